#!/usr/bin/env python3
"""Placement ceilings on this host: a saturation sweep per platform, cluster size and client rate limits.

Steady traces (harness/scale/steady.py) at rising offered rates (--rates jobs/s, each for --seconds),
replayed one after the other on the native cluster's KWOK nodes (Kueue + JobSet) and on the emulated Slurm
cluster (harness/replay/), at each --nodes size; on Kubernetes once per --limits setting of the controllers'
client rate limits (`default`, or e.g. kueue=200/300,kube-controller-manager=200/300, as `poc cluster up
--client-qps` sets them); the whole sweep --repeat times. A platform's rates stop rising after the first one
it clearly fell behind at (placed under --stop-below of it): past saturation a rate only adds backlog to
drain. Each replay records the host's CPU (whole host and each component, mean and peak: replay/hostcpu.py).

Writes DIR/<nodes>n/<platform>[-<limits>]/r<repeat>/<rate>/ (each replay), DIR/throughput.json (every row,
the ceilings), DIR/throughput.md and DIR/throughput.png; with --ceilings-out, merges the ceilings into a
campaign's <campaign>/scale/ceilings.json, which its replays' reports and the decision row read
(harness/scale/ceiling.py). The controllers' rate limits are put back as they were at the end.

Needs root and the native cluster up; brings the emulated nodes up and removes them (and the emulated Slurm
cluster) afterwards. Prints numbers; asserts nothing. Run it alone on the host: it measures the host too.

    .venv/bin/python benchmarks/replay_throughput.py --nodes 64 256 --rates 1 2 4 8 16 --repeat 2 \\
        --limits default kueue=200/300,kube-controller-manager=200/300 --results /tmp/sat
"""
from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from harness.clusters import images
from harness.clusters import native_k8s as nk
from harness.clusters.k8s import kwok, rate_limits, tuning
from harness.clusters.k8s.layout import Layout
from harness.clusters.slurm import emulated
from harness.errors import ConfigError
from harness.fsutil import atomic_write
from harness.replay import local
from harness.replay import store as rs
from harness.report import throughput as rt
from harness.scale import ceiling as cl
from harness.scale import outcome, steady


def runtime_for(nodes: int) -> int:
    """Short jobs, so the nodes never fill (steady.HEADROOM): 3 s below 128 nodes (up to 9 jobs/s at 64), else 5."""
    return 3 if nodes < 128 else 5


def slug(limits: str) -> str:
    return "default" if limits == "default" else re.sub(r"[^a-z0-9]+", "-", limits.lower()).strip("-")


def set_limits(L: Layout, limits: str) -> str:
    """Apply a --limits setting to the running native cluster (restarting what changed); its ceiling label."""
    tuning.apply_rate_limits(L, rate_limits.parse(limits))
    nk.up()
    return cl.limits_label("k8s", rate_limits.describe(L))


def one(platform: str, trace, name: str, where: Path) -> dict:
    t0 = time.monotonic()
    say = lambda m: print("    " + m, flush=True)   # noqa: E731
    run = local.replay_k8s if platform == "k8s" else local.replay_slurm
    result, total = run(trace, name, None, say=say)
    wall = time.monotonic() - t0
    result["replay_wall_s"] = round(wall, 1)
    figs = rs.save(where, trace, platform, result, total)
    t = outcome.throughput(rs.outcomes_of(platform, trace, result), trace_rate=trace.params["rate_jobs_per_s"])
    late = sorted(x["sent_at"] - x["due_s"] for x in result["submitted"])
    cpu = result.get("host_cpu") or {}
    return {"jobs": len(trace.jobs), "wall_s": round(wall, 1), "jobs_without_record": figs["jobs_without_record"],
            "harness_cpu_s": result["harness_cpu_s"], "submit_late_max_s": round(late[-1], 3), "throughput": t,
            "host_cpu": {k: v for k, v in cpu.items() if k != "series"}}


