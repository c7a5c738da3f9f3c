"""The workload's event lines: parsing and grouping.

workloads/ddp_train.py writes `POC_EVENT {json}` lines; every backend hands the
pipeline the same dicts, whichever way it read them (files, logs, SSH).
"""
from __future__ import annotations

import json
from collections.abc import Iterable

EVENT_PREFIX = "POC_EVENT "
KINDS = (
    "process_start", "torch_imported", "rendezvous_done", "sweep_start", "allreduce", "sweep_done", "comm",
    "checkpoint_loaded", "train_start", "step", "checkpoint_saved", "done", "workload_error",
    "calibration", "calibration_done", "stopped",
    # the step before training (workloads/poc_check.py)
    "check_start", "health_gate", "allocation_allreduce", "check_done",
)


def parse_line(line: str) -> dict | None:
    """One event from a log line or a bare JSON line; None for anything else."""
    idx = line.find(EVENT_PREFIX)
    payload = line[idx + len(EVENT_PREFIX):] if idx >= 0 else line
    payload = payload.strip()
    if not payload.startswith("{"):
        return None
    try:
        ev = json.loads(payload)
    except (ValueError, RecursionError):
        return None  # a line cut short by a kill, unrelated JSON, or JSON nested past the parser's depth
    if not isinstance(ev, dict) or not isinstance(ev.get("kind"), str) or not _is_int(ev.get("ts_ns")):
        return None
    if any(k in ev and ev[k] is not None and not _is_int(ev[k]) for k in _INT_FIELDS):
        return None   # a field the metrics do arithmetic on is not a number: not one of the workload's lines
    if "host" in ev and not isinstance(ev["host"], str):
        return None
    att = ev.get("attempt") or [0, 0, 0]
    if not isinstance(att, list) or not all(_is_int(a) for a in att):
        return None
    ev["attempt"] = list(att)
    return ev


_INT_FIELDS = ("rank", "step", "pid", "world_size", "bytes", "local_rank")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse_lines(lines: Iterable[str]) -> list[dict]:
    """Every event in the lines; a line holding several events (two writers on one pipe glued
    their lines together) gives each of them."""
    out = []
    for line in lines:
        pieces = line.split(EVENT_PREFIX)
        parts = [EVENT_PREFIX + p for p in pieces[1:]] if len(pieces) > 2 else [line]
        out += [ev for ev in map(parse_line, parts) if ev is not None]
    return out


def event_key(ev: dict) -> tuple:
    return (ev.get("host"), ev.get("pid"), ev.get("kind"), ev.get("ts_ns"), ev.get("rank"), ev.get("bytes"))


class Unseen:
    """Remembers which events a backend has handed over already: logs and event files are re-read
    around the last position, so the same line arrives more than once."""

    def __init__(self) -> None:
        self._keys: set[tuple] = set()

    def __call__(self, events: Iterable[dict]) -> list[dict]:
        new = []
        for ev in events:
            k = event_key(ev)
            if k not in self._keys:
                self._keys.add(k)
                new.append(ev)
        return new

    def forget(self) -> None:
        self._keys.clear()


def dedupe(events: Iterable[dict]) -> list[dict]:
    """Merge events read twice (stdout and files), ordered by time."""
    seen, out = set(), []
    for ev in events:
        k = event_key(ev)
        if k not in seen:
            seen.add(k)
            out.append(ev)
    out.sort(key=lambda e: e["ts_ns"])
    return out


def attempt_of(ev: dict) -> tuple[int, ...]:
    return tuple(ev.get("attempt") or (0, 0, 0))


def attempts(events: Iterable[dict]) -> list[tuple[int, ...]]:
    return sorted({attempt_of(e) for e in events})


def of_kind(events: Iterable[dict], kind: str, attempt: tuple[int, ...] | None = None) -> list[dict]:
    return [e for e in events if e["kind"] == kind and (attempt is None or attempt_of(e) == attempt)]


def dumps(events: Iterable[dict]) -> str:
    return "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events)
