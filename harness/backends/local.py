"""Local baseline: torchrun agents as child processes, no scheduler.

It is the floor for queue and startup time: "allocated" is the moment the
agents are spawned, so everything after it is launcher and workload cost.
"""
from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from .. import events as evmod
from ..errors import BackendError
from ..netutil import free_port
from ..render.local import as_script, render_local
from ..spec import JobSpec
from ..states import JobState
from .base import Backend, Collected, FaultRecord, Handle, Observation, Rendered

LOCAL_ENV = {
    # Keep gloo on loopback: the host's name may resolve to an address other processes cannot reach.
    "GLOO_SOCKET_IFNAME": "lo",
}
# Run by the Python that will run torchrun. A missing module is answered on stdout with exit code 3, so
# the harness can tell "torch is not installed" (a light install) from a torch that is broken.
TORCH_PROBE = """\
import sys
try:
    import torch, torch.distributed as d
except ImportError as exc:
    print(exc.name or "", exc, sep="\t")
    sys.exit(3)
print(torch.__version__, d.is_available(), d.is_gloo_available())
"""
MISSING = 3


class EventTail:
    """Reads new complete lines from every file in a directory, remembering offsets."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.offsets: dict[str, int] = {}

    def read(self) -> list[dict]:
        out: list[dict] = []
        if not self.directory.is_dir():
            return out
        for path in sorted(self.directory.glob("*.jsonl")):
            off = self.offsets.get(path.name, 0)
            with open(path, "rb") as fh:
                fh.seek(off)
                chunk = fh.read()
            end = chunk.rfind(b"\n")
            if end < 0:
                continue  # no complete line yet
            self.offsets[path.name] = off + end + 1
            out.extend(evmod.parse_lines(chunk[: end + 1].decode("utf-8", "replace").splitlines()))
        return out


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    out, stack = set(), [pid]
    while stack:
        for c in children.get(stack.pop(), []):
            if c not in out:
                out.add(c)
                stack.append(c)
    return out


def _note_exit(proc: subprocess.Popen, rec: dict) -> None:
    rec["exit_code"] = proc.wait()
    rec["exited_at"] = time.time()


class LocalBackend(Backend):
    platform = "local"
    poll_s = 0.2

    def __init__(self, work_root: str | os.PathLike, python: str = sys.executable, keep_checkpoints: bool = False):
        self.work_root = Path(work_root)
        self.python = python
        self.keep_checkpoints = keep_checkpoints
        self._procs: dict[str, list[subprocess.Popen]] = {}
        self._tails: dict[str, EventTail] = {}
        self._seen: dict[str, list[dict]] = {}
        self._ended: dict[str, float] = {}
        self._cancelled: set[str] = set()
        self._spawns: dict[str, list[dict]] = {}   # run_id -> per agent: pid, spawn bracket, exit (raw evidence)

    def work_dir(self, spec_or_handle) -> Path:
        return self.work_root / spec_or_handle.run_id

    @staticmethod
    def env(spec: JobSpec) -> dict[str, str]:
        return {**spec.launch_env(), **LOCAL_ENV}

    def render(self, spec: JobSpec) -> Rendered:
        argvs = render_local(spec, str(self.work_dir(spec)), self.python)
        return Rendered("local", {"launch.sh": as_script(argvs, self.env(spec))}, payload=argvs)

    def preflight(self) -> dict:
        # torch is the `workload` extra, not a dependency of the harness: a plain `pip install k8s-slurm-poc`
        # lacks it, and this is where local.runtime: host first needs it.
        install = (f"pip install 'k8s-slurm-poc[workload]' into the Python that runs torchrun "
                   f"({shlex.quote(self.python)} -m pip install 'k8s-slurm-poc[workload]'), or use "
                   "local.runtime: container (the worker image brings its own torch)")
        try:
            out = subprocess.run([self.python, "-c", TORCH_PROBE],
                                 capture_output=True, text=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BackendError(f"cannot run {self.python}, the Python that local.runtime: host runs torchrun "
                               f"with: {exc}", tip=install) from exc
        if out.returncode == MISSING:
            name, _, why = out.stdout.rstrip("\n").partition("\t")
            if name.split(".")[0] == "torch":
                raise BackendError(f"torch is not installed in {self.python}, the Python that local.runtime: host "
                                   "runs torchrun with", tip=install)
            raise BackendError(f"torch cannot be imported by {self.python}: {why}",
                               tip=(f"install {name}, which torch imports, into that Python" if name else
                                    "reinstall torch in that Python") + ", or use local.runtime: container")
        if out.returncode != 0:
            last = (out.stderr.strip().splitlines() or [f"exit code {out.returncode}"])[-1]
            raise BackendError(f"torch cannot be imported by {self.python}: {last}",
                               tip="reinstall torch in that Python, or use local.runtime: container")
        version, dist_ok, gloo_ok = out.stdout.split()
        if dist_ok != "True" or gloo_ok != "True":
            raise BackendError("this torch build lacks torch.distributed with gloo", tip="install torch from PyPI")
        return {"scheduler": "none", "scheduler_version": None, "torch_local": version,
                "hostname": socket.gethostname(), "cpus": os.cpu_count(),
                "torchrun_max_restarts": None}

    def submit(self, spec: JobSpec, rendered: Rendered) -> Handle:
        # The port is chosen at submit time so render stays pure; the rendered copy shows the default port.
        spec = dataclasses.replace(spec, rdzv_port=free_port())
        rendered = self.render(spec)
        work = self.work_dir(spec)
        if work.exists():
            shutil.rmtree(work)  # a resumed campaign re-runs an unfinished run from scratch
        (work / "events").mkdir(parents=True)
        env = dict(os.environ, **self.env(spec))
        submitted = time.time()
        procs, spawns = [], []
        for i, argv in enumerate(rendered.payload):
            # The child holds its own copy of the descriptor, so ours can close as soon as it is spawned.
            with open(work / f"agent-{i}.log", "wb") as log:
                b = time.time()
                procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                              env=env, cwd=work, start_new_session=True))
                spawns.append({"pid": procs[-1].pid, "spawn_before": b, "spawn_after": time.time(),
                               "exited_at": None, "exit_code": None})
        allocated = time.time()
        for p, rec in zip(procs, spawns, strict=True):
            # a thread blocked in wait() notes each exit within milliseconds (a poll would be 0.2-0.5 s late)
            threading.Thread(target=_note_exit, args=(p, rec), daemon=True).start()
        self._spawns[spec.run_id] = spawns
        self._procs[spec.run_id] = procs
        self._tails[spec.run_id] = EventTail(work / "events")
        self._seen[spec.run_id] = []
        return Handle("local", spec.run_id, [str(p.pid) for p in procs], submitted,
                      data={"allocated": allocated, "work_dir": str(work), "port": spec.rdzv_port})

    def _state(self, run_id: str) -> tuple[JobState, str]:
        procs = self._procs.get(run_id, [])
        if not procs:
            return JobState.UNKNOWN, "not started by this harness"
        codes = [p.poll() for p in procs]
        if any(c is None for c in codes):
            if any(c not in (None, 0) for c in codes):
                return JobState.RUNNING, "an agent exited with " + str([c for c in codes if c])
            return JobState.RUNNING, "running"
        if all(c == 0 for c in codes):
            return JobState.SUCCEEDED, "exit 0"
        if any(c is not None and c < 0 for c in codes) and run_id in self._cancelled:
            return JobState.CANCELLED, f"exit codes {codes}"
        return JobState.FAILED, f"exit codes {codes}"

    def observe(self, handles: list[Handle]) -> dict[str, Observation]:
        out = {}
        for h in handles:
            tail = self._tails.get(h.run_id)
            new = tail.read() if tail else []
            self._seen.setdefault(h.run_id, []).extend(new)
            state, why = self._state(h.run_id)
            if state.terminal and h.run_id not in self._ended:
                self._ended[h.run_id] = time.time()
            times = {"submitted": h.submitted_at, "allocated": h.data["allocated"]}
            if h.run_id in self._ended:
                times["ended"] = self._ended[h.run_id]
            out[h.run_id] = Observation(state=state, events=new, times=times, native_state=why)
        return out

    def inject(self, handle: Handle, kind: str, target_event: dict, journal=None) -> FaultRecord:
        if kind != "kill_rank":
            raise BackendError(f"fault {kind!r} is not available on the local baseline",
                               tip="the local baseline supports kill_rank only")
        pid = int(target_event["pid"])
        ours = set()
        for p in self._procs.get(handle.run_id, []):
            ours |= _descendants(p.pid)
        if pid not in ours:
            raise BackendError(f"pid {pid} (rank {target_event.get('rank')}) is not a process of run {handle.run_id}")
        t = time.time()
        os.kill(pid, signal.SIGKILL)
        return FaultRecord(kind, t, {k: target_event.get(k) for k in ("rank", "host", "pid", "attempt", "step")},
                           {"signal": "SIGKILL"}, acted_at=time.time())

    def collect(self, handle: Handle) -> Collected:
        work = Path(handle.data["work_dir"])
        tail = EventTail(work / "events")  # re-read everything: the store keeps the complete record
        events = evmod.dedupe(tail.read())
        logs = {}
        for p in sorted(work.glob("agent-*.log")):
            logs[p.name] = p.read_text(errors="replace")[-200_000:]
        times = {"submitted": handle.submitted_at, "allocated": handle.data["allocated"]}
        if handle.run_id in self._ended:
            times["ended"] = self._ended[handle.run_id]
        codes = [p.poll() for p in self._procs.get(handle.run_id, [])]
        if not self.keep_checkpoints:
            shutil.rmtree(work / "ckpt", ignore_errors=True)
        raw = {"runtime": "host",
               "submit": {"before": handle.submitted_at, "after": handle.data["allocated"], "scheduler_record": None},
               "processes": [dict(r) for r in self._spawns.get(handle.run_id, [])],
               "image": {"ref": None, "id": None, "source": f"host Python {self.python} (no image)"}}
        return Collected(events=events, times=times, attempts=[], logs=logs, info={"exit_codes": codes}, raw=raw)

    def cancel(self, handle: Handle) -> None:
        self._cancelled.add(handle.run_id)
        procs = self._procs.get(handle.run_id)
        pids = [int(i) for i in handle.ids] if procs is None else [p.pid for p in procs]
        for pid in pids:
            try:
                os.killpg(pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.time() + 10
        for p in procs or []:
            try:
                p.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
