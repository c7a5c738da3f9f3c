"""All-reduce bandwidth: nccl-tests' formulas, its average, correctness gating, the agreed iteration
count, the transport, and older workloads' events (the stored 2026-12-02 campaign)."""
import gzip
import importlib.util
import json
import subprocess
import sys

import pytest
from support.paths import ROOT

from harness import config, metrics
from harness import events as ev
from harness.metrics import bandwidth

spec = importlib.util.spec_from_file_location("ddp_train", ROOT / "workloads" / "ddp_train.py")
ddp_train = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ddp_train)
STORED = ROOT / "results" / "smoke-2026-12-02" / "smoke-poc" / "runs"


@pytest.mark.parametrize("n, factor", [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75)])
def test_busbw_factor_is_nccl_tests(n, factor):
    assert metrics.busbw_factor(n) == pytest.approx(factor)


def test_busbw_from_algbw():
    # nccl-tests: 1 GB all-reduced in 0.1 s on 8 ranks -> algbw 10 GB/s, busbw 17.5 GB/s
    algbw = 1e9 / 0.1 / 1e9
    assert metrics.busbw(algbw, 8) == pytest.approx(17.5)
    assert bandwidth.busbw_of(10**9, 0.1, 8) == pytest.approx(17.5)
    # the workload's own figures are the same formula (AllReduceGetBw)
    assert ddp_train.bw_figures(10**9, 0.1, 8) == pytest.approx((10.0, 17.5))


def test_sweep_sizes():
    assert ddp_train.sweep_sizes("1K:8K") == [1024, 2048, 4096, 8192]
    assert ddp_train.sweep_sizes("1K,1M") == [1024, 1024**2]
    assert ddp_train.sweep_sizes("1K:256M")[-1] == 256 * 1024**2
    with pytest.raises(ValueError):
        ddp_train.parse_size("12Q")


def test_restart_counts_read_every_layer(monkeypatch):
    monkeypatch.setenv("SLURM_RESTART_COUNT", "2")
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    monkeypatch.delenv("JOBSET_RESTART_ATTEMPT", raising=False)
    assert ddp_train.restart_counts() == {"jobset": 0, "slurm": 2, "torchelastic": 1}


# --- the iteration count every rank runs

def test_agreed_iters_caps_by_the_slowest_ranks_calibration():
    assert ddp_train.agreed_iters(20, 0.01, 2.0) == 20           # 20 x 10 ms fits in 2 s
    assert ddp_train.agreed_iters(20, 0.25, 2.0) == 8            # 8 x 250 ms does
    assert ddp_train.agreed_iters(20, 5.0, 2.0) == 1             # at least one
    assert ddp_train.agreed_iters(20, 5.0, 0.0) == 20            # no cap
    assert ddp_train.agreed_iters(20, 0.0, 2.0) == 20            # an instant calibration: no cap
    assert ddp_train.agreed_iters(20, float("inf"), 2.0) == 20


def test_agreed_iters_is_the_same_on_every_rank():
    # each rank's own calibration would give each its own count (the old hang); the MAX does not
    own = [0.09, 0.11, 0.3]
    assert len({ddp_train.agreed_iters(20, t, 2.0) for t in own}) > 1
    agreed = max(own)                                            # what all_reduce(MAX) hands every rank
    assert {ddp_train.agreed_iters(20, agreed, 2.0) for _ in own} == {6}


def test_block_sizes_cover_the_loop():
    assert ddp_train.block_sizes(20) == [5, 5, 5, 5]
    assert ddp_train.block_sizes(7) == [2, 2, 2, 1]
    assert ddp_train.block_sizes(2) == [1, 1]
    assert ddp_train.block_sizes(1) == [1]
    assert all(sum(ddp_train.block_sizes(k)) == k for k in range(1, 50))


# --- the metrics from the workload's events

def _variant(t, *, correct=True, spread=0.1):
    return {"iters": 20, "time_s": t, "time_max_s": t * (1 + spread / 2), "time_min_s": t * (1 - spread / 2),
            "block_max_s": t * (1 + spread), "block_min_s": t * (1 - spread), "correct": correct}


def _events(times, world=4, wrong=()):
    """allreduce events of every rank; times: bytes -> (oop s, ip s); wrong: (bytes, variant) pairs."""
    out = [{"kind": "torch_imported", "ts_ns": 1, "rank": 0, "attempt": [0, 0, 0],
            "torch_build": {"version": "2.6.0", "nccl": None}, "comm": {"backend": "gloo", "transport": "tcp default"}},
           {"kind": "comm", "ts_ns": 10**9, "rank": 0, "attempt": [0, 0, 0], "backend": "gloo",
            "transport": "tcp GLOO_SOCKET_IFNAME=eth0", "transport_source": "GLOO_SOCKET_IFNAME"}]
    for i, (nbytes, (oop, ip)) in enumerate(sorted(times.items())):
        for rank in range(world):
            out.append({"kind": "allreduce", "ts_ns": 2 + i, "rank": rank, "world_size": world,
                        "attempt": [0, 0, 0], "bytes": nbytes, "iters": 20, "warmup": 1,
                        "oop": _variant(oop, correct=(nbytes, "oop") not in wrong),
                        "ip": _variant(ip, correct=(nbytes, "ip") not in wrong)})
    return out


