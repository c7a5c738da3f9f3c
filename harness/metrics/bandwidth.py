"""All-reduce bus bandwidth, as nccl-tests' all_reduce_perf measures and reports it.

The workload (ddp_train.py, allreduce_sweep) times every size out-of-place ("oop") and in-place
("ip") with nccl-tests' defaults: 1 warm-up and 20 timed iterations, the per-iteration time of
each rank averaged across ranks (`-a 1`), the result checked (`-c 1`). busbw = algbw x 2(n-1)/n,
algbw = bytes / 1e9 / time (nccl-tests src/all_reduce.cu, AllReduceGetBw).

- allreduce_busbw_gbps: busbw at the largest swept size whose result was correct, in-place.
  One size, the same in every run, so runs compare like with like; the peak over sizes (the
  figure in older campaigns) picks whichever noisy size happened to be fastest, and it moved between
  runs (peak / mean over 4-64 MiB had median 1.17 in the 2026-12-02 campaign).
  In-place, because torch.distributed has no out-of-place all_reduce: "out-of-place" is a copy
  plus the in-place call (as torch's functional all_reduce does), not nccl-tests' out-of-place
  (the same kernel as in-place, other pointers), and the copy is not free where memory is slow
  against the link: on this project's CPU workers it read ~15 % below in-place at 64 MiB
  (benchmarks/allreduce_check.py). Both variants are in detail.curve.
- allreduce_avg_busbw_gbps: nccl-tests' "Avg bus bandwidth": the mean busbw over every size and
  both variants (src/common.cu: BenchTime adds busBw to bw[0] for oop and ip alike, the footer
  prints bw[0] / bw_count[0]). None when any result was wrong: nccl-tests fails that run.

Both carry in detail the transport the workload named and, where its comm event recorded them, the
facts behind it (comm_facts): what report/compare.py sets side by side before it compares platforms.

Interval: value from the time averaged across ranks. The ranks' totals alone disagree only by
when each left the barrier before the loop (a few microseconds: an interval that would claim far
more than one timed loop knows), so the workload also cuts the loop into 4 blocks (CUDA events on
a GPU, the clock on a CPU: no stall) and reports each block's time per iteration. lo comes from the
slowest of the ranks' totals and all blocks of all ranks, hi from the fastest: the range the time
per iteration moved in during the measurement, not a confidence interval.

Events from older workloads (the 2026-12-02 campaign) carry one in-place figure per size, from the
slowest rank's time, with no spread: they read as that variant with lo = hi = value and
detail.legacy = True.
"""
from __future__ import annotations

from .. import events as ev
from .common import _record, _t

HEADLINE_VARIANT = "ip"


def busbw_factor(world_size: int) -> float:
    return 2.0 * (world_size - 1) / world_size if world_size > 1 else 0.0


def busbw(algbw_gbps: float, world_size: int) -> float:
    return algbw_gbps * busbw_factor(world_size)


def busbw_of(nbytes: int, time_s: float | None, world_size: int) -> float | None:
    """nccl-tests' busbw (GB/s, 1e9 B) of `nbytes` all-reduced in `time_s` by `world_size` ranks."""
    if not time_s or time_s <= 0:
        return None
    return busbw(nbytes / 1e9 / time_s, world_size)


def _extreme(pick, *xs):
    xs = [x for x in xs if x is not None]
    return pick(xs) if xs else None


def _variant(nbytes: int, v: dict, world: int) -> dict:
    slow = _extreme(max, v.get("time_max_s"), v.get("block_max_s"))
    fast = _extreme(min, v.get("time_min_s"), v.get("block_min_s"))
    ok = bool(v.get("correct"))
    return {"iters": v.get("iters"), "time_s": v.get("time_s"), "time_max_s": v.get("time_max_s"),
            "time_min_s": v.get("time_min_s"), "block_max_s": v.get("block_max_s"),
            "block_min_s": v.get("block_min_s"), "correct": ok,
            "busbw_gbps": busbw_of(nbytes, v.get("time_s"), world) if ok else None,
            "busbw_lo_gbps": busbw_of(nbytes, slow, world) if ok else None,
            "busbw_hi_gbps": busbw_of(nbytes, fast, world) if ok else None}


def rank_memlock(events: list[dict]) -> dict:
    """{rank: [soft, hard]} of RLIMIT_MEMLOCK as each rank's process found it (the workload's
    process_start; the latest process of a rank wins): what RDMA memory registration may pin. Empty for
    events from before the workload recorded limits."""
    out = {}
    for e in ev.of_kind(events, "process_start"):
        got = (e.get("limits") or {}).get("memlock")
        if got is not None and "rank" in e:
            out[str(e["rank"])] = got
    return dict(sorted(out.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 0))


def sweep_point(e: dict, world: int) -> dict:
    """One size of the sweep from its `allreduce` event, old or new, recomputed from the times."""
    world = e.get("world_size", world)
    nbytes = e["bytes"]
    point = {"bytes": nbytes, "iters": e.get("iters"), "warmup": e.get("warmup"), "legacy": "ip" not in e}
    if point["legacy"]:   # an older workload's event: in-place only, time_s is the slowest rank's, no spread
        t = e.get("time_s")
        point["ip"] = _variant(nbytes, {"iters": e.get("iters"), "time_s": t, "time_max_s": t, "time_min_s": t,
                                        "correct": e.get("correct")}, world)
        return point
    for name in ("oop", "ip"):
        if isinstance(e.get(name), dict):
            point[name] = _variant(nbytes, e[name], world)
    return point


