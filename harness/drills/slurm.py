"""Slurm's side of the upgrade drills (harness/drills/base.py): restart, or upgrade to the next
release, slurmdbd, then slurmctld, then slurmd node by node — the order of Slurm's upgrade guide
(the database daemon first, since it accepts older controllers; the controller before the nodes,
since a controller accepts older slurmd but not newer).

On the harness's own Docker cluster (harness/clusters/slurm_docker.py) the steps are built in:
slurmdbd and slurmctld restart with their containers (their state lives in volumes: the MariaDB
database, StateSaveLocation), and slurmd restarts in place under the node entrypoint's loop, so the
jobs' slurmstepd processes keep running as they do on a real node. The upgrade recreates slurmdbd
and slurmctld from the cluster's image plus the newer packages (harness/clusters/slurm/upgrade.py)
with the same volumes, and installs the same packages into each running node before its slurmd
restarts. On a user's cluster the steps are the user's own commands (harness/drills/commands.py);
this module then only decides owned() and answers the probes.

Commands reach the cluster through `run(argv, timeout) -> (rc, stdout, stderr)` (docker exec on the
local cluster; a transport of each thread's own elsewhere, so the probe thread never shares an SSH
channel with the runner's). What the commands print is parsed in slurm_text.py (pure).
"""
from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..backends.base import Handle
from ..errors import BackendError, PocError
from . import commands
from .base import Step
from .slurm_text import (
    bad_nodes,
    leftover_steps,
    parse_kv_line,
    parse_nodes,
    parse_sacct,
    parse_show_config,
    slurmd_back,
)

LABEL_KEY = "k8s-slurm-poc.cluster"
DBD_CONTAINER = "poc-slurm-slurmdbd"
POLL_S = 0.5            # health checks are polled this often: `back` is late by at most this much
PROBE_TIMEOUT_S = 20    # a probe that hangs this long counts as refused
TIME_ENV = {"SLURM_TIME_FORMAT": "%s"}
SACCT_FIELDS = "JobID,JobIDRaw,JobName,State,Submit,Start,End,NodeList,ExitCode,User,Account"
# a submission through slurmctld's whole admission path (partition, association, limits) that
# creates no job: --test-only only estimates when it would start
PROBE_SUBMIT = ["sbatch", "--test-only", "--nodes=1", "--ntasks=1", "--time=1", "--job-name=poc-drill-probe",
                "--wrap=true"]
PROBE_STATUS = ["squeue", "-h", "-o", "%i"]
HEALTH = {"slurmdbd": "sacctmgr -n show cluster answers with the cluster",
          "slurmctld": "scontrol ping: UP",
          "slurmd": "slurmd running with a new pid, registered again (SlurmdStartTime changed) and responding"}

Runner = Callable[..., tuple[int, str, str]]


