"""Where platforms are compared on a transport-bound figure, the report sets their collectives' recorded
facts side by side: every difference in transport, NCCL's version, network, net plugin, interfaces, GPUDirect
RDMA, NVLS, channel path kinds, gloo's interface and the communication variables is named with both values;
a difference among one platform's own runs is noted; the same facts (or facts one side never recorded) give
no warning. The records are in the shape the store keeps (metrics/bandwidth.py's detail)."""
from __future__ import annotations

import copy
import json

import pytest

from harness.metrics import bandwidth
from harness.report import comm_facts, compare, stats, table
from harness.report.document import build

FAST = [5.0, 5.2, 5.4, 5.6, 5.8, 6.0]
SLOW = [10.0, 10.2, 10.4, 10.6, 10.8, 11.0]
HEAD = "the all-reduce ran differently on the two platforms (the figure may show that, not the scheduler): "
PLUGIN = "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin."
NCCL = {"version": "2.21.5+cuda12.4", "network": "IB", "net_plugin": [PLUGIN],
        "using": "IB: [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>",
        "paths": ["NET/IB/0/GDRDMA", "NET/IB/1/GDRDMA", "P2P/CUMEM/read"], "gdrdma": True, "nvls": True}
ENV = {"NCCL_IB_HCA": "mlx5_0,mlx5_1", "NCCL_SOCKET_IFNAME": "ib0", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}
GLOO_ENV = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}
DEFAULT_IFACE = "default (the address the hostname resolves to)"


def nccl_detail(**over) -> dict:
    d = {"transport": "NET/IB+P2P", "transport_source": "NCCL_DEBUG=INFO set by the workload, to a file",
         "backend": "nccl", "comm_env": dict(ENV), "nccl": copy.deepcopy(NCCL)}
    for k, v in over.items():
        if k in NCCL:
            d["nccl"][k] = v
        else:
            d[k] = v
    return d


def gloo_detail(interface: str = "eth0", env: dict | None = None) -> dict:
    env = {**GLOO_ENV, "GLOO_SOCKET_IFNAME": interface} if env is None and interface != DEFAULT_IFACE else env
    return {"transport": "tcp", "backend": "gloo", "comm_env": env or dict(GLOO_ENV), "interface": interface}


def record(run_id: str, platform: str, value: float, detail: dict, metric: str = "allreduce_busbw_gbps") -> dict:
    m = {"value": value, "unit": "GB/s", "lo": value - 0.01, "hi": value + 0.01, "uncertainty": 0.01,
         "sources": {}, "detail": detail if metric == "allreduce_busbw_gbps" else {}}
    return {"schema": 1, "run_id": run_id, "campaign": "c", "platform": platform, "scenario": "clean",
            "status": "ok", "metrics": {metric: m}, "environment": {"torch": "2.6.0"}}


def runs(platform: str, values, detail, **kw) -> list[dict]:
    details = detail if isinstance(detail, list) else [detail] * len(values)
    return [record(f"{platform}-{i:02d}", platform, v, d, **kw)
            for i, (v, d) in enumerate(zip(values, details, strict=True))]


def warning(k8s, slurm, metric: str = "allreduce_busbw_gbps") -> str | None:
    recs = runs("k8s", SLOW, k8s, metric=metric) + runs("slurm", FAST, slurm, metric=metric)
    t = table.from_records(recs)
    comps = {(c.metric, c.numerator, c.denominator): c for c in compare.comparisons(stats.groups(t), t)}
    return comps[(metric, "k8s", "slurm")].warning


def test_the_same_facts_give_no_warning_even_from_other_hosts():
    # another host's addresses in NCCL's "Using" line and other device indices are not another path
    other = nccl_detail(using="IB: [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.7<0>",
                        paths=["NET/IB/2/GDRDMA", "NET/IB/3/GDRDMA", "P2P/CUMEM/read"])
    assert warning(nccl_detail(), other) is None
    assert warning(gloo_detail(), gloo_detail()) is None