def _headline(point: dict) -> dict | None:
    v = point.get(HEADLINE_VARIANT)
    return v if v and v["correct"] else None


def _flat(v: dict, nbytes: int) -> dict:
    return {"time_s": v["time_s"], "algbw_gbps": nbytes / 1e9 / v["time_s"], "busbw_gbps": v["busbw_gbps"],
            "correct": True}


def nccl_average(points: list[dict]) -> tuple[float | None, float | None, float | None, int]:
    """nccl-tests' Avg bus bandwidth (value, lo, hi) over every size and variant, and how many
    results were wrong (then no average: nccl-tests fails the run)."""
    vs = [p[name] for p in points for name in ("oop", "ip") if name in p]
    wrong = sum(not v["correct"] for v in vs)
    if not vs or wrong:
        return None, None, None, wrong

    def mean(key: str) -> float | None:
        xs = [v[key] for v in vs]
        return sum(xs) / len(xs) if all(x is not None for x in xs) else None
    return mean("busbw_gbps"), mean("busbw_lo_gbps"), mean("busbw_hi_gbps"), 0


def comm_facts(comm: dict, imported: dict) -> dict:
    """What the workload recorded about the collective's path beyond its name, each only where recorded
    (older events lack some; the report compares them between platforms): the backend, the
    NCCL_*/GLOO_*/TORCH_NCCL_*/TORCH_GLOO_* and fabric.env variables (sorted), gloo's interface, and
    NCCL's own facts (version, network, net plugin, interfaces or HCAs taken, channel paths, GPUDirect
    RDMA, NVLS). The comm event wins; torch_imported's comm (before the rendezvous) stands in."""
    early = imported.get("comm") or {}
    out: dict = {}
    backend = comm.get("backend") or early.get("backend")
    if backend:
        out["backend"] = backend
    env = comm.get("env") if isinstance(comm.get("env"), dict) else early.get("env")
    if isinstance(env, dict):
        out["comm_env"] = {k: env[k] for k in sorted(env)}
    if comm.get("interface"):
        out["interface"] = comm["interface"]
    if isinstance(comm.get("nccl"), dict):
        out["nccl"] = comm["nccl"]
    return out


def _first_of(events: list[dict], kind: str, attempt: tuple) -> dict:
    rows = sorted(ev.of_kind(events, kind, attempt), key=lambda e: (e.get("rank", 0), e["ts_ns"]))
    return rows[0] if rows else {}


def allreduce(events: list[dict], world: int) -> dict[str, dict]:
    """The two bandwidth metrics of a run, by name."""
    atts = ev.attempts(events)
    first = atts[0] if atts else (0, 0, 0)
    rows = ev.of_kind(events, "allreduce", first)
    low = min((e["rank"] for e in rows), default=0)   # every rank emits the same all-gathered figures
    rows = sorted((e for e in rows if e["rank"] == low), key=lambda e: e["bytes"])
    if not rows:
        return {name: _record(name, None, None, None, {}, {}, {"note": "no sweep ran"})
                for name in ("allreduce_busbw_gbps", "allreduce_avg_busbw_gbps")}
    points = [sweep_point(e, world) for e in rows]
    # the report charts each point's busbw_gbps: the headline variant's, correct points only
    curve = [{**p, **_flat(_headline(p), p["bytes"])} for p in points if _headline(p)]
    wrong_bytes = [p["bytes"] for p in points if any(not p[n]["correct"] for n in ("oop", "ip") if n in p)]
    imported, comm = _first_of(events, "torch_imported", first), _first_of(events, "comm", first)
    sources = {"sweep_first": _t(rows[0]), "sweep_last": _t(rows[-1])}
    legacy = any(p["legacy"] for p in points)
    common = {"world_size": rows[0].get("world_size", world), "iters": rows[-1].get("iters"),
              "warmup": rows[-1].get("warmup"), "all_correct": not wrong_bytes, "incorrect_bytes": wrong_bytes,
              "transport": comm.get("transport") or (imported.get("comm") or {}).get("transport"),
              "transport_source": comm.get("transport_source"), "torch_build": imported.get("torch_build"),
              "legacy": legacy}
    common.update(comm_facts(comm, imported))
    if memlock := rank_memlock(events):
        common["memlock"] = memlock

    top = curve[-1] if curve else None
    v = _headline(top) if top else None
    head = {"bytes": top["bytes"] if top else None, "variant": HEADLINE_VARIANT,
            "oop_busbw_gbps": (top.get("oop") or {}).get("busbw_gbps") if top else None, "curve": curve, **common}
    if not top:
        head["note"] = "no size gave a correct result"
    avg, lo, hi, wrong = nccl_average(points)
    mean = {"sizes": len(points), "results": sum(("oop" in p) + ("ip" in p) for p in points), **common}
    if wrong:
        mean["note"] = f"{wrong} wrong result(s): nccl-tests fails such a run, so no average"
    return {"allreduce_busbw_gbps": _record("allreduce_busbw_gbps", v and v["busbw_gbps"], v and v["busbw_lo_gbps"],
                                            v and v["busbw_hi_gbps"], sources, {}, head),
            "allreduce_avg_busbw_gbps": _record("allreduce_avg_busbw_gbps", avg, lo, hi, sources, {}, mean)}
