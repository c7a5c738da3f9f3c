"""The workload's calibration phase (workloads/poc_calibration.py), its pure parts and its decision: nvidia-smi and
all_reduce_perf output read into facts, a node's health problems in words, each rank's matmul rate, and which
nodes are refused beside their peers (every rank decides the same from the same all-gathered list); a child
(nccl-tests, a site tool) started with a clean environment and a log of its own; the timed all-reduce that times
the all-reduce alone.

The GPU form cannot run here (no GPU): its parsing and its decisions are tested on outputs in the tools'
own layouts. tests/integration/test_calibration.py runs the CPU form on both local clusters.
"""
from __future__ import annotations

import importlib.util
import os

import pytest
import torch
from support.paths import FIXTURES, ROOT

SHIPPED = ROOT / "harness" / "data" / "workloads" / "ddp_train.py"
_spec = importlib.util.spec_from_file_location("ddp_train_calibration", SHIPPED)
workload = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(workload)
w = workload.sibling("poc_calibration")      # shipped beside ddp_train.py, imported from its directory

# nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,ecc.errors.uncorrected.volatile.total
# --format=csv,noheader,nounits, in its layout (one GPU with ECC reporting off, one with errors)
SMI = """0, NVIDIA H100 80GB HBM3, GPU-0b4e, 550.90.07, 81559, 0
1, NVIDIA H100 80GB HBM3, GPU-1c5f, 550.90.07, 81559, [N/A]
2, NVIDIA H100 80GB HBM3, GPU-2d6a, 550.90.07, 81559, 3
"""


def test_nvidia_smi_rows_become_one_fact_per_gpu():
    gpus = w.parse_smi(SMI + "\nNo devices were found\n")
    assert [g["index"] for g in gpus] == ["0", "1", "2"]
    assert gpus[0]["driver_version"] == "550.90.07" and gpus[0]["memory.total"] == "81559"


def test_all_reduce_perf_table_is_read_size_by_size():
    got = w.parse_nccl_tests((FIXTURES / "calibration" / "all_reduce_perf-8gpu-layout.txt").read_text())
    assert len(got["rows"]) == 31 and got["rows"][0]["bytes"] == 8 and got["rows"][-1]["bytes"] == 8 << 30
    top = got["rows"][-1]
    assert top["oop_busbw_gbps"] == pytest.approx(359.83) and top["ip_busbw_gbps"] == pytest.approx(363.46)
    assert top["wrong"] == ["0", "0"] and got["avg_busbw_gbps"] == pytest.approx(134.553)


def test_a_failed_all_reduce_perf_gives_no_rows():
    assert w.parse_nccl_tests("all_reduce_perf: error while loading shared libraries: libmpi.so.40\n")["rows"] == []


def facts(memlock=8 << 20, gpus=None, rc=0):
    f = {"limits": {"memlock": [memlock, memlock]}, "torch": "2.6"}
    if gpus is not None:
        f.update(nvidia_smi={"rc": rc, "out": "NVIDIA-SMI has failed" if rc else SMI}, gpus=gpus)
    return f


@pytest.mark.parametrize("case, kw, words", [
    ("healthy CPU node", dict(f=facts(), gpus=0, simulated=False, memlock=0), []),
    ("GPUs simulated", dict(f=facts(), gpus=8, simulated=True, memlock=0), []),
    ("no nvidia-smi", dict(f={**facts(), "nvidia_smi": {"rc": None, "out": ""}}, gpus=8, simulated=False, memlock=0),
     ["nvidia-smi is not on the PATH"]),
    ("nvidia-smi fails", dict(f=facts(gpus=[], rc=9), gpus=8, simulated=False, memlock=0),
     ["nvidia-smi failed (exit 9)"]),
    ("GPUs missing and ECC errors", dict(f=facts(gpus=w.parse_smi(SMI)), gpus=8, simulated=False, memlock=0),
     ["3 of 8 GPUs visible", "GPU 2 has 3 uncorrected ECC errors"]),
    ("memlock low", dict(f=facts(memlock=64 << 10), gpus=0, simulated=False, memlock=1 << 20),
     ["memlock is 64 KiB (ulimit -l), below the 1048576 KiB"]),
    ("memlock unlimited", dict(f=facts(memlock="unlimited"), gpus=0, simulated=False, memlock=1 << 20), []),
    ("memlock low, IPC_LOCK held", dict(f={**facts(memlock=64 << 10), "cap_ipc_lock": True}, gpus=0, simulated=False,
                                        memlock=1 << 20), []),
])
def test_node_problems_name_what_a_site_engineer_fixes(case, kw, words):
    got = w.node_problems(kw["f"], kw["gpus"], kw["simulated"], kw["memlock"])
    assert len(got) == len(words), (case, got)
    for problem, start in zip(got, words, strict=True):
        assert problem.startswith(start), (case, problem)


