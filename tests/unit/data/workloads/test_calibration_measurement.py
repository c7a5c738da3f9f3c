"""What the calibration measures, and what its children may touch: nccl-tests (a real child process, here a
script in its place) runs without the rank's launcher variables and never writes into the rank's own NCCL log;
the workload's timed all-reduce times the collective and not the refill of its buffer; every event names the
node as the scheduler does (SLURMD_NODENAME), which Slurm's faults aim at."""
from __future__ import annotations

import importlib.util
import json
from types import SimpleNamespace

import pytest
from support.paths import ROOT

SHIPPED = ROOT / "harness" / "data" / "workloads" / "ddp_train.py"
_spec = importlib.util.spec_from_file_location("ddp_train_measurement", SHIPPED)
w = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(w)

LAUNCHER = {"SLURM_JOB_ID": "7", "SLURM_PROCID": "0", "PMI_RANK": "0", "PMIX_RANK": "0",
            "OMPI_COMM_WORLD_RANK": "0", "PRTE_MCA_x": "1"}
# all_reduce_perf's stand-in: opens $NCCL_DEBUG_FILE as NCCL does (fopen "w": truncates), says which launcher
# variables it saw, and prints one table row in all_reduce_perf's layout
FAKE_ALL_REDUCE_PERF = """#!/bin/sh
[ -n "$NCCL_DEBUG_FILE" ] && echo "host:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4" > "$NCCL_DEBUG_FILE"
env | grep -E '^(SLURM_|PMI|OMPI_|PRTE_)' | sed 's/^/seen /'
echo "# nccl-tests version 2.13.11 nccl-headers=22105 nccl-library=22105"
echo "  8589934592  2147483648  float  sum  -1  47213  181.94  318.40  0  47100  182.38  319.16  0"
"""


