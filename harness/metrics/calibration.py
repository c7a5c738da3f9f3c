"""The calibration phase's figures: what the workload found in its own allocation before training.

The workload (ddp_train.py, calibrate; config calibration.enabled) emits one `calibration` event on rank 0
per attempt: every node's facts, health problems and matmul rate beside its peers', nccl-tests'
all_reduce_perf on each GPU node where the image has it, the workload's own all-reduce among the node's
ranks at nccl-tests' largest size, a checked all-reduce over the whole job, and the nodes it refused.
The figures come from the first attempt that calibrated (a run's figures are its first attempt's, as
timing's); a later attempt's verdict is kept as a note. A run without the phase gives no key at all, so
campaigns from before it re-derive as they were.

- calibration_allreduce_busbw_gbps: the job-wide check: nccl-tests' busbw (algbw x 2(n-1)/n) of one
  size all-reduced over every rank, in-place, time averaged over 5 iterations after a warm-up (rank 0's
  clock); None when the sum was wrong.
- calibration_nccl_tests_busbw_gbps: the median over nodes of all_reduce_perf's in-place busbw at its
  largest size, over the node's GPUs (-g its ranks); absent where no node ran it (CPUs; the phase off).
- calibration_workload_vs_nccl_tests: per node, the workload's intra-node in-place busbw ÷ nccl-tests'
  in-place busbw at the same size; the value is the lowest node's. Goal 0.95: the workload's collective
  should get what the node's fabric gives. Absent where there is no nccl-tests figure.
- calibration_nodes_refused: how many nodes the calibration refused (the run then stopped); each with
  why, and a short summary of every node's facts.

calibration_s (rendezvous -> every rank's calibration_done) is timing's: it is a span of instants.

The step before training (workloads/poc_check.py; allocation_check below) gives, from its first attempt:
- allocation_allreduce_busbw_gbps: the all-reduce across the whole allocation (on GPUs an MPI build of nccl-tests,
  one rank per GPU; on CPUs gloo), in-place bus bandwidth at its largest size, read from the tool's table; None
  where it did not run or counted wrong results. The detail holds the form, the rows, the floor and the verdict.
- health_nodes_refused: how many nodes the health gate refused (the run then stopped untrained), each with why,
  and every node's health facts in short (GPUs' throttling, power and clocks, remapped rows, NVLink, HCA ports,
  GPUDirect, XIDs, DCGM, the clock offset, the topology address Slurm gave it).
allocation_check_s (the check's first start -> its last end, left out of launch_s) is timing's.
"""
from __future__ import annotations

import statistics

from .. import events as ev
from .common import _metric, _t

GOAL = 0.95   # the workload's collective against nccl-tests' on the same GPUs and size
GOAL_TEXT = "≥ 95 %"


def calibration(events: list[dict]) -> dict[str, dict]:
    """The calibration metrics of a run by name; {} for events without a `calibration` event."""
    per_attempt: dict[tuple, dict] = {}
    for e in sorted(ev.of_kind(events, "calibration"), key=lambda e: (e["ts_ns"], e.get("rank", 0))):
        per_attempt.setdefault(ev.attempt_of(e), e)
    if not per_attempt:
        return {}
    first = ev.attempts(events)[0]
    used = first if first in per_attempt else min(per_attempt)
    cal = per_attempt[used]
    nodes = [n for n in cal.get("nodes") or [] if isinstance(n, dict)]
    base = {"attempt": list(used)}
    if used != first:
        base["note_attempt"] = (f"the first attempt {list(first)} emitted no calibration: the figures are "
                                f"attempt {list(used)}'s")
    sources = {"calibration": _t(cal)}
    out = {"calibration_allreduce_busbw_gbps": _job_check(cal, _comm_transport(events, used), sources, base)}
    out.update(_nccl_tests(nodes, sources, base))
    out["calibration_nodes_refused"] = _refused(cal, nodes, per_attempt, used, sources, base)
    return out


