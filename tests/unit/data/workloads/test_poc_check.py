"""The step before training (workloads/poc_check.py): its pure parts (ranks from the launcher, nccl-tests' options,
the MPI forms' command lines, the verdict against the floor) and the gloo form's table read back by the same
parser as nccl-tests' (one process, a real gloo group); the nodes' judgement (clock offsets, refusals). The whole
step runs on both local clusters in tests/integration/test_calibration.py.
"""
from __future__ import annotations

import importlib.util
import itertools
import os
import socket
import sys

import pytest
import torch
import torch.distributed as dist
from support.paths import FIXTURES, ROOT

WORKLOADS = ROOT / "harness" / "data" / "workloads"
_spec = importlib.util.spec_from_file_location("ddp_train_check", WORKLOADS / "ddp_train.py")
workload = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(workload)
c = workload.sibling("poc_check")
cal = workload.sibling("poc_calibration")


class Recorder:
    def __init__(self):
        self.events: list[dict] = []

    def emit(self, kind, **data):
        self.events.append({"kind": kind, **data})


def args(**kw):
    base = {"gpus_per_node": 8, "binary": "all_reduce_perf_mpi", "args": "-b 8 -e 8G -f 2", "mpirun": "mpirun",
            "ssh_port": 2222, "min_busbw_gbps": 300.0, "form": "mpi", "timeout_s": 60.0}
    return type("Args", (), {**base, **kw})()


def test_ranks_come_from_the_launcher(monkeypatch):
    monkeypatch.setenv("SLURM_PROCID", "9")
    monkeypatch.setenv("SLURM_NTASKS", "16")
    monkeypatch.setenv("SLURM_LOCALID", "1")
    assert c.placement("slurm", 2) == {"rank": 9, "world": 16, "local_rank": 1}
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "1")
    assert c.placement("k8s", 2) == {"rank": 1, "world": 2, "local_rank": 0}


def test_nccl_tests_options_drive_the_gloo_form():
    assert c.parse_bench_args("-b 1K -e 16M -f 4 -n 5 -w 1") == {"b": 1024, "e": 16 << 20, "f": 4, "n": 5, "w": 1}
    assert c.parse_bench_args("") == {"b": 1024, "e": 16 << 20, "f": 2, "n": 20, "w": 1}


def test_the_first_pods_mpirun_reaches_every_pod_over_the_runs_ssh(monkeypatch):
    monkeypatch.setenv("NCCL_IB_HCA", "=mlx5_0")
    monkeypatch.setenv("POC_FABRIC_ENV", "NCCL_IB_HCA,UCX_NET_DEVICES")
    monkeypatch.setenv("UCX_NET_DEVICES", "mlx5_0:1")
    argv = c.mpirun_argv(args(), ["10.0.0.5", "10.0.1.7"], "/tmp/k/id", dict(os.environ))
    assert argv[argv.index("-np") + 1] == "16" and argv[argv.index("-H") + 1] == "10.0.0.5:8,10.0.1.7:8"
    agent = argv[argv.index("plm_rsh_agent") + 1]
    assert agent.startswith("ssh -p 2222 -i /tmp/k/id -o BatchMode=yes")
    assert argv[argv.index("NCCL_IB_HCA") - 1:argv.index("NCCL_IB_HCA") + 1] == ["-x", "NCCL_IB_HCA"]
    assert "UCX_NET_DEVICES" in argv
    assert argv[-9:] == ["all_reduce_perf_mpi", "-b", "8", "-e", "8G", "-f", "2", "-g", "1"]   # one GPU per rank


def test_each_pods_sshd_takes_the_runs_key_from_the_first_pod_only():
    line = c.authorized_key("ssh-ed25519 AAAAC3Nz poc\n", "10.0.0.5")
    assert line == ('from="10.0.0.5",no-pty,no-agent-forwarding,no-port-forwarding,no-X11-forwarding '
                    "ssh-ed25519 AAAAC3Nz poc\n")
    argv = c.sshd_argv("/usr/sbin/sshd", 2222, "10.0.1.7", "/tmp/w", "root")
    opts = {a: b for a, b in itertools.pairwise(argv) if a.startswith("-")}
    assert argv[:3] == ["/usr/sbin/sshd", "-D", "-e"] and opts["-p"] == "2222" and opts["-h"] == "/tmp/w/host_key"
    assert "PasswordAuthentication=no" in argv and "ListenAddress=10.0.1.7" in argv and "AllowUsers=root" in argv


def report(res, **kw):
    ev = Recorder()
    rc = c.allreduce_report(ev, args(**kw), res, 16, ["c1", "c2"], 0.0)
    return rc, ev.events


NCCL_TABLE = (FIXTURES / "calibration" / "all_reduce_perf-8gpu-layout.txt").read_text()


def test_the_allocations_figure_is_nccl_tests_in_place_busbw_at_its_largest_size():
    rc, events = report({"argv": ["all_reduce_perf_mpi"], "rc": 0, "out": NCCL_TABLE}, min_busbw_gbps=300)
    (ar,) = events
    assert rc == 0 and ar["kind"] == "allocation_allreduce" and ar["ok"] and ar["why"] is None
    assert ar["bytes"] == 8 << 30 and ar["busbw_gbps"] == pytest.approx(363.46) and ar["world"] == 16
    assert ar["nodes"] == ["c1", "c2"] and ar["floor_gbps"] == 300


