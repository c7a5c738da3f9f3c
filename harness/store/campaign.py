"""A campaign's directory, written: campaign.json, runs.jsonl (RunRecord lines), runs/<run_id>/ and the
in-flight journal, under the campaign's lock (the layout and the crash rules: harness/store/__init__.py).

Everything stored under the campaign passes through harness/redact.py on its way to disk (Store._clean,
_clean_text): campaign.json, every runs.jsonl line (its error message, tip and traceback included), every
artifact of a run whatever its kind (logs, events.jsonl, rendered files), and the raw evidence. Secrets are
replaced by "<redacted>", this machine's paths and host name by placeholders ($HOME, $STATE_DIR, $RESULTS,
$HOST, ...: harness/redact_machine.py). The raw evidence is cleaned exactly as the pipeline cleaned it before
deriving stamps and audit answers from it (redact.scrub with this machine, no $RESULTS), so what `poc
rederive` reads is what the figures came from. The in-flight journal is not results (mode 0600, read back
to cancel): it is written as it is."""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .. import owner, redact, redact_machine
from ..errors import StoreError
from ..fsutil import append_line, atomic_write, disk_error_tip, fsync_dir, write_synced
from . import bounded
from .reading import RAW_FILE, raw_bytes, read_runs
from .record import SCHEMA_VERSION, RunRecord


def set_aside_bad_lines(path: Path, torn_path: Path) -> list[str]:
    """Move every line of a runs.jsonl that is not a JSON record (a write torn by a crash or a full
    disk, older harness versions glued the next record to it) to torn_path, so that every reader of
    the campaign, the report's included, sees only whole records. The owner's lock is held; the file
    is replaced atomically after the lines are safe in torn_path. Returns a note per line moved."""
    if not path.exists():
        return []
    data = bounded.read_bytes(path)
    keep, bad, notes = [], [], []
    for i, line in enumerate(data.splitlines(keepends=True)):
        try:   # within the reading limits: a line nested past them is no record this harness wrote
            ok = not line.strip() or isinstance(bounded.loads(line), dict)
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
    def __init__(self, results_dir: str | os.PathLike, campaign: str, machine: redact_machine.Machine | None = None):
        """machine: whose paths and host name become placeholders in what is stored (None: this machine)."""
        self.root = Path(results_dir).expanduser() / campaign
        self.campaign = campaign
        self.runs_path = self.root / "runs.jsonl"
        self._lock_fh = None
        self._raw_written: set[str] = set()  # raw evidence this process wrote: kept when the run dir is swapped
        self.notes: list[str] = []  # what was kept aside or skipped (torn lines, corrupt handles), for the CLI to say
        self._noted: set[str] = set()   # each said once, however often the file is read again
        self.meta: dict = {}   # more for campaign.json (the CLI's config overrides), written by open()
        # what this campaign makes on a shared cluster carries its owner id and marks made with its key
        # (harness/owner.py): the key lives in .owner-key (mode 0600) beside campaign.json, so --resume
        # reuses it and no other user, nor anything stored or reported, ever holds it
        self.owner_key: owner.OwnerKey | None = None
        self.owner_id = ""
        # whose paths become placeholders in what is stored: this machine, and (but in the raw evidence, which
        # is cleaned as the pipeline cleaned it) this results directory
        self.raw_machine = redact_machine.here() if machine is None else machine
        self.machine = self.raw_machine.with_results(self.root.parent)

    def _clean(self, value: object) -> object:
        """A structure as it is stored: secrets out, this machine's paths and host name as placeholders."""
        return redact.scrub(value, self.machine).data

    def _clean_text(self, text: str | bytes) -> str | bytes:
        return redact.scrub_text(text, self.machine).data

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
        if meta_path.exists():
            try:
                meta = bounded.load_json(meta_path, bounded.MAX_META_BYTES)
            except StoreError:   # not JSON, past the reading limits, a link
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
        self.owner_key = self._owner_key()
        self.owner_id = self.owner_key.id
        with _writing(meta_path):
            meta = self._clean({"schema": SCHEMA_VERSION, "campaign": self.campaign, "config_hash": config_hash,
                                "owner": self.owner_id, "config": config, **self.meta, "updated": time.time()})
            atomic_write(meta_path, json.dumps(meta, indent=2) + "\n")
        return existing

    def _owner_key(self) -> owner.OwnerKey:
        with _writing(self.root / owner.KEY_FILE):
            try:
                return owner.load_or_create(self.root)
            except owner.KeyFileError as exc:
                raise StoreError(f"{exc}: the campaign's owner key must be yours alone",
                                 tip=f"if the campaign is yours, `chmod 600 {self.root / owner.KEY_FILE}`; if the "
                                     "file is damaged, start a new campaign (--campaign NAME)") from None

    @property
    def token(self) -> str:
        """The campaign's public owner id (the name older callers knew it by)."""
        return self.owner_id

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
        """Write a run's files into a fresh directory and swap it in whole, each one cleaned (_clean_text)."""
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
            write_synced(p, self._clean_text(content))   # durable before the record that points at it is appended
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

        Returns what redaction removed ({"removed": n, "by_rule": {...}}, and "placeholders" when this
        machine's paths or name were replaced), worth keeping in the record. Cleaned as the pipeline
        cleaned it before deriving from it (this machine, no $RESULTS: see the module's doc).
        Either order with write_artifacts works: raw evidence written first survives the swap.
        Deterministic bytes (sorted keys, gzip mtime 0): the same evidence gives the same file."""
        cleaned = redact.scrub(raw or {}, self.raw_machine)
        path = self.run_dir(run_id) / RAW_FILE
        with _writing(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, raw_bytes(cleaned.data))
        self._raw_written.add(run_id)
        return cleaned.summary()

    def append(self, record: RunRecord | dict) -> None:
        """Append the run's line (record.to_line(): the schema version first). A dict, such as a record
        read back from another campaign, is read as a RunRecord first, so a malformed one is refused
        before anything is written."""
        if not isinstance(record, RunRecord):
            record = RunRecord.from_json(record)
        data = record.to_json()
        cleaned = self._clean(data)
        if "raw_evidence" in data:   # the harness's own counts by rule ("secret_key": 2), not a secret
            cleaned["raw_evidence"] = data["raw_evidence"]
        line = RunRecord.from_json(cleaned).to_line()
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
            # mode 0600: a handle names the run's owner mark, which proves the run's directory is ours
            atomic_write(path, json.dumps(handle_json), mode=0o600)
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
                h = bounded.load_json(p, bounded.MAX_META_BYTES)
            except StoreError:   # damaged, past the reading limits, a link: kept aside below
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


