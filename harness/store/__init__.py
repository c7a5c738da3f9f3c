"""The results store: RESULTS_DIR/<campaign>/. campaign.py writes it (Store), reading.py reads it,
record.py is the typed line of runs.jsonl (RunRecord).

Layout (every file written through harness/redact.py: secrets out, this machine's paths and host name as
placeholders; see campaign.py):
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

from ..fsutil import atomic_write  # re-exported for report/document.py
from .campaign import Store, set_aside_bad_lines
from .reading import (
    EVENTS_FILES,
    RAW_FILE,
    iter_runs,
    latest_records,
    load_events,
    load_raw,
    load_results,
    raw_bytes,
    read_runs,
    runs_files,
)
from .record import SCHEMA_VERSION, RunRecord

__all__ = ["EVENTS_FILES", "RAW_FILE", "SCHEMA_VERSION", "RunRecord", "Store", "atomic_write", "iter_runs",
           "latest_records", "load_events", "load_raw", "load_results", "raw_bytes", "read_runs", "runs_files",
           "set_aside_bad_lines"]
