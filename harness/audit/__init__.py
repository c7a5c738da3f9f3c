"""Auditing a run from each platform's own records: who submitted it, what exactly, when, on which
nodes, what it used, how it ended, and who cancelled or deleted it.

``answers(platform, raw)`` is pure: the run's stored raw evidence (raw["audit"] gathered after
cancel and cleanup by backends/<platform>/auditlog.py, plus what collect kept) in, one answer per
question out, each ``{"answered", "value", "source", "note"}``. An answer the records (readable to
the user who ran the job, or to the admin on the project's local clusters) do not give is
``answered: false`` with a note saying why. ``RETENTION`` says how long each source is kept by
default and which setting changes it ({source: text}); ``SOURCES`` has the same with its parts and the
reference it was checked against; ``retention_of(answers)`` picks the entries an answer set names.
``poc rederive`` recomputes the answers from the stored raw file and compares.
"""
from __future__ import annotations

from . import k8s, slurm
from .common import no
from .retention import RETENTION, SOURCES, sources

QUESTIONS = ("who_submitted", "what", "when", "where", "usage", "outcome", "who_cancelled")
_READERS = {"slurm": slurm.answers, "k8s": k8s.answers}
PLATFORMS = frozenset(_READERS)   # the local baseline has no scheduler, so no records to audit

__all__ = ["PLATFORMS", "QUESTIONS", "RETENTION", "SOURCES", "answers", "retention_of"]


def answers(platform: str, raw: dict) -> dict:
    """{"platform", "answers": {question: answer}} for one run."""
    read = _READERS.get(platform)
    if read is None:
        got = {q: no("-", f"no platform records are read for {platform!r}") for q in QUESTIONS}
    elif not isinstance(raw, dict) or not raw.get("audit"):
        got = {q: no("-", "the run has no audit evidence (raw['audit'] is missing)") for q in QUESTIONS}
        if isinstance(raw, dict) and raw:
            got = {**got, **{q: a for q, a in read(raw).items() if a["answered"] and q not in
                             ("who_submitted", "who_cancelled")}}
    else:
        got = read(raw)
    return {"platform": platform, "answers": {q: got[q] for q in QUESTIONS}}


def retention_of(result: dict) -> dict[str, dict]:
    """The SOURCES entries (default, setting, reference) the answers' sources name."""
    names = {k for a in (result.get("answers") or {}).values() for k in sources(a.get("source") or "")}
    return {k: SOURCES[k] for k in SOURCES if k in names}