def docker_runner(argv: list[str], timeout: float = 60) -> tuple[int, str, str]:
    """argv on this machine; (124, ...) when it timed out; never raises (a probe must not)."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout:g}s"
    except FileNotFoundError as exc:
        return 127, "", str(exc)
    return p.returncode, p.stdout, p.stderr


class SlurmDrill:
    platform = "slurm"

    def __init__(self, backend, drills, *, run: Runner = docker_runner, clock=time.time, sleep=time.sleep,
                 transport_factory: Callable | None = None, state_dir: str | Path | None = None):
        self.b, self.d = backend, drills
        self.docker = backend.docker or None     # {login, controller, nodes}: the local cluster
        self._run, self._clock, self._sleep = run, clock, sleep
        self._factory = transport_factory or (lambda: _own_transport(backend))
        self._tls = threading.local()
        self._state_dir = state_dir
        self._next: dict = {}                    # what prepare("upgrade") made
        self._user = getattr(getattr(backend, "cfg", None), "user", None) or "poc"

    # ------------------------------------------------------------ commands
    def _slurm(self, argv: list[str], *, admin: bool = False, env: dict | None = None,
               timeout: float = 30) -> tuple[int, str, str]:
        """A Slurm command: on the local cluster in the controller (admin) or the login node (as the
        user); elsewhere through this thread's own transport."""
        if self.docker:
            cmd = ["docker", "exec"] + ([] if admin else ["-u", "poc"])
            for k, v in (env or {}).items():
                cmd += ["-e", f"{k}={v}"]
            box = self.docker["controller"] if admin else self.docker["login"]
            return self._run(cmd + [box, *argv], timeout=timeout)
        t = getattr(self._tls, "t", None)
        if t is None:
            t = self._tls.t = self._factory()
        try:
            r = t.run(argv, env=env, timeout=timeout, check=False)
        except PocError as exc:
            return 255, "", exc.message
        return r.returncode, r.stdout, r.stderr

    def _containers(self) -> dict[str, str]:
        return {"slurmdbd": DBD_CONTAINER, "slurmctld": self.docker["controller"],
                **{f"slurmd@{n}": c for n, c in sorted(self.docker["nodes"].items())}}

    # ------------------------------------------------------------ ownership
    def owned(self) -> tuple[bool, str]:
        if self.docker:
            fmt = "{{index .Config.Labels \"" + LABEL_KEY + "\"}}"
            rc, out, _ = self._run(["docker", "inspect", "-f", fmt, self.docker["controller"]], timeout=30)
            marker = _state_marker(self._state_dir)
            if rc == 0 and out.strip() == "slurm" and marker.exists():
                return True, (f"the harness's own local cluster: {self.docker['controller']} carries "
                              f"{LABEL_KEY}=slurm and {marker} exists")
        want = self.d.confirm_cluster
        rc, out, err = self._slurm(["scontrol", "show", "config"])
        name = parse_show_config(out).get("ClusterName", "") if rc == 0 else ""
        if not want:
            return False, ("not a cluster the harness made (no local cluster markers) and drills.confirm_cluster "
                           f"is not set; set it to the cluster's ClusterName ({name or 'scontrol show config'}) "
                           "to confirm the cluster is yours to restart")
        if not name:
            return False, f"cannot read the ClusterName to compare with {want!r}: {(err or out).strip()[:200]}"
        if name != want:
            return False, f"drills.confirm_cluster is {want!r} but this cluster's ClusterName is {name!r}"
        return True, f"drills.confirm_cluster names this cluster ({name})"

    # ------------------------------------------------------------ plan, versions
    def plan(self, kind: str) -> list[str]:
        if self.docker:
            return list(self._containers())
        return commands.plan(self.d.commands, "slurm", kind)   # a user's cluster: their commands, their order

    def versions(self) -> dict[str, str]:
        out: dict[str, str] = {}
        rc, text, _ = self._slurm(["scontrol", "show", "config"], admin=True)
        out["slurmctld"] = parse_show_config(text).get("SLURM_VERSION", "") if rc == 0 else ""
        rc, text, _ = self._slurm(["scontrol", "show", "node", "-o"], admin=True)
        for name, f in (parse_nodes(text) if rc == 0 else {}).items():
            out[f"slurmd@{name}"] = f.get("Version", "")
        if self.docker:   # a recreated container's installed release is the running one
            out["slurmdbd"] = self._installed(DBD_CONTAINER, "slurmdbd")
            for n, c in self.docker["nodes"].items():   # a node not registered yet with a new controller
                if not out.get(f"slurmd@{n}"):           # shows no Version: the installed one is running
                    out[f"slurmd@{n}"] = self._installed(c, "slurmd")
        return out

    def _installed(self, container: str, package: str) -> str:
        rc, text, _ = self._run(["docker", "exec", container, "dpkg-query", "-W", "-f", "${Version}", package],
                                timeout=30)
        return text.strip().split("-")[0] if rc == 0 else ""

    # ------------------------------------------------------------ prepare, step
    def prepare(self, kind: str) -> dict:
        if kind != "upgrade" or not self.docker:
            return {}
        from ..clusters.slurm import upgrade

        base = self._image_of(self.docker["controller"])
        now = self.versions().get("slurmctld", "")
        target = upgrade.target_for(self._release())
        ok, why = upgrade.upgrade_supported(now, target.major)
        if not ok:
            raise BackendError(f"cannot upgrade Slurm {now} to {target.major} in place: {why}")
        self._next = {**upgrade.prepare(self._release(), base), "path": why, "from": now}
        return dict(self._next)

    def step(self, kind: str, component: str) -> Step:
        if not self.docker:   # a user's cluster: their commands, back when their health check answers
            return commands.step(self.d.commands, "slurm", kind, component, status=self.try_status,
                                 timeout_s=self.d.component_timeout_s, clock=self._clock, sleep=self._sleep)
        if kind == "upgrade" and not self._next:
            raise BackendError("the upgrade drill needs prepare('upgrade') first")
        name, _, node = component.partition("@")
        before = self.versions().get(component, "")
        container = self._containers()[component]
        st = Step(component=component, group={"slurmdbd": "database", "slurmctld": "control plane"}.get(name, "nodes"),
                  started=self._clock(), version_before=before, health=HEALTH[name], resolution_s=POLL_S)
        try:
            if name == "slurmd":
                check = self._slurmd_step(kind, node, container, st)
            else:
                check = self._daemon_step(kind, name, container, st)
        except PocError as exc:
            st.ok, st.error = False, exc.message
            return st
        want = self._next.get("version", "").split("-")[0] if kind == "upgrade" else ""
        back, seen = self._poll(lambda: check(want), st.started)
        st.back, st.extra["last_check"] = back, seen
        st.version_after = self.versions().get(component, "")
        if back is None:
            st.ok, st.error = False, f"not healthy {self.d.component_timeout_s:g} s after the {kind}: {seen}"
        return st

    def _do(self, argv: list[str], st: Step, timeout: float = 300) -> None:
        st.how = (st.how + "; " if st.how else "") + " ".join(argv)
        rc, out, err = self._run(argv, timeout=timeout)
        if rc != 0:
            raise BackendError(f"{' '.join(argv[:4])} failed (exit {rc}): {(err or out).strip()[-400:]}")

    def _daemon_step(self, kind: str, name: str, container: str, st: Step):
        if kind == "restart":   # SIGTERM, so slurmctld saves its state; the container keeps its volumes
            self._do(["docker", "restart", "-t", "30", container], st)
        else:
            from ..clusters.slurm import upgrade

            argv = upgrade.service_run_argv(name, self._next["image"], self._state_dir)
            self._do(["docker", "stop", "-t", "30", container], st)
            st.extra["stopped"] = self._clock()
            self._do(["docker", "rm", container], st)
            self._do(argv, st)
        if name == "slurmdbd":
            def check(want: str):
                rc, out, err = self._slurm(["sacctmgr", "-n", "-P", "show", "cluster", "format=cluster"],
                                           admin=True, timeout=15)
                ver = self.versions().get("slurmdbd", "") if want else ""
                ok = rc == 0 and bool(out.strip()) and (not want or ver == want)
                return ok, (out or err).strip()[:200] + (f" (slurmdbd {ver})" if want else "")
        else:
            def check(want: str):
                rc, out, err = self._slurm(["scontrol", "ping"], admin=True, timeout=15)
                up = rc == 0 and " is UP" in out
                ver = parse_show_config(self._slurm(["scontrol", "show", "config"], admin=True)[1]).get(
                    "SLURM_VERSION", "") if want and up else ""
                return up and (not want or ver == want), (out or err).strip()[:200]
        return check

    def _slurmd_step(self, kind: str, node: str, container: str, st: Step):
        pid_before = self._slurmd_pid(container)
        started_before = parse_nodes(self._slurm(["scontrol", "show", "node", "-o", node], admin=True)[1]) \
            .get(node, {}).get("SlurmdStartTime", "")
        st.extra.update(pid_before=pid_before, slurmd_start_before=started_before)
        if kind == "upgrade":
            from ..clusters.slurm import upgrade

            t0 = self._clock()
            self._do(upgrade.copy_argv(self._next["debs_dir"], container), st)
            self._do(upgrade.install_argv(container), st, timeout=600)
            st.extra["install_s"] = round(self._clock() - t0, 2)   # slurmd kept running meanwhile
        st.extra["stopped"] = self._clock()
        self._do(["docker", "exec", container, "poc-entrypoint", "slurmd-restart"], st, timeout=30)

        def check(want: str):
            pid = self._slurmd_pid(container)
            rc, out, _ = self._slurm(["scontrol", "show", "node", "-o", node], admin=True, timeout=15)
            return slurmd_back(parse_nodes(out).get(node, {}) if rc == 0 else {}, pid_before, pid,
                               started_before, want)
        return check

    def _slurmd_pid(self, container: str) -> str:
        # the pid the entrypoint's loop wrote, and only when that process is alive
        rc, out, _ = self._run(["docker", "exec", container, "sh", "-c",
                                'p=$(cat /run/poc-slurmd.pid) && kill -0 "$p" && echo "$p"'], timeout=15)
        return out.strip() if rc == 0 else ""

    def _poll(self, check, started: float) -> tuple[float | None, str]:
        seen = ""
        while True:
            ok, seen = check()
            now = self._clock()
            if ok:
                return now, seen
            if now - started > self.d.component_timeout_s:
                return None, seen
            self._sleep(POLL_S)

    # ------------------------------------------------------------ probes (probe thread)
    def try_submit(self) -> str | None:
        rc, out, err = self._slurm(PROBE_SUBMIT, timeout=PROBE_TIMEOUT_S)
        return None if rc == 0 else ((err or out).strip()[:300] or f"exit {rc}")

    def try_status(self) -> str | None:
        rc, out, err = self._slurm(PROBE_STATUS, timeout=PROBE_TIMEOUT_S)
        return None if rc == 0 else ((err or out).strip()[:300] or f"exit {rc}")

    # ------------------------------------------------------------ after the jobs
    def snapshot(self, handles: list[Handle]) -> dict:
        ids = [job_id(h) for h in handles]
        rc, out, err = self._slurm(["sacct", "-D", "-P", "-j", ",".join(ids), "-o", SACCT_FIELDS], env=TIME_ENV)
        snap: dict = {"at": self._clock(), "sacct": {"rc": rc, "rows": parse_sacct(out), "text": out,
                                                     "stderr": err.strip()[:500]}, "scontrol": {}}
        for i in ids:
            rc, out, err = self._slurm(["scontrol", "show", "job", "-o", i])
            snap["scontrol"][i] = {"rc": rc, "fields": parse_kv_line(out), "stderr": err.strip()[:300]}
        return snap

    def leftovers(self, handles: list[Handle]) -> list[dict]:
        ids = {job_id(h) for h in handles}
        found: list[dict] = []
        rc, out, err = self._slurm(["squeue", "-h", "-o", "%i|%T"])
        active = {ln.split("|")[0]: ln.split("|")[1] for ln in out.splitlines() if "|" in ln} if rc == 0 else {}
        found += [{"what": "job still active", "job": j, "state": s} for j, s in active.items() if j in ids]
        rc, out, _ = self._slurm(["squeue", "-h", "-s", "-o", "%i"])
        for step_id in out.split() if rc == 0 else []:
            if step_id.split(".")[0] in ids and step_id.split(".")[0] not in active:
                found.append({"what": "step listed after its job ended", "step": step_id})
        rc, out, _ = self._slurm(["sacct", "-P", "-n", "-j", ",".join(sorted(ids)), "-o", "JobID,State"])
        found += leftover_steps(out, set(active)) if rc == 0 else []
        rc, out, _ = self._slurm(["sinfo", "-h", "-N", "-o", "%N|%T"])
        found += bad_nodes(out, busy=bool(active))
        rc, out, err = self._slurm(["scontrol", "ping"])
        if rc != 0 or " is UP" not in out:
            found.append({"what": "slurmctld not answering", "detail": (out or err).strip()[:200]})
        rc, out, err = self._slurm(["sacctmgr", "-n", "-P", "show", "cluster", "format=cluster"])
        if rc != 0 or not out.strip():
            found.append({"what": "slurmdbd not answering", "detail": (out or err).strip()[:200]})
        return found

    def restore(self, kind: str) -> dict:
        """Restart: the cluster is checked (and anything stopped started) by slurm_docker.up(). Upgrade:
        slurmdbd's database and slurmctld's saved state are in the newer release's format, which the
        pinned release cannot read: the cluster is recreated with fresh state volumes (the shared file
        system, the secrets and the ports stay), and up() makes the poc account again."""
        if not self.docker:
            return {}
        from ..clusters import slurm_docker as sd

        t0, done = self._clock(), {}
        release = self._release()
        if kind == "upgrade":
            from ..clusters.slurm import upgrade

            done["removed"] = sd.down(self._state_dir, volumes=False)
            for vol in upgrade.state_volumes():
                rc, _, err = self._run(["docker", "volume", "rm", vol], timeout=120)
                done.setdefault("volumes_removed", []).append(vol) if rc == 0 else done.setdefault(
                    "volume_errors", []).append(err.strip()[:200])
        info = sd.up(self._state_dir, release=release)
        done.update(release=release, slurm_version=info.slurm_version, seconds=round(self._clock() - t0, 2))
        return done

    # ------------------------------------------------------------ helpers
    def _image_of(self, container: str) -> str:
        rc, out, err = self._run(["docker", "inspect", "-f", "{{.Config.Image}}", container], timeout=30)
        if rc != 0:
            raise BackendError(f"cannot inspect {container}: {err.strip()[:200]}",
                               tip="is the local cluster up? `poc cluster up --slurm`")
        return out.strip()

    def _release(self) -> str:
        from ..backends.slurm.connect import docker_cluster_settings

        s = docker_cluster_settings(getattr(self.b.cfg, "connection_file", None)) or {}
        return s.get("release") or "trixie"


def _state_marker(state_dir) -> Path:
    from ..clusters import slurm_docker as sd

    return sd.state_dir(state_dir) / "cluster.json"


def _own_transport(backend):
    """A transport for one thread: an SSH connection of its own (never the backend's channel); a local
    transport is a subprocess per command, so it is shared."""
    from ..transports import SshTransport

    inner = getattr(backend.t, "inner", backend.t)
    if isinstance(inner, SshTransport) and getattr(backend.cfg, "host", None):
        return SshTransport.from_slurm(backend.cfg)
    if getattr(inner, "name", "") == "local":
        return inner
    raise BackendError(f"drill probes need the Slurm commands over ssh or locally (transport: {inner.name})",
                       tip="set slurm.transport: ssh with slurm.host for the drill")


def job_id(h: Handle) -> str:
    return str(h.data.get("job_id") or h.ids[0])
