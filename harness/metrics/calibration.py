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
