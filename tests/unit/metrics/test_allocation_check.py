"""The step before training in the figures: allocation_check_s (its first start -> its last end) left out of launch_s,
the all-reduce across the allocation (allocation_allreduce_busbw_gbps) and the health gate's refusals
(health_nodes_refused) from its events, the training ranks' CPUs beside their GPUs', and Slurm's timed image
import step as image_pull_s."""
from __future__ import annotations

import pytest
from support.requeue import event as _e

from harness import metrics
from harness.evidence import slurm as slurm_evidence
from harness.metrics.calibration import allocation_check
from harness.metrics.image import image_pull_metrics
from harness.timing import Stamp

PRICE = {"usd_per_hour": 1.0, "unit": "node"}


def run_events(check: bool = True) -> list[dict]:
    ev = []
    if check:
        ev += [_e("check_start", 101.0, r, part="gate") for r in (0, 1)]
        ev += [_e("check_done", 104.0 + r, r, part="allreduce", rc=0) for r in (0, 1)]
    ev += [_e("process_start", 106.0, r, local_rank=0, binding={"cpus": "0-3", "ncpus": 4, "numa_nodes": [0]})
           for r in (0, 1)]
    ev += [_e("rendezvous_done", 107.0, r) for r in (0, 1)] + [_e("step", 108.0, r, step=1, dur_s=0.5) for r in (0, 1)]
    ev += [_e("done", 109.0, r) for r in (0, 1)]
    return ev


def test_the_check_is_its_own_figure_and_left_out_of_launch():
    st = {"submitted": 99.0, "allocated": 100.0}
    with_check, _ = metrics.derive(run_events(), st, world=2, nodes=2, gpus_per_node=0, steps=1, price=PRICE,
                                  faults=[])
    without, _ = metrics.derive(run_events(check=False), st, world=2, nodes=2, gpus_per_node=0, steps=1, price=PRICE,
                                faults=[])
    assert with_check["allocation_check_s"]["value"] == pytest.approx(4.0)          # 101 -> 105
    assert with_check["launch_s"]["value"] == pytest.approx(6.0 - 4.0)               # 100 -> 106, less the check
    assert with_check["launch_s"]["detail"]["left_out"].startswith("the allocation check")
    assert without["launch_s"]["value"] == pytest.approx(6.0) and "allocation_check_s" not in without
    assert with_check["startup_s"]["value"] == pytest.approx(without["startup_s"]["value"] - 4.0)


GATE_NODE = {"rank": 0, "node": "c1", "host": "c1.poc.lab", "ip": "10.0.0.5", "clock_offset_s": 0.0,
             "problems": [], "facts": {"limits": {"memlock": [65536, 65536]}, "gloo_ifname": {"name": "eth0"},
                                       "host_loopback": True, "topology_addr": "s1.s3.c1",
                                       "topo": {"gpus": {"0": {"cpus": "0-55,112-167"}}},
                                       "gpus": [{"reasons_active": ["HW Slowdown"], "power": {"limit_w": 700.0}}],
                                       "ib_ports": [{"ca": "mlx5_0", "port": 1, "state": "Active", "rate_gbps": 400}],
                                       "gdr": {"peermem": True, "dma_buf": False}, "nvlink": [{"links": {0: 26.5}}]}}


def test_the_gate_and_the_all_reduce_are_read_from_their_events():
    bad = {**GATE_NODE, "rank": 1, "node": "c2", "host": "c2.poc.lab", "problems": ["mlx5_0 port 1 is Down"]}
    events = [
        _e("health_gate", 103.0, 0, ok=False, nodes=[GATE_NODE, bad],
           refused=[{"node": "c2", "host": "c2.poc.lab", "why": ["mlx5_0 port 1 is Down"]}], bars={"x": 1},
           seconds=2.0),
        _e("allocation_allreduce", 104.0, 0, ok=True, why=None, form="mpi", argv=["all_reduce_perf_mpi"], rc=0,
           version="2.19.6", world=16, nodes=["c[1-2]"], rows=[{}] * 31, bytes=8 << 30, busbw_gbps=361.2,
           oop_busbw_gbps=358.0, avg_busbw_gbps=120.0, floor_gbps=300.0,
           nccl={"paths": ["NET/IB/0/GDRDMA", "P2P/CUMEM/read"], "gdrdma": True}, env_dropped=["NCCL_DEBUG_FILE"]),
        _e("process_start", 106.0, 0, host="c1.poc.lab", local_rank=0, binding={"cpus": "56-60"}),
    ]
    m = allocation_check(events)
    ar = m["allocation_allreduce_busbw_gbps"]
    assert ar["value"] == 361.2 and ar["unit"] == "GB/s" and ar["detail"]["form"] == "mpi"
    assert ar["detail"]["transport"] == "NCCL over NET/IB+P2P" and ar["detail"]["gdrdma"] is True
    gate = m["health_nodes_refused"]
    assert gate["value"] == 1 and gate["detail"]["refused"][0]["node"] == "c2"
    c1 = gate["detail"]["nodes"][0]
    assert c1["throttled"] == 1 and c1["topology_addr"] == "s1.s3.c1" and c1["gdr"] == {"peermem": True,
                                                                                          "dma_buf": False}
    assert c1["rank_cpus"] == {"0": "56-60"} and c1["ib_ports"] == ["mlx5_0/1 Active 400"]
    # the training rank 0 runs on CPUs of the other socket than its GPU's: warned, not refused
    assert gate["detail"]["locality_warnings"] == [
        "c1: local rank 0 runs on CPUs 56-60, 5 of them outside GPU 0's affinity 0-55,112-167"]
    assert allocation_check(run_events()) == {}


def test_slurms_image_import_step_is_image_pull_s():
    clock = ("batch_start 100.100000 0 c1.poc.lab 7\nimport_start 100.200000 0 c1.poc.lab 7\n"
             "import_done 131.700000 0 c1.poc.lab 7 0\nsrun_start 140.0 0 c1.poc.lab 7\n")
    (line,) = [ln for ln in slurm_evidence.clock_lines(clock) if ln["kind"] == "import_done"]
    assert line["rc"] == 0 and line["t"] == pytest.approx(131.7)
    st = {"attempts": [{"image_import": {"start": Stamp.exact(100.2, "s"), "done": Stamp.exact(131.7, "d"),
                                         "rc": 0}}]}
    m = image_pull_metrics(st)["image_pull_s"]
    assert m["value"] == pytest.approx(31.5) and "import step" in m["detail"]["how"]
    assert image_pull_metrics({"attempts": [{}]}) == {}
