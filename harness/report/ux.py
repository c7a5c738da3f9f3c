"""The user-experience section: what a user writes and the calls each step took for the same clean job,
and how long each platform took to tell a user, in its own words, what was wrong with a mistaken job."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from .extras import ADMIN, UX_STAGES, WRITTEN, ux_calls, ux_written
from .sections import fmt, fmt_pm, headline_cell
from .stats import PLATFORM_LABEL, SummaryRow, platform_sort_key
from .table import RunTable

# What a user types for each step (the names only; the counts beside them are measured).
USER_COMMANDS = {
    "slurm": {"submit": "sbatch job.sh", "watch": "squeue -j <id>", "logs": "tail -f slurm-<id>.out",
              "cancel": "scancel <id>"},
    "k8s": {"submit": "kubectl apply -f jobset.yaml", "watch": "kubectl get jobset,workload,pods",
            "logs": "kubectl logs -f <pod>", "cancel": "kubectl delete jobset <name>"},
}
STAGE_TEXT = {"submit": "submit", "watch": "watch", "logs": "read logs", "cancel": "cancel"}
MESSAGE_CHARS = 160


def _mistake_order() -> tuple[str, ...]:
    try:
        from ..config.ux import MISTAKES
    except ImportError:
        return ()
    return tuple(MISTAKES)


@dataclass(frozen=True)
class Probe:
    """One user-mistake probe's outcome, as the report shows it."""
    platform: str
    kind: str
    change: str | None
    clear: bool
    seconds: float | None      # to the first clear message; None: none before the deadline
    resolution: float | None   # the probe's poll interval
    deadline: float | None
    at_submit: bool | None
    message: str | None
    source: str | None
    status: str | None         # the probe run's own status: a probe that did not complete says so


def _num(v) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


def probes(table: RunTable) -> list[Probe]:
    """Every probe (harness errors aside), in the configured mistakes' order, then platform."""
    order = {k: i for i, k in enumerate(_mistake_order())}
    out = []
    for i, m in table.mistakes.items():
        if table.harness_error[i]:
            continue
        t = _num(m.get("time_to_error_s"))
        clear = bool(m.get("clear")) and t is not None
        out.append(Probe(table.platform[i], str(m.get("kind") or "?"), m.get("change"), clear, t if clear else None,
                         _num(m.get("resolution_s")), _num(m.get("deadline_s")), m.get("at_submit"),
                         m.get("message") if isinstance(m.get("message"), str) else None,
                         m.get("source") if isinstance(m.get("source"), str) else None, table.status[i]))
    return sorted(out, key=lambda p: (order.get(p.kind, len(order)), p.kind, platform_sort_key(p.platform)))


def code(text: str | None, limit: int = MESSAGE_CHARS) -> str:
    """A platform's message in code style, on one line and trimmed; a backtick would end the code span."""
    if not text:
        return "–"
    one = re.sub(r"\s+", " ", text).strip().replace("`", "'")
    return f"`{one if len(one) <= limit else one[:limit - 1] + '…'}`"


def seconds_text(p: Probe) -> str:
    if p.status not in ("ok", None) and not p.clear:
        return f"probe did not complete ({p.status})"
    if p.clear:
        # the look that showed it came `resolution` after the one that did not: it appeared in between
        res = f" (appeared after {fmt(max(0.0, p.seconds - p.resolution))} s)" if p.resolution else ""
        return f"{fmt(p.seconds)} s{res}"
    return f"not clear within {fmt(p.deadline)} s" if p.deadline else "not clear"


def error_table(table: RunTable) -> tuple[list[str], list[list[str]]]:
    header = ["mistake", "platform", "what was changed", "time to a clear error", "told", "the platform's message",
              "source"]
    rows = []
    for p in probes(table):
        told = "–" if not p.clear else ("at submit" if p.at_submit else "after submit")
        message = code(p.message) if p.clear else (f"unclear: {code(p.message)}" if p.message else "–")
        rows.append([f"`{p.kind}`", PLATFORM_LABEL.get(p.platform, p.platform), code(p.change, 80), seconds_text(p),
                     told, message, p.source or "–"])
    return header, rows


def clean_patterns(table: RunTable) -> dict[str, list[tuple]]:
    """Per platform, the UX counts of its clean training runs that succeeded."""
    out: dict[str, list[tuple]] = {}
    for i in np.flatnonzero(table.ok & table.scenario.where("clean")).tolist():
        if table.ux[i] is not None:
            out.setdefault(table.platform[i], []).append(table.ux[i])
    return out


