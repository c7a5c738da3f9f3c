"""A local Slurm cluster in Docker: mariadb, slurmdbd, slurmctld, login (sshd) and compute nodes c1..c3.

``harness/data/docker-compose.yml`` (copied to the repository root) describes the cluster. This module
reads it and starts exactly what it says by driving the docker CLI (argv lists, never a shell),
because this machine has no ``docker compose`` v2 and no BuildKit: building Compose v2 from the Go
module proxy costs minutes of a 2-core machine's time on every fresh CI machine, and Debian's
docker-compose v1 (1.29.2) is unmaintained and pulls a second copy of docker-py into the system
Python. Only the compose keys this module understands are allowed (others are refused), so the file
and what runs cannot drift apart; users with Compose v2 can run the same file (see its header).

Public API::

    up(state_dir=None, release="trixie", timeout=300) -> ClusterInfo
    down(state_dir=None, volumes=True) -> list[str]
    status(state_dir=None) -> dict[str, str]
    login_exec_argv(argv, user="poc") -> list[str]     # `docker exec` into the login node
    read_ssh_settings(state_dir=None) -> dict

State dir: ``$POC_STATE_DIR/slurm`` (default ``~/.local/state/k8s-slurm-poc/slurm``) holds the secrets
(munge key, DB password, SSH keys; mode 0600, never printed), ``ssh.json`` (what the harness's ssh
transport uses), ``known_hosts`` and ``compose.env``.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml

from harness import data
from harness.clusters import images
from harness.clusters.images import run
from harness.errors import ClusterError

COMPOSE_FILE = data.path("docker-compose.yml")
LABEL = "k8s-slurm-poc.cluster=slurm"
LOGIN_CONTAINER = "poc-slurm-login"
CTLD_CONTAINER = "poc-slurm-slurmctld"
COMPUTE_NODES = ("c1", "c2", "c3")
SSH_USER = "poc"
SHARED_DIR = "/shared"
ALLOWED_SERVICE_KEYS = {"image", "container_name", "hostname", "command", "depends_on", "volumes",
                        "ports", "environment", "networks", "init", "labels"}


def state_dir(base: str | os.PathLike | None = None) -> Path:
    """``<base or $POC_STATE_DIR or ~/.local/state/k8s-slurm-poc>/slurm``."""
    root = Path(base) if base else Path(os.environ.get("POC_STATE_DIR")
                                       or Path.home() / ".local" / "state" / "k8s-slurm-poc")
    return root / "slurm"


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
    login_container: str
    compute_nodes: tuple[str, ...]
    shared_dir: str
    containers: dict[str, str]
    timings_s: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------- compose file

_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}")


def _interpolate(value: Any, env: dict[str, str]) -> Any:
    if isinstance(value, str):
        def sub(m: re.Match) -> str:
            if m.group(0) == "$$":
                return "$"
            name, default = m.group(1), m.group(2)
            if env.get(name):
                return env[name]
            if default is not None:
                return default
            raise ClusterError(f"docker-compose.yml needs ${{{name}}}, which is not set")
        return _VAR.sub(sub, value)
    if isinstance(value, list):
        return [_interpolate(v, env) for v in value]
    if isinstance(value, dict):
        return {k: _interpolate(v, env) for k, v in value.items()}
    return value


def load_compose(env: dict[str, str], path: Path = COMPOSE_FILE) -> dict[str, Any]:
    """Parse docker-compose.yml, interpolate ${VARS} from env, check it uses only known keys."""
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ClusterError(f"cannot read {path}: {exc}") from exc
    doc = {k: v for k, v in doc.items() if not str(k).startswith("x-")}
    doc = _interpolate(doc, env)
    for name, svc in doc.get("services", {}).items():
        unknown = set(svc) - ALLOWED_SERVICE_KEYS
        if unknown:
            raise ClusterError(f"docker-compose.yml: service {name} uses keys this driver does not "
                               f"implement: {sorted(unknown)}",
                               "extend harness/clusters/slurm_docker.py or drop the keys")
    return doc


def _start_order(services: dict[str, Any]) -> list[str]:
    order: list[str] = []
    seen: set[str] = set()

    def visit(n: str, stack: tuple[str, ...] = ()) -> None:
        if n in seen:
            return
        if n in stack:
            raise ClusterError(f"docker-compose.yml: depends_on cycle through {n}")
        for d in services[n].get("depends_on", []) or []:
            visit(d, stack + (n,))
        seen.add(n)
        order.append(n)

    for n in services:
        visit(n)
    return order


def run_argv(name: str, svc: dict[str, Any], doc: dict[str, Any]) -> list[str]:
    """The `docker run` argv for one compose service (pure; tested without Docker)."""
    cname = svc.get("container_name") or f"{doc.get('name', 'poc')}-{name}"
    argv = ["docker", "run", "-d", "--name", cname, "--restart", "no"]
    if svc.get("hostname"):
        argv += ["--hostname", svc["hostname"]]
    if svc.get("init"):
        argv.append("--init")
    labels = dict(svc.get("labels") or {})
    labels["k8s-slurm-poc.service"] = name
    for k, v in labels.items():
        argv += ["--label", f"{k}={v}"]
    nets = svc.get("networks") or []
    for i, net in enumerate(nets):
        real = (doc.get("networks", {}).get(net) or {}).get("name", net)
        if i == 0:
            argv += ["--network", real, "--network-alias", name]
    vols = doc.get("volumes", {}) or {}
    for spec in svc.get("volumes") or []:
        parts = spec.split(":")
        src = parts[0]
        if not src.startswith(("/", ".")):
            src = (vols.get(src) or {}).get("name", src)
        argv += ["-v", ":".join([src] + parts[1:])]
    for p in svc.get("ports") or []:
        argv += ["-p", str(p)]
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) for e in env)
    for k, v in env.items():
        argv += ["-e", f"{k}={v}"]
    argv.append(svc["image"])
    cmd = svc.get("command")
    if cmd:
        argv += list(cmd) if isinstance(cmd, list) else cmd.split()
    return argv


# ---------------------------------------------------------------- secrets

def _write_secret(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(path, 0o600)


def _ed25519_pair() -> tuple[bytes, bytes]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    priv = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                             serialization.NoEncryption())
    pub = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                        serialization.PublicFormat.OpenSSH)
    return priv, pub


def ensure_secrets(sdir: Path) -> Path:
    """Create (once) the munge key, DB password, client and host SSH keys under sdir/secrets."""
    sec = sdir / "secrets"
    sec.mkdir(parents=True, exist_ok=True)
    os.chmod(sec, 0o700)
    if not (sec / "munge.key").exists():
        _write_secret(sec / "munge.key", secrets.token_bytes(1024))
    if not (sec / "db.pass").exists():
        _write_secret(sec / "db.pass", secrets.token_hex(24).encode())
    if not (sec / "id_ed25519").exists():
        priv, pub = _ed25519_pair()
        _write_secret(sec / "id_ed25519", priv)
        _write_secret(sec / "id_ed25519.pub", pub + b" poc@k8s-slurm-poc\n")
    _write_secret(sec / "authorized_keys", (sec / "id_ed25519.pub").read_bytes())
    if not (sec / "ssh_host_ed25519_key").exists():
        priv, pub = _ed25519_pair()
        _write_secret(sec / "ssh_host_ed25519_key", priv)
        _write_secret(sec / "ssh_host_ed25519_key.pub", pub + b" root@login\n")
    return sec


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ssh_port(sdir: Path) -> int:
    if os.environ.get("POC_SLURM_SSH_PORT"):
        return int(os.environ["POC_SLURM_SSH_PORT"])
    f = sdir / "ssh_port"
    if f.exists():
        return int(f.read_text().strip())
    port = _free_port()
    f.write_text(f"{port}\n")
    return port


def compose_env(sdir: Path, release: str, slurm_image: str, mariadb_image: str) -> dict[str, str]:
    return {
        "POC_SLURM_IMAGE": slurm_image,
        "POC_MARIADB_IMAGE": mariadb_image,
        "POC_SLURM_SECRETS": str(sdir / "secrets"),
        "POC_SLURM_SSH_PORT": str(_ssh_port(sdir)),
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
    from datetime import datetime, timezone

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
            t = datetime.fromisoformat(f.get("SlurmdStartTime", "")).replace(tzinfo=timezone.utc).timestamp()
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
       timeout: float = 300) -> ClusterInfo:
    """Build images when missing, create secrets, start the cluster, wait until c1..c3 are idle in
    sinfo and the login node's sshd answers; write ssh.json; return ClusterInfo."""
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    sdir = state_dir(state_dir_base)
    sdir.mkdir(parents=True, exist_ok=True)
    slurm_image = images.ensure_slurm_image(release)
    mariadb_image = images.ensure_mariadb_image(release)
    timings["images"] = round(time.monotonic() - t0, 2)

    sec = ensure_secrets(sdir)
    env = compose_env(sdir, release, slurm_image, mariadb_image)
    _write_env_file(sdir / "compose.env", env)
    doc = load_compose(env)
    services = doc["services"]

    t1 = time.monotonic()
    for net in (doc.get("networks") or {}).values():
        _ensure_network(net["name"])
    for vol in (doc.get("volumes") or {}).values():
        _ensure_volume(vol["name"])
    names = []
    for name in _start_order(services):
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
    port = int(env["POC_SLURM_SSH_PORT"])
    _wait(f"sshd on 127.0.0.1:{port}", lambda: _ssh_banner(port), 30, [LOGIN_CONTAINER])

    known_hosts = sdir / "known_hosts"
    host_pub = (sec / "ssh_host_ed25519_key.pub").read_text().split()
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    os.chmod(known_hosts, 0o644)
    ssh = SshSettings(host="127.0.0.1", port=port, user=SSH_USER,
                      key_path=str(sec / "id_ed25519"), known_hosts_path=str(known_hosts))
    ver = _exec(LOGIN_CONTAINER, ["sinfo", "--version"]).stdout.strip()  # "slurm 24.11.5"
    timings["total"] = round(time.monotonic() - t0, 2)
    info = ClusterInfo(
        release=release, slurm_version=ver.split()[-1] if ver else "", state_dir=str(sdir),
        images={"slurm": slurm_image, "mariadb": mariadb_image,
                "worker": images.worker_ref(release)},
        ssh=ssh, ssh_settings_path=str(sdir / "ssh.json"), login_container=LOGIN_CONTAINER,
        compute_nodes=COMPUTE_NODES, shared_dir=SHARED_DIR, containers=status(state_dir_base),
        timings_s=timings)
    _atomic_json(sdir / "ssh.json", {"version": 1, **asdict(ssh), "login_container": LOGIN_CONTAINER,
                                     "controller_container": CTLD_CONTAINER,
                                     "node_containers": {n: f"poc-slurm-{n}" for n in COMPUTE_NODES},
                                     "release": release, "slurm_version": info.slurm_version,
                                     "shared_dir": SHARED_DIR})
    _atomic_json(sdir / "cluster.json", {"version": 1, **info.to_dict()})
    return info


def _atomic_json(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _write_env_file(path: Path, env: dict[str, str]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    os.replace(tmp, path)


def read_ssh_settings(state_dir_base: str | os.PathLike | None = None) -> dict[str, Any]:
    """The ssh.json written by up(); ClusterError when the cluster was never started."""
    path = state_dir(state_dir_base) / "ssh.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ClusterError(f"{path} does not exist", "run `poc cluster up --slurm` first") from exc


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


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m harness.clusters.slurm_docker up|down|status [--release R]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m harness.clusters.slurm_docker")
    ap.add_argument("cmd", choices=["up", "down", "status"])
    ap.add_argument("--release", default=images.DEFAULT_RELEASE, choices=images.SUPPORTED_RELEASES)
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "up":
            info = up(release=args.release, timeout=args.timeout)
            print(json.dumps({"slurm_version": info.slurm_version, "ssh": asdict(info.ssh),
                              "timings_s": info.timings_s, "containers": info.containers}, indent=2))
        elif args.cmd == "down":
            print("\n".join(down()))
        else:
            print(json.dumps(status(), indent=2))
    except ClusterError as exc:
        print(f"ERROR {exc.message}")
        if exc.tip:
            print(f"TIP {exc.tip}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