def rank(r, host, gflops, **node):
    return {"rank": r, "host": host, "local_rank": 0 if node else 1, "compute": {"gflops": gflops}, **node}


def test_a_refused_node_is_named_as_its_scheduler_names_it():
    ranks = [rank(0, "a", 50.0, facts=facts(), problems=[]),
             {**rank(1, "gpu-b-17.ib.site", 5.0, facts=facts(), problems=[]), "node": "gpu-b-17"}]
    nodes, refused = w.verdict(ranks, 0.5)
    assert [n["node"] for n in nodes] == ["a", "gpu-b-17"] and refused[0]["node"] == "gpu-b-17"


def test_a_node_far_below_the_median_is_refused_with_its_figures():
    ranks = [rank(0, "a", 50.0, facts=facts(), problems=[]), rank(1, "a", 48.0),
             rank(2, "b", 52.0, facts=facts(), problems=[]), rank(3, "b", 51.0),
             rank(4, "c", 9.0, facts=facts(), problems=[]), rank(5, "c", 49.0)]
    nodes, refused = w.verdict(ranks, 0.5)
    assert [n["host"] for n in nodes] == ["a", "b", "c"] and [n["ranks"] for n in nodes] == [[0, 1], [2, 3], [4, 5]]
    assert [n["gflops"] for n in nodes] == [48.0, 51.0, 9.0]                 # a node is its slowest rank
    assert nodes[0]["compute_ratio"] == pytest.approx(1.0)
    assert [r["host"] for r in refused] == ["c"]
    assert "matmul 9 GFLOP/s is 0.19 of the nodes' median 48" in refused[0]["why"][0]


def test_a_node_with_problems_is_refused_whatever_its_speed():
    ranks = [rank(0, "a", 50.0, facts=facts(), problems=[]), rank(1, "b", 50.0, facts=facts(),
                                                                    problems=["3 of 8 GPUs visible"])]
    _, refused = w.verdict(ranks, 0.5)
    assert refused == [{"host": "b", "node": "b", "why": ["3 of 8 GPUs visible"]}]


def test_one_node_has_no_peers_to_fall_below():
    _, refused = w.verdict([rank(0, "a", 0.001, facts=facts(), problems=[])], 0.5)
    assert refused == []


def test_a_node_whose_nccl_tests_bandwidth_is_far_below_its_peers_is_refused():
    def node(r, host, bw):
        return rank(r, host, 900.0, facts=facts(), problems=[], nccl_tests={"busbw_gbps": bw, "bytes": 8 << 30})
    nodes, refused = w.verdict([node(0, "a", 360.0), node(8, "b", 355.0), node(16, "c", 120.0)], 0.5)
    assert [r["host"] for r in refused] == ["c"]
    assert refused[0]["why"] == ["nccl-tests busbw 120 GB/s is 0.34 of the nodes' median 355"]
    assert nodes[0]["nccl_tests"]["busbw_gbps"] == 360.0


def test_every_rank_reaches_the_same_verdict_from_the_same_list():
    ranks = [rank(i, f"n{i}", 10.0 + i * 7, facts=facts(), problems=[]) for i in range(5)]
    assert w.verdict(list(reversed(ranks)), 0.6) == w.verdict(ranks, 0.6)


def test_the_matmul_rate_is_the_best_of_its_windows():
    got = w.compute_rate(torch, torch.device("cpu"), seconds=0.1, windows=4)
    assert len(got["windows"]) == 4 and got["gflops"] == pytest.approx(max(got["windows"]), rel=1e-3)
    assert got["gflops"] > 0 and got["dtype"] == "float32" and got["n"] == 256


def test_a_missing_site_tool_is_a_fact_not_an_error():
    assert w.site_tool(["poc-no-such-tool-here", "-l"]) == {"argv": ["poc-no-such-tool-here", "-l"], "rc": None,
                                                            "out": ""}
    got = w.site_tool(["sh", "-c", "echo two HCAs; exit 3"])
    assert got["rc"] == 3 and "two HCAs" in got["out"]


# ------------------------------------------------------------------ a child's environment and log