def _median(values: list[float]) -> float:
    v = [x for x in values if not math.isnan(x)]
    return float(np.median(v)) if v else math.nan


def stage_calls(patterns: list[tuple], stage: str) -> dict[str, float]:
    """Per kind of call, the median count over the runs (a run without that kind counts 0)."""
    per_run = [ux_calls(p).get(stage, {}) for p in patterns]
    kinds = sorted({k for c in per_run for k in c})
    return {k: _median([c.get(k, 0.0) for c in per_run]) for k in kinds}


def written(patterns: list[tuple]) -> dict[str, float]:
    return {k: _median([ux_written(p).get(k, math.nan) for p in patterns]) for k in WRITTEN + ADMIN}


WRITTEN_FORM = "files / lines (not blank or comment) / objects"


def count(v: float) -> str:
    """A count, or a median of counts: whole where it is whole."""
    return "–" if math.isnan(v) else str(int(v)) if float(v).is_integer() else fmt(v)


def written_text(w: dict[str, float], admin: bool = False) -> str:
    """As WRITTEN_FORM: "1 / 40 (32) / 1"."""
    files, lines, code_lines, objects = (w[k] for k in WRITTEN) if not admin else (
        w["admin_files"], w["admin_lines"], math.nan, w["admin_objects"])
    if all(math.isnan(v) for v in (files, lines, objects)):
        return "none" if admin else "not recorded"
    return f"{count(files)} / {count(lines)}" + ("" if math.isnan(code_lines) else f" ({count(code_lines)})") \
        + f" / {count(objects)}"


def calls_text(calls: dict[str, float]) -> str:
    # a call most runs did not make (its median is 0) is not part of the typical step
    calls = {k: n for k, n in calls.items() if n > 0}
    if not calls:
        return "none"
    total = sum(calls.values())
    parts = ", ".join(f"`{k}` ×{count(n)}" for k, n in calls.items())
    return f"{count(total)}: {parts}" if len(calls) > 1 else parts


def job_table(table: RunTable, first_log: dict[str, SummaryRow]) -> tuple[list[str], list[list[str]]]:
    """Steps down, per platform: what a user types and the calls the harness measured (median over clean runs)."""
    pats = clean_patterns(table)
    # the platforms a user chooses between (the local baseline has no scheduler to submit to)
    plats = sorted((set(pats) | set(first_log)) & set(USER_COMMANDS), key=platform_sort_key)
    header = ["step"]
    for p in plats:
        label = PLATFORM_LABEL.get(p, p)
        header += [f"{label}: a user types", f"{label}: calls made (median of {len(pats.get(p, []))} clean runs)"]
    rows = [[f"the user writes for the job: {WRITTEN_FORM}"] + [c for p in plats for c in (
        "–", written_text(written(pats[p])) if p in pats else "not recorded")],
            ["a cluster admin sets up once for a team (queues, RBAC): files / lines / objects"] + [
                c for p in plats for c in ("–", written_text(written(pats[p]), admin=True) if p in pats else "–")]]
    for stage in UX_STAGES:
        rows.append([STAGE_TEXT[stage]] + [c for p in plats for c in (
            f"`{USER_COMMANDS[p][stage]}`" if p in USER_COMMANDS else "–",
            calls_text(stage_calls(pats[p], stage)) if p in pats else "not recorded")])
    rows.append(["first log line readable (`first_log_s`, s)"] + [c for p in plats for c in (
        "–", headline_cell(first_log[p]) if p in first_log else "not measured")])
    return header, rows


NOTE_JOB = ("Calls are the platform calls the harness's backend made at each step (Slurm: commands; Kubernetes: "
            "API requests), counted, not assumed; the watch count follows the harness's ~1 s polling and the run's "
            "length, so a user watching by hand makes fewer. \"Written\" is what a user writes for this job: the "
            "batch script or the manifests.")
NOTE_ERRORS = ("One probe per mistake and platform: the figures describe this campaign's probes, they carry no "
               "verdict (n = 1). A message is clear when it names the problem (the wrong value itself, or the "
               "scheduler's words for an impossible request); time runs from submit to the first such message a "
               "user could read, to the probe's poll interval.")


def first_log_rows(summ: list[SummaryRow]) -> dict[str, SummaryRow]:
    return {s.platform: s for s in summ if s.metric == "first_log_s"}


def text_pm(s: SummaryRow) -> str:
    return f"{fmt_pm(s.median, s.uncertainty)} s (n {s.n})"