@pytest.mark.parametrize("slurm, said", [
    (nccl_detail(version="2.23.4+cuda12.6"),
     "NCCL version: 2.21.5+cuda12.4 on Kubernetes vs 2.23.4+cuda12.6 on Slurm"),
    (nccl_detail(network="Socket"), "NCCL network: IB on Kubernetes vs Socket on Slurm"),
    (nccl_detail(net_plugin=["NET/Plugin: Loaded net plugin NCCL RDMA Plugin v8 (v8)"]),
     f'NCCL net plugin: "{PLUGIN}" on Kubernetes vs "NET/Plugin: Loaded net plugin NCCL RDMA Plugin v8 (v8)" on '
     "Slurm"),
    (nccl_detail(using="IB: [0]mlx5_2:1/IB ; OOB ib1:10.0.0.1<0>"),
     "NCCL's interfaces/HCAs: IB: [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0 on Kubernetes vs IB: [0]mlx5_2:1/IB ; "
     "OOB ib1 on Slurm"),
    (nccl_detail(gdrdma=False, paths=["NET/IB/0", "NET/IB/1", "P2P/CUMEM/read"]),
     "GPUDirect RDMA on Kubernetes only; NCCL channel path kinds: NET/IB/GDRDMA on Kubernetes only and NET/IB on "
     "Slurm only"),
    (nccl_detail(nvls=False), "NVLS on Kubernetes only"),
    (nccl_detail(paths=["NET/IB/0/GDRDMA", "SHM/direct/direct"]),
     "NCCL channel path kinds: P2P/CUMEM/read on Kubernetes only and SHM/direct/direct on Slurm only"),
    (nccl_detail(comm_env={**ENV, "NCCL_SOCKET_IFNAME": "eth0"}),
     "NCCL_SOCKET_IFNAME: ib0 on Kubernetes vs eth0 on Slurm"),
    (nccl_detail(comm_env={**ENV, "NCCL_ALGO": "Ring"}), "NCCL_ALGO: unset on Kubernetes vs Ring on Slurm"),
    (nccl_detail(comm_env={k: v for k, v in ENV.items() if k != "NCCL_IB_HCA"}),
     "NCCL_IB_HCA: mlx5_0,mlx5_1 on Kubernetes vs unset on Slurm"),
    (nccl_detail(transport="NET/Socket+P2P", network="Socket"),
     "transport: NCCL over NET/IB+P2P on Kubernetes vs NCCL over NET/Socket+P2P on Slurm; NCCL network: IB on "
     "Kubernetes vs Socket on Slurm"),
])
def test_each_difference_between_the_platforms_is_named_with_both_values(slurm, said):
    assert warning(nccl_detail(), slurm) == HEAD + said


def test_gloo_over_tcp_names_the_interface_once():
    # the local clusters as committed: Kubernetes sets GLOO_SOCKET_IFNAME=eth0, Slurm leaves gloo its default
    w = warning(gloo_detail("eth0"), gloo_detail(DEFAULT_IFACE))
    assert w == HEAD + f"interface of gloo over TCP: eth0 on Kubernetes vs {DEFAULT_IFACE} on Slurm"
    assert "GLOO_SOCKET_IFNAME" not in w      # the interface line names what it set
    assert warning(gloo_detail(), nccl_detail()).startswith(
        HEAD + "transport: gloo over TCP on Kubernetes vs NCCL over NET/IB+P2P on Slurm; ")


def test_a_difference_among_one_platforms_own_runs_is_noted():
    mixed = [nccl_detail(comm_env={**ENV, "NCCL_ALGO": a}) for a in ("Ring", "Tree", "Ring", "Tree", "Ring", "Tree")]
    w = warning(mixed, [nccl_detail(comm_env={**ENV, "NCCL_ALGO": "Ring"})] * 6)
    assert w == (HEAD + "NCCL_ALGO: Ring / Tree on Kubernetes vs Ring on Slurm. "
                 "Kubernetes' own runs differ: NCCL_ALGO Ring / Tree")
    alike = [nccl_detail(version=v) for v in ("2.21.5", "2.23.4") * 3]
    assert warning(nccl_detail(version="2.21.5"), alike) == (
        HEAD + "NCCL version: 2.21.5 on Kubernetes vs 2.21.5 / 2.23.4 on Slurm. "
        "Slurm's own runs differ: NCCL version 2.21.5 / 2.23.4")