TIMES = {2**20: (0.002, 0.001), 2**26: (0.04, 0.05)}


def test_headline_is_in_place_at_the_largest_size_with_its_spread():
    m = bandwidth.allreduce(_events(TIMES), 4)
    head = m["allreduce_busbw_gbps"]
    assert head["value"] == pytest.approx(2**26 / 1e9 / 0.05 * 1.5)
    assert head["lo"] == pytest.approx(2**26 / 1e9 / (0.05 * 1.1) * 1.5)    # slowest block of any rank
    assert head["hi"] == pytest.approx(2**26 / 1e9 / (0.05 * 0.9) * 1.5)    # fastest
    assert head["uncertainty"] == pytest.approx((head["hi"] - head["lo"]) / 2)
    assert head["unit"] == "GB/s"
    d = head["detail"]
    assert d["bytes"] == 2**26 and d["variant"] == "ip" and d["all_correct"] and not d["legacy"]
    assert d["oop_busbw_gbps"] == pytest.approx(2**26 / 1e9 / 0.04 * 1.5)
    assert d["transport"] == "tcp GLOO_SOCKET_IFNAME=eth0"                   # the comm event wins
    assert d["torch_build"]["version"] == "2.6.0"
    assert [c["bytes"] for c in d["curve"]] == [2**20, 2**26]
    assert d["curve"][0]["busbw_gbps"] == pytest.approx(2**20 / 1e9 / 0.001 * 1.5)


def test_average_is_nccl_tests_avg_bus_bandwidth():
    # nccl-tests: bw[0] += busBw for every size, out-of-place and in-place; footer bw[0] / bw_count[0]
    m = bandwidth.allreduce(_events(TIMES), 4)["allreduce_avg_busbw_gbps"]
    each = [b / 1e9 / t * 1.5 for b, ts in TIMES.items() for t in ts]
    assert m["value"] == pytest.approx(sum(each) / 4)
    assert m["lo"] < m["value"] < m["hi"]
    assert m["detail"]["results"] == 4 and m["detail"]["sizes"] == 2


def test_a_wrong_result_has_no_bandwidth():
    m = bandwidth.allreduce(_events(TIMES, wrong={(2**26, "ip")}), 4)
    head = m["allreduce_busbw_gbps"]
    # the largest size was wrong: the headline is the largest correct one, and says so
    assert head["detail"]["bytes"] == 2**20
    assert head["value"] == pytest.approx(2**20 / 1e9 / 0.001 * 1.5)
    assert head["detail"]["all_correct"] is False and head["detail"]["incorrect_bytes"] == [2**26]
    assert [c["bytes"] for c in head["detail"]["curve"]] == [2**20]
    # nccl-tests fails a run with wrong values: no average
    avg = m["allreduce_avg_busbw_gbps"]
    assert avg["value"] is None and "wrong" in avg["detail"]["note"]


def test_no_correct_size_and_no_sweep():
    m = bandwidth.allreduce(_events(TIMES, wrong={(b, "ip") for b in TIMES}), 4)
    assert m["allreduce_busbw_gbps"]["value"] is None
    m = bandwidth.allreduce([], 2)
    assert set(m) == {"allreduce_busbw_gbps", "allreduce_avg_busbw_gbps"}
    assert all(r["value"] is None for r in m.values())


def test_old_events_still_give_a_value():
    # an older workload's events: in-place only, time_s was the slowest rank's, no spread
    old = [{"kind": "allreduce", "ts_ns": 1 + i, "rank": r, "world_size": 2, "attempt": [0, 0, 0], "bytes": b,
            "iters": 5, "time_s": t, "algbw_gbps": b / t / 1e9, "busbw_gbps": b / t / 1e9, "correct": True}
           for i, (b, t) in enumerate([(2**20, 0.002), (2**26, 0.05)]) for r in (0, 1)]
    m = bandwidth.allreduce(old, 2)
    head = m["allreduce_busbw_gbps"]
    assert head["value"] == pytest.approx(2**26 / 0.05 / 1e9) == head["lo"] == head["hi"]
    assert head["detail"]["legacy"] and head["detail"]["variant"] == "ip"
    assert m["allreduce_avg_busbw_gbps"]["value"] == pytest.approx((2**20 / 0.002 + 2**26 / 0.05) / 2e9)


def test_the_stored_campaign_still_gives_a_value():
    runs = sorted(p for p in STORED.glob("*clean-0*/events.jsonl.gz"))
    assert runs
    for path in runs:
        events = ev.parse_lines(gzip.decompress(path.read_bytes()).decode().splitlines())
        head = bandwidth.allreduce(events, 2)["allreduce_busbw_gbps"]
        assert head["value"] > 0 and head["detail"]["bytes"] == 64 * 2**20 and head["detail"]["legacy"], path


# --- what the workload records about the communication

