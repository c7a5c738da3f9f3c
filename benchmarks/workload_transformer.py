#!/usr/bin/env python3
"""The workload's transformer on this machine's CPUs: step time and peak RSS for a few sizes.

Each size is one process of harness/data/workloads/ddp_train.py (world size 1, gloo, no sweep),
so its peak RSS (the `done` event's max_rss_bytes: torch itself, weights, gradients, AdamW's
moments, activations) is its own. The step time is the median over the steps after the first
(the first pays for allocations and kernel selection). A size still running when the time budget
(--budget-s, 60 s) is spent is stopped, and later ones skipped, and said so. Prints numbers;
asserts nothing.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.events import of_kind, parse_lines

SCRIPT = Path(__file__).resolve().parents[1] / "harness" / "data" / "workloads" / "ddp_train.py"
# (model_params, precision): sizes a 2-core machine trains in a few seconds a step
# (50M fp32 took ~50 s on 2 busy cores: run it alone with --sizes 50M)
CASES = [("1M", "fp32"), ("5M", "fp32"), ("5M", "bf16"), ("20M", "fp32"), ("20M", "bf16")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one(size: str, precision: str, a: argparse.Namespace, timeout_s: float) -> dict:
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "RANK": "0",
           "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        argv = [sys.executable, str(SCRIPT), "--model", "transformer", "--model-params", size, "--layers",
                str(a.layers), "--seq-len", str(a.seq_len), "--vocab-size", str(a.vocab_size), "--batch",
                str(a.batch), "--steps", str(a.steps), "--precision", precision, "--sweep", "",
                "--events-dir", tmp]
        t0 = time.monotonic()
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return {"size": size, "precision": precision, "error": f"over the budget ({timeout_s:.0f} s): stopped"}
        wall = time.monotonic() - t0
    if proc.returncode != 0:
        return {"size": size, "precision": precision, "error": proc.stderr.strip().splitlines()[-1:]}
    events = parse_lines(proc.stdout.splitlines())
    start, done = of_kind(events, "train_start")[0], of_kind(events, "done")[0]
    durs = [e["dur_s"] for e in of_kind(events, "step")]
    step_s = statistics.median(durs[1:] or durs)
    return {"size": size, "precision": start["precision"], "params": start["params"], "d_model": start["d_model"],
            "heads": start["heads"], "grad_mb": start["grad_bytes"] / 2**20, "first_s": durs[0], "step_s": step_s,
            "tok_s": start["tokens_per_step"] / step_s, "rss_mb": done["max_rss_bytes"] / 2**20, "wall_s": wall,
            "requested": start["params_requested"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--vocab-size", type=int, default=32000)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=60.0, help="stop any size still running after this long")
    ap.add_argument("--sizes", default="", help="comma-separated sizes instead of the default cases, e.g. 50M,125M")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="with --sizes")
    a = ap.parse_args()
    cases = [(x.strip(), a.precision) for x in a.sizes.split(",") if x.strip()] or CASES
    print(f"transformer on CPU ({os.cpu_count()} cores): layers {a.layers}, seq_len {a.seq_len}, "
          f"vocab {a.vocab_size}, batch {a.batch}, {a.steps} steps, 1 process (no all-reduce)")
    print(f"{'requested':>9} {'params':>11} {'err':>6} {'d_model':>7} {'heads':>5} {'prec':>4} {'grad MB':>8} "
          f"{'step 1 s':>8} {'step s':>7} {'tok/s':>7} {'peak RSS MB':>11} {'wall s':>6}")
    t0 = time.monotonic()
    for size, precision in cases:
        left = a.budget_s - (time.monotonic() - t0)
        if left < 5:
            print(f"{size:>9} {precision}: skipped (past the {a.budget_s:.0f} s budget)")
            continue
        r = one(size, precision, a, left)
        if "error" in r:
            print(f"{size:>9} {precision}: failed: {r['error']}")
            continue
        err = r["params"] / r["requested"] - 1
        print(f"{size:>9} {r['params']:>11,} {err:>+6.1%} {r['d_model']:>7} {r['heads']:>5} {r['precision']:>4} "
              f"{r['grad_mb']:>8.1f} {r['first_s']:>8.3f} {r['step_s']:>7.3f} {r['tok_s']:>7.0f} "
              f"{r['rss_mb']:>11.0f} {r['wall_s']:>6.1f}")
    print(f"total {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
