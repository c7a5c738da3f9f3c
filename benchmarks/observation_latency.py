#!/usr/bin/env python3
"""Observation latency per platform: how long after the workload wrote an event the harness had it.

Reads stored runs (events.jsonl of each run carries `observed_at`, stamped by the pipeline when
observe() returned the event) and prints the distribution per platform, with the target
(p95 <= 0.5 s) met or not. Where a backend kept what watching a run cost (Slurm:
record["scheduler"]["info"]["polls"]), prints the cost of one poll and the commands it sent.
Also prints the harness's own CPU time and peak memory per run (record["harness_usage"]).
Prints numbers; asserts nothing.
"""
from __future__ import annotations

import argparse
import gzip
import json
import statistics
from pathlib import Path

from harness.store import load_results

TARGET_P95_S = 0.5


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def events_text(run_dir: Path) -> str | None:
    d = run_dir / "events.jsonl"
    gz = d.with_name(d.name + ".gz")   # a committed campaign keeps its events gzipped
    if d.exists():
        return d.read_text()
    if gz.exists():
        return gzip.decompress(gz.read_bytes()).decode()
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results_dir")
    args = ap.parse_args()
    lat: dict[str, list[float]] = {}
    usage: dict[str, list[dict]] = {}
    polls: dict[str, list[dict]] = {}
    for r in load_results(args.results_dir):
        plat = r["platform"]
        if r.get("harness_usage"):
            usage.setdefault(plat, []).append(r["harness_usage"])
        p = ((r.get("scheduler") or {}).get("info") or {}).get("polls")
        if p and p.get("count"):
            polls.setdefault(plat, []).append(p)
        text = events_text(Path(r["_dir"]) / "runs" / r["run_id"])
        for line in (text or "").splitlines():
            e = json.loads(line)
            if "observed_at" in e:
                lat.setdefault(plat, []).append(e["observed_at"] - e["ts_ns"] / 1e9)
    print(f"platform  events  latency_s: p50    p95    max   target p95 <= {TARGET_P95_S:g} s")
    for plat, xs in sorted(lat.items()):
        p95 = pct(xs, 95)
        print(f"{plat:8s}  {len(xs):6d}  {statistics.median(xs):14.3f}  {p95:5.3f}  {max(xs):5.3f}   "
              f"{'met' if p95 <= TARGET_P95_S else 'NOT met'} ({p95 / TARGET_P95_S:.2f} of the target)")
    if polls:
        print("platform  runs  polls  poll cost ms (mean per run: median, max)  commands/poll  interval_s (median)")
        for plat, ps in sorted(polls.items()):
            cost = [1000 * p["seconds"] / p["count"] for p in ps]
            cmds = sum(p["commands"] for p in ps) / sum(p["count"] for p in ps)
            print(f"{plat:8s}  {len(ps):4d}  {sum(p['count'] for p in ps):5d}  {statistics.median(cost):26.1f}  "
                  f"{max(cost):6.1f}  {cmds:13.2f}  {statistics.median(p['interval_s'] for p in ps):19.3f}")
    print("platform  runs  harness cpu_s per run (median)  peak RSS MB (max)")
    for plat, us in sorted(usage.items()):
        print(f"{plat:8s}  {len(us):4d}  {statistics.median(u['cpu_s'] for u in us):30.2f}  "
              f"{max(u['max_rss_mb'] for u in us):.0f}")


if __name__ == "__main__":
    main()
