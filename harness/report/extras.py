"""What a run record says about auditing, user experience and user-mistake probes, kept per run.

A campaign's runs mostly share a few audit and UX outcomes, so each run keeps a reference to one
shared tuple (interned) rather than dicts of its own: 100,000 runs cost a list of references.
"""
from __future__ import annotations

import math
from typing import Any

from .records import Record

# questions whose value names a user: the report lists the users it saw
WHO = ("who_submitted", "who_cancelled")
UX_STAGES = ("submit", "watch", "logs", "cancel")
# what a user writes for the job itself, then what a cluster admin sets up once for a team (queues, RBAC)
WRITTEN = ("files", "lines", "code_lines", "objects")
ADMIN = ("admin_files", "admin_lines", "admin_objects")


def is_probe(scenario: str | None) -> bool:
    """A user-mistake probe (scenario "mistake:<kind>", or "mistake"): not a training run."""
    return bool(scenario) and (scenario == "mistake" or scenario.startswith("mistake:"))


def is_scale(scenario: str | None) -> bool:
    """A scale-curve run (scenario "scale:<nodes>", harness/scale_curve.py): the config's job at another
    size, so its figures are the scale-curve section's, never pooled with the config's job's."""
    return bool(scenario) and scenario.startswith("scale:")


def _count(v: Any) -> float:
    """A count as the record holds it; anything else (a note, a null) reads as NaN, never as 0."""
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else math.nan


def _text(v: Any) -> str | None:
    return None if v is None or v == "" else str(v)


class Extras:
    """Fed each record in file order; `take` keeps the rows the report counts (a retried run's last record)."""

    def __init__(self) -> None:
        self._shared: dict[tuple, tuple] = {}
        self.audit: list[tuple | None] = []
        self.ux: list[tuple | None] = []
        self.probe = bytearray()
        self.mistake: dict[int, dict] = {}

    def _intern(self, t: tuple) -> tuple:
        return self._shared.setdefault(t, t)

    def add(self, row: int, rec: Record) -> None:
        a = rec.audit
        self.audit.append(None if a is None or not a.answers else self._intern(tuple(
            (q, bool(x.answered), _text(x.source), _text(x.value) if q in WHO and x.answered else None,
             None if x.answered else _text(x.note))   # why a question went unanswered
            for q, x in a.answers.items())))
        u = rec.ux
        if u is None or not (u.calls or u.written):
            self.ux.append(None)
        else:
            calls = tuple((stage, tuple(sorted((str(k), _count(n)) for k, n in kinds.items())))
                          for stage, kinds in u.calls.items() if isinstance(kinds, dict))
            self.ux.append(self._intern((calls, written(u.written))))
        probe = is_probe(rec.scenario)
        self.probe.append(probe)
        if probe:
            m = dict(rec.mistake or {})
            m.setdefault("kind", rec.scenario.partition(":")[2] or None)
            self.mistake[row] = m

    def take(self, last_row: list[int], retried: bool) -> tuple[list, list, bytearray, dict[int, dict]]:
        if not retried:
            return self.audit, self.ux, self.probe, self.mistake
        return ([self.audit[r] for r in last_row], [self.ux[r] for r in last_row],
                bytearray(self.probe[r] for r in last_row),
                {i: self.mistake[r] for i, r in enumerate(last_row) if r in self.mistake})


def written(w: dict) -> tuple:
    """harness.footprint.written's totals: job_files, job_lines, ... and per file its role; a record
    shaped as the plan first had it ({"files": n, "lines": n, "objects": n}) reads too."""
    job = tuple((k, _count(w.get(f"job_{k}", w.get(k)))) for k in WRITTEN)
    per = w.get("files") if isinstance(w.get("files"), dict) else {}
    admin = [f for f in per.values() if isinstance(f, dict) and f.get("role") == "admin"]
    if not admin:
        return job
    return job + (("admin_files", float(len(admin))), ("admin_lines", sum(_count(f.get("lines")) for f in admin)),
                  ("admin_objects", sum(_count(f.get("objects")) for f in admin)))


def ux_calls(pattern: tuple) -> dict[str, dict[str, float]]:
    return {stage: dict(kinds) for stage, kinds in pattern[0]}


def ux_written(pattern: tuple) -> dict[str, float]:
    return dict(pattern[1])
