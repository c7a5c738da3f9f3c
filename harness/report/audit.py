"""The audit section: per platform, which of the audit questions its own records answered, from which
source, how long that source keeps them by default, and which users the records named."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..audit import PLATFORMS as AUDITED
from ..audit import QUESTIONS, SOURCES
from ..audit import sources as source_names
from .stats import PLATFORM_LABEL, platform_sort_key
from .table import RunTable

QUESTION_TEXT = {"who_submitted": "who submitted it", "what": "what exactly (the spec)", "when": "when",
                 "where": "on which nodes", "usage": "what it used (node-/GPU-hours)", "outcome": "how it ended",
                 "who_cancelled": "who cancelled or deleted it"}
SHOWN = 3   # users and sources listed per cell, the most frequent first


def questions() -> tuple[str, ...]:
    return tuple(QUESTIONS)


@dataclass
class Answers:
    """One question on one platform, over the runs with audit records."""
    runs: int = 0
    answered: int = 0
    sources: Counter = field(default_factory=Counter)
    users: Counter = field(default_factory=Counter)
    why_not: Counter = field(default_factory=Counter)   # the notes of the runs that left it unanswered


def summarise(table: RunTable) -> dict[str, dict[str, Answers]]:
    """Per platform, per question: in how many of its runs (harness errors aside) the records answered it."""
    out: dict[str, dict[str, Answers]] = {}
    qs = questions()
    shared: Counter = Counter()   # runs share a few outcomes: count those, then add each once
    for i in np.flatnonzero(~table.harness_error).tolist():
        if table.audit[i] is not None:
            shared[(table.platform[i], table.audit[i])] += 1
    for (plat, pattern), n in shared.items():
        mine = out.setdefault(plat, {q: Answers() for q in qs})
        have = {q: rest for q, *rest in pattern}
        for q in set(qs) | set(have):
            a = mine.setdefault(q, Answers())
            a.runs += n
            ok, src, who, note = have.get(q, (False, None, None, "not in the record"))
            if not ok:
                a.why_not[f"{src}: {note}" if src and note else note or src or "no reason recorded"] += n
            else:
                a.answered += n
                a.sources[src or "source not named"] += n
                if who:
                    a.users[who] += n
    return out


def _top(c: Counter, total: int) -> str:
    if not c:
        return "–"
    items = c.most_common()
    text = ", ".join(f"`{k}`" + ("" if n == total else f" ({n})") for k, n in items[:SHOWN])
    return text + (f", {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def tables(table: RunTable) -> list[tuple[str, tuple[list[str], list[list[str]]], tuple[list[str], list[list[str]]]]]:
    """(platform label, the questions' table, the retention table of the records they came from) per
    platform the audit reads (the local baseline has no scheduler records: none)."""
    header = ["question", "answered (runs)", "source", "attributed user(s) seen"]
    out = []
    for plat, answers in sorted(summarise(table).items(), key=lambda kv: platform_sort_key(kv[0])):
        if plat not in AUDITED:
            continue
        rows, records = [], Counter()
        order = list(questions()) + sorted(set(answers) - set(questions()))
        for q in order:
            a = answers[q]
            for s in a.sources:
                records.update(source_names(s))
            source = _top(a.sources, a.answered)
            if a.why_not:
                source = ("" if not a.answered else source + "; ") + "unanswered: " + "; ".join(
                    f"{k}" + ("" if n == a.runs - a.answered else f" ({n})") for k, n in a.why_not.most_common(SHOWN))
            rows.append([QUESTION_TEXT.get(q, q) + f" (`{q}`)", f"{a.answered} of {a.runs}", source,
                         _top(a.users, a.answered) if q.startswith("who_") else "–"])
        kept = [[f"`{k}`", SOURCES[k]["default"], SOURCES[k]["setting"], SOURCES[k]["cite"]]
                for k in SOURCES if k in records]
        out.append((PLATFORM_LABEL.get(plat, plat), (header, rows),
                    (["record", "kept by default", "the setting that changes it", "reference"], kept)))
    return out


def answered_counts(table: RunTable) -> dict[str, tuple[int, int, int, list[str]]]:
    """Per platform: (questions answered in every run, answered in some run, questions, sources used)."""
    out = {}
    for plat, answers in summarise(table).items():
        if plat not in AUDITED:
            continue
        every = sum(1 for a in answers.values() if a.runs and a.answered == a.runs)
        some = sum(1 for a in answers.values() if a.answered)
        sources = Counter()
        for a in answers.values():   # by record ("sacct (slurmdbd)"), not by the field each answer read
            sources.update(list(dict.fromkeys(k for s in a.sources for k in (source_names(s) or [s.split(":")[0]]))))
        out[plat] = (every, some, len(answers), [s for s, _ in sources.most_common()])
    return out


NOTE = ("Answers come from each platform's own records only (Slurm: accounting through slurmdbd and slurmctld's "
        "log; Kubernetes: the API server's audit log, Events and Kueue's Workload status), gathered after the run "
        "was cancelled and cleaned up. \"Answered (runs)\": in how many of the platform's runs with audit records "
        "(training runs and user-mistake probes) the question had an answer. A run made as a restricted user "
        "should show that user, not an admin, under the who-questions.")
