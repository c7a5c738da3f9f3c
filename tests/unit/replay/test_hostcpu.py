"""The host CPU record of a replay, read from a fake /proc: the whole host's busy cores and each group's, mean
and peak, "other" as what no group used; a cgroup's processes listed from its cgroup.procs."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.replay import hostcpu


def stat_line(utime: int, stime: int, cutime: int = 0, cstime: int = 0) -> str:
    rest = " ".join(["0"] * 30)
    return f"1 (name with) spaces) S 1 1 1 0 0 0 0 0 0 0 {utime} {stime} {cutime} {cstime} {rest}\n"


class FakeProc:
    def __init__(self, root: Path):
        self.root = root
        (root / "proc").mkdir()

    @property
    def proc(self) -> Path:
        return self.root / "proc"

    def host(self, busy: int, idle: int) -> None:
        (self.proc / "stat").write_text(f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 1 2 3\n")

    def pid(self, pid: int, ticks: int, comm: str = "x", children: int = 0) -> None:
        d = self.proc / str(pid)
        d.mkdir(exist_ok=True)
        (d / "stat").write_text(stat_line(ticks, 0, children, 0))
        (d / "comm").write_text(comm + "\n")


def test_busy_cores_per_group_and_other_are_sampled_with_mean_and_peak(tmp_path):
    f = FakeProc(tmp_path)
    clock = iter([0.0, 1.0, 2.0])
    f.host(0, 0)
    f.pid(10, 0, "kube-apiserver")
    f.pid(20, 0, "python", children=0)
    cpu = hostcpu.HostCpu(lambda: {"kube-apiserver": [10], "harness": [20]}, proc=f.proc,
                          clock=lambda: next(clock))
    cpu.sample()
    # second 1: the host 150 ticks busy (1.5 cores at 100 ticks a second), the API server 100, the harness 20
    # plus its reaped children's 10
    f.host(150, 50)
    f.pid(10, 100)
    f.pid(20, 20, children=10)
    cpu.sample()
    f.host(200, 200)
    f.pid(10, 120)
    cpu.sample()
    got = hostcpu.summary(cpu.samples, 1.0, cpus=2)
    tick = hostcpu.TICK
    assert got["samples"] == 2
    assert got["host"]["peak_cores"] == pytest.approx(150 / tick)
    assert got["components"]["kube-apiserver"]["mean_cores"] == pytest.approx(round((100 + 20) / 2 / tick, 3))
    assert got["components"]["harness"]["peak_cores"] == pytest.approx(round(30 / tick, 3))
    # other: the host's busy time no group used, 150 - 130 in the first second, 50 - 20 in the second
    assert got["components"]["other"]["peak_cores"] == pytest.approx(round(30 / tick, 3))
    assert got["components"]["other"]["mean_cores"] == pytest.approx(round(25 / tick, 3))
    assert got["series"][0][0] == 0 and len(got["series"]) == 2


def test_a_process_that_goes_away_or_appears_is_never_negative(tmp_path):
    f = FakeProc(tmp_path)
    clock = iter([0.0, 1.0])
    f.host(0, 0)
    f.pid(10, 500)
    pids = [[10], [11]]
    cpu = hostcpu.HostCpu(lambda: {"slurmd (all)": pids.pop(0)}, proc=f.proc, clock=lambda: next(clock))
    cpu.sample()
    f.host(10, 90)
    f.pid(11, 900)      # first seen: counted from here, not its whole life
    cpu.sample()
    assert cpu.samples[0][2]["slurmd (all)"] == 0


def test_a_containers_processes_come_from_its_cgroup(tmp_path):
    f = FakeProc(tmp_path)
    f.pid(7, 1)
    (f.proc / "7" / "cgroup").write_text("4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n")
    cg = tmp_path / "sys" / "cpu,cpuacct" / "docker" / "abc"
    cg.mkdir(parents=True)
    (cg / "cgroup.procs").write_text("7\n8\n9\n")
    assert hostcpu.cgroup_pids(7, proc=f.proc, sys_cgroup=tmp_path / "sys") == [7, 8, 9]
    assert hostcpu.cgroup_pids(99, proc=f.proc, sys_cgroup=tmp_path / "sys") == []
    assert hostcpu.summary([], 1.0)["host"] is None
