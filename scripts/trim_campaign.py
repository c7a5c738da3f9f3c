"""Copy a campaign directory into results/ small enough to commit.

    python scripts/trim_campaign.py SRC_CAMPAIGN_DIR DST_DIR
    python scripts/trim_campaign.py --paths-only DIR     # a committed results dir, in place

Keeps runs.jsonl and campaign.json, the rendered jobs as text, and gzips the workload events
and the logs, each log cut to its last 400 lines. `poc report` reads the result like the
original (events.jsonl.gz is read transparently). In every file but the raw scheduler evidence,
this machine's absolute paths become named placeholders: the harness's state and cache directories
($STATE_DIR, $CACHE_DIR), then the home directory ($HOME). raw.json.gz stays as the platforms
answered (already redacted of secrets when it was written): its audit records hash the request
bodies the API server received, which hold such paths, and `poc rederive` checks those hashes.
Regenerate the report after.
"""
from __future__ import annotations

import gzip
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import paths  # the script runs from a checkout, not an install

LOG_LINES = 400
RAW = "raw.json.gz"   # the evidence `poc rederive` re-derives from, hashes included: copied as it is


def placeholders() -> list[tuple[str, str]]:
    """(this machine's path, its name), the longest first so a state path is not named $HOME/..."""
    pairs = [(str(paths.state_dir()), "$STATE_DIR"), (str(paths.cache_dir()), "$CACHE_DIR"),
             (str(Path.home()), "$HOME")]
    return sorted({(p.rstrip("/"), n) for p, n in pairs if p.rstrip("/")}, key=lambda pn: -len(pn[0]))


def unmachine(text: str) -> str:
    for path, name in placeholders():
        text = text.replace(path + "/", name + "/").replace(f'"{path}"', f'"{name}"')
    return text


def scrub_in_place(root: Path) -> int:
    """Every file under root, gzipped or not, with the placeholders; returns how many changed."""
    changed = 0
    for f in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix != ".png" and p.name != RAW):
        if f.suffix == ".gz":
            with gzip.open(f, "rt", errors="surrogateescape") as fh:
                text = fh.read()
            new = unmachine(text)
            if new != text:
                with gzip.open(f, "wt", errors="surrogateescape") as fh:
                    fh.write(new)
                changed += 1
            continue
        try:
            text = f.read_text()
        except UnicodeDecodeError:
            continue
        new = unmachine(text)
        if new != text:
            f.write_text(new)
            changed += 1
    return changed


def trim(src: Path, dst: Path) -> None:
    if not (src / "runs.jsonl").is_file():
        sys.exit(f"ERROR {src} has no runs.jsonl\nTIP pass a campaign directory: RESULTS_DIR/<campaign>")
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("runs.jsonl", "campaign.json"):
        if (src / name).is_file():
            (dst / name).write_text(unmachine((src / name).read_text()))
    for f in sorted((src / "runs").rglob("*")):
        if not f.is_file():
            continue
        rel = f.relative_to(src)
        out = dst / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if f.name == RAW:
            out.write_bytes(f.read_bytes())
        elif f.suffix == ".gz":
            with gzip.open(f, "rt", errors="surrogateescape") as fh, \
                    gzip.open(out, "wt", errors="surrogateescape") as fw:
                fw.write(unmachine(fh.read()))
        elif rel.parts[2] == "rendered":
            out.write_text(unmachine(f.read_text(errors="replace")))
        else:
            text = unmachine(f.read_text(errors="replace"))
            if rel.parts[2] == "logs":
                text = "\n".join(text.splitlines()[-LOG_LINES:]) + "\n"
            with gzip.open(out.with_name(out.name + ".gz"), "wt") as fh:
                fh.write(text)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--paths-only":
        print(f"{scrub_in_place(Path(sys.argv[2]))} file(s) changed under {sys.argv[2]}")
    elif len(sys.argv) == 3:
        trim(Path(sys.argv[1]), Path(sys.argv[2]))
    else:
        sys.exit(__doc__)
