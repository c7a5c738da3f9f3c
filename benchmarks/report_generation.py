#!/usr/bin/env python3
"""How long `poc report` takes for N synthetic run records (default 100,000), against parsing the
same runs.jsonl with the standard `json` module, and the report's peak memory.

Prints numbers; asserts nothing. Records are shaped like real ones (tests/fixtures/local/runs.jsonl),
with values drawn around the recorded ones, across three platforms. Each phase (synthesis, the
plain parse, the report) runs in a child process of its own, so each peak RSS is that phase's alone;
the parse and the report alternate, --repeat times each, and the best time of each is compared.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIX = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "local" / "runs.jsonl"


def synth(n: int, out: Path) -> None:
    base = [json.loads(line) for line in FIX.read_text().splitlines()]
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


def plain_parse(path: Path) -> None:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            json.loads(line)


def report(camp: Path) -> None:
    from harness.report.document import build  # timed too: `poc report` pays for these imports


    build(str(camp), str(camp.parent / "report"))


def _phase(args: argparse.Namespace) -> None:
    """In the child: run one phase, print its seconds as JSON."""
    camp = Path(args.dir) / "bench"
    t0 = time.perf_counter()
    if args.phase == "synth":
        camp.mkdir(parents=True, exist_ok=True)
        synth(args.records, camp / "runs.jsonl")
    elif args.phase == "parse":
        plain_parse(camp / "runs.jsonl")
    else:
        report(camp)
    print(json.dumps({"seconds": time.perf_counter() - t0}))


def _run(phase: str, args: argparse.Namespace) -> tuple[float, float, float]:
    """(seconds inside the child, CPU seconds of the child, its peak RSS in MB) for one phase."""
    cmd = [sys.executable, __file__, "--phase", phase, "--dir", args.dir, "--records", str(args.records)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)   # this child's own rusage, not the max over all children
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"phase {phase} failed with exit code {proc.returncode}")
    return json.loads(out)["seconds"], usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of the parse and of the report, alternating; the best of each counts "
                         "(the CPUs are shared)")
    ap.add_argument("--phase", choices=["synth", "parse", "report"], help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase:
        _phase(args)
        return
    with tempfile.TemporaryDirectory() as d:
        args.dir = d
        load0 = os.getloadavg()
        synth_s, _, _ = _run("synth", args)
        size = (Path(d) / "bench" / "runs.jsonl").stat().st_size
        parse, rep = [], []
        for _ in range(args.repeat):
            parse.append(_run("parse", args))
            rep.append(_run("report", args))
        load1 = os.getloadavg()
    parse_s, parse_cpu = min(r[0] for r in parse), min(r[1] for r in parse)
    rep_s, rep_cpu = min(r[0] for r in rep), min(r[1] for r in rep)
    print(f"records: {args.records}  runs.jsonl: {size / 1e6:.1f} MB  CPUs: {os.cpu_count()}  "
          f"load average (1 min) before/after: {load0[0]:.2f}/{load1[0]:.2f}")
    print(f"synthesis: {synth_s:.2f} s")
    print(f"plain json parse of runs.jsonl (json.loads per line): {parse_s:.2f} s, CPU {parse_cpu:.2f} s  "
          f"(best of {args.repeat}: {', '.join(f'{r[0]:.2f}' for r in parse)} s)")
    print(f"report generation (imports, read, stats, bootstrap, charts, md/html/csv): {rep_s:.2f} s, "
          f"CPU {rep_cpu:.2f} s  (best of {args.repeat}: {', '.join(f'{r[0]:.2f}' for r in rep)} s)")
    print(f"report / plain parse: {rep_s / parse_s:.2f} (CPU: {rep_cpu / parse_cpu:.2f})")
    print(f"peak RSS of the report process: {max(r[2] for r in rep):.0f} MB "
          f"(of the plain parse: {max(r[2] for r in parse):.0f} MB)")


if __name__ == "__main__":
    main()