NCCL_LINES = [
    "host:1:2 [0] NCCL INFO Using network IB",
    "host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
    "host:1:2 [0] NCCL INFO Channel 01/0 : 1[1] -> 2[0] [send] via NET/IB/0/GDRDMA",
    "host:1:2 [0] NCCL INFO Channel 02/0 : 2[0] -> 3[1] via SHM/direct/direct",
]


def test_nccl_transport_from_info_lines():
    assert ddp_train.nccl_transport(NCCL_LINES) == "NET/IB+P2P+SHM"
    assert ddp_train.nccl_transport(NCCL_LINES[:1]) == "network IB (no channel lines)"
    assert ddp_train.nccl_transport(["NCCL INFO Channel 00/0 : 0[0] -> 1[0] via NET/Socket/0"]) == "NET/Socket"
    assert ddp_train.nccl_transport([]).startswith("unknown")


def test_comm_env_and_gloo_transport(monkeypatch):
    monkeypatch.setenv("NCCL_IB_HCA", "mlx5_0")
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "eth1")
    monkeypatch.setenv("UNRELATED", "x")
    env = ddp_train.comm_env()
    assert env["NCCL_IB_HCA"] == "mlx5_0" and env["GLOO_SOCKET_IFNAME"] == "eth1" and "UNRELATED" not in env
    # whatever the harness's fabric.env set is recorded too, whatever its prefix (UCX_*, FI_*)
    monkeypatch.setenv("UCX_NET_DEVICES", "mlx5_0:1")
    monkeypatch.setenv("POC_FABRIC_ENV", "UCX_NET_DEVICES,NCCL_IB_HCA")
    assert ddp_train.comm_env()["UCX_NET_DEVICES"] == "mlx5_0:1" and "UNRELATED" not in ddp_train.comm_env()
    monkeypatch.delenv("POC_FABRIC_ENV")
    # the interface is a setting, not another transport: one platform naming it and another not must
    # not read as two transports (the report warns on different transports)
    assert ddp_train.gloo_transport() == "tcp" and ddp_train.gloo_interface() == "eth1"
    monkeypatch.delenv("GLOO_SOCKET_IFNAME")
    assert ddp_train.gloo_transport() == "tcp" and ddp_train.gloo_interface().startswith("default")


def test_stderr_tap_keeps_nccl_lines_and_passes_everything_on():
    code = ("import importlib.util, os, sys\n"
            f"s = importlib.util.spec_from_file_location('w', {str(ROOT / 'workloads' / 'ddp_train.py')!r})\n"
            "w = importlib.util.module_from_spec(s); s.loader.exec_module(w)\n"
            "tap = w.StderrTap()\n"
            "os.write(2, b'x NCCL INFO Channel 00/0 : 0[0] -> 1[0] via NET/Socket/0\\nplain line\\n')\n"
            "lines = tap.close()\n"
            "print(w.nccl_transport(lines), len(lines))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["NET/Socket", "1"]
    assert "plain line" in out.stderr and "via NET/Socket/0" in out.stderr


def test_the_sweep_runs_and_checks_its_results(tmp_path):
    """One rank, gloo, in this process: the event's shape, and a correct result."""
    torch = pytest.importorskip("torch")
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        got = []

        class Sink:
            def emit(self, kind, **data):
                got.append(dict(kind=kind, **data))
        ddp_train.allreduce_sweep(Sink(), dist, torch, torch.device("cpu"), [1024, 4096 + 12], 1, 3, 2.0)
    finally:
        dist.destroy_process_group()
    assert [e["bytes"] for e in got] == [1024, 4108]
    for e in got:
        assert e["iters"] == 3 and e["warmup"] == 1
        for name in ("oop", "ip"):
            v = e[name]
            assert v["correct"] and v["iters"] == 3 and v["time_min_s"] <= v["time_s"] <= v["time_max_s"]
            assert v["block_min_s"] <= v["block_max_s"] and v["busbw_gbps"] == 0.0   # one rank: no bus traffic


def test_the_pattern_check_sees_a_wrong_element():
    torch = pytest.importorskip("torch")
    pat = torch.arange(10, dtype=torch.float32) + 1
    buf = torch.empty(25)
    ddp_train._tile(torch, buf, pat)
    assert ddp_train._matches(buf, pat)
    buf[23] += 1
    assert not ddp_train._matches(buf, pat)


# --- configuration

def test_config_defaults_are_nccl_tests_and_sizes_are_bounded():
    w = config.Workload()
    assert (w.sweep_iters, w.sweep_warmup) == (20, 1)
    assert config.Workload(sweep="1K:8G").sweep_max_bytes == 8 * 1024**3
    with pytest.raises(ValueError, match="8G"):
        config.Workload(sweep="1K:16G")
    with pytest.raises(ValueError, match="gloo"):
        config.Workload(sweep="1K:2G", backend="gloo")
    assert config.Workload(sweep="", backend="gloo").sweep_max_bytes == 0


def test_event_kinds_know_comm():
    assert "comm" in ev.KINDS
    assert json.dumps(ev.KINDS)
