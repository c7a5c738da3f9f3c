"""The host's load around one run: sampled before, during and after it, stored in the run record.

Every platform of the lab runs on the harness's own host, so a run's figures carry whatever else that
host was doing: a startup that takes 15 s on a machine at load 12 takes 6 s on a quiet one. A figure
that cannot say how busy its host was cannot be weighed, so every run records (``RunRecord.host_load``):

  before / after   the load averages (1, 5, 15 min) when the run started and when it ended;
  during           the 1-min load average sampled every ``interval_s`` while it ran (median, highest);
  cpu              the host's CPU time over the run from /proc/stat: the share busy, stolen by the
                   hypervisor (steal: the VM waited for a physical CPU) and waiting on I/O;
  groups_cpu_s     that CPU time by who used it: the harness (this process and the calls it made: their time is
                   its cutime/cstime), the clusters (the processes seen in a container's cgroup, and the lab's
                   daemons by name: dockerd, containerd, kube-*, etcd, slurm*, ...) and other: the rest of the
                   host's busy time (what a quiet machine would not run, and what lived and ended between two
                   looks), never more than the host ran; other_seen is the part of it seen as processes.
                   Reaped children's time is not added to other parents: an orphan's whole life, its time
                   before the run included, lands in whatever reaps it (an init, a container's docker-init);
  busiest          the processes that used the most CPU over the run, by name, with their group.

Linux only (/proc); elsewhere the record says ``{"unavailable": why}``. Pure reading: nothing here
changes the host. The report decides from these numbers whether a run's host was busy
(harness/report/conditions.py), so a threshold can change without the records changing.
"""
from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

VERSION = 1
INTERVAL_S = 5.0
TOP = 8
# the lab's own daemons when they run on the host itself (the native Kubernetes cluster's processes);
# the Slurm cluster's and every pod's processes are in a container's cgroup and found by it
LAB_NAMES = ("dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2", "runc", "docker-proxy",
             "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet", "etcd",
             "coredns", "jobset", "kueue", "kwok", "slurmctld", "slurmd", "slurmdbd", "slurmrestd",
             "slurmstepd", "munged", "mariadbd", "sshd")
# a container's cgroup, or the native cluster's own (clusters/k8s/host.py CGROUP_PARENT: its daemons and pods)
CONTAINER_CGROUP = ("/docker/", "/docker-", "kubepods", "/containerd/", "/libpod", "/lxc/", "/poc-native-k8s/")
_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class Snapshot:
    t: float
    load: tuple[float, float, float]
    cpu: dict[str, int]                      # /proc/stat's first line, jiffies by field
    procs: dict[int, tuple[str, int, int, int]]   # pid -> (name, ppid, utime + stime, cutime + cstime), jiffies


def _read(path: Path) -> str:
    return path.read_text()


def snapshot(proc: Path = Path("/proc"), clock: Callable[[], float] = time.time, procs: bool = True) -> Snapshot:
    """One look at the host. procs=False skips the per-process scan (the cheap look taken between scans)."""
    load = tuple(float(x) for x in _read(proc / "loadavg").split()[:3])
    first = _read(proc / "stat").splitlines()[0].split()
    cpu = {name: int(v) for name, v in zip(_CPU_FIELDS, first[1:], strict=False)}
    table: dict[int, tuple[str, int, int, int]] = {}
    if procs:
        for entry in os.scandir(proc):
            if not entry.name.isdigit():
                continue
            try:
                text = _read(Path(entry.path) / "stat")
            except OSError:          # it exited between the listing and the read
                continue
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split at the last ')'
            head, _, rest = text.rpartition(")")
            fields = rest.split()
            if len(fields) < 15:
                continue
            table[int(entry.name)] = (head.partition("(")[2], int(fields[1]), int(fields[11]) + int(fields[12]),
                                      int(fields[13]) + int(fields[14]))
    return Snapshot(clock(), load, cpu, table)   # type: ignore[arg-type]


def in_container(pid: int, proc: Path = Path("/proc")) -> bool:
    try:
        return any(mark in _read(proc / str(pid) / "cgroup") for mark in CONTAINER_CGROUP)
    except OSError:
        return False


def _ticks() -> int:
    try:
        return os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):
        return 100