def transport_text(backend: str | None, transport: str | None = None) -> str:
    """As the report names a collective's transport: "gloo over TCP", "NCCL over NET/IB", "NCCL"."""
    if backend == "gloo":
        return "gloo over TCP"
    if backend == "nccl":
        return f"NCCL over {transport}" if transport and not str(transport).startswith("unknown") else "NCCL"
    return str(backend or "unknown")


def _comm_transport(events: list[dict], attempt: tuple) -> str | None:
    """What NCCL's INFO lines named for the job's communicator (the comm event, after the sweep: the check
    ran on the same default group before it); None where the run stopped before saying."""
    comm = ev.of_kind(events, "comm", attempt)
    return min(comm, key=lambda e: e.get("rank", 0)).get("transport") if comm else None


def _job_check(cal: dict, transport: str | None, sources: dict, base: dict) -> dict:
    job = cal.get("job_allreduce") or {}
    correct = bool(job.get("correct"))
    world = job.get("world_size")
    detail = {**base, "bytes": job.get("bytes"), "time_s": job.get("time_s"), "backend": job.get("backend"),
              "transport": transport_text(job.get("backend"), transport), "world_size": world, "correct": correct}
    value = job.get("busbw_gbps") if correct else None
    if not job:
        detail["note"] = "the calibration event has no job-wide all-reduce check"
    elif not correct:
        detail["note"] = "the all-reduce check over the job gave a wrong sum: no bandwidth counts"
    elif world == 1:
        detail["note"] = "one rank: an all-reduce moves nothing between ranks (busbw factor 0)"
    return _metric("calibration_allreduce_busbw_gbps", value, sources, **detail)


def _ip_top(nt: dict) -> dict:
    """nccl-tests' largest row as the workload parsed it: its in-place and out-of-place busbw, and whether
    nccl-tests counted wrong results there ("N/A" when it did not check)."""
    rows = [r for r in nt.get("rows") or [] if isinstance(r, dict) and r.get("bytes") is not None]
    top = max(rows, key=lambda r: r["bytes"]) if rows else {}
    wrong = [w for w in top.get("wrong") or [] if isinstance(w, str) and w.isdigit() and int(w) > 0]
    return {"bytes": top.get("bytes", nt.get("bytes")), "ip": top.get("ip_busbw_gbps"),
            "oop": top.get("oop_busbw_gbps", nt.get("busbw_gbps")), "wrong": bool(wrong)}


