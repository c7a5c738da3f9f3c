"""The host's CPU over one replay, sampled: the whole host and each component, mean and peak.

A replay on this host measures a scheduler only while the host has CPU to spare; where it has none, the
queue is the host's. So every replay keeps, beside its figures, the host's busy cores and each
component's (the Kubernetes control plane process by process, the emulated Slurm container by daemon,
Docker, the harness itself) sampled every ``interval_s``: the mean over the replay and the busiest
sample, and the series for a chart. "other" is the host's busy time that none of the named groups used
(other work on the machine), never below 0.

Reading only /proc (and the container's cgroup to find its processes); Linux only. A group's processes
are listed again at every sample, so slurmstepd that come and go are counted while they live.
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

INTERVAL_S = 1.0
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
BUSY = (0, 1, 2, 5, 6, 7)   # user nice system irq softirq steal of /proc/stat's first line (idle, iowait out)
SERIES_MAX = 600            # samples kept for the chart; more are thinned evenly


def host_busy_ticks(proc: Path = Path("/proc")) -> tuple[int, int]:
    """(busy jiffies, total jiffies) of the whole host since boot."""
    fields = [int(x) for x in (proc / "stat").read_text().splitlines()[0].split()[1:9]]
    return sum(fields[i] for i in BUSY), sum(fields)


def pid_ticks(pid: int, proc: Path = Path("/proc"), children: bool = False) -> int | None:
    """utime + stime of a process (and its reaped children's with `children`), jiffies; None when gone."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    f = text.rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12]) + ((int(f[13]) + int(f[14])) if children else 0)


def comm(pid: int, proc: Path = Path("/proc")) -> str | None:
    try:
        return (proc / str(pid) / "comm").read_text().strip()
    except OSError:
        return None


def cgroup_pids(pid: int, proc: Path = Path("/proc"), sys_cgroup: Path = Path("/sys/fs/cgroup")) -> list[int]:
    """Every process in the cgroup of `pid` (a container's init): cgroup v1's cpuacct hierarchy or v2's."""
    try:
        lines = (proc / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        _, ctrl, path = line.split(":", 2)
        roots = ([sys_cgroup / "cpu,cpuacct", sys_cgroup / "cpuacct"] if "cpuacct" in ctrl.split(",")
                 else [sys_cgroup] if ctrl == "" else [])
        for root in roots:
            f = root / path.lstrip("/") / "cgroup.procs"
            try:
                return [int(x) for x in f.read_text().split()]
            except (OSError, ValueError):
                continue
    return []


def by_name(names: tuple[str, ...], proc: Path = Path("/proc")) -> list[int]:
    """Pids of the host's processes whose comm is one of `names` (a scan of /proc: do it once)."""
    out = []
    for d in proc.iterdir():
        if d.name.isdigit() and comm(int(d.name), proc) in names:
            out.append(int(d.name))
    return out


class HostCpu:
    """Samples in a thread from start() to stop(). `groups` returns {group name: pids} at each sample (pids
    whose ticks count towards it; `own` names the group whose pids count their reaped children too: the
    harness's `docker exec` and `sbatch` calls)."""

    def __init__(self, groups: Callable[[], dict[str, list[int]]], interval_s: float = INTERVAL_S,
                 proc: Path = Path("/proc"), clock: Callable[[], float] = time.monotonic, own: str = "harness"):
        self.groups, self.interval_s, self.proc, self.clock, self.own = groups, interval_s, proc, clock, own
        self.samples: list[tuple[float, float, dict[str, float]]] = []   # (t, host busy cores, group cores)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: tuple[float, int, dict[tuple[str, int], int]] | None = None

    def _read(self) -> tuple[float, int, dict[tuple[str, int], int]]:
        ticks = {}
        for name, pids in self.groups().items():
            for pid in pids:
                t = pid_ticks(pid, self.proc, children=name == self.own)
                if t is not None:
                    ticks[(name, pid)] = t
        return self.clock(), host_busy_ticks(self.proc)[0], ticks

    def sample(self) -> None:
        now = self._read()
        if self._last is not None:
            t0, busy0, ticks0 = self._last
            dt = now[0] - t0
            if dt > 0:
                per: dict[str, float] = {}
                for (name, pid), t in now[2].items():
                    before = ticks0.get((name, pid))
                    used = t - before if before is not None else 0   # a process first seen: counted from here
                    per[name] = per.get(name, 0.0) + max(0, used) / TICK / dt
                host = (now[1] - busy0) / TICK / dt
                per["other"] = max(0.0, host - sum(per.values()))
                self.samples.append((round(now[0], 3), host, per))
        self._last = now

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sample()
            except (OSError, ValueError, IndexError):
                continue

    def start(self) -> HostCpu:
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="hostcpu", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self.sample()
        except (OSError, ValueError, IndexError):
            pass
        return summary(self.samples, self.interval_s)


def summary(samples: list[tuple[float, float, dict[str, float]]], interval_s: float, cpus: int | None = None) -> dict:
    """Mean and peak busy cores of the host and of each group, over the samples; the series, thinned to
    SERIES_MAX points, as [seconds from the first sample, host cores, {group: cores}]."""
    cpus = cpus or os.cpu_count() or 0
    if not samples:
        return {"interval_s": interval_s, "samples": 0, "host_cpus": cpus, "host": None, "components": {}, "series": []}
    names = sorted({n for _, _, per in samples for n in per})
    comp = {n: {"mean_cores": round(sum(per.get(n, 0.0) for _, _, per in samples) / len(samples), 3),
                "peak_cores": round(max(per.get(n, 0.0) for _, _, per in samples), 3)} for n in names}
    host = [h for _, h, _ in samples]
    step = max(1, -(-len(samples) // SERIES_MAX))
    t0 = samples[0][0]
    series = [[round(t - t0, 1), round(h, 3), {n: round(v, 3) for n, v in per.items() if v >= 0.005}]
              for t, h, per in samples[::step]]
    return {"interval_s": interval_s, "samples": len(samples), "host_cpus": cpus,
            "host": {"mean_cores": round(sum(host) / len(host), 3), "peak_cores": round(max(host), 3),
                     "peak_share": round(max(host) / cpus, 3) if cpus else None},
            "components": comp, "series": series}