def test_facts_one_side_did_not_record_are_not_compared():
    old = {"transport": "NET/IB+P2P"}                     # a record from before the facts were kept
    assert warning(nccl_detail(), old) is None
    # NCCL printed no INFO lines (NCCL_DEBUG=WARN): its facts are unknown, not "no GPUDirect RDMA"
    blind = nccl_detail(transport="unknown (NCCL_DEBUG=WARN: no INFO lines)",
                        nccl={"version": None, "network": None, "net_plugin": [], "using": None, "paths": [],
                              "gdrdma": False, "nvls": False})
    assert warning(nccl_detail(), blind) == (
        HEAD + "transport: NCCL over NET/IB+P2P on Kubernetes vs NCCL over unknown (NCCL_DEBUG=WARN: no INFO lines) "
        "on Slurm")


def test_only_transport_bound_figures_carry_the_warning():
    assert warning(nccl_detail(), nccl_detail(version="2.23.4"), metric="startup_s") is None


def test_the_report_prints_the_warning_in_its_findings(tmp_path):
    recs = runs("k8s", SLOW, nccl_detail()) + runs("slurm", FAST, nccl_detail(nvls=False, version="2.23.4"))
    d = tmp_path / "campaign"
    d.mkdir()
    (d / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    md = build(str(d), str(tmp_path / "rep"))["report.md"].read_text()
    assert (f"Warning: {HEAD}NCCL version: 2.21.5+cuda12.4 on Kubernetes vs 2.23.4 on Slurm; NVLS on Kubernetes "
            "only.") in md


def test_older_gloo_transports_keep_the_interface_they_named():
    assert comm_facts.transport_name("tcp") == "gloo over TCP"
    assert comm_facts.transport_name("tcp GLOO_SOCKET_IFNAME=eth0") == "gloo over TCP (GLOO_SOCKET_IFNAME=eth0)"
    assert comm_facts.transport_name("NET/IB+P2P", "nccl") == "NCCL over NET/IB+P2P"
    assert comm_facts.path_kind("NET/IB/0/GDRDMA") == "NET/IB/GDRDMA"


# --- the metric keeps them, only where the workload recorded them

def _events(comm: dict) -> list[dict]:
    v = {"iters": 20, "time_s": 0.01, "time_max_s": 0.011, "time_min_s": 0.009, "correct": True}
    return [{"kind": "torch_imported", "ts_ns": 1, "rank": 0, "attempt": [0, 0, 0],
             "torch_build": {"version": "2.6.0"}, "comm": {"backend": comm.get("backend"), "env": comm.get("env")}},
            {"kind": "comm", "ts_ns": 2, "rank": 0, "attempt": [0, 0, 0], **comm},
            {"kind": "allreduce", "ts_ns": 3, "rank": 0, "world_size": 2, "attempt": [0, 0, 0], "bytes": 2**20,
             "iters": 20, "warmup": 1, "oop": v, "ip": v}]


def test_the_metric_carries_the_comm_facts_into_its_detail():
    env = {"NCCL_SOCKET_IFNAME": "ib0", "NCCL_ALGO": "Ring"}
    m = bandwidth.allreduce(_events({"backend": "nccl", "env": env, "transport": "NET/IB", "nccl": NCCL}), 2)
    for name in ("allreduce_busbw_gbps", "allreduce_avg_busbw_gbps"):
        d = m[name]["detail"]
        assert d["backend"] == "nccl" and d["nccl"] == NCCL and "interface" not in d
        assert list(d["comm_env"]) == ["NCCL_ALGO", "NCCL_SOCKET_IFNAME"]        # sorted
    d = bandwidth.allreduce(_events({"backend": "gloo", "env": {}, "transport": "tcp", "interface": "eth0"}), 2)[
        "allreduce_busbw_gbps"]["detail"]
    assert d["interface"] == "eth0" and d["comm_env"] == {} and "nccl" not in d
    # an older workload's comm event without them: nothing is added
    old = _events({"transport": "tcp"})
    old[0]["comm"] = {}
    d = bandwidth.allreduce(old, 2)["allreduce_busbw_gbps"]["detail"]
    assert not {"backend", "comm_env", "interface", "nccl"} & d.keys()