def sweep(platform: str, nodes: int, limits: str, label: str, repeat: int, rates: list[float], seconds: float,
          gpus: int, stop_below: float, out: Path) -> list[dict]:
    rows = []
    for rate in rates:
        trace = steady.steady_trace(rate, seconds, nodes, gpus, runtime_for(nodes), seed=repeat)
        side = platform if platform == "slurm" else f"k8s-{slug(limits)}"
        where = out / f"{nodes}n" / side / f"r{repeat}" / f"{rate:g}"
        print(f"  {platform} {nodes}n {label} repeat {repeat}: {rate:g} jobs/s for {seconds:g} s", flush=True)
        row = {"platform": platform, "nodes": nodes, "limits": label, "repeat": repeat, "rate": rate,
               **one(platform, trace, f"sat-{nodes}-{rate:g}", where)}
        row["offered"], row["achieved"] = rt.offered(row), rt.achieved(row)
        rows.append(row)
        h = (row["host_cpu"].get("host") or {})
        print(f"    offered {rt.num(row['offered'])}, placed {rt.num(row['achieved'])} jobs/s, lag "
              f"{row['throughput']['lag_s']} s; host {rt.num(h.get('mean_cores'), '.2f')} cores mean, "
              f"{rt.num(h.get('peak_cores'), '.2f')} peak; wall {row['wall_s']} s", flush=True)
        if row["achieved"] is not None and row["offered"] and row["achieved"] < stop_below * row["offered"]:
            print(f"    fell behind ({row['achieved'] / row['offered']:.0%} of offered): no higher rate", flush=True)
            break
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--rates", type=float, nargs="+", default=[1, 2, 4, 8, 16], help="offered jobs/s, rising")
    ap.add_argument("--seconds", type=float, default=30, help="how long each rate is offered")
    ap.add_argument("--limits", nargs="+", default=["default", "kueue=200/300,kube-controller-manager=200/300"],
                    help="Kubernetes controllers' client rate limits to sweep under (`poc cluster up --client-qps`)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--stop-below", type=float, default=0.75,
                    help="stop a platform's rising rates after one placed under this share of it")
    ap.add_argument("--platform", nargs="+", choices=["k8s", "slurm"], default=["k8s", "slurm"])
    ap.add_argument("--results", type=Path, default=None)
    ap.add_argument("--ceilings-out", type=Path, help="merge the ceilings into this ceilings.json")
    ap.add_argument("--report-only", type=Path, metavar="DIR", help="write DIR's report again from throughput.json")
    a = ap.parse_args()
    if a.report_only:
        kept = json.loads((a.report_only / "throughput.json").read_text())
        report(kept["rows"], kept["settings"], a.report_only, a.ceilings_out)
        return
    rates = sorted(set(a.rates))
    for n in a.nodes:     # every trace must fit before any cluster is touched
        try:
            steady.steady_trace(rates[-1] if rates[-1] <= steady.max_rate(n, runtime_for(n)) else
                                steady.max_rate(n, runtime_for(n)), a.seconds, n, a.gpus_per_node, runtime_for(n))
        except ConfigError as e:
            raise SystemExit(f"ERROR {e.message}\nTIP {e.tip}") from None
    if not nk.is_up():
        raise SystemExit("ERROR the native Kubernetes cluster is not up\nTIP poc cluster up --k8s --provider native")
    L = Layout(nk.info().state_dir)
    before = rate_limits.load(L)
    out = a.results or Path("/tmp/replay-throughput") / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    rows: list[dict] = []
    settings = {"nodes": a.nodes, "gpus_per_node": a.gpus_per_node, "rates": rates, "seconds": a.seconds,
                "runtime_s": {str(n): runtime_for(n) for n in a.nodes}, "repeat": a.repeat, "limits": a.limits,
                "stop_below": a.stop_below, "keeps_up": rt.KEEPS_UP, "headroom": steady.HEADROOM,
                "k8s_topology": "preferred", "queue_policy": "site"}
    try:
        for n in a.nodes:
            ok = [r for r in rates if r <= steady.max_rate(n, runtime_for(n))]
            if "k8s" in a.platform:
                kwok.up(L, kwok.Shape(nodes=n, gpus=a.gpus_per_node))
                for limits in a.limits:
                    label = set_limits(L, limits)
                    for rep in range(1, a.repeat + 1):
                        rows += sweep("k8s", n, limits, label, rep, ok, a.seconds, a.gpus_per_node, a.stop_below, out)
                kwok.down(L)
            if "slurm" in a.platform:
                emulated.down()
                emulated.EmulatedSlurm(emulated.EmulatedShape(nodes=n, gpus_per_node=a.gpus_per_node),
                                       emulated.default_conf_dir(), images.ensure_slurm_emulated_image()).up()
                for rep in range(1, a.repeat + 1):
                    rows += sweep("slurm", n, "-", cl.SLURM_LIMITS, rep, ok, a.seconds, a.gpus_per_node,
                                  a.stop_below, out)
                emulated.down()
    finally:
        tuning.apply_rate_limits(L, before)
        nk.up()
        print(f"\nremoved: {json.dumps({'k8s': kwok.down(L), 'slurm': emulated.down()})}; rate limits back to "
              f"{rate_limits.describe(L)}")
        if rows:
            report(rows, settings, out, a.ceilings_out)


def report(rows: list[dict], settings: dict, out: Path, ceilings_out: Path | None) -> None:
    found = cl.ceilings(rows)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "throughput.json", json.dumps(
        {"version": 2, "settings": settings, "rows": rows, "ceilings": [c.as_dict() for c in found]},
        indent=1, sort_keys=True))
    rt.sweep_chart(rows, found, out / "throughput.png")
    text = rt.sweep_markdown(rows, found, settings)
    atomic_write(out / "throughput.md", text)
    print("\n" + text)
    if ceilings_out:
        merge_ceilings(ceilings_out, found, out)
    print(f"\nstored {out} (throughput.md, throughput.json, throughput.png, one directory per replay)")


def merge_ceilings(path: Path, found: list[cl.Ceiling], source: Path) -> None:
    """Keep every ceiling already there except those this sweep measured again (same platform, size, limits)."""
    old = json.loads(path.read_text()) if path.is_file() else {"version": 1, "ceilings": [], "sources": []}
    keys = {(c.platform, c.nodes, c.limits) for c in found}
    kept = [c for c in old.get("ceilings", []) if (c["platform"], c["nodes"], c["limits"]) not in keys]
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps({"version": 1, "ceilings": kept + [c.as_dict() for c in found],
                                   "sources": sorted({*old.get("sources", []), source.name})},
                                  indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
