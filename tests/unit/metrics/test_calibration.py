"""The calibration figures (harness/metrics/calibration.py) from events shaped as the workload emits them.

The CPU cases run the workload's own `calibrate` on rank 0 (real torch on the CPU, the real Events
writer, node_facts and verdict), its peers' all-gathered reports and the collectives faked by a world
of one process. The GPU case builds the nodes' reports with the workload's own parsers (nvidia-smi's
CSV, all_reduce_perf's table) and verdict, and emits them through its Events writer as calibrate does.
Recorded runs: every tests/fixtures/calibration/*.jsonl (a run's events, as a backend stored them) and
every run under tests/fixtures/calibration/results (a real local-baseline campaign, one run the
calibration refused) is checked against its own calibration event; drop a recorded run there to add it.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.paths import FIXTURES, ROOT

from harness import events as ev
from harness import metrics, rederive
from harness.metrics.calibration import GOAL, calibration

spec = importlib.util.spec_from_file_location("ddp_train_calibration", ROOT / "harness" / "data" / "workloads"
                                              / "ddp_train.py")
ddp_train = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ddp_train)
calib = ddp_train.sibling("poc_calibration")   # the calibration phase, shipped beside it
torch = pytest.importorskip("torch")

CAL = FIXTURES / "calibration"
NAMES = {"calibration_allreduce_busbw_gbps", "calibration_nccl_tests_busbw_gbps",
         "calibration_workload_vs_nccl_tests", "calibration_nodes_refused"}


def recorded() -> list[Path]:
    """Every recorded run's events under tests/fixtures/calibration."""
    return sorted(CAL.glob("*.jsonl")) + sorted(CAL.glob("results/*/runs/*/events.jsonl"))


def read_events(path: Path) -> list[dict]:
    return ev.parse_lines(path.read_text().splitlines())


# ---------------------------------------------------------------- the workload's calibrate on rank 0, peers faked