def _nccl_tests(nodes: list[dict], sources: dict, base: dict) -> dict[str, dict]:
    ran = [n for n in nodes if isinstance(n.get("nccl_tests"), dict)]
    if not ran:   # CPU nodes, or GPUs with nccl_tests unset: nothing to compare against
        return {}
    per_node, oop, notes, versions, sizes = {}, {}, [], {}, {}
    for n in ran:
        nt, host = n["nccl_tests"], n["host"]
        top = _ip_top(nt)
        if nt.get("rc") is None:
            notes.append(f"{host}: {(nt.get('argv') or ['all_reduce_perf'])[0]} is not installed in the job's image")
        elif nt.get("rc") != 0:
            notes.append(f"{host}: all_reduce_perf failed (exit {nt['rc']})")
        elif top["wrong"]:
            notes.append(f"{host}: nccl-tests counted wrong results at {top['bytes']} bytes")
        elif top["ip"] is None:
            notes.append(f"{host}: no result row in all_reduce_perf's output")
        if nt.get("rc") == 0 and not top["wrong"] and top["ip"] is not None:
            per_node[host] = top["ip"]
            oop[host] = top["oop"]
            sizes[host] = top["bytes"]
        versions[host] = nt.get("version")
    value = statistics.median(per_node.values()) if per_node else None
    distinct = sorted({v for v in versions.values() if v})
    detail = {**base, "variant": "ip", "per_node": per_node, "oop_per_node": oop,
              "bytes": sorted(set(sizes.values()))[-1] if sizes else None,
              "version": distinct[0] if len(distinct) == 1 else None,
              "argv": next((n["nccl_tests"].get("argv") for n in ran if n["nccl_tests"].get("argv")), None),
              "nodes_ran": len(ran)}
    if len(distinct) > 1:   # nodes of one job with other nccl-tests builds: each one's, and a note
        detail["versions"] = versions
        notes.append("the nodes ran different nccl-tests or NCCL versions")
    if notes:
        detail["note"] = "; ".join(notes)
    out = {"calibration_nccl_tests_busbw_gbps": _metric("calibration_nccl_tests_busbw_gbps", value, sources, **detail)}
    if not per_node:
        return out
    ratios, why = {}, []
    for n in ran:
        host = n["host"]
        if host not in per_node:
            continue
        mine, ref = n.get("intra_node") or {}, per_node[host]
        if not mine:
            why.append(f"{host}: one rank on the node, no intra-node all-reduce to compare")
            continue
        if mine.get("bytes") != sizes[host]:
            why.append(f"{host}: the workload all-reduced {mine.get('bytes')} bytes, nccl-tests' largest was "
                       f"{sizes[host]}: not the same size")
            continue
        if not mine.get("correct") or mine.get("busbw_gbps") is None or not ref:
            why.append(f"{host}: " + ("the workload's intra-node sum was wrong" if not mine.get("correct")
                                      else "no busbw to divide"))
            continue
        ratios[host] = {"workload_busbw_gbps": mine["busbw_gbps"], "nccl_tests_busbw_gbps": ref,
                        "ratio": round(mine["busbw_gbps"] / ref, 9), "bytes": sizes[host]}
    low = min((r["ratio"] for r in ratios.values()), default=None)
    rdetail = {**base, "per_node": ratios, "goal": GOAL, "goal_text": GOAL_TEXT,
               "meets_goal": None if low is None else low >= GOAL,
               "what": "the workload's in-place all-reduce among the node's ranks ÷ nccl-tests' in-place, same size"}
    if why:
        rdetail["note"] = "; ".join(why)
    out["calibration_workload_vs_nccl_tests"] = _metric("calibration_workload_vs_nccl_tests", low, sources, **rdetail)
    return out


def _memlock_soft(facts: dict):
    pair = (facts.get("limits") or {}).get("memlock")
    return pair[0] if isinstance(pair, list) and pair else None


def node_summary(n: dict, refused_hosts: set) -> dict:
    """One node's facts as the report shows them: no raw nvidia-smi text, no nccl-tests output."""
    facts = n.get("facts") or {}
    gpus = facts.get("gpus")
    nt = n.get("nccl_tests") if isinstance(n.get("nccl_tests"), dict) else None
    intra = n.get("intra_node") or {}
    return {"host": n.get("host"), "node": n.get("node") or n.get("host"), "ranks": n.get("ranks") or [],
            "gflops": n.get("gflops"),
            "compute_ratio": n.get("compute_ratio"), "memlock_soft": _memlock_soft(facts),
            "torch": facts.get("torch"), "cuda": facts.get("cuda"), "nccl": facts.get("nccl"),
            "driver": facts.get("driver"),
            "gpus": None if gpus is None else len(gpus),
            "gpu_names": None if gpus is None else sorted({g.get("name") for g in gpus if g.get("name")}),
            "ibv_devices": facts.get("ibv_devices"), "ofed": facts.get("ofed"),
            "problems": list(n.get("problems") or []),
            "nccl_tests_busbw_gbps": None if nt is None else _ip_top(nt)["ip"],
            "intra_node_busbw_gbps": intra.get("busbw_gbps"),
            "refused": n.get("host") in refused_hosts}


def _refused_list(cal: dict) -> list[dict]:
    return [{"host": r.get("host"), "node": r.get("node") or r.get("host"), "why": list(r.get("why") or [])}
            for r in cal.get("refused") or [] if isinstance(r, dict)]


