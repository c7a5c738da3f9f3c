"""Reading a results store back: runs.jsonl line by line (a torn line skipped and said), a run's raw
evidence and workload events, and the runs.jsonl files under a results dir. The raw evidence's bytes
are made here too, so that what is written and what is read stay one format. Every file is read
through bounded.py: no link followed, nothing inflated or nested past its limits."""
from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import StoreError
from ..events import parse_lines
from . import bounded
from .record import SCHEMA_VERSION

RAW_FILE = "raw.json.gz"
EVENTS_FILES = ("events.jsonl", "events.jsonl.gz")  # a committed campaign may keep its events compressed


def iter_runs(path: Path, on_skip: Callable[[str], None] | None = None) -> Iterator[dict]:
    """Every complete record of a runs.jsonl, read line by line. A line that is not JSON (a write
    torn by a crash or a full disk) is skipped and described to on_skip; a record of another
    schema is an error (another harness version wrote it, nothing was lost)."""
    if not path.exists():
        return
    skip = bounded.SkipNotes(on_skip, path)
    for i, raw in enumerate(bounded.iter_lines(path, total=None)):
        if isinstance(raw, bounded.LineTooLong):
            skip(f"{path}: line {i + 1} is {raw}: skipped")
            continue
        line = raw.decode("utf-8", errors="replace")
        if not line.strip():
            continue
        try:
            rec = bounded.loads(line)
        except bounded.TooDeep as exc:
            skip(f"{path}: line {i + 1} is JSON {exc}, not a run record: skipped")
            continue
        except ValueError:
            rec = None
        if not isinstance(rec, dict):
            skip(f"{path}: line {i + 1} is not a JSON record ({len(raw)} bytes, a torn write?): skipped")
            continue
        if rec.get("schema") != SCHEMA_VERSION:
            raise StoreError(f"{path}: line {i + 1} has schema {repr(rec.get('schema'))[:40]}; this harness reads "
                             f"{SCHEMA_VERSION}", tip="use the harness version that wrote it, or start a new campaign")
        yield rec
    skip.done()


def read_runs(path: Path, on_skip: Callable[[str], None] | None = None) -> list[dict]:
    return list(iter_runs(path, on_skip))


def raw_bytes(raw: dict) -> bytes:
    """Raw evidence as stored: sorted-key JSON, gzip with no name and mtime 0 (identical input, identical
    bytes, so a re-run or a copy is recognisable by its hash)."""
    text = json.dumps(raw, sort_keys=True, separators=(",", ":"), default=str).encode()
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as gz:
        gz.write(text)
    return buf.getvalue()


def load_raw(run_dir: str | os.PathLike) -> dict:
    """A run's raw evidence ({} when it has none: a run from before raw evidence was kept)."""
    path = Path(run_dir) / RAW_FILE
    if not os.path.lexists(path):
        return {}
    raw = bounded.load_json(path)
    if not isinstance(raw, dict):
        raise StoreError(f"{path}: raw evidence is a JSON {type(raw).__name__}, not an object",
                         tip="the file was edited; re-run the run, or restore it from the campaign's copy")
    return raw


def load_events(run_dir: str | os.PathLike) -> list[dict] | None:
    """A run's stored workload events (events.jsonl, or events.jsonl.gz); None when it has neither."""
    for name in EVENTS_FILES:
        path = Path(run_dir) / name
        if os.path.lexists(path):
            return [ev for ev in parse_lines(_text_lines(path)) if _shallow(ev)]
    return None


def _text_lines(path: Path) -> Iterator[str]:
    """A file's lines as text opened in text mode gives them (a lone CR ends a line too); a line past
    bounded.MAX_LINE_BYTES is left out: no event is that long."""
    for raw in bounded.iter_lines(path):
        if isinstance(raw, bounded.LineTooLong):
            continue
        text = raw.decode("utf-8", errors="replace")
        yield from (io.StringIO(text, newline=None) if "\r" in text else (text,))


def _shallow(event: dict) -> bool:
    """An event within the nesting limit; a deeper line is not one the workload wrote (parse_lines
    drops one nested past the JSON parser's own limit, this one past bounded.MAX_JSON_DEPTH)."""
    try:
        bounded.check_depth(event)
    except bounded.TooDeep:
        return False
    return True


def runs_files(path: str | os.PathLike) -> list[Path]:
    """The runs.jsonl files under a results dir: a campaign dir, or a dir of campaigns."""
    root = Path(path).expanduser()
    if not root.exists():
        raise StoreError(f"results directory {str(path)!r} does not exist",
                         tip="pass the --results dir of `poc run` (or a campaign inside it)")
    files = [root / "runs.jsonl"] if (root / "runs.jsonl").exists() else sorted(root.glob("*/runs.jsonl"))
    if not files:
        raise StoreError(f"no runs.jsonl under {root}", tip="run `poc run --results DIR` first, then `poc report DIR`")
    return files


def latest_records(path: str | os.PathLike, marker: bytes, keep) -> list[tuple[dict, Path]]:
    """(record, its run directory) of every run under a results dir that `keep(record)` selects, a
    retried run's last record only. `marker`: bytes every such line contains, a cheap test before the
    JSON parse (most lines are other runs); a torn last line is skipped (the table's reader reports it)."""
    latest: dict[tuple, tuple[dict, Path]] = {}
    for f in runs_files(path):
        for line in bounded.iter_lines(f, total=None):
            if isinstance(line, bounded.LineTooLong) or marker not in line:
                continue
            try:
                rec = bounded.loads(line)
            except ValueError:   # not JSON, or nested too deep: the table's reader says so
                continue
            if isinstance(rec, dict) and keep(rec):
                latest[(rec.get("campaign"), rec.get("run_id"))] = (rec, f.parent / "runs" / str(rec.get("run_id")))
    return list(latest.values())


def load_results(path: str | os.PathLike, on_skip: Callable[[str], None] | None = None) -> list[dict]:
    """Every run under a results dir (see runs_files), each with its campaign dir as ``_dir``."""
    runs = []
    for f in runs_files(path):
        for r in iter_runs(f, on_skip):
            r.setdefault("_dir", str(f.parent))
            runs.append(r)
    return runs