class World:
    """torch.distributed as rank 0 of `hosts` sees it: the other ranks' calibration reports are the peers'
    (their matmul rate a factor of rank 0's measured one), every all-reduce sums as the ranks would
    (or one too many where `wrong`)."""

    def __init__(self, hosts: list[str], peers: list[dict], wrong: bool = False):
        self.hosts, self.peers, self.wrong = hosts, peers, wrong

    def get_world_size(self) -> int:
        return len(self.hosts)

    def get_rank(self, group=None) -> int:
        return 0

    def new_group(self, members=None, backend=None):
        return tuple(members) if members is not None else tuple(range(len(self.hosts)))

    def all_gather_object(self, out: list, obj, group=None) -> None:
        if isinstance(obj, str):
            out[:] = self.hosts
            return
        mine = obj["compute"]["gflops"]
        out[:] = [obj] + [{**p, "compute": {**p["compute"], "gflops": p["compute"]["factor"] * mine}}
                          for p in self.peers]

    def all_reduce(self, buf, group=None) -> None:
        n = len(group) if group else len(self.hosts)
        buf.fill_(float(n * (n + 1) // 2 + (1 if self.wrong else 0)))


def facts(memlock=8 << 20, **more) -> dict:
    return {"limits": {"memlock": [memlock, memlock], "nofile": [1024, 4096]}, "torch": "2.6.0", "cuda": None,
            "nccl": None, "ibv_devices": None, "ofed": None, **more}


def peer(rank: int, host: str, factor: float, min_memlock_kib: int = 0, memlock=8 << 20) -> dict:
    f = facts(memlock)
    return {"rank": rank, "host": host, "local_rank": 0, "compute": {"what": "matmul", "factor": factor},
            "facts": f, "problems": calib.node_problems(f, 0, False, min_memlock_kib)}


def run_calibrate(tmp_path: Path, monkeypatch, peers: list[dict], *, wrong: bool = False, attempt=(0, 0, 0),
                  min_ratio: float = 0.5, min_memlock_kib: int = 0) -> tuple[bool, list[dict]]:
    hosts = ["node-a"] + [p["host"] for p in peers]
    for k, v in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": str(len(hosts)), "LOCAL_WORLD_SIZE": "1"}.items():
        monkeypatch.setenv(k, v)
    e = ddp_train.Events("cal-test", str(tmp_path / "ev"))
    e.host, e.attempt = "node-a", list(attempt)
    args = SimpleNamespace(calibrate_seconds=0.02, gpus_per_node=0, simulated_gpus=False, nccl_tests="",
                           nccl_tests_args="", calibrate_bytes=4096, calibrate_min_ratio=min_ratio,
                           calibrate_min_memlock_kib=min_memlock_kib)
    try:
        ok = calib.calibrate(args, e, World(hosts, peers, wrong), torch, torch.device("cpu"), "gloo")
    finally:
        e.close()
    return ok, events_in(tmp_path / "ev")


def events_in(d: Path) -> list[dict]:
    return sorted((x for f in sorted(d.glob("*.jsonl")) for x in read_events(f)), key=lambda x: x["ts_ns"])


# ---------------------------------------------------------------- CPU: the real calibrate

def test_a_healthy_cpu_allocation(tmp_path, monkeypatch):
    ok, events = run_calibrate(tmp_path, monkeypatch, [peer(1, "node-b", 1.1)])
    assert ok
    (cal,) = ev.of_kind(events, "calibration")
    m = calibration(events)
    assert set(m) == {"calibration_allreduce_busbw_gbps", "calibration_nodes_refused"}   # no nccl-tests on CPUs
    bw = m["calibration_allreduce_busbw_gbps"]
    job = cal["job_allreduce"]
    assert bw["value"] == pytest.approx(job["busbw_gbps"]) and bw["value"] > 0
    assert bw["lo"] == bw["hi"] == bw["value"] and bw["unit"] == "GB/s"
    assert bw["detail"] | {"time_s": None} == {"attempt": [0, 0, 0], "bytes": 4096, "time_s": None, "backend": "gloo",
                                               "transport": "gloo over TCP", "world_size": 2, "correct": True}
    assert bw["sources"] == {"calibration": cal["ts_ns"] / 1e9}
    r = m["calibration_nodes_refused"]
    assert r["value"] == 0 and r["unit"] == "count" and r["detail"]["ok"] and r["detail"]["refused"] == []
    a, b = r["detail"]["nodes"]
    assert (a["host"], a["ranks"], b["host"], b["ranks"]) == ("node-a", [0], "node-b", [1])
    assert b["gflops"] == pytest.approx(1.1 * a["gflops"])
    assert a["compute_ratio"] == pytest.approx(a["gflops"] / ((a["gflops"] + b["gflops"]) / 2))
    assert b["memlock_soft"] == 8 << 20 and b["torch"] == "2.6.0" and b["problems"] == [] and not b["refused"]
    # node-a's facts are this machine's, as node_facts read them
    assert a["memlock_soft"] == cal["nodes"][0]["facts"]["limits"]["memlock"][0]
    assert r["detail"]["min_ratio"] == 0.5 and r["detail"]["min_memlock_kib"] == 0
    assert "nvidia_smi" not in json.dumps(m)


def test_a_slow_node_is_refused_with_why(tmp_path, monkeypatch):
    ok, events = run_calibrate(tmp_path, monkeypatch, [peer(1, "node-b", 1.0), peer(2, "node-c", 0.2)])
    assert not ok
    (err,) = ev.of_kind(events, "workload_error")
    assert err["error"] == "calibration" and "node-c" in err["message"]
    r = calibration(events)["calibration_nodes_refused"]
    assert r["value"] == 1 and not r["detail"]["ok"]
    (refused,) = r["detail"]["refused"]
    assert refused["host"] == "node-c" and "of the nodes' median" in refused["why"][0]
    assert [n["refused"] for n in r["detail"]["nodes"]] == [False, False, True]
    assert r["detail"]["nodes"][2]["compute_ratio"] == pytest.approx(0.2)


def test_a_memlock_below_the_bar_is_a_problem_and_a_refusal(tmp_path, monkeypatch):
    ok, events = run_calibrate(tmp_path, monkeypatch, [peer(1, "node-b", 1.0, 1 << 30, memlock=64 << 10)],
                               min_memlock_kib=1 << 30)
    r = calibration(events)["calibration_nodes_refused"]
    a, b = r["detail"]["nodes"]
    assert b["memlock_soft"] == 64 << 10 and b["problems"][0].startswith("memlock is 64 KiB") and b["refused"]
    # node-a is this machine: refused too unless its memlock is unlimited or it may lock memory anyway
    assert a["refused"] == (a["memlock_soft"] != "unlimited" and not calib.cap_ipc_lock())
    assert not ok and r["value"] == 1 + a["refused"] and r["detail"]["min_memlock_kib"] == 1 << 30


def test_a_wrong_sum_gives_no_bandwidth_and_stops_the_run(tmp_path, monkeypatch):
    ok, events = run_calibrate(tmp_path, monkeypatch, [peer(1, "node-b", 1.0)], wrong=True)
    m = calibration(events)
    assert not ok
    bw, r = m["calibration_allreduce_busbw_gbps"], m["calibration_nodes_refused"]
    assert bw["value"] is None and not bw["detail"]["correct"] and "wrong sum" in bw["detail"]["note"]
    assert r["value"] == 0 and not r["detail"]["job_check_correct"] and "wrong sum" in r["detail"]["note"]
    (err,) = ev.of_kind(events, "workload_error")
    # no node is blamed for a broken collective: no exclusion is suggested
    assert err["refused"] == [] and "wrong sum" in err["message"] and "--exclude" not in err["tip"]


def test_the_first_attempt_gives_the_figures_and_a_later_one_a_note(tmp_path, monkeypatch):
    _, first = run_calibrate(tmp_path / "1", monkeypatch, [peer(1, "node-b", 1.0), peer(2, "node-c", 0.2)])
    _, again = run_calibrate(tmp_path / "2", monkeypatch, [peer(1, "node-b", 1.0), peer(2, "node-d", 0.9)],
                             attempt=(0, 1, 0))
    m = calibration(first + again)
    r = m["calibration_nodes_refused"]
    assert r["value"] == 1 and r["detail"]["attempt"] == [0, 0, 0]
    assert r["detail"]["other_attempts"] == [{"attempt": [0, 1, 0], "ok": True, "refused": []}]
    assert "attempt [0, 1, 0] calibrated again: every node passed" in r["detail"]["note"]
    (cal,) = ev.of_kind(first, "calibration")
    assert m["calibration_allreduce_busbw_gbps"]["value"] == pytest.approx(cal["job_allreduce"]["busbw_gbps"])
    # a first attempt that died before calibrating: the next one's figures, said so
    early = [{**first[0], "kind": "process_start", "attempt": [0, 0, 0]}]
    m = calibration(early + again)
    assert m["calibration_nodes_refused"]["detail"]["attempt"] == [0, 1, 0]
    assert "emitted no calibration" in m["calibration_nodes_refused"]["detail"]["note_attempt"]


# ---------------------------------------------------------------- GPUs: nccl-tests beside the workload

def smi(host: str, n: int, ecc: int = 0) -> str:
    return "".join(f"{i}, NVIDIA H100 80GB HBM3, GPU-{host}-{i}, 550.54.15, 81559, {ecc}\n" for i in range(n))


def all_reduce_perf(top_oop: float, top_ip: float, wrong: str = "0") -> str:
    """all_reduce_perf's output as nccl-tests 2.x prints it (header, one row per size, the footer)."""
    rows = [(8, 2, 0.0, 0.0), (1 << 20, 262144, 41.2, 40.8), (1 << 30, 268435456, top_oop * 0.98, top_ip * 0.98),
            (8 << 30, 2147483648, top_oop, top_ip)]
    out = ["# nccl-tests version 2.13.9 nccl-headers=22105 nccl-library=22105",
           "# nThread 1 nGpus 4 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20",
           "#                                                              out-of-place                       in-place",
           "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
           "   busbw #wrong"]
    for size, count, oop, ip in rows:
        out.append(f"{size:>12} {count:>13}     float     sum      -1   123.4   {oop / 1.5:6.2f}  {oop:6.2f}"
                   f"  {wrong:>5}   122.9   {ip / 1.5:6.2f}  {ip:6.2f}  {wrong:>5}")
    out += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 98.7", "#"]
    return "\n".join(out) + "\n"


def gpu_node(rank: int, host: str, gflops: float, nccl_out: str | None, intra_busbw: float | None,
             rc: int | None = 0, intra_bytes: int = 8 << 30, gpus: int = 4) -> dict:
    """A GPU node's local rank 0 report, as calibrate builds it."""
    text = smi(host, gpus)
    f = facts(memlock="unlimited", cuda="12.4", nccl="2.21.5",
              nvidia_smi={"argv": ["nvidia-smi"], "rc": 0, "out": text}, gpus=calib.parse_smi(text),
              ibv_devices=["mlx5_0", "mlx5_1"], ofed="MLNX_OFED_LINUX-24.01-0.3.3.1")
    f["driver"] = f["gpus"][0]["driver_version"]
    parsed = calib.parse_nccl_tests(nccl_out) if nccl_out is not None and rc == 0 else {"rows": []}
    top = parsed["rows"][-1] if parsed["rows"] else None
    return {"rank": rank, "host": host, "local_rank": 0, "compute": {"gflops": gflops}, "facts": f,
            "problems": calib.node_problems(f, gpus, False, 0),
            "nccl_tests": {"argv": ["all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", str(gpus)], "rc": rc,
                           "version": parsed.get("version"), "bytes": top["bytes"] if top else None,
                           "busbw_gbps": top["oop_busbw_gbps"] if top else None, "rows": parsed["rows"],
                           "out_tail": ""},
            "intra_node": None if intra_busbw is None else {"bytes": intra_bytes, "time_s": 0.06,
                                                            "busbw_gbps": intra_busbw, "correct": True}}


def emit_gpu(tmp_path: Path, monkeypatch, nodes_in: list[dict], min_ratio: float = 0.5) -> list[dict]:
    """rank 0's calibration event as calibrate emits it, for 2 nodes of 4 GPUs (the other ranks' reports
    carry only their matmul rate)."""
    ranks = []
    for n in nodes_in:
        ranks.append(n)
        ranks += [{"rank": n["rank"] + i, "host": n["host"], "local_rank": i, "compute": n["compute"]}
                  for i in range(1, 4)]
    nodes, refused = calib.verdict(ranks, min_ratio)
    for k, v in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": str(len(ranks))}.items():
        monkeypatch.setenv(k, v)
    e = ddp_train.Events("cal-gpu", str(tmp_path / "ev"))
    e.host = nodes_in[0]["host"]
    job = {"bytes": 16 << 20, "time_s": 0.0004, "busbw_gbps": 73.4, "correct": True}
    e.emit("calibration", ok=not refused, nodes=nodes, refused=refused,
           job_allreduce={**job, "backend": "nccl", "world_size": len(ranks)}, min_ratio=min_ratio,
           min_memlock_kib=0, seconds=41.0)
    e.close()
    return events_in(tmp_path / "ev")


def test_gpu_nodes_nccl_tests_beside_the_workload(tmp_path, monkeypatch):
    events = emit_gpu(tmp_path, monkeypatch, [gpu_node(0, "gpu-a", 700e3, all_reduce_perf(231.0, 230.0), 225.4),
                                              gpu_node(4, "gpu-b", 690e3, all_reduce_perf(229.0, 228.0), 205.2)])
    comm = {**events[0], "kind": "comm", "transport": "NET/IB+P2P"}
    m = calibration(events + [comm])
    assert set(m) == NAMES
    bw = m["calibration_allreduce_busbw_gbps"]
    assert bw["value"] == 73.4 and bw["detail"]["world_size"] == 8
    assert bw["detail"]["transport"] == "NCCL over NET/IB+P2P"   # the comm event's words for the job's communicator
    nt = m["calibration_nccl_tests_busbw_gbps"]
    assert nt["value"] == pytest.approx(229.0)   # the median of the nodes' in-place busbw at 8 GiB
    assert nt["detail"]["per_node"] == {"gpu-a": 230.0, "gpu-b": 228.0}
    assert nt["detail"]["oop_per_node"] == {"gpu-a": 231.0, "gpu-b": 229.0}
    assert nt["detail"]["bytes"] == 8 << 30 and nt["detail"]["version"].startswith("nccl-tests version 2.13.9")
    assert "note" not in nt["detail"]
    ratio = m["calibration_workload_vs_nccl_tests"]
    assert ratio["value"] == pytest.approx(205.2 / 228.0) and ratio["unit"] == "ratio"
    assert ratio["detail"]["goal"] == GOAL == 0.95 and ratio["detail"]["goal_text"] == "≥ 95 %"
    assert ratio["detail"]["meets_goal"] is False
    assert ratio["detail"]["per_node"]["gpu-a"] == {"workload_busbw_gbps": 225.4, "nccl_tests_busbw_gbps": 230.0,
                                                   "ratio": pytest.approx(225.4 / 230.0), "bytes": 8 << 30}
    a = m["calibration_nodes_refused"]["detail"]["nodes"][0]
    assert (a["gpus"], a["gpu_names"], a["driver"], a["nccl"], a["cuda"]) == (4, ["NVIDIA H100 80GB HBM3"],
                                                                              "550.54.15", "2.21.5", "12.4")
    assert a["ibv_devices"] == ["mlx5_0", "mlx5_1"] and a["ofed"].startswith("MLNX_OFED") and a["ranks"] == [0, 1, 2, 3]
    assert a["memlock_soft"] == "unlimited" and a["nccl_tests_busbw_gbps"] == 230.0
    assert "GPU-gpu-a-0" not in json.dumps(m)   # the nvidia-smi rows are summarised, not copied


def test_gpu_nodes_without_nccl_tests_or_with_other_sizes(tmp_path, monkeypatch):
    events = emit_gpu(tmp_path, monkeypatch, [gpu_node(0, "gpu-a", 700e3, None, 225.4, rc=None, intra_bytes=16 << 20),
                                              gpu_node(4, "gpu-b", 700e3, None, 225.4, rc=None, intra_bytes=16 << 20)])
    m = calibration(events)
    nt = m["calibration_nccl_tests_busbw_gbps"]
    assert nt["value"] is None and "is not installed in the job's image" in nt["detail"]["note"]
    assert "calibration_workload_vs_nccl_tests" not in m   # no nccl-tests figure: nothing to compare with
    events = emit_gpu(tmp_path / "2", monkeypatch, [
        gpu_node(0, "gpu-a", 700e3, all_reduce_perf(231.0, 230.0), 225.4, intra_bytes=1 << 30),
        gpu_node(4, "gpu-b", 700e3, all_reduce_perf(231.0, 230.0, wrong="3"), 225.4)])
    m = calibration(events)
    assert m["calibration_nccl_tests_busbw_gbps"]["detail"]["per_node"] == {"gpu-a": 230.0}
    assert "gpu-b: nccl-tests counted wrong results" in m["calibration_nccl_tests_busbw_gbps"]["detail"]["note"]
    ratio = m["calibration_workload_vs_nccl_tests"]
    assert ratio["value"] is None and ratio["detail"]["meets_goal"] is None
    assert "not the same size" in ratio["detail"]["note"]


def test_a_gpu_node_with_ecc_errors_is_refused(tmp_path, monkeypatch):
    bad = gpu_node(4, "gpu-b", 700e3, all_reduce_perf(229.0, 228.0), 220.0)
    bad["facts"]["gpus"][2]["ecc.errors.uncorrected.volatile.total"] = "7"
    bad["problems"] = calib.node_problems(bad["facts"], 4, False, 0)
    events = emit_gpu(tmp_path, monkeypatch, [gpu_node(0, "gpu-a", 700e3, all_reduce_perf(231.0, 230.0), 225.4), bad])
    r = calibration(events)["calibration_nodes_refused"]
    assert r["value"] == 1
    assert r["detail"]["refused"] == [{"host": "gpu-b", "node": "gpu-b", "why": ["GPU 2 has 7 uncorrected ECC errors"]}]


# ---------------------------------------------------------------- old events, recorded runs, derive

def test_events_without_calibration_give_no_key():
    events = read_events(FIXTURES / "local" / "clean_events.jsonl")
    assert calibration(events) == {}
    m, timeline = metrics.derive(events, {}, world=2, nodes=2, gpus_per_node=0, steps=40,
                                 price={"usd_per_hour": 1.0, "unit": "node"}, faults=[])
    assert not any(k.startswith("calibration") for k in m) and "calibrated" not in timeline


@pytest.mark.parametrize("path", recorded(), ids=lambda p: str(p.relative_to(CAL)))
def test_a_recorded_run_matches_its_own_calibration_event(path):
    events = read_events(path)
    m = calibration(events)
    first = ev.attempts(events)[0]
    cal = min(ev.of_kind(events, "calibration", first), key=lambda e: e["ts_ns"])
    job = cal["job_allreduce"]
    assert m["calibration_allreduce_busbw_gbps"]["value"] == (pytest.approx(job["busbw_gbps"]) if job["correct"]
                                                              else None)
    r = m["calibration_nodes_refused"]["detail"]
    assert m["calibration_nodes_refused"]["value"] == len(cal["refused"]) and r["ok"] == cal["ok"]
    assert [n["host"] for n in r["nodes"]] == [n["host"] for n in cal["nodes"]]
    assert sorted(x for n in r["nodes"] for x in n["ranks"]) == list(range(job["world_size"]))
    gpu = any(isinstance(n.get("nccl_tests"), dict) for n in cal["nodes"])
    assert ("calibration_nccl_tests_busbw_gbps" in m) == gpu
    for name, rec in m.items():
        assert rec["unit"] == metrics.UNITS[name] and rec["sources"] == {"calibration": cal["ts_ns"] / 1e9}


def test_a_recorded_run_derives_its_calibration_and_the_phase_in_its_timeline():
    path = CAL / "results" / "calibration-local" / "runs" / "local-clean-01" / "events.jsonl"
    events = read_events(path)
    m, timeline = metrics.derive(events, {}, world=2, nodes=2, gpus_per_node=0, steps=6,
                                 price={"usd_per_hour": 1.0, "unit": "node"}, faults=[])
    assert NAMES - set(m) == {"calibration_nccl_tests_busbw_gbps", "calibration_workload_vs_nccl_tests"}
    assert timeline["rendezvous"] < timeline["calibrated"] < timeline["sweep_done"] < timeline["first_step"]
    done = max(e["ts_ns"] for e in events if e["kind"] == "calibration_done") / 1e9
    assert timeline["calibrated"] == pytest.approx(done, abs=1e-6)


def test_the_recorded_campaign_rederives_with_no_mismatch():
    checks = rederive.check(CAL / "results")
    totals = rederive.totals(checks)
    assert rederive.passed(checks) and totals["mismatches"] == 0 and totals["runs_checked"] == 2, totals
    runs = CAL / "results" / "calibration-local" / "runs.jsonl"
    stored = [json.loads(line) for line in runs.read_text().splitlines()]
    assert all("calibration_nodes_refused" in r["metrics"] and "calibrated" in r["timeline"] for r in stored)
