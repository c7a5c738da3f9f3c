"""A local Slurm cluster in Docker: mariadb, slurmdbd, slurmctld, slurmrestd, login (sshd) and compute
nodes c1..c3, each with 4 fake GPUs (gres.conf).

``harness/data/docker-compose.yml`` (copied to the repository root) describes the cluster. This module
reads it and starts exactly what it says by driving the docker CLI (argv lists, never a shell),
because this machine has no ``docker compose`` v2 and no BuildKit: building Compose v2 from the Go
module proxy costs minutes of a 2-core machine's time on every fresh CI machine, and Debian's
docker-compose v1 (1.29.2) is unmaintained and pulls a second copy of docker-py into the system
Python. Only the compose keys this module understands are allowed (others are refused), so the file
and what runs cannot drift apart; users with Compose v2 can run the same file (see its header).

Public API (``SlurmDocker`` puts it behind the LocalCluster interface of ``base.py``)::

    up(state_dir=None, release="trixie", timeout=300, say=None) -> ClusterInfo   # cheap when running
    down(state_dir=None, volumes=True) -> list[str]
    status(state_dir=None) -> dict[str, str]
    is_up(state_dir=None) -> bool
    login_exec_argv(argv, user="poc") -> list[str]     # `docker exec` into the login node
    read_ssh_settings(state_dir=None) -> dict           # ssh.json, with rest_url (slurmrestd)
    rest_token(user="poc", lifespan_s=600) -> str       # a JWT for slurmrestd; never stored

The compose subset lives in ``slurm/compose.py``, the secrets in ``slurm/secrets.py``, slurmrestd's
port, probe and tokens in ``slurm/restd.py``.
`poc cluster up|down|status --slurm` drives it.

State dir: ``$POC_STATE_DIR/slurm`` (default ``~/.local/state/k8s-slurm-poc/slurm``) holds the secrets
(munge key, JWT key, DB password, SSH keys; mode 0600, never printed), ``ssh.json`` (what the harness's
ssh and rest transports use; no secret in it), ``known_hosts`` and ``compose.env``.
"""
from __future__ import annotations

import json
import os
import re
import socket
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.clusters import images
from harness.clusters.base import ComponentStatus, Say
from harness.clusters.images import run
from harness.clusters.slurm import accounts, compose, restd
from harness.clusters.slurm.compose import run_argv
from harness.clusters.slurm.layout import COMPOSE_FILE, state_dir
from harness.clusters.slurm.secrets import ensure_secrets
from harness.errors import ClusterError
from harness.fsutil import atomic_write, atomic_write_json
from harness.paths import SLURM_CLUSTER

LABEL = "k8s-slurm-poc.cluster=slurm"
LOGIN_CONTAINER = "poc-slurm-login"
CTLD_CONTAINER = "poc-slurm-slurmctld"
COMPUTE_NODES = ("c1", "c2", "c3")
SSH_USER = "poc"
SHARED_DIR = "/shared"
__all__ = ["COMPOSE_FILE", "ensure_secrets", "run", "run_argv", "state_dir"]   # re-exported for callers of this module


@dataclass(frozen=True)
class SshSettings:
    host: str
    port: int
    user: str
    key_path: str
    known_hosts_path: str


@dataclass(frozen=True)
class ClusterInfo:
    release: str
    slurm_version: str
    images: dict[str, str]
    state_dir: str
    ssh: SshSettings
    ssh_settings_path: str
    rest_url: str
    login_container: str
    compute_nodes: tuple[str, ...]
    shared_dir: str
    containers: dict[str, str]
    timings_s: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def compose_env(sdir: Path, release: str, slurm_image: str, mariadb_image: str) -> dict[str, str]:
    return {
        "POC_SLURM_IMAGE": slurm_image,
        "POC_MARIADB_IMAGE": mariadb_image,
        "POC_SLURM_SECRETS": str(sdir / "secrets"),
        "POC_SLURM_SSH_PORT": str(restd.loopback_port(sdir, "ssh_port", "POC_SLURM_SSH_PORT")),
        "POC_SLURM_REST_PORT": str(restd.loopback_port(sdir, "rest_port", "POC_SLURM_REST_PORT")),
        "POC_SLURM_RELEASE": release,
    }


# ---------------------------------------------------------------- docker helpers