def _refused(cal: dict, nodes: list[dict], per_attempt: dict, used: tuple, sources: dict, base: dict) -> dict:
    refused = _refused_list(cal)
    hosts = {r["host"] for r in refused}
    job_ok = bool((cal.get("job_allreduce") or {}).get("correct"))
    others = [{"attempt": list(a), "ok": bool(e.get("ok")), "refused": _refused_list(e)}
              for a, e in sorted(per_attempt.items()) if a != used]
    detail = {**base, "ok": bool(cal.get("ok")), "refused": refused,
              "nodes": [node_summary(n, hosts) for n in nodes], "job_check_correct": job_ok,
              "min_ratio": cal.get("min_ratio"), "min_memlock_kib": cal.get("min_memlock_kib"),
              "seconds": cal.get("seconds")}
    notes = []
    if not job_ok and not refused:
        notes.append("no node was refused, but the job-wide all-reduce check gave a wrong sum: the run stopped")
    if others:
        detail["other_attempts"] = others
        notes += [f"attempt {o['attempt']} calibrated again: " + (
            "refused " + ", ".join(f"{r['host']} ({'; '.join(r['why'])})" for r in o["refused"])
            if o["refused"] else ("every node passed" if o["ok"] else "no node refused, the check failed"))
            for o in others]
    if notes:
        detail["note"] = "; ".join(notes)
    return _metric("calibration_nodes_refused", len(refused), sources, **detail)


def _first_of(events: list[dict], kind: str) -> dict | None:
    found = sorted(ev.of_kind(events, kind), key=lambda e: (ev.attempt_of(e), e["ts_ns"]))
    return found[0] if found else None


def allocation_check(events: list[dict]) -> dict[str, dict]:
    """The step before training's metrics by name; {} for a run without it (older runs, calibration off)."""
    out: dict[str, dict] = {}
    ar = _first_of(events, "allocation_allreduce")
    if ar is not None:
        nccl = ar.get("nccl") if isinstance(ar.get("nccl"), dict) else None
        detail = {"attempt": list(ev.attempt_of(ar)), "form": ar.get("form"), "argv": ar.get("argv"),
                  "rc": ar.get("rc"), "version": ar.get("version"), "ranks": ar.get("world"),
                  "nodes": ar.get("nodes"), "bytes": ar.get("bytes"), "oop_busbw_gbps": ar.get("oop_busbw_gbps"),
                  "avg_busbw_gbps": ar.get("avg_busbw_gbps"), "floor_gbps": ar.get("floor_gbps"),
                  "ok": bool(ar.get("ok")), "why": ar.get("why"),
                  "rows": len(ar.get("rows") or []),
                  "transport": None if nccl is None else transport_text("nccl", _net(nccl)),
                  "gdrdma": None if nccl is None else nccl.get("gdrdma"),
                  "env_dropped": ar.get("env_dropped")}
        out["allocation_allreduce_busbw_gbps"] = _metric("allocation_allreduce_busbw_gbps", ar.get("busbw_gbps"),
                                                         {"allocation_allreduce": _t(ar)}, **detail)
    gate = _first_of(events, "health_gate")
    if gate is not None:
        refused = [{"node": r.get("node"), "host": r.get("host"), "why": list(r.get("why") or [])}
                   for r in gate.get("refused") or [] if isinstance(r, dict)]
        nodes = [health_summary(n) for n in gate.get("nodes") or [] if isinstance(n, dict)]
        bindings = rank_bindings(events, ev.attempt_of(gate))
        for n in nodes:
            n["rank_cpus"] = bindings.get(str(n.get("host")), {})
        out["health_nodes_refused"] = _metric("health_nodes_refused", len(refused), {"health_gate": _t(gate)},
                                              attempt=list(ev.attempt_of(gate)), ok=bool(gate.get("ok")),
                                              refused=refused, nodes=nodes, bars=gate.get("bars"),
                                              seconds=gate.get("seconds"),
                                              locality_warnings=[w for n in nodes for w in locality(n)])
    return out


