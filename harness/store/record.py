"""One line of runs.jsonl, typed: every field a run record holds, which ones every record has, and the
schema version the store writes first on the line.

Every writer (the pipeline, its preflight failures, the user-experience probe, through run_record.py)
fills a RunRecord; the store writes ``to_json()``. Readers may keep reading the dicts: ``to_json()``
is exactly the dict the writers built before the record was typed, keys in the order the run filled
them (a record read back with ``from_json()`` is written back byte for byte).

An optional field is None while the run has not filled it, and then absent from the line. A field a
later harness adds is kept in ``extra`` by ``from_json()``, in its place, so nothing read is lost.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, get_args, get_origin, get_type_hints

from ..errors import StoreError

SCHEMA_VERSION = 1
UNVERSIONED = 1   # what a record written before the schema version was stored is
STATUSES = ("ok", "failed", "interrupted", "harness_error")
_NOT_OURS = "the record was not written by this harness version; use the one that wrote it, or start a new campaign"


@dataclass
class RunRecord:
    # -- every record: run_record.start fills these ---------------------------------------------------------------
    run_id: str
    campaign: str
    platform: str
    scenario: str          # as planned: "clean", a fault kind, "contention", "serve", "drill:<kind>", "mistake:<kind>"
    config_hash: str
    started_at: float
    status: str            # one of STATUSES; "failed" until the run says otherwise
    stages: list           # {name, start, end, ok[, error][, calls]}: the same list the run's Stages appends to
    # -- filled as the run goes (None: not reached) -------------------------------------------------------------
    error: dict | None = None          # stage, type, origin (platform | user | harness), message, tip[, traceback]
    order: dict | None = None          # the run's place in its campaign (harness/order.py)
    ux: dict | None = None             # what the user wrote (written) and the calls per user action (calls)
    job_ids: list | None = None
    derive_inputs: dict | None = None  # what metrics.derive took beyond the evidence, for `poc rederive`
    metrics: dict | None = None
    timeline: dict | None = None
    cancel_error: str | None = None    # the cancel failed: the run stays in the in-flight journal
    collect_error: str | None = None
    cleanup: dict | None = None        # the run's files on the cluster: removed, kept (per other job: by name)
    audit: dict | None = None          # the platform's own records' answers (harness/audit)
    audit_error: str | None = None
    finished_at: float | None = None
    harness_usage: dict | None = None  # the harness's own CPU and memory while it watched the run
    host_load: dict | None = None      # the host's load before, during and after the run (harness/hostload.py);
                                       # records written before it have none and read as they were
    stamps_error: str | None = None    # a failed run's evidence could not be read
    scheduler: dict | None = None      # times, attempts, info and the stamps derived from the raw evidence
    environment: dict | None = None
    raw_evidence: dict | None = None   # what redaction removed from raw.json.gz
    # -- the blocks a scenario owns -------------------------------------------------------------------------------
    faults: list | None = None         # the faults injected (injection.py); [] for a run with none
    contention: dict | None = None     # the blocking job (contention.py)
    drill: dict | None = None          # an upgrade or restart drill's summary (drills/)
    serve: dict | None = None          # a serving run's summary (serve/)
    mistake: dict | None = None        # a user-mistake probe's outcome (ux/probe.py)
    # -- what this harness does not name: kept as read; a new scenario's block until it is named above ---------------
    extra: dict[str, Any] = field(default_factory=dict)
    schema: int = SCHEMA_VERSION

    def __setattr__(self, name: str, value: Any) -> None:
        # Checked at every assignment, so a writer's mistake fails where it is made, not in a reader
        # months later. The order of first assignment is the order of the line's keys: the dict this
        # record replaces kept insertion order, and committed lines must read back byte for byte.
        if name in _TYPES:
            _check(name, value)
            keys = self.__dict__.setdefault("_keys", [])
            if value is None:
                if name in keys:
                    keys.remove(name)
            elif name not in keys:
                keys.append(name)
        elif name in ("extra", "schema"):
            _check(name, value)
        object.__setattr__(self, name, value)

    def to_json(self) -> dict:
        """The line's dict: schema first (as the store has always written it), then the fields in the
        order they were filled; an unfilled optional field is left out."""
        out: dict[str, Any] = {"schema": self.schema}
        for key in self.__dict__.get("_keys", []):
            if key in _TYPES:
                out[key] = getattr(self, key)
            elif key in self.extra:
                out[key] = self.extra[key]
        for key, value in self.extra.items():
            if key in _ALL:   # it would be lost behind the field of the same name
                raise TypeError(f"extra key {key!r} is a field of the record: set record.{key}")
            out.setdefault(key, value)
        return out

    def to_line(self) -> bytes:
        """The bytes the store appends to runs.jsonl."""
        return (json.dumps(self.to_json(), separators=(",", ":"), default=str) + "\n").encode()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        """A stored line's dict as a record; StoreError naming the field when one is missing or of the
        wrong type. A line without "schema" was written before the version was stored: version 1."""
        if not isinstance(data, Mapping):
            raise StoreError(f"a run record is a JSON object, not {type(data).__name__}", tip=_NOT_OURS)
        who = f"run record {data.get('run_id')!r}" if isinstance(data.get("run_id"), str) else "run record"
        schema = data.get("schema", UNVERSIONED)
        if schema != SCHEMA_VERSION:
            raise StoreError(f"{who} has schema {schema!r}; this harness reads {SCHEMA_VERSION}", tip=_NOT_OURS)
        missing = [k for k in REQUIRED if k not in data]
        if missing:
            raise StoreError(f"{who} lacks {', '.join(missing)}: every run record has {', '.join(REQUIRED)}",
                             tip=_NOT_OURS)
        known = {k: v for k, v in data.items() if k in _TYPES}
        extra = {k: v for k, v in data.items() if k not in _TYPES and k != "schema"}
        try:
            rec = cls(**known, extra=extra)
        except TypeError as exc:
            raise StoreError(f"{who}: {exc}", tip=_NOT_OURS) from None
        # the line's own order, an explicit null included: written back as it was read
        rec.__dict__["_keys"] = [k for k in data if k != "schema"]
        return rec


# the JSON type each field holds, read from the annotations above (one list of fields, not two);
# a float field takes an int too (a clock in a test gives 5; it is written back as 5, not 5.0), never a bool
_KINDS = {str: "a string", float: "a number", int: "an integer", list: "a list", dict: "an object"}


def _field_types() -> tuple[dict[str, type], tuple[str, ...]]:
    hints = get_type_hints(RunRecord)
    types, required = {}, []
    for f in fields(RunRecord):
        args = get_args(hints[f.name])
        optional = type(None) in args
        base = next(a for a in args if a is not type(None)) if optional else hints[f.name]
        types[f.name] = get_origin(base) or base
        if not optional and f.name not in ("extra", "schema"):
            required.append(f.name)
    return types, tuple(required)


def _check(name: str, value: Any) -> None:
    if value is None and name not in REQUIRED and name not in ("extra", "schema"):
        return
    want = _ALL[name]
    ok = isinstance(value, (int, float) if want is float else want) and not isinstance(value, bool)
    if not ok:
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise TypeError(f"field {name!r} must be {_KINDS[want]}, not {type(value).__name__} ({shown})")
    if name == "status" and value not in STATUSES:
        raise TypeError(f"field 'status' must be one of {', '.join(STATUSES)}, not {value!r}")


_ALL, REQUIRED = _field_types()
_TYPES = {k: v for k, v in _ALL.items() if k not in ("extra", "schema")}   # the fields a line holds by name
