"""The results store: RESULTS_DIR/<campaign>/.

Layout:
  campaign.json          schema version, config hash, the (redacted) config
  runs.jsonl             one line per finished run (ok or failed); append-only
  runs/<run_id>/         events.jsonl, rendered files, logs, scheduler facts, and raw.json.gz: the
                         scheduler's own records every time-stamp was derived from, secrets removed
                         (harness/redact.py), for `poc rederive`
  inflight/<run_id>.json the handle of a submitted, unfinished run (for cancel on resume)

A run's directory is complete before its line is appended, and the line is
appended whole or not at all (fsutil.append_line: a short write is continued or
taken back, then fsync). What a crash or a full disk still leaves is kept aside,
never deleted, and reported in Store.notes: a torn tail of runs.jsonl goes to
runs.jsonl.torn before the next append, and so does (when the campaign is opened)
any line that is not a JSON record; a reader skips such a line and says so; an
unreadable in-flight handle is renamed inflight/<run_id>.json.corrupt.
A filesystem that refuses a write (full, read-only) is a StoreError, not a traceback.
"""
from __future__ import annotations

import fcntl
import gzip
import io
import json
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from . import redact
from .errors import StoreError
from .events import parse_lines
from .fsutil import (  # atomic_write: re-exported for report/document.py
    append_line,
    atomic_write,
    disk_error_tip,
    fsync_dir,
    write_synced,
)

SCHEMA_VERSION = 1
RAW_FILE = "raw.json.gz"
EVENTS_FILES = ("events.jsonl", "events.jsonl.gz")  # a committed campaign may keep its events compressed


def iter_runs(path: Path, on_skip: Callable[[str], None] | None = None) -> Iterator[dict]:
    """Every complete record of a runs.jsonl, read line by line. A line that is not JSON (a write
    torn by a crash or a full disk) is skipped and described to on_skip; a record of another
    schema is an error (another harness version wrote it, nothing was lost)."""
    if not path.exists():
        return
    with open(path, encoding="utf-8", errors="replace") as fh:
        for i, line in enumerate(fh):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                rec = None
            if not isinstance(rec, dict):
                if on_skip is not None:
                    on_skip(f"{path}: line {i + 1} is not a JSON record ({len(line)} bytes, a torn write?): skipped")
                continue
            if rec.get("schema") != SCHEMA_VERSION:
                raise StoreError(f"{path}: line {i + 1} has schema {rec.get('schema')!r}; this harness reads "
                                 f"{SCHEMA_VERSION}",
                                 tip="use the harness version that wrote it, or start a new campaign")
            yield rec


def read_runs(path: Path, on_skip: Callable[[str], None] | None = None) -> list[dict]:
    return list(iter_runs(path, on_skip))


def set_aside_bad_lines(path: Path, torn_path: Path) -> list[str]:
    """Move every line of a runs.jsonl that is not a JSON record (a write torn by a crash or a full
    disk, older harness versions glued the next record to it) to torn_path, so that every reader of
    the campaign, the report's included, sees only whole records. The owner's lock is held; the file
    is replaced atomically after the lines are safe in torn_path. Returns a note per line moved."""
    if not path.exists():
        return []
    data = path.read_bytes()
    keep, bad, notes = [], [], []
    for i, line in enumerate(data.splitlines(keepends=True)):
        try:
            ok = not line.strip() or isinstance(json.loads(line), dict)
        except ValueError:
            ok = False
        if ok:
            keep.append(line)
        else:
            bad.append(line.rstrip(b"\n") + b"\n")
            notes.append(f"{path}: line {i + 1} is not a JSON record ({len(line)} bytes, a torn write?): "
                         f"moved to {torn_path}")
    for line in bad:
        append_line(torn_path, line, torn_path.with_name(torn_path.name + ".torn"))
    if bad:
        atomic_write(path, b"".join(keep))
    return notes


@contextmanager
def _writing(path: Path) -> Iterator[None]:
    """A filesystem that refuses a write (full, over quota, read-only) as a StoreError with a tip."""
    try:
        yield
    except OSError as exc:
        tip = disk_error_tip(exc)
        if tip is None:
            raise
        raise StoreError(f"cannot write {exc.filename or path}: {exc.strerror}", tip=tip) from None