@dataclass
class Sampler:
    """Looks at the host when started, every interval_s on a daemon thread while the run goes on, and when
    stopped; stop() returns the run record's host_load. `read` and `container` are the host's by default
    (tests pass recorded snapshots)."""
    interval_s: float = INTERVAL_S
    read: Callable[..., Snapshot] = snapshot
    container: Callable[[int], bool] = in_container
    own_pid: int = field(default_factory=os.getpid)
    cpus: int = field(default_factory=lambda: os.cpu_count() or 1)
    ticks_per_s: int = field(default_factory=_ticks)
    _first: Snapshot | None = None
    _last: Snapshot | None = None
    _loads: list[float] = field(default_factory=list)
    # pid -> (name, ppid, own ticks and reaped children's ticks at the first look that saw it: 0 for a process
    # born after the run's first look)
    _seen: dict[int, tuple[str, int, int, int]] = field(default_factory=dict)
    _final: dict[int, tuple[int, int]] = field(default_factory=dict)   # pid -> (own, children's) at its last look
    _group: dict[int, str] = field(default_factory=dict)   # pid -> its group, decided when first seen (alive)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _problem: str | None = None

    def start(self) -> Sampler:
        try:
            self._first = self.read()
        except (OSError, ValueError, IndexError) as exc:   # no /proc (not Linux), or one we cannot read
            self._problem = f"{type(exc).__name__}: {exc}"[:200]
            return self
        self._take(self._first)
        self._thread = threading.Thread(target=self._loop, name="poc-hostload", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._take(self.read())
            except (OSError, ValueError, IndexError):
                continue   # one missed look; the next one or the last one still counts

    def _take(self, s: Snapshot) -> None:
        self._loads.append(s.load[0])
        for pid, (name, ppid, ticks, reaped) in s.procs.items():
            if pid not in self._seen:   # one born during the run: all of its time is the run's
                first = s is self._first
                self._seen[pid] = (name, ppid, ticks if first else 0, reaped if first else 0)
            self._final[pid] = (ticks, reaped)
        for pid in s.procs:   # while it is alive: its cgroup file goes with it (a pod's rank ends before the stop)
            if pid not in self._group:
                self._group[pid] = self.classify(pid)
        self._last = s

    def close(self) -> None:
        """Stop looking, without a summary (a run whose record could not be written)."""
        self._stop.set()

    def stop(self) -> dict:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s + 5)
        if self._first is None:
            return {"version": VERSION, "unavailable": self._problem or "not sampled"}
        try:
            self._take(self.read())
        except (OSError, ValueError, IndexError):
            pass   # the last thread's look stands in for the end
        return summarize(self._first, self._last or self._first, self._loads, self._seen, self._final, self.own_pid,
                         self.group_of, self.cpus, self.ticks_per_s, self.interval_s)

    def group_of(self, pid: int) -> str:
        """The group decided when the process was first seen (classify), or now for one never classified."""
        return self._group.get(pid) or self.classify(pid)

    def classify(self, pid: int) -> str:
        """harness (this process or a descendant), clusters (a container's process or a lab daemon), other."""
        chain, p = 0, pid
        while p > 1 and chain < 64:   # the harness's children: ssh, docker and kubectl calls it made
            if p == self.own_pid:
                return "harness"
            p = self._seen.get(p, ("", 0, 0, 0))[1]
            chain += 1
        name = self._seen.get(pid, ("", 0, 0, 0))[0]
        if name in LAB_NAMES or name.startswith(("kube-", "containerd-shim", "slurm")) or self.container(pid):
            return "clusters"
        return "other"


def _load(s: Snapshot) -> dict:
    return {"t": round(s.t, 3), "load1": s.load[0], "load5": s.load[1], "load15": s.load[2]}


def used_ticks(seen: dict, final: dict, own_pid: int) -> dict[int, int]:
    """Per pid, the CPU ticks it used while the run was looked at: its own time since its first look; for the
    harness's own process also its children's that ended (its cutime/cstime: it waits for each call it makes).
    Other processes' reaped children are not added: an orphan's whole life, its time before the run included,
    lands in whatever reaps it (an init, a container's docker-init), so the kernel's sum would count twice."""
    out = {pid: final[pid][0] - f_own for pid, (_, _, f_own, _) in seen.items() if pid in final}
    if own_pid in seen and own_pid in final:
        out[own_pid] += max(0, final[own_pid][1] - seen[own_pid][3])
    return out


def summarize(first: Snapshot, last: Snapshot, loads: list[float], seen: dict, final: dict, own_pid: int,
              group_of: Callable[[int], str], cpus: int, ticks_per_s: int, interval_s: float) -> dict:
    total = {k: last.cpu.get(k, 0) - first.cpu.get(k, 0) for k in _CPU_FIELDS}
    all_ticks = sum(total.values())
    busy_ticks = all_ticks - total["idle"] - total["iowait"] - total["steal"]   # what ran, not what waited

    def share(x: float) -> float | None:
        return round(x / all_ticks, 4) if all_ticks > 0 else None

    by_group: dict[str, float] = {"harness": 0.0, "clusters": 0.0, "other": 0.0}
    by_name: dict[tuple[str, str], list[float]] = {}
    ticks = used_ticks(seen, final, own_pid)
    for pid, (name, _, _, _) in seen.items():
        used = ticks.get(pid, 0) / ticks_per_s
        if used <= 0:
            continue
        group = group_of(pid)
        by_group[group] += used
        entry = by_name.setdefault((name, group), [0.0, 0])
        entry[0] += used
        entry[1] += 1
    host_s = busy_ticks / ticks_per_s
    # everything the host ran that is neither the harness's nor the clusters' seen processes: other processes,
    # and what lived and ended between two looks (an agent's short test processes; a few of the lab's own too)
    seen_other = by_group["other"]
    by_group["other"] = max(host_s - by_group["harness"] - by_group["clusters"], 0.0)
    wall = max(last.t - first.t, 0.0)
    busiest = sorted(by_name.items(), key=lambda kv: -kv[1][0])[:TOP]
    return {
        "version": VERSION, "cpus": cpus, "interval_s": interval_s, "samples": len(loads),
        "before": _load(first), "after": _load(last),
        "during": {"load1_median": round(statistics.median(loads), 2) if loads else None,
                   "load1_max": max(loads) if loads else None},
        "cpu": {"wall_s": round(wall, 3), "busy_share": share(busy_ticks), "steal_share": share(total["steal"]),
                "iowait_share": share(total["iowait"])},
        "groups_cpu_s": {**{k: round(v, 2) for k, v in by_group.items()}, "other_seen": round(seen_other, 2)},
        "busiest": [{"name": n, "group": g, "cpu_s": round(v[0], 2), "processes": v[1]} for (n, g), v in busiest],
    }
