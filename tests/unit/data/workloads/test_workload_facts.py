"""Facts the workload records for the report beyond its timings: checkpoint size, storage and rotation,
the device's name, and NCCL's path in detail (version, network and plugin, every channel path,
GPUDirect RDMA, NVLS). NCCL's INFO lines below are in NCCL's own layout (no GPU here to record them)."""
from __future__ import annotations

import importlib.util
import json
import os
import socket

import pytest
from support.paths import ROOT

SHIPPED = ROOT / "harness" / "data" / "workloads" / "ddp_train.py"
_spec = importlib.util.spec_from_file_location("ddp_train_facts", SHIPPED)
w = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(w)

NCCL_INFO = """node-a:4242:4242 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
node-a:4242:4300 [0] NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin v8 (v8)
node-a:4242:4300 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.1.0.5<0>
node-a:4242:4300 [0] NCCL INFO Using network IB
node-a:4242:4300 [0] NCCL INFO NVLS multicast support is available on dev 0
node-a:4242:4300 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
node-a:4242:4300 [0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] via NET/IB/0/GDRDMA
node-a:4242:4300 [0] NCCL INFO Channel 01/0 : 8[0] -> 7[7] [receive] via NET/IB/1/GDRDMA
""".splitlines()


def test_nccl_facts_keep_the_path_beyond_its_name():
    got = w.nccl_facts(NCCL_INFO)
    assert got["version"] == "2.21.5+cuda12.4" and got["network"] == "IB"
    assert got["net_plugin"] == ["NET/Plugin: Loaded net plugin NCCL RDMA Plugin v8 (v8)"]
    assert got["using"] == "IB: [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.1.0.5<0>"
    assert got["paths"] == ["NET/IB/0/GDRDMA", "NET/IB/1/GDRDMA", "P2P/CUMEM/read"]
    assert got["gdrdma"] and got["nvls"]
    # the name alone, as before: the same for IB with and without GPUDirect RDMA
    assert w.nccl_transport(NCCL_INFO) == "NET/IB+P2P"


def test_no_lines_no_facts():
    assert w.nccl_facts([]) == {"version": None, "network": None, "net_plugin": [], "using": None, "paths": [],
                                "gdrdma": False, "nvls": False}


def test_rotation_keeps_the_newest_checkpoints(tmp_path):
    for step in (10, 20, 30, 40):
        (tmp_path / f"ckpt-{step}.pt").write_bytes(b"x" * step)
    (tmp_path / "ckpt-50.pt.tmp-1").write_bytes(b"half written")
    gone = w.rotate_checkpoints(str(tmp_path), 2)
    assert sorted(p.rsplit("/", 1)[1] for p in gone) == ["ckpt-10.pt", "ckpt-20.pt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-30.pt", "ckpt-40.pt", "ckpt-50.pt.tmp-1"]
    assert w.newest_checkpoint(str(tmp_path)).endswith("ckpt-40.pt")
    assert w.rotate_checkpoints(str(tmp_path), 0) == []          # 0 keeps them all


def test_the_file_system_under_a_path_is_its_longest_mount():
    assert w.fs_type("/proc/self") == "proc"
    assert w.fs_type("/") is not None


def test_the_cpu_has_a_name():
    assert w.cpu_name()


def test_a_checkpoint_saved_and_loaded_records_its_size_and_storage(tmp_path):
    torch = pytest.importorskip("torch")
    ev_dir, ck = tmp_path / "ev", tmp_path / "ck"
    args = ["--steps", "4", "--ckpt-every", "1", "--ckpt-keep", "2", "--ckpt-dir", str(ck), "--events-dir",
            str(ev_dir), "--model-params", "200K", "--layers", "2", "--sweep", "", "--batch", "4"]
    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        env["MASTER_PORT"] = str(s.getsockname()[1])
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        assert w.main(args) == 0
        assert w.main(args[:1] + ["6"] + args[2:]) == 0                # resumes from step 3
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    events = [json.loads(ln) for f in ev_dir.iterdir() for ln in f.read_text().splitlines()]
    saved = [e for e in events if e["kind"] == "checkpoint_saved"]
    assert saved and all(e["bytes"] > 0 and e["fs"] for e in saved)
    assert saved[-1]["removed"] and sorted(p.name for p in ck.glob("ckpt-*.pt")) == ["ckpt-4.pt", "ckpt-5.pt"]
    loaded = [e for e in events if e["kind"] == "checkpoint_loaded" and e["path"]]
    assert loaded and loaded[0]["step"] == 3 and loaded[0]["bytes"] > 0


def test_a_ranks_binding_is_its_cpu_list_and_their_numa_nodes():
    assert w.cpu_ranges({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8" and w.cpu_ranges(set()) == ""
    assert w.parse_cpulist("0-3,8-9,12\n") == {0, 1, 2, 3, 8, 9, 12}
    assert w.parse_cpulist(w.cpu_ranges({3, 4, 9})) == {3, 4, 9}
    got = w.binding()
    assert got["ncpus"] == len(os.sched_getaffinity(0)) and w.parse_cpulist(got["cpus"]) == os.sched_getaffinity(0)
    assert got["numa_nodes"]          # every Linux machine has node0