STAND_IN = """#!/usr/bin/env python3
# stands in for all_reduce_perf: opens NCCL_DEBUG_FILE as NCCL does (fopen "w") and says what launcher
# variables it was given, then prints a result row in all_reduce_perf's layout
import os, sys
path = os.environ.get("NCCL_DEBUG_FILE")
if path:
    with open(path, "w") as f:
        f.write("child:%d:1 [0] NCCL INFO NCCL version 2.99.9+cuda12.4\\n" % os.getpid())
leaked = sorted(k for k in os.environ if k.startswith(("SLURM_", "PMI", "OMPI_")) or k in ("RANK", "MASTER_ADDR"))
print("# nccl-tests version 2.99.9 nccl-headers=22909 nccl-library=22909")
print("# leaked: " + ",".join(leaked))
print("  8589934592    2147483648     float     sum      -1  47260.1  181.76  318.08      0  "
      "47138.2  182.23  318.90      0")
"""


@pytest.fixture
def stand_in(tmp_path):
    exe = tmp_path / "all_reduce_perf"
    exe.write_text(STAND_IN)
    exe.chmod(0o755)
    return exe


def test_a_child_gets_no_launcher_variables_and_no_nccl_debug_file():
    env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": "/tmp/rank0.log", "NCCL_IB_HCA": "=mlx5_0", "SLURM_PROCID": "0",
           "SLURM_STEP_ID": "1", "PMI_FD": "7", "PMIX_RANK": "0", "OMPI_COMM_WORLD_RANK": "0", "RANK": "3",
           "MASTER_ADDR": "c1", "TORCHELASTIC_RUN_ID": "r", "PATH": "/usr/bin", "CUDA_VISIBLE_DEVICES": "0,1"}
    got, dropped = w.child_env(env, nccl_log="/tmp/child.log")
    assert got == {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": "/tmp/child.log", "NCCL_IB_HCA": "=mlx5_0",
                   "PATH": "/usr/bin", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert dropped == sorted(set(env) - {"NCCL_DEBUG", "NCCL_IB_HCA", "PATH", "CUDA_VISIBLE_DEVICES"})
    # the launcher's own task (an srun step's MPI rank under a wrapper) keeps what its wire-up needs
    kept, dropped = w.child_env(env, nccl_log="/tmp/child.log", keep_launcher=True)
    assert kept["SLURM_PROCID"] == "0" and kept["PMIX_RANK"] == "0" and dropped == ["NCCL_DEBUG_FILE"]


def test_nccl_tests_leave_the_ranks_own_nccl_log_alone(stand_in, tmp_path, monkeypatch):
    """The rank's NCCL log is written by NCCL (fopen "w" at init); nccl-tests run as its child once inherited
    NCCL_DEBUG_FILE and replaced that log with its own: the transport the report reads was the child's."""
    mine = tmp_path / "poc-nccl-rank0.log"
    mine.write_text("c1:100:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\nc1:100:1 [0] NCCL INFO Channel 00/0 : 0[0] "
                    "-> 8[0] [send] via NET/IB/0/GDRDMA\n")
    before = mine.read_text()
    for k, v in {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_FILE": str(mine), "SLURM_PROCID": "0", "PMI_RANK": "0",
                 "OMPI_COMM_WORLD_SIZE": "16", "RANK": "0", "MASTER_ADDR": "c1"}.items():
        monkeypatch.setenv(k, v)
    got = w.run_nccl_tests(str(stand_in), "-b 8 -e 8G -f 2", 8, "c1")
    assert mine.read_text() == before                                  # the rank's own log, untouched
    assert got["parent_log"]["intact"] is True
    assert got["rc"] == 0 and got["busbw_gbps"] == pytest.approx(318.90) and got["bytes"] == 8 << 30
    assert got["nccl"]["version"] == "2.99.9+cuda12.4"                 # the child's own log, read back
    assert got["log"] != str(mine) and not os.path.exists(got["log"])
    assert {"NCCL_DEBUG_FILE", "SLURM_PROCID", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "RANK",
            "MASTER_ADDR"} <= set(got["env_dropped"])


def test_a_truncated_log_is_not_intact(tmp_path):
    log = tmp_path / "l"
    log.write_text("x" * 100)
    before = w._log_state(str(log))
    log.write_text("y")                       # fopen("w") by another process: the same file, shorter
    assert w.log_intact(before, w._log_state(str(log))) is False
    assert w.log_intact({"path": "p", "bytes": None}, {"path": "p", "bytes": None}) is True
    assert w.log_intact({"path": "p", "bytes": None}, {"path": "p", "bytes": 10, "ino": 1}) is False
