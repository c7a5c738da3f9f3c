"""Same-image local baseline: one container per node of the clusters' worker image, no scheduler.

The clusters run Debian's torch in the worker image (Kubernetes pods run it; the Slurm node image
is built FROM it); the host's Python usually has another torch build (PyPI's), about ten times
faster or slower per step. So the baseline that stands for "no scheduler" runs the same image, with
the same per-node CPU and memory limits, one torchrun agent per container, the containers joined by
a Docker bridge network of their own (internal: no route out, only to each other), rendezvous by
the first container's name, the workload script bind-mounted read-only (as the pods' ConfigMap) and
a host directory for checkpoints and event files. `docker run` with argv lists, started directly:
no compose or SDK, because the CLI is the one Docker piece every machine here has (no compose v2,
no registry) and every call stays printable in the rendered launch script.

The platform name stays "local"; config `local.runtime: host` selects harness/backends/local.py.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .. import events as evmod
from ..errors import BackendError
from ..render.local import WORKLOAD_SIBLINGS, workload_script
from ..spec import WORKLOAD_SCRIPT, JobSpec
from ..states import JobState
from ..timing import docker_time
from .base import Backend, Collected, FaultRecord, Handle, Observation, Rendered
from .local import EventTail, _descendants

WORKLOAD_DIR = "/opt/poc"          # where the script is mounted, as the pods' ConfigMap
RUN_MOUNT = "/poc-run"             # the run's host directory: ckpt/ and events/ under it, as in the pods
CONTAINER_ENV = {
    # the container's one interface on the run's bridge: gloo must not pick loopback (as in the pods)
    "GLOO_SOCKET_IFNAME": "eth0",
    # a non-root user has no home in the image; torch and Python write caches under $HOME
    "HOME": "/tmp",
}
DOCKER_TIMEOUT_S = 120


@dataclass(frozen=True)
class ContainerJob:
    """What submit() runs, in order: the network, then one container per node."""
    network: str
    names: tuple[str, ...]         # container names (docker's), node 0 first
    hosts: tuple[str, ...]         # their host names (what the workload's events carry), also network aliases
    network_argv: tuple[str, ...]
    run_argvs: tuple[tuple[str, ...], ...]


def job_names(spec: JobSpec) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """(network, container names, host names) of a run; the campaign keeps concurrent campaigns apart."""
    base = f"poc-{spec.campaign}-{spec.run_id}"
    hosts = tuple(f"{spec.run_id}-{i}"[-63:].lstrip("-") for i in range(spec.nodes))   # a DNS label
    return base, tuple(f"{base}-{i}" for i in range(spec.nodes)), hosts


def labels(spec: JobSpec) -> dict[str, str]:
    return {**dict(spec.labels), "poc/platform": spec.platform, "poc/runtime": "container"}


def render_containers(spec: JobSpec, image: str, work_dir: str, script: str, user: str) -> ContainerJob:
    """Pure: the docker argv lists of a run (the same torchrun and workload arguments as the clusters)."""
    network, names, hosts = job_names(spec)
    lab = [a for k, v in sorted(labels(spec).items()) for a in ("--label", f"{k}={v}")]
    net_argv = ("docker", "network", "create", "--driver", "bridge", "--internal", *lab, network)
    env = {**spec.launch_env(), **CONTAINER_ENV, "POC_RUN_ID": spec.run_id}
    command = ["python3", "-m", "torch.distributed.run", *spec.torchrun_args(f"{hosts[0]}:{spec.rdzv_port}"),
               f"{WORKLOAD_DIR}/{WORKLOAD_SCRIPT}",
               *spec.workload_args(f"{RUN_MOUNT}/ckpt", f"{RUN_MOUNT}/events")]
    # caps = what a pod of the clusters gets (spec.caps): limits, no swap beyond the memory; none where
    # the campaign's platforms only reserve
    caps = [f"--cpus={spec.cpus_per_node}", f"--memory={spec.memory_mb}m",
            f"--memory-swap={spec.memory_mb}m"] if spec.caps == "enforced" else []
    runs = []
    for name, host in zip(names, hosts, strict=True):
        argv = ["docker", "run", "--detach", "--name", name, "--hostname", host,
                "--network", network, "--network-alias", host, *lab, *caps, "--user", user]
        for k, v in sorted(env.items()):
            argv += ["--env", f"{k}={v}"]
        # the workload and the modules shipped beside it (ddp_train.py imports poc_calibration.py with --calibrate)
        here = os.path.dirname(script)
        siblings = [a for name in WORKLOAD_SIBLINGS
                    for a in ("--volume", f"{os.path.join(here, name)}:{WORKLOAD_DIR}/{name}:ro")]
        argv += ["--volume", f"{work_dir}:{RUN_MOUNT}",
                 "--volume", f"{script}:{WORKLOAD_DIR}/{WORKLOAD_SCRIPT}:ro", *siblings,
                 "--workdir", RUN_MOUNT, image, *command]
        runs.append(tuple(argv))
    return ContainerJob(network, names, hosts, net_argv, tuple(runs))


def as_script(job: ContainerJob) -> str:
    lines = ["#!/usr/bin/env bash",
             "# Local baseline (container runtime): one container of the clusters' image per node,",
             "# on a bridge network of their own, started directly (no scheduler).",
             "set -euo pipefail", shlex.join(job.network_argv)]
    lines += [shlex.join(a) for a in job.run_argvs]
    lines.append("docker wait " + " ".join(shlex.quote(n) for n in job.names))
    return "\n".join(lines) + "\n"


def _trim_env(obj: dict) -> dict:
    """docker inspect without environment values (names only): nothing secret goes into raw evidence."""
    out = json.loads(json.dumps(obj))
    cfg = out.get("Config") or {}
    if isinstance(cfg.get("Env"), list):
        cfg["Env"] = [str(e).split("=", 1)[0] for e in cfg["Env"]]
    return out


def _ns_pid(host_pid: int) -> int | None:
    """The pid a host process has in its innermost pid namespace (the container's), from NSpid."""
    try:
        with open(f"/proc/{host_pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError):
        return None
    return None


class ContainerBackend(Backend):
    platform = "local"

    def __init__(self, work_root: str | os.PathLike, image: str, *, default_image: bool = False,
                 keep_checkpoints: bool = False, user: str | None = None):
        self.work_root = Path(work_root)
        self.image = image
        self.default_image = default_image      # the project's worker image: build it when missing
        self.keep_checkpoints = keep_checkpoints
        # files in the bind-mounted run directory belong to whoever runs the harness, not to root
        self.user = user or f"{os.getuid()}:{os.getgid()}"
        self._tails: dict[str, EventTail] = {}
        self._ended: dict[str, float] = {}
        self._cancelled: set[str] = set()
        self._last: dict[str, list[dict]] = {}     # run_id -> the last docker inspect seen

    # ------------------------------------------------------------------ docker
    @staticmethod
    def _docker(argv, *, check: bool = True, timeout: float = DOCKER_TIMEOUT_S) -> subprocess.CompletedProcess:
        try:
            res = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
        except FileNotFoundError as exc:
            raise BackendError("docker is not installed", tip="install docker and start its daemon, "
                               "or set local.runtime: host") from exc
        except subprocess.TimeoutExpired as exc:
            raise BackendError(f"{shlex.join(argv[:3])} did not answer within {timeout:g} s",
                               tip="is the Docker daemon healthy (`docker info`)?") from exc
        if check and res.returncode != 0:
            raise BackendError(f"{shlex.join(argv[:4])} failed (exit {res.returncode}): {res.stderr.strip()[-800:]}",
                               tip="is the Docker daemon running (`docker info`)?")
        return res

    def _inspect(self, names) -> list[dict]:
        """docker inspect of those containers that still exist (a missing one is simply absent)."""
        res = self._docker(["docker", "container", "inspect", *names], check=False)
        try:
            return json.loads(res.stdout or "[]")
        except json.JSONDecodeError:
            return []

    def work_dir(self, spec_or_handle) -> Path:
        return self.work_root / spec_or_handle.run_id

    # ------------------------------------------------------------------ interface
    def render(self, spec: JobSpec) -> Rendered:
        job = render_containers(spec, self.image, str(self.work_dir(spec)), str(workload_script()), self.user)
        # one file, every docker call shell-quoted (shlex.split of a line gives back its argv exactly)
        return Rendered("local", {"launch.sh": as_script(job)}, payload=job)

    def preflight(self) -> dict:
        version = self._docker(["docker", "version", "--format", "{{.Server.Version}}"]).stdout.strip()
        if self._docker(["docker", "image", "inspect", self.image], check=False).returncode != 0:
            if not self.default_image:
                raise BackendError(f"image {self.image} is not in the local Docker engine",
                                   tip="docker pull or build it, or set local.image: null for the worker image")
            from ..clusters import images  # the same build Kubernetes and Slurm use (content-hashed tag)
            images.ensure_worker_image()
        image_id = self._docker(["docker", "image", "inspect", "--format", "{{.Id}}", self.image]).stdout.strip()
        probe = self._docker(["docker", "run", "--rm", "--network", "none", self.image, "python3", "-c",
                              "import torch, torch.distributed as d; "
                              "print(torch.__version__, d.is_available(), d.is_gloo_available())"],
                             check=False, timeout=300)
        parts = probe.stdout.split()
        if probe.returncode != 0 or len(parts) != 3 or parts[1:] != ["True", "True"]:
            raise BackendError(f"torch with gloo is not usable in {self.image}: {probe.stderr.strip()[-500:]}",
                               tip="use the worker image (local.image: null)")
        return {"scheduler": "none", "scheduler_version": None, "runtime": "container",
                "docker_version": version, "image": self.image, "image_id": image_id,
                "torch_local": parts[0], "hostname": socket.gethostname(), "cpus": os.cpu_count(),
                "torchrun_max_restarts": None}

    def _remove(self, names, network: str) -> None:
        self._docker(["docker", "rm", "--force", "--volumes", *names], check=False)
        self._docker(["docker", "network", "rm", network], check=False)

    def submit(self, spec: JobSpec, rendered: Rendered) -> Handle:
        job: ContainerJob = rendered.payload
        work = self.work_dir(spec)
        self._remove(job.names, job.network)   # a resumed campaign re-runs an unfinished run from scratch
        if work.exists():
            shutil.rmtree(work)
        for sub in ("events", "ckpt"):          # made by the harness's user, so the containers' user writes
            (work / sub).mkdir(parents=True)
        self._docker(job.network_argv)
        calls = []
        before = time.time()
        try:
            for name, argv in zip(job.names, job.run_argvs, strict=True):
                b = time.time()
                cid = self._docker(argv).stdout.strip()
                calls.append({"name": name, "id": cid, "before": b, "after": time.time()})
        except BackendError:
            self._remove(job.names, job.network)
            raise
        after = time.time()
        self._tails[spec.run_id] = EventTail(work / "events")
        return Handle("local", spec.run_id, list(job.names), before,
                      data={"runtime": "container", "network": job.network, "containers": list(job.names),
                            "hosts": dict(zip(job.hosts, job.names, strict=True)), "work_dir": str(work),
                            "image": self.image, "submit": {"before": before, "after": after, "calls": calls}})

    def _state(self, handle: Handle, info: list[dict]) -> tuple[JobState, str]:
        if not info:
            if handle.run_id in self._cancelled:
                return JobState.CANCELLED, "containers removed"
            return JobState.UNKNOWN, "no container of this run exists"
        status = [(c.get("State") or {}).get("Status") for c in info]
        codes = [(c.get("State") or {}).get("ExitCode") for c in info]
        if len(info) < len(handle.data["containers"]) and handle.run_id not in self._cancelled:
            return JobState.FAILED, "a container of the run was removed"
        if any(s in ("created", "running", "restarting", "paused") for s in status):
            return JobState.RUNNING, "running" if all(c == 0 for c in codes) else f"exit codes {codes}"
        if handle.run_id in self._cancelled:
            return JobState.CANCELLED, f"exit codes {codes}"
        if all(c == 0 for c in codes):
            return JobState.SUCCEEDED, "exit 0"
        return JobState.FAILED, f"exit codes {codes}"

    @staticmethod
    def _times(handle: Handle, info: list[dict]) -> dict[str, float]:
        times = {"submitted": handle.submitted_at}
        starts = [docker_time((c.get("State") or {}).get("StartedAt")) for c in info]
        if info and len(info) == len(handle.data["containers"]) and None not in starts:
            times["allocated"] = max(starts)
        states = [c.get("State") or {} for c in info]
        ends = [docker_time(s.get("FinishedAt")) for s in states]
        if info and all(s.get("Status") in ("exited", "dead") for s in states) and None not in ends:
            times["ended"] = max(ends)
        return times

    def observe(self, handles: list[Handle]) -> dict[str, Observation]:
        out = {}
        for h in handles:
            info = self._inspect(h.data["containers"])
            if info:
                self._last[h.run_id] = info
            tail = self._tails.setdefault(h.run_id, EventTail(Path(h.data["work_dir"]) / "events"))
            new = tail.read()
            state, why = self._state(h, info)
            out[h.run_id] = Observation(state=state, events=new, times=self._times(h, info), native_state=why)
        return out

    def inject(self, handle: Handle, kind: str, target_event: dict, journal=None) -> FaultRecord:
        if kind != "kill_rank":
            raise BackendError(f"fault {kind!r} is not available on the local baseline",
                               tip="the local baseline supports kill_rank only")
        host, pid = str(target_event.get("host")), int(target_event["pid"])
        name = handle.data["hosts"].get(host)
        if name is None:
            raise BackendError(f"host {host!r} (rank {target_event.get('rank')}) is not a container of run "
                               f"{handle.run_id}")
        info = self._inspect([name])
        init = int(((info[0] if info else {}).get("State") or {}).get("Pid") or 0)
        # the rank's host pid: the same SIGKILL from the same harness as the host runtime's, no docker exec
        # in between (which would add its own start-up to the fault's time)
        host_pid = next((p for p in sorted(_descendants(init) | {init}) if init and _ns_pid(p) == pid), None)
        target = {k: target_event.get(k) for k in ("rank", "host", "pid", "attempt", "step")}
        t = time.time()
        if host_pid is not None:
            try:
                os.kill(host_pid, signal.SIGKILL)
                return FaultRecord(kind, t, target, {"signal": "SIGKILL", "container": name, "host_pid": host_pid},
                                   acted_at=time.time())
            except PermissionError:
                pass            # a rootless harness may not signal the container's processes: ask dockerd
        t = time.time()
        res = self._docker(["docker", "exec", name, "python3", "-c",
                            "import os, sys; os.kill(int(sys.argv[1]), 9)", str(pid)], check=False)
        if res.returncode != 0:
            raise BackendError(f"could not kill pid {pid} in {name}: {res.stderr.strip()[-300:]}")
        return FaultRecord(kind, t, target, {"signal": "SIGKILL", "container": name, "via": "docker exec"},
                           acted_at=time.time())

    def collect(self, handle: Handle) -> Collected:
        names = handle.data["containers"]
        info = self._inspect(names) or self._last.get(handle.run_id, [])
        work = Path(handle.data["work_dir"])
        events = evmod.dedupe(EventTail(work / "events").read())   # everything: the store keeps the record
        logs = {}
        for i, name in enumerate(names):
            res = self._docker(["docker", "logs", name], check=False)
            if res.returncode == 0:
                logs[f"container-{i}.log"] = (res.stdout + res.stderr)[-200_000:]
        if not self.keep_checkpoints:
            shutil.rmtree(work / "ckpt", ignore_errors=True)
        raw_containers = [_trim_env(c) for c in info]
        image_ids = sorted({c.get("Image") for c in info if c.get("Image")})
        sub = dict(handle.data.get("submit") or {})
        created = sorted(t for t in (docker_time(c.get("Created")) for c in info) if t is not None)
        sub["scheduler_record"] = created[0] if created else None
        raw = {"runtime": "container", "submit": sub, "containers": raw_containers,
               "network": {"name": handle.data["network"], "driver": "bridge", "internal": True},
               "image": {"ref": handle.data.get("image"), "id": image_ids[0] if len(image_ids) == 1 else image_ids,
                         "source": "docker inspect .Image of the run's containers"}}
        codes = [(c.get("State") or {}).get("ExitCode") for c in info]
        return Collected(events=events, times=self._times(handle, info), attempts=[], logs=logs,
                         info={"exit_codes": codes, "containers": names, "image_id": raw["image"]["id"]}, raw=raw)

    def cancel(self, handle: Handle) -> None:
        self._cancelled.add(handle.run_id)
        names = handle.data.get("containers") or handle.ids
        info = self._inspect(names)
        if info:
            self._last[handle.run_id] = info     # evidence for a collect after the containers are gone
        network = handle.data.get("network") or f"poc-{handle.run_id}"
        self._remove(names, network)