def _container_state(name: str) -> tuple[str, str] | None:
    """(state, image) of a container, or None when it does not exist."""
    res = run(["docker", "inspect", "--type", "container", "--format",
               "{{.State.Status}} {{.Config.Image}}", name], check=False)
    if res.returncode != 0:
        return None
    state, image = res.stdout.strip().split(" ", 1)
    return state, image


def _ensure_network(name: str) -> None:
    if run(["docker", "network", "inspect", name], check=False).returncode != 0:
        run(["docker", "network", "create", "--label", LABEL, name], what="docker network create")


def _ensure_volume(name: str) -> None:
    if run(["docker", "volume", "inspect", name], check=False).returncode != 0:
        run(["docker", "volume", "create", "--label", LABEL, name], what="docker volume create")


def _exec(container: str, argv: Sequence[str], *, user: str | None = None, env: dict[str, str] | None = None,
          timeout: float = 60, check: bool = False):
    cmd = ["docker", "exec"]
    if user:
        cmd += ["-u", user]
    for k, v in (env or {}).items():
        cmd += ["-e", f"{k}={v}"]
    return run(cmd + [container, *argv], timeout=timeout, check=check, what=f"docker exec {container}")


def login_exec_argv(argv: Sequence[str], user: str = SSH_USER) -> list[str]:
    """argv that runs argv on the login node as user (for a local transport or tests)."""
    return ["docker", "exec", "-u", user, LOGIN_CONTAINER, *argv]


def container_logs_tail(names: Sequence[str], lines: int = 30) -> str:
    """`docker logs` tail plus the Slurm log files' tails of each container, for error messages."""
    out = []
    for n in names:
        res = run(["docker", "logs", "--tail", str(lines), n], check=False)
        out.append(f"--- docker logs {n} ---\n{(res.stdout + res.stderr).strip()}")
        res = run(["docker", "exec", n, "sh", "-c",
                   f"tail -n {int(lines)} /var/log/slurm/*.log 2>/dev/null"], check=False)
        if res.stdout.strip():
            out.append(f"--- /var/log/slurm in {n} ---\n{res.stdout.strip()}")
    return "\n".join(out)


# ---------------------------------------------------------------- waits

