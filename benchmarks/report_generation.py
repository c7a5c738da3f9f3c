#!/usr/bin/env python3
"""How long `poc report` takes for N synthetic run records (default 100,000), and its peak memory.

Prints numbers; asserts nothing. Records are shaped like real ones (tests/fixtures/local/runs.jsonl),
with values drawn around the recorded ones, across three platforms.
"""
from __future__ import annotations

import argparse
import json
import random
import resource
import tempfile
import time
from pathlib import Path

FIX = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "local" / "runs.jsonl"


def synth(n: int, out: Path) -> None:
    base = [json.loads(l) for l in FIX.read_text().splitlines()]
    base = [r for r in base if r["status"] == "ok"]
    rnd = random.Random(0)
    with open(out, "w") as fh:
        for i in range(n):
            r = json.loads(json.dumps(base[i % len(base)]))
            plat = ("local", "slurm", "k8s")[i % 3]
            r["platform"], r["run_id"] = plat, f"{plat}-{i:06d}"
            for m in r["metrics"].values():
                if isinstance(m.get("value"), (int, float)):
                    m["value"] *= rnd.uniform(0.8, 1.25) * (1 + 0.5 * (plat == "k8s"))
            r["metrics"]["step_time_s"]["detail"]["samples"] = r["metrics"]["step_time_s"]["detail"]["samples"][:8]
            fh.write(json.dumps(r) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    args = ap.parse_args()
    from harness.report.document import build

    with tempfile.TemporaryDirectory() as d:
        camp = Path(d) / "bench"
        camp.mkdir()
        t0 = time.perf_counter()
        synth(args.records, camp / "runs.jsonl")
        t1 = time.perf_counter()
        build(str(camp), str(Path(d) / "report"))
        t2 = time.perf_counter()
        size = (camp / "runs.jsonl").stat().st_size
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"records: {args.records}  runs.jsonl: {size / 1e6:.1f} MB")
    print(f"synthesis: {t1 - t0:.2f} s")
    print(f"report generation (read, stats, bootstrap, 5 charts, md/html/csv): {t2 - t1:.2f} s")
    print(f"peak RSS of the process: {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
