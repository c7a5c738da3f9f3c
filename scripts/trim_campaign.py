"""Copy a campaign directory into results/ small enough to commit.

    python scripts/trim_campaign.py SRC_CAMPAIGN_DIR DST_DIR

Keeps runs.jsonl and campaign.json as they are, the rendered jobs as text, and gzips the
workload events and the logs, each log cut to its last 400 lines. `poc report` reads the
result like the original (events.jsonl.gz is read transparently).
"""
from __future__ import annotations

import gzip
import shutil
import sys
from pathlib import Path

LOG_LINES = 400


def trim(src: Path, dst: Path) -> None:
    if not (src / "runs.jsonl").is_file():
        sys.exit(f"ERROR {src} has no runs.jsonl\nTIP pass a campaign directory: RESULTS_DIR/<campaign>")
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("runs.jsonl", "campaign.json"):
        if (src / name).is_file():
            shutil.copy2(src / name, dst / name)
    for f in sorted((src / "runs").rglob("*")):
        if not f.is_file():
            continue
        rel = f.relative_to(src)
        out = dst / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if rel.parts[2] == "rendered" or f.suffix == ".gz":
            shutil.copy2(f, out)
        else:
            text = f.read_text(errors="replace")
            if rel.parts[2] == "logs":
                text = "\n".join(text.splitlines()[-LOG_LINES:]) + "\n"
            with gzip.open(out.with_name(out.name + ".gz"), "wt") as fh:
                fh.write(text)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    trim(Path(sys.argv[1]), Path(sys.argv[2]))