def _wait(what: str, probe, timeout: float, names: Sequence[str], interval: float = 1.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        ok, last = probe()
        if ok:
            return last
        time.sleep(interval)
    raise ClusterError(
        f"Slurm cluster: timed out after {timeout:.0f}s waiting for {what}; last observation: {last}\n"
        + container_logs_tail(names),
        "see the logs above; `poc cluster down --slurm` then `up` again starts from scratch")


def _started_at(container: str) -> float:
    """When docker last started container (epoch seconds, UTC)."""
    from datetime import datetime

    res = run(["docker", "inspect", "-f", "{{.State.StartedAt}}", container], check=False)
    text = res.stdout.strip()
    if res.returncode != 0 or not text:
        return 0.0
    text = re.sub(r"\.(\d{6})\d*", r".\1", text).replace("Z", "+00:00")
    return datetime.fromisoformat(text).timestamp()


def _nodes_ready(started: dict[str, float]) -> tuple[bool, str]:
    """True when every compute node is up (IDLE, or busy with jobs; not drained or not responding) and
    its slurmd registered after
    its container (re)started: a restarted controller restores old node states from its state files."""
    from datetime import UTC, datetime

    res = _exec(LOGIN_CONTAINER, ["scontrol", "show", "node", "-o"], timeout=30)
    if res.returncode != 0:
        return False, (res.stderr or res.stdout).strip()
    seen = {}
    for line in res.stdout.splitlines():
        f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        if "NodeName" in f:
            seen[f["NodeName"]] = f
    problems = []
    for n in COMPUTE_NODES:
        f = seen.get(n)
        if f is None:
            problems.append(f"{n}: unknown")
            continue
        base, *flags = (f.get("State") or "").split("+")
        # ALLOCATED/MIXED: a cluster that is already up and running jobs is ready too.
        if base not in ("IDLE", "ALLOCATED", "MIXED") or set(flags) & {"DRAIN", "NOT_RESPONDING", "FAIL"}:
            problems.append(f"{n}: {f.get('State')} {f.get('Reason', '')}".strip())
            continue
        try:
            t = datetime.fromisoformat(f.get("SlurmdStartTime", "")).replace(tzinfo=UTC).timestamp()
        except ValueError:
            problems.append(f"{n}: slurmd not registered")
            continue
        if t + 2 < started.get(n, 0.0):
            problems.append(f"{n}: slurmd not yet registered since the container started")
    return not problems, "; ".join(problems) or "c1..c3 up"


def _ssh_banner(port: int) -> tuple[bool, str]:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.settimeout(2)
            banner = s.recv(64).decode(errors="replace")
            return banner.startswith("SSH-2.0"), banner.strip()
    except OSError as exc:
        return False, str(exc)


# ---------------------------------------------------------------- public API

def up(state_dir_base: str | os.PathLike | None = None, release: str = images.DEFAULT_RELEASE,
       timeout: float = 300, say: Say | None = None) -> ClusterInfo:
    """Build images when missing, create secrets, start the cluster, wait until c1..c3 are idle in
    sinfo and the login node's sshd answers; write ssh.json; return ClusterInfo.

    On a running cluster this only checks (and starts what is stopped). `say` (default: stderr)
    gets progress lines while images build."""
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    sdir = state_dir(state_dir_base)
    sdir.mkdir(parents=True, exist_ok=True)
    slurm_image = images.ensure_slurm_image(release, say=say)
    mariadb_image = images.ensure_mariadb_image(release, say=say)
    timings["images"] = round(time.monotonic() - t0, 2)

    sec = ensure_secrets(sdir)
    env = compose_env(sdir, release, slurm_image, mariadb_image)
    atomic_write(sdir / "compose.env", "".join(f"{k}={v}\n" for k, v in env.items()))
    doc = compose.load_compose(env, COMPOSE_FILE)
    services = doc["services"]

    t1 = time.monotonic()
    for net in (doc.get("networks") or {}).values():
        _ensure_network(net["name"])
    for vol in (doc.get("volumes") or {}).values():
        _ensure_volume(vol["name"])
    names = []
    for name in compose.start_order(services):
        argv = run_argv(name, services[name], doc)
        cname = argv[argv.index("--name") + 1]
        names.append(cname)
        cur = _container_state(cname)
        if cur is not None and cur[1] != services[name]["image"]:
            run(["docker", "rm", "-f", cname], what="docker rm")  # image changed: recreate
            cur = None
        if cur is None:
            run(argv, what=f"start {name}", timeout=120)
        elif cur[0] != "running":
            run(["docker", "start", cname], what=f"docker start {cname}", timeout=120)
    timings["start_containers"] = round(time.monotonic() - t1, 2)

    t2 = time.monotonic()
    started = {n: _started_at(f"poc-slurm-{n}") for n in COMPUTE_NODES}
    _wait("c1..c3 up in Slurm", lambda: _nodes_ready(started), max(10.0, timeout - (t2 - t0)), names)
    timings["nodes_idle"] = round(time.monotonic() - t2, 2)
    accounts.ensure_association(lambda argv, **kw: _exec(CTLD_CONTAINER, argv, **kw), SSH_USER,
                                f"docker exec {CTLD_CONTAINER} sacctmgr show assoc")
    port = int(env["POC_SLURM_SSH_PORT"])
    _wait(f"sshd on 127.0.0.1:{port}", lambda: _ssh_banner(port), 30, [LOGIN_CONTAINER])
    rest_port = int(env["POC_SLURM_REST_PORT"])
    _wait(f"slurmrestd on 127.0.0.1:{rest_port}", lambda: restd.answers(rest_port), 60,
          [restd.REST_CONTAINER])

    known_hosts = sdir / "known_hosts"
    host_pub = (sec / "ssh_host_ed25519_key.pub").read_text().split()
    atomic_write(known_hosts, f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n", mode=0o644)
    ssh = SshSettings(host="127.0.0.1", port=port, user=SSH_USER,
                      key_path=str(sec / "id_ed25519"), known_hosts_path=str(known_hosts))
    ver = _exec(LOGIN_CONTAINER, ["sinfo", "--version"]).stdout.strip()  # "slurm 24.11.5"
    timings["total"] = round(time.monotonic() - t0, 2)
    info = ClusterInfo(
        release=release, slurm_version=ver.split()[-1] if ver else "", state_dir=str(sdir),
        images={"slurm": slurm_image, "mariadb": mariadb_image,
                "worker": images.worker_ref(release)},
        ssh=ssh, ssh_settings_path=str(sdir / "ssh.json"), rest_url=restd.rest_url(rest_port),
        login_container=LOGIN_CONTAINER,
        compute_nodes=COMPUTE_NODES, shared_dir=SHARED_DIR, containers=status(state_dir_base),
        timings_s=timings)
    atomic_write_json(sdir / "ssh.json", {"version": 1, **asdict(ssh), "login_container": LOGIN_CONTAINER,
                                          "controller_container": CTLD_CONTAINER,
                                          "node_containers": {n: f"poc-slurm-{n}" for n in COMPUTE_NODES},
                                          "release": release, "slurm_version": info.slurm_version,
                                          "shared_dir": SHARED_DIR, "rest_url": info.rest_url},
                      sort_keys=True)
    atomic_write_json(sdir / "cluster.json", {"version": 1, **info.to_dict()}, sort_keys=True)
    return info


def read_ssh_settings(state_dir_base: str | os.PathLike | None = None) -> dict[str, Any]:
    """The ssh.json written by up(); ClusterError when the cluster was never started."""
    path = state_dir(state_dir_base) / "ssh.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ClusterError(f"{path} does not exist", "run `poc cluster up --slurm` first") from exc


def rest_token(user: str = SSH_USER, lifespan_s: int = 600) -> str:
    """A JWT that slurmrestd (ssh.json's rest_url) accepts for user, minted by the controller; the
    caller keeps it in memory (X-SLURM-USER-TOKEN), the harness never stores it."""
    return restd.mint_token(CTLD_CONTAINER, user, lifespan_s)


def _labelled(kind: str) -> list[str]:
    if kind == "container":
        res = run(["docker", "ps", "-a", "--filter", f"label={LABEL}", "--format", "{{.Names}}"])
    else:
        res = run(["docker", kind, "ls", "--filter", f"label={LABEL}", "--format", "{{.Name}}"])
    return [line for line in res.stdout.split() if line]


def down(state_dir_base: str | os.PathLike | None = None, volumes: bool = True) -> list[str]:
    """Remove the cluster's containers, its network and (volumes=True) its volumes. Returns what
    was removed. Secrets and ssh settings in the state dir are kept (ssh.json is removed)."""
    removed: list[str] = []
    names = _labelled("container")
    if names:
        run(["docker", "rm", "-f", "-v", *names], what="docker rm", timeout=120)
        removed += names
    for net in _labelled("network"):
        run(["docker", "network", "rm", net], what="docker network rm")
        removed.append(net)
    if volumes:
        for vol in _labelled("volume"):
            run(["docker", "volume", "rm", vol], what="docker volume rm")
            removed.append(vol)
    ssh_json = state_dir(state_dir_base) / "ssh.json"
    if ssh_json.exists():
        ssh_json.unlink()
    return removed


def status(state_dir_base: str | os.PathLike | None = None) -> dict[str, str]:
    """Each cluster container's state (running, exited, ...); {} when nothing exists."""
    res = run(["docker", "ps", "-a", "--filter", f"label={LABEL}", "--format", "{{.Names}}\t{{.State}}"])
    out = {}
    for line in res.stdout.splitlines():
        if "\t" in line:
            n, s = line.split("\t", 1)
            out[n] = s
    return dict(sorted(out.items()))


def is_up(state_dir_base: str | os.PathLike | None = None) -> bool:
    """Started by up() (ssh.json is there) and every container running: one `docker ps`."""
    if not (state_dir(state_dir_base) / "ssh.json").exists():
        return False
    st = status(state_dir_base)
    return bool(st) and all(s == "running" for s in st.values())


class SlurmDocker:
    """The Slurm-in-Docker cluster behind the LocalCluster interface (``harness.clusters.base``)."""

    name = SLURM_CLUSTER

    def __init__(self, release: str | None = None, state_dir: str | os.PathLike | None = None,
                 say: Say | None = None, timeout: float = 300):
        self.release = release or images.DEFAULT_RELEASE
        self.state_dir, self.say, self.timeout = state_dir, say, timeout

    def up(self) -> ClusterInfo:
        return up(self.state_dir, self.release, self.timeout, self.say)

    def down(self) -> dict:
        return {"removed": down(self.state_dir)}

    def status(self) -> list[ComponentStatus]:
        return [ComponentStatus(name=n, pid=None, alive=s == "running", state=s) for n, s in status().items()]

    def is_up(self) -> bool:
        return is_up(self.state_dir)
