#!/usr/bin/env python3
"""Every config of the hostile corpus (tests/support/hostile_configs.py: injection strings in every string
field, huge, negative, NaN and infinite numbers, deep and aliased YAML, wrong types, unknown keys, reserved
labels and annotations, security-relevant choices, binary junk, duplicate keys, giant files) through
`poc validate`, `poc render -p slurm` and `poc render -p k8s`, each in a subprocess of its own, and
each case classified: refused, rendered safely, traceback, unsafe (the module's docstring says how).

Prints the four counts (the goal: 0 traceback, 0 unsafe), the slowest cases, and every case that is a
traceback or unsafe with what was found; asserts nothing. --json FILE keeps every case's result.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support.hostile_configs import Case, corpus, k8s_problems, sbatch_problems, verdict  # noqa: E402

CLASSES = ("refused", "rendered safely", "traceback", "unsafe")


def _poc(argv: list[str], env: dict) -> tuple[int, str]:
    try:
        r = subprocess.run([sys.executable, "-m", "harness.cli", *argv], env=env, capture_output=True, text=True,
                           errors="replace", timeout=300, check=False)
    except subprocess.TimeoutExpired:
        return -9, "Traceback: timed out after 300 s (counted as a traceback: no ERROR within bounds)"
    return r.returncode, r.stderr


def run_case(case: Case, env: dict) -> dict:
    with tempfile.TemporaryDirectory() as d:
        cfg = case.write(Path(d) / "config.yaml")
        t0 = time.perf_counter()
        results = [_poc(["validate", "--config", str(cfg)], env)]
        problems, rendered = [], False
        for plat in ("slurm", "k8s"):
            out = Path(d) / plat
            rc, err = _poc(["render", "-p", plat, "--config", str(cfg), "--out", str(out)], env)
            results.append((rc, err))
            if rc == 0:
                rendered = True
                files = {p.name: p.read_text(errors="replace") for p in sorted(out.iterdir()) if p.is_file()}
                if plat == "slurm":
                    problems += [f"slurm {name}: {x}" for name, text in files.items() if name.endswith(".sbatch")
                                 for x in sbatch_problems(text)]
                else:
                    problems += [f"k8s {x}" for x in k8s_problems(files)]
        took = time.perf_counter() - t0
    cls = verdict(results, problems, rendered)
    said = next((line for _, err in results for line in err.splitlines() if line.startswith("ERROR")), "")
    return {"name": case.name, "kind": case.kind, "class": cls, "seconds": round(took, 2), "problems": problems,
            "exit_codes": [rc for rc, _ in results], "first_error": said[:200],
            "tracebacks": [err[-1500:] for _, err in results if "Traceback" in err]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2, help="cases at once (default 2)")
    ap.add_argument("--kind", action="append", help="only cases of this kind (repeatable)")
    ap.add_argument("--json", help="write every case's result here")
    args = ap.parse_args()
    cases = [c for c in corpus() if not args.kind or c.kind in args.kind]
    env = {k: v for k, v in os.environ.items() if not k.startswith("POC_")}   # no overrides from this shell
    env["PYTHONPATH"] = str(ROOT)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.workers) as pool:
        results = list(pool.map(lambda c: run_case(c, env), cases))
    counts = Counter(r["class"] for r in results)
    by_kind: dict[str, Counter] = {}
    for r in results:
        by_kind.setdefault(r["kind"], Counter())[r["class"]] += 1
    print(f"hostile configs: {len(results)} cases, {len(cases) * 3} poc commands, {time.perf_counter() - t0:.0f} s")
    print("  " + "  ".join(f"{c}: {counts.get(c, 0)}" for c in CLASSES))
    for kind, c in by_kind.items():
        print(f"    {kind:16} " + "  ".join(f"{k}: {c.get(k, 0)}" for k in CLASSES if c.get(k)))
    slow = sorted(results, key=lambda r: -r["seconds"])[:3]
    print("  slowest: " + "; ".join(f"{r['name'][:50]} {r['seconds']:.1f} s (3 commands)" for r in slow))
    for r in results:
        if r["class"] in ("traceback", "unsafe"):
            print(f"  {r['class'].upper()}: {r['name']!r} exit {r['exit_codes']}: {r['problems'] or r['tracebacks']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
