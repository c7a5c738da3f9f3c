#!/usr/bin/env python3
"""Observation latency per platform: how long after the workload wrote an event the harness had it.

Reads stored runs (events.jsonl of each run carries `observed_at`, stamped by the pipeline when
observe() returned the event) and prints the distribution per platform. Prints numbers; asserts nothing.
Also prints the harness's own CPU time and peak memory per run (record["harness_usage"]).
"""
from __future__ import annotations

import argparse
import gzip
import json
import statistics
from pathlib import Path

from harness.store import load_results


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results_dir")
    args = ap.parse_args()
    lat: dict[str, list[float]] = {}
    usage: dict[str, list[dict]] = {}
    for r in load_results(args.results_dir):
        d = Path(r["_dir"]) / "runs" / r["run_id"] / "events.jsonl"
        if r.get("harness_usage"):
            usage.setdefault(r["platform"], []).append(r["harness_usage"])
        gz = d.with_name(d.name + ".gz")   # a committed campaign keeps its events gzipped
        if d.exists():
            text = d.read_text()
        elif gz.exists():
            text = gzip.decompress(gz.read_bytes()).decode()
        else:
            continue
        for line in text.splitlines():
            e = json.loads(line)
            if "observed_at" in e:
                lat.setdefault(r["platform"], []).append(e["observed_at"] - e["ts_ns"] / 1e9)
    print("platform  events  latency_s: median  p95  max")
    for plat, xs in sorted(lat.items()):
        print(f"{plat:8s}  {len(xs):6d}  {statistics.median(xs):16.3f}  {pct(xs, 95):.3f}  {max(xs):.3f}")
    print("platform  runs  harness cpu_s per run (median)  peak RSS MB (max)")
    for plat, us in sorted(usage.items()):
        print(f"{plat:8s}  {len(us):4d}  {statistics.median(u['cpu_s'] for u in us):30.2f}  "
              f"{max(u['max_rss_mb'] for u in us):.0f}")


if __name__ == "__main__":
    main()