@pytest.mark.parametrize("res, floor, why", [
    ({"argv": ["all_reduce_perf_mpi"], "rc": 0, "out": NCCL_TABLE}, 400.0,
     "363 GB/s in-place at 8589934592 bytes, below the floor 400 GB/s (calibration.min_allreduce_busbw_gbps)"),
    ({"argv": ["all_reduce_perf_mpi"], "rc": None, "out": ""}, 0.0,
     "all_reduce_perf_mpi is not installed in the job's image"),
    ({"argv": ["/opt/nccl-tests/build/all_reduce_perf_mpi"], "rc": 1, "out": "MPI_Init failed"}, 0.0,
     "all_reduce_perf_mpi failed (exit 1)"),
    ({"argv": ["gloo"], "rc": 0, "out": "# nothing\n"}, 0.0, "no result row in its output"),
])
def test_the_allocation_is_refused_below_the_floor_or_without_a_figure(res, floor, why):
    rc, events = report(res, min_busbw_gbps=floor)
    assert rc == c.REFUSED
    ar, err = events
    assert ar["ok"] is False and ar["why"] == why
    assert err["kind"] == "workload_error" and err["error"] == "allocation_allreduce"
    assert err["message"] == f"the all-reduce across the allocation (c1,c2) was refused: {why}"
    assert "calibration.min_allreduce_busbw_gbps" in err["tip"]


def test_wrong_results_are_refused_whatever_the_bandwidth():
    wrong = NCCL_TABLE.replace("363.46      0", "363.46      7")
    rc, events = report({"argv": ["x"], "rc": 0, "out": wrong}, min_busbw_gbps=0)
    assert rc == c.REFUSED and events[0]["why"] == "wrong results at 8589934592 bytes"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_gloo_table_is_read_by_nccl_tests_parser():
    """One rank: every size all-reduced, timed and checked; the table nccl-tests' parser reads, in- and
    out-of-place, busbw 0 (one rank moves nothing), no wrong results."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        text = c.gloo_table(dist, torch, c.parse_bench_args("-b 1K -e 64K -f 4 -n 2 -w 1"), 1)
    finally:
        dist.destroy_process_group()
    parsed = cal.parse_nccl_tests(text)
    assert [r["bytes"] for r in parsed["rows"]] == [1024, 4096, 16384, 65536]
    assert all(r["wrong"] == ["0", "0"] for r in parsed["rows"]) and parsed["avg_busbw_gbps"] == 0


def test_the_check_is_runnable_as_the_renderers_start_it():
    """`python3 poc_check.py --help` from its own directory: it finds ddp_train.py and poc_health.py beside it."""
    import subprocess
    here = ROOT / "harness" / "data" / "workloads"
    res = subprocess.run([sys.executable, str(here / "poc_check.py"), "--help"], capture_output=True, text=True,
                         timeout=60, cwd="/", check=False)
    assert res.returncode == 0 and "gate" in res.stdout, res.stderr


def test_every_node_gets_its_clock_offset_from_the_first_and_a_far_one_is_refused():
    nodes = [{"node": f"c{i}", "host": f"c{i}.lab", "t": t, "problems": []} for i, t in
             enumerate((100.0, 100.25, 97.0), start=1)]
    refused = c.judge(nodes, 1.0)
    assert [n["clock_offset_s"] for n in nodes] == [0.0, 0.25, -3.0] and all("t" not in n for n in nodes)
    assert [r["node"] for r in refused] == ["c3"] and "-3.000 s off the first node's" in refused[0]["why"][0]
    assert c.judge([{"node": "c1", "host": "h", "t": 5.0, "problems": ["no GPU"]}], 0) == [
        {"node": "c1", "host": "h", "why": ["no GPU"]}]


def test_two_processes_check_their_allocation_and_exit_with_its_status(tmp_path):
    """The whole step as a batch script starts it, on two processes of this machine (gloo over loopback, ranks
    from Slurm's variables): both pass the gate and the all-reduce, both say so and exit 0 on their own."""
    import json
    import subprocess
    script = ROOT / "harness" / "data" / "workloads" / "poc_check.py"
    port = free_port()
    procs = []
    for rank in (0, 1):
        env = {**os.environ, "SLURM_PROCID": str(rank), "SLURM_NTASKS": "2", "SLURM_LOCALID": "0",
               "GLOO_SOCKET_IFNAME": "lo", "POC_RUN_ID": "two-procs"}
        procs.append(subprocess.Popen(
            [sys.executable, str(script), "all", "--events-dir", str(tmp_path), "--master", f"127.0.0.1:{port}",
             "--ranks-from", "slurm", "--nodes", "2", "--form", "gloo", "--args", "-b 1K -e 64K -f 4 -n 2 -w 1",
             "--timeout-s", "60"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    events = [json.loads(ln) for f in sorted(tmp_path.glob("*.jsonl")) for ln in f.read_text().splitlines()]
    done = sorted((e["rank"], e["rc"]) for e in events if e["kind"] == "check_done")
    assert done == [(0, 0), (1, 0)], events
    (ar,) = [e for e in events if e["kind"] == "allocation_allreduce"]
    assert ar["ok"] and ar["world"] == 2 and ar["bytes"] == 64 << 10 and ar["busbw_gbps"] > 0, ar