@pytest.fixture
def rank_env(tmp_path, monkeypatch):
    """A rank's environment as torchrun under srun leaves it, with the rank's NCCL log already written."""
    log = tmp_path / "rank0-nccl.log"
    log.write_text("host:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/IB/0/GDRDMA\n")
    for k, v in {**LAUNCHER, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": str(log)}.items():
        monkeypatch.setenv(k, v)
    exe = tmp_path / "all_reduce_perf"
    exe.write_text(FAKE_ALL_REDUCE_PERF)
    exe.chmod(0o755)
    return SimpleNamespace(log=log, before=log.read_text(), exe=str(exe))


def test_a_site_tool_runs_without_the_launchers_variables_and_leaves_the_ranks_nccl_log_alone(rank_env):
    res = w.site_tool([rank_env.exe, "-b", "8G", "-e", "8G"])
    assert res["rc"] == 0
    assert [ln for ln in res["out"].splitlines() if ln.startswith("seen ")] == []
    assert rank_env.log.read_text() == rank_env.before


def test_nccl_tests_get_a_log_of_their_own_read_into_their_facts(rank_env):
    got = w.run_nccl_tests(rank_env.exe, "-b 8G -e 8G", 8, "node-a")
    assert rank_env.log.read_text() == rank_env.before
    assert got["rc"] == 0 and got["bytes"] == 8 << 30 and got["busbw_gbps"] == pytest.approx(319.16)
    assert got["nccl"]["version"] == "2.21.5+cuda12.4"          # the child's log, read back
    assert set(LAUNCHER) | {"NCCL_DEBUG_FILE"} <= set(got["env_dropped"])
    assert got["argv"][-2:] == ["-g", "8"]


def test_the_child_environment_keeps_everything_else_and_the_users_nccl_level():
    env, dropped = w.child_env({"NCCL_DEBUG": "WARN", "NCCL_DEBUG_FILE": "/x/%h.log", "PATH": "/bin",
                                "SLURM_JOB_ID": "7", "NCCL_IB_HCA": "mlx5_0"}, nccl_log="/tmp/own.log")
    assert env == {"NCCL_DEBUG": "WARN", "NCCL_DEBUG_FILE": "/tmp/own.log", "PATH": "/bin", "NCCL_IB_HCA": "mlx5_0"}
    assert dropped == ["NCCL_DEBUG_FILE", "SLURM_JOB_ID"]


class Clock:
    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


FILL_S, ALLREDUCE_S = 1.0, 0.1     # an 8 GiB fill is far shorter, but any time it takes must not be counted


class Buffer:
    """Rank 0's buffer of a job where every rank fills rank + 1: an all-reduce of freshly filled buffers sums
    1..world; of buffers already reduced (all equal), multiplies by world."""

    def __init__(self, clock, value, world):
        self.clock, self.value, self.world, self.fresh = clock, value, world, True

    def fill_(self, value):
        self.clock.now += FILL_S
        self.value, self.fresh = value, True

    def __getitem__(self, _):
        return self

    __hash__ = None

    def __eq__(self, other):
        return SimpleNamespace(all=lambda: SimpleNamespace(item=lambda: self.value == other))


def fake_collective(world):
    clock = Clock()
    torch = SimpleNamespace(float32="float32", full=lambda shape, value, dtype, device: Buffer(clock, value, world))

    def all_reduce(buf, group=None):
        clock.now += ALLREDUCE_S
        buf.value = buf.value * world * (world + 1) / 2 if buf.fresh else buf.value * world
        buf.fresh = False
    dist = SimpleNamespace(get_rank=lambda group=None: 0, all_reduce=all_reduce)
    return clock, torch, dist


def test_the_timed_all_reduce_times_the_collective_and_not_the_refill(monkeypatch):
    clock, torch, dist = fake_collective(world=4)
    monkeypatch.setattr(w, "time", clock)          # this module's clock only: the fake collective advances it
    got = w.timed_allreduce(dist, torch, SimpleNamespace(type="cpu"), 8 << 30, 4, iters=5)
    assert got["time_s"] == pytest.approx(ALLREDUCE_S)
    assert got["correct"] is True and got["busbw_gbps"] == pytest.approx(w.bw_figures(8 << 30, ALLREDUCE_S, 4)[1])


def test_a_wrong_sum_is_still_caught(monkeypatch):
    clock, torch, dist = fake_collective(world=4)
    right = dist.all_reduce

    def short_by_one(buf, group=None):       # a collective that loses one rank's share
        right(buf, group)
        buf.value -= 1
    dist.all_reduce = short_by_one
    monkeypatch.setattr(w, "time", clock)
    got = w.timed_allreduce(dist, torch, SimpleNamespace(type="cpu"), 1 << 20, 4)
    assert got["correct"] is False and got["busbw_gbps"] is None


def read_events(capsys) -> list[dict]:
    return [json.loads(ln[len(w.EVENT_PREFIX):]) for ln in capsys.readouterr().out.splitlines()
            if ln.startswith(w.EVENT_PREFIX)]


def test_every_event_names_the_slurm_node_beside_the_host(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("SLURMD_NODENAME", "gpu-a17")
    monkeypatch.delenv("POC_NODE_NAME", raising=False)
    ev = w.Events("r1", str(tmp_path))
    ev.emit("process_start")
    ev.emit("step", step=1)
    ev.close()
    printed = read_events(capsys)
    written = [json.loads(ln) for f in tmp_path.iterdir() for ln in f.read_text().splitlines()]
    assert [e["node"] for e in printed] == [e["node"] for e in written] == ["gpu-a17", "gpu-a17"]
    assert all(e["host"] == w.socket.gethostname() for e in printed)


def test_an_event_outside_any_scheduler_has_no_node(monkeypatch, capsys):
    for k in ("SLURMD_NODENAME", "POC_NODE_NAME"):
        monkeypatch.delenv(k, raising=False)
    w.Events("r1", None).emit("process_start")
    (e,) = read_events(capsys)
    assert "node" not in e and e["host"]


def test_the_kubernetes_node_name_is_the_node_where_there_is_no_slurm(monkeypatch, capsys):
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)
    monkeypatch.setenv("POC_NODE_NAME", "k8s-worker-2")
    w.Events("r1", None).emit("process_start")
    (e,) = read_events(capsys)
    assert e["node"] == "k8s-worker-2"