def rank_bindings(events: list[dict], attempt: tuple) -> dict[str, dict[str, str]]:
    """host -> local rank -> the CPUs the training rank may run on (its process_start binding), in the attempt."""
    out: dict[str, dict[str, str]] = {}
    for e in ev.of_kind(events, "process_start", attempt):
        cpus = (e.get("binding") or {}).get("cpus") if isinstance(e.get("binding"), dict) else None
        if cpus:
            out.setdefault(str(e.get("host")), {})[str(e.get("local_rank", 0))] = str(cpus)
    return out


def cpu_set(text: str | None) -> set[int]:
    """The kernel's cpulist ("0-3,8") as a set; empty for anything else."""
    got: set[int] = set()
    for raw in str(text or "").split(","):
        part = raw.strip()
        lo, _, hi = part.partition("-")
        if lo.isdigit() and (hi.isdigit() or not hi):
            got.update(range(int(lo), int(hi or lo) + 1))
    return got


def locality(n: dict) -> list[str]:
    """A node's training ranks whose CPUs lie outside their GPU's CPU affinity (nvidia-smi topo -m): their data
    loading and NCCL's proxy threads cross the socket. A warning, not a refusal."""
    out = []
    for lr, cpus in sorted((n.get("rank_cpus") or {}).items()):
        near = cpu_set((n.get("gpu_cpus") or {}).get(lr))
        mine = cpu_set(cpus)
        if near and mine and not mine <= near:
            out.append(f"{n.get('node')}: local rank {lr} runs on CPUs {cpus}, {len(mine - near)} of them outside "
                       f"GPU {lr}'s affinity {(n.get('gpu_cpus') or {}).get(lr)}")
    return out


def _net(nccl: dict) -> str | None:
    paths = [p for p in nccl.get("paths") or [] if isinstance(p, str)]
    kinds = sorted({"/".join(p.split("/")[:2]) if p.startswith("NET/") else p.split("/")[0] for p in paths})
    return "+".join(kinds) if kinds else nccl.get("network")


def health_summary(n: dict) -> dict:
    """One node's health facts as the report shows them: counts and states, no tool output."""
    f = n.get("facts") if isinstance(n.get("facts"), dict) else {}
    gpus = f.get("gpus") if isinstance(f.get("gpus"), list) else None
    ports = f.get("ib_ports") if isinstance(f.get("ib_ports"), list) else None
    nvl = f.get("nvlink") if isinstance(f.get("nvlink"), list) else None
    gdr = f.get("gdr") if isinstance(f.get("gdr"), dict) else {}
    topo = f.get("topo") if isinstance(f.get("topo"), dict) else {}
    return {"node": n.get("node"), "host": n.get("host"), "problems": list(n.get("problems") or []),
            "clock_offset_s": n.get("clock_offset_s"),
            "gpus": None if gpus is None else len(gpus),
            "throttled": None if gpus is None else sum(1 for g in gpus if g.get("reasons_active")),
            "power_limit_w": sorted({(g.get("power") or {}).get("limit_w") for g in gpus or []} - {None}),
            "nvlinks_active": None if nvl is None else [sum(1 for v in (x.get("links") or {}).values() if v)
                                                         for x in nvl],
            "ib_ports": None if ports is None else [f"{p.get('ca')}/{p.get('port')} {p.get('state')} "
                                                    f"{p.get('rate_gbps')}" for p in ports],
            "gdr": {"peermem": gdr.get("peermem"), "dma_buf": gdr.get("dma_buf")} if gdr else None,
            "gpu_cpus": {str(k): v.get("cpus") for k, v in (topo.get("gpus") or {}).items()} if topo else None,
            "binding": (f.get("binding") or {}).get("cpus") if isinstance(f.get("binding"), dict) else None,
            "memlock_soft": _memlock_soft(f), "gloo_ifname": f.get("gloo_ifname"),
            "host_loopback": f.get("host_loopback"), "topology_addr": f.get("topology_addr"),
            "xids": None if f.get("xids") is None else len(f.get("xids") or [])}
