"""How many credential shapes survive, per path by which the harness stores or prints something.

    python scripts/secret_survivors.py [-v]

Pushes every (shape, context) pair of tests/support/secret_shapes.py (about 100 shapes of cloud, CI,
registry, chat, SaaS and database credentials, keys and tokens, each in up to seven contexts) through a real
Store, a replay's store and the real `poc` CLI (tests/support/secret_paths.py), in a temporary directory, and
prints per path how many pairs and how many shapes left their secret in what was written. -v lists them.
The goal is 0 everywhere. It runs against whatever `harness` is importable (PYTHONPATH=<a checkout> counts
that checkout's survivors), so a change can be measured before and after. Prints numbers, asserts nothing.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))   # the corpus and the driver are the test's own
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))            # the checkout's harness unless PYTHONPATH names another

from support.secret_paths import push_everywhere  # noqa: E402
from support.secret_shapes import SHAPES, cases  # noqa: E402

TRACE = ROOT / "results" / "smoke-2026-12-05" / "smoke-poc" / "scale" / "verdict-64n" / "trace.jsonl"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-v", "--verbose", action="store_true", help="list each surviving shape and context")
    args = ap.parse_args()
    import harness
    all_cases = cases()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        found = push_everywhere(Path(tmp), TRACE, all_cases)
    print(f"harness from {Path(harness.__file__).parent}: {len(SHAPES)} shapes, {len(all_cases)} (shape, context) "
          f"pairs, {time.monotonic() - t0:.1f} s")
    print(f"{'path':40s} {'pairs surviving':>16s} {'shapes surviving':>17s}")
    for path, survivors in found.items():
        print(f"{path:40s} {len(survivors):16d} {len({c.shape for c in survivors}):17d}")
        if args.verbose:
            for c in survivors:
                print(f"    {c.shape} [{c.context}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