class Store:
    def __init__(self, results_dir: str | os.PathLike, campaign: str):
        self.root = Path(results_dir).expanduser() / campaign
        self.campaign = campaign
        self.runs_path = self.root / "runs.jsonl"
        self._lock_fh = None
        self._raw_written: set[str] = set()  # raw evidence this process wrote: kept when the run dir is swapped
        self.notes: list[str] = []  # what was kept aside or skipped (torn lines, corrupt handles), for the CLI to say
        self._noted: set[str] = set()   # each said once, however often the file is read again
        self.meta: dict = {}   # more for campaign.json (the CLI's config overrides), written by open()
        # marks what this campaign makes on a shared cluster (its Slurm run directories): random, so two
        # users' campaigns of one name never take each other's; kept in campaign.json, so --resume reuses it
        self.token = ""

    # -- campaign -------------------------------------------------------------------------------------------------
    def open(self, config_hash: str, config: dict, resume: bool) -> list[dict]:
        """Create or reopen the campaign; return the runs already recorded."""
        with _writing(self.root):
            self.root.mkdir(parents=True, exist_ok=True)
            self._lock_fh = open(self.root / ".lock", "w")  # noqa: SIM115 - held open: the flock lives as long as it
        try:
            fcntl.flock(self._lock_fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.close()
            raise StoreError(f"campaign {self.root} is in use by another poc process",
                             tip="wait for it to finish, or use another --campaign") from None
        try:
            return self._open_locked(config_hash, config, resume)
        except BaseException:
            self.close()
            raise

    def _open_locked(self, config_hash: str, config: dict, resume: bool) -> list[dict]:
        meta_path = self.root / "campaign.json"
        with _writing(self.runs_path):
            for note in set_aside_bad_lines(self.runs_path, self.runs_path.with_name(self.runs_path.name + ".torn")):
                self.note(note)
        existing = read_runs(self.runs_path, self.note)
        token = ""
        if meta_path.exists():
            try:
                meta = json.loads(meta_path.read_bytes())
            except ValueError:
                meta = None
            if not isinstance(meta, dict):
                raise StoreError(f"{meta_path} is not readable JSON (a damaged file?)",
                                 tip="restore it from a copy, or start a new campaign (--campaign NAME); its "
                                     "runs.jsonl and runs/ are untouched")
            if meta.get("schema") != SCHEMA_VERSION:
                raise StoreError(f"{meta_path} has schema {meta.get('schema')}; this harness writes {SCHEMA_VERSION}",
                                 tip="start a new campaign (--campaign NAME)")
            if existing and not resume:
                raise StoreError(f"campaign {self.root} already holds {len(existing)} runs",
                                 tip="add --resume to continue it, or choose another --campaign or --results")
            if resume and meta.get("config_hash") != config_hash:
                raise StoreError(f"campaign {self.root} was started with another config "
                                 f"(hash {meta.get('config_hash')}, now {config_hash})",
                                 tip="resume with the same config, or start a new campaign")
            if resume and isinstance(meta.get("token"), str) and meta["token"].isalnum():
                token = meta["token"]
        self.token = token or secrets.token_hex(4)
        with _writing(meta_path):
            atomic_write(meta_path, json.dumps({"schema": SCHEMA_VERSION, "campaign": self.campaign,
                                                "config_hash": config_hash, "token": self.token, "config": config,
                                                **self.meta, "updated": time.time()}, indent=2) + "\n")
        return existing

    def note(self, text: str) -> None:
        if text not in self._noted:
            self._noted.add(text)
            self.notes.append(text)

    def close(self) -> None:
        if self._lock_fh is not None:
            self._lock_fh.close()
            self._lock_fh = None

    # -- runs -----------------------------------------------------------------------------------------------------
    def run_dir(self, run_id: str) -> Path:
        return self.root / "runs" / run_id

    def write_artifacts(self, run_id: str, files: dict[str, str | bytes]) -> Path:
        """Write a run's files into a fresh directory and swap it in whole."""
        with _writing(self.root):
            return self._write_artifacts(run_id, files)

    def _write_artifacts(self, run_id: str, files: dict[str, str | bytes]) -> Path:
        final = self.run_dir(run_id)
        tmp = final.with_name(f".{run_id}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        dirs = {tmp}
        for name, content in files.items():
            p = tmp / name
            p.parent.mkdir(parents=True, exist_ok=True)
            dirs.add(p.parent)
            write_synced(p, content)   # durable before the record that points at it is appended
        tmp.mkdir(parents=True, exist_ok=True)
        old_raw = final / RAW_FILE
        if run_id in self._raw_written and RAW_FILE not in files and old_raw.exists():
            os.replace(old_raw, tmp / RAW_FILE)  # written by write_raw before the swap: same run, keep it
        for d in sorted(dirs, key=lambda d: len(d.parts), reverse=True):
            fsync_dir(d)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        fsync_dir(final.parent)
        return final

    def write_raw(self, run_id: str, raw: dict) -> dict:
        """Store a run's raw scheduler evidence as runs/<run_id>/raw.json.gz, secrets removed first.

        Returns what redaction removed ({"removed": n, "by_rule": {...}}), worth keeping in the record.
        Either order with write_artifacts works: raw evidence written first survives the swap.
        Deterministic bytes (sorted keys, gzip mtime 0): the same evidence gives the same file."""
        cleaned = redact.scrub(raw or {})
        path = self.run_dir(run_id) / RAW_FILE
        with _writing(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, raw_bytes(cleaned.data))
        self._raw_written.add(run_id)
        return cleaned.summary()

    def append(self, record: dict) -> None:
        record = {"schema": SCHEMA_VERSION, **record}
        line = (json.dumps(record, separators=(",", ":"), default=str) + "\n").encode()
        with _writing(self.runs_path):
            self.root.mkdir(parents=True, exist_ok=True)
            note = append_line(self.runs_path, line, self.runs_path.with_name(self.runs_path.name + ".torn"))
        if note:
            self.note(note)
        # the in-flight handle is not cleared here: only a successful cancel clears it, so a run
        # whose cancel failed is cancelled again by --resume

    def runs(self) -> list[dict]:
        return read_runs(self.runs_path, self.note)

    # -- in-flight handles ----------------------------------------------------------------------------------------
    def mark_inflight(self, handle_json: dict) -> None:
        path = self.root / "inflight" / f"{handle_json['run_id']}.json"
        with _writing(path):
            atomic_write(path, json.dumps(handle_json))
            fsync_dir(path.parent)   # the journal entry must outlive a power cut, not only its bytes

    def clear_inflight(self, run_id: str) -> None:
        with _writing(self.root / "inflight"):
            try:
                (self.root / "inflight" / f"{run_id}.json").unlink()
            except FileNotFoundError:
                return
            fsync_dir(self.root / "inflight")

    def inflight(self) -> list[dict]:
        """Every readable in-flight handle. One that is not (a damaged file) may still name a job or
        a node a fault took, so it is renamed <name>.corrupt, kept for a person to read, and noted."""
        d = self.root / "inflight"
        out = []
        for p in sorted(d.glob("*.json")) if d.is_dir() else []:
            try:
                h = json.loads(p.read_bytes())
            except (ValueError, UnicodeDecodeError):
                h = None
            if isinstance(h, dict) and isinstance(h.get("run_id"), str) and isinstance(h.get("platform"), str):
                out.append(h)
                continue
            aside = p.with_name(p.name + ".corrupt")
            n = 1
            while aside.exists():   # an earlier damaged copy is evidence too: never overwritten
                aside, n = p.with_name(f"{p.name}.corrupt.{n}"), n + 1
            with _writing(aside):
                os.replace(p, aside)
            self.note(f"{p}: in-flight record is not readable; kept as {aside}: it may name a job or "
                              "a node this campaign changed, so check those by hand")
        return out


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
    if not path.exists():
        return {}
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, EOFError, ValueError) as exc:
        raise StoreError(f"{path}: not readable as gzip JSON ({exc})",
                         tip="the file is damaged; re-run the run, or restore it from the campaign's copy") from None


def load_events(run_dir: str | os.PathLike) -> list[dict] | None:
    """A run's stored workload events (events.jsonl, or events.jsonl.gz); None when it has neither."""
    for name in EVENTS_FILES:
        path = Path(run_dir) / name
        if path.exists():
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
                return parse_lines(fh)
    return None


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
        with open(f, "rb") as fh:
            for line in fh:
                if marker not in line:
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
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
