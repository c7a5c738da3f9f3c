"""Parse what Slurm's commands print, for the releases this project meets.

* ``squeue --json`` / ``sacct --json``: Slurm 22.05 prints the openapi v0.0.38 shapes (states are
  strings, times plain integers); 23.02 and later print data_parser shapes (states are lists of
  flags, many numbers are ``{"set": bool, "infinite": bool, "number": int}``). Both are read here
  into one ``SlurmJob`` record; fixtures recorded from real 22.05.8 (bookworm) and 24.11.5 (trixie)
  output are in tests/fixtures/slurm/.
* ``sacct --parsable2`` (``-P``) with ``SLURM_TIME_FORMAT=%s``: the fallback, and the source of
  per-attempt rows (``sacct -D``).
* ``scontrol show config``: the settings that shape queue and recovery times.

One table, ``STATE_MAP``, maps Slurm's job states into the shared ``JobState`` enum.

The text comes from commands the harness does not control (other releases, site wrappers, a
message on stdout), so every parser returns what it can read and skips what it cannot: none raises
on any input (tests/unit/test_slurm_parse_props.py feeds them arbitrary text and JSON).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from .states import JobState

# Slurm base job states -> the shared enum. COMPLETING is not terminal: the exit code is not final yet.
STATE_MAP: dict[str, JobState] = {
    "PENDING": JobState.PENDING,
    "SUSPENDED": JobState.PENDING,
    "STOPPED": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING,
    "CONFIGURING": JobState.STARTING,
    "RUNNING": JobState.RUNNING,
    "COMPLETING": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "STAGE_OUT": JobState.RUNNING,
    "REQUEUED": JobState.RESTARTING,
    "REQUEUE_FED": JobState.RESTARTING,
    "PREEMPTED": JobState.RESTARTING,
    "COMPLETED": JobState.SUCCEEDED,
    "FAILED": JobState.FAILED,
    "BOOT_FAIL": JobState.FAILED,
    "NODE_FAIL": JobState.FAILED,
    "OUT_OF_MEMORY": JobState.FAILED,
    "SPECIAL_EXIT": JobState.FAILED,
    "LAUNCH_FAILED": JobState.FAILED,
    "CANCELLED": JobState.CANCELLED,
    "REVOKED": JobState.CANCELLED,
    "DEADLINE": JobState.TIMEOUT,
    "TIMEOUT": JobState.TIMEOUT,
}
# Flags that 23.02+ list beside the base state (squeue/sacct --json), or that older releases print.
_FLAG_RESTARTING = {"REQUEUED", "REQUEUE_FED", "REQUEUE_CRON"}


def _str(v: Any) -> str:
    """A JSON value where text is expected: strings as they are, anything else (a number, null) as text."""
    if v is None:
        return ""
    return v if isinstance(v, str) else str(v) if isinstance(v, (int, float)) else ""


def map_state(native: str | list[str] | None, flags: list[str] | None = None) -> JobState:
    """A Slurm state ('CANCELLED by 1000', ['PENDING', 'REQUEUED'], 'OUT_OF_ME+') -> JobState."""
    if isinstance(native, list):
        flags = list(native[1:]) + list(flags if isinstance(flags, list) else [])
        native = native[0] if native else ""
    words = _str(native).split()
    base = words[0].rstrip("+") if words else ""
    if base == "OUT_OF_ME":
        base = "OUT_OF_MEMORY"
    state = STATE_MAP.get(base, JobState.UNKNOWN)
    if state == JobState.PENDING and _FLAG_RESTARTING & {_str(f) for f in (flags if isinstance(flags, list) else [])}:
        return JobState.RESTARTING
    return state


def parse_version(text: str) -> tuple[int, ...]:
    """'slurm 24.11.5', 'slurm-wlm 22.05.8' or '24.11.5' -> (24, 11, 5); () when there is none."""
    m = re.search(r"(?<![0-9])([0-9]+)\.([0-9]+)(?:\.([0-9]+))?", text or "")
    return tuple(int(x) for x in m.groups() if x is not None) if m else ()


def _num(v: Any) -> int | None:
    """A plain number, or a 23.02+ {"set","infinite","number"} object; None when unset/infinite/0."""
    if isinstance(v, dict):
        if not v.get("set", True) or v.get("infinite"):
            return None
        v = v.get("number")
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        return None
    try:
        n = int(v)
    except (ValueError, OverflowError):   # "", "12abc", inf, nan
        return None
    return n or None


@dataclass(frozen=True)
class SlurmJob:
    job_id: str
    name: str = ""
    native_state: str = ""
    state: JobState = JobState.UNKNOWN
    flags: tuple[str, ...] = ()
    reason: str = ""
    submit: int | None = None
    eligible: int | None = None
    start: int | None = None
    end: int | None = None
    nodes: str = ""
    restarts: int = 0
    exit_code: str = ""
    comment: str = ""
    extra: dict = field(default_factory=dict)


def _state_of(raw: Any) -> tuple[str, tuple[str, ...]]:
    if isinstance(raw, dict):          # sacct --json: {"current": ..., "reason": ...}
        raw = raw.get("current")
    if isinstance(raw, list):
        words = [_str(w) for w in raw]
        return (words[0] if words else ""), tuple(words[1:])
    return _str(raw), ()


def _exit(raw: Any) -> str:
    if isinstance(raw, dict):
        rc, sig = raw.get("return_code"), raw.get("signal")
        if isinstance(sig, dict):
            sig = sig.get("id")
        return f"{_num(rc) or 0}:{_num(sig) or 0}"
    return _str(raw)


def _comment(raw: Any) -> str:
    return _str(raw.get("job")) if isinstance(raw, dict) else _str(raw)


def _jobs(text: str) -> list[dict]:
    """The "jobs" list of a JSON document; [] for anything else (not JSON, a message, another shape).
    A line some site wrapper prints before or after the document is skipped."""
    text = text if isinstance(text, str) else ""
    try:
        doc, _ = json.JSONDecoder().raw_decode(text, max(0, text.find("{")))
    except (ValueError, RecursionError):
        return []
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    return [j for j in jobs if isinstance(j, dict) and _job_id(j)] if isinstance(jobs, list) else []


def _job_id(j: dict) -> str:
    v = j.get("job_id")
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else v if isinstance(v, str) else ""


def squeue_json(text: str) -> list[SlurmJob]:
    """``squeue --json`` of Slurm 22.05 (v0.0.38) or 23.02+ (data_parser); jobs without an id are skipped."""
    out = []
    for j in _jobs(text):
        native, flags = _state_of(j.get("job_state"))
        out.append(SlurmJob(
            job_id=_job_id(j), name=_str(j.get("name")), native_state=native,
            state=map_state(native, list(flags)), flags=flags, reason=_str(j.get("state_reason")),
            submit=_num(j.get("submit_time")), eligible=_num(j.get("eligible_time")),
            start=_num(j.get("start_time")), end=_num(j.get("end_time")),
            nodes=_str(j.get("nodes")), restarts=_num(j.get("restart_cnt")) or 0,
            comment=_comment(j.get("comment")), exit_code=_exit(j.get("exit_code"))))
    return out


def sacct_json(text: str) -> list[SlurmJob]:
    """``sacct --json`` of Slurm 22.05 (v0.0.38) or 23.02+ (data_parser): one record per job, the
    latest attempt, or with ``-D`` one record per attempt (requeues), each with its own times."""
    out = []
    for j in _jobs(text):
        st = j.get("state")
        native, flags = _state_of(st)
        t = j.get("time")
        t = t if isinstance(t, dict) else {}
        out.append(SlurmJob(
            job_id=_job_id(j), name=_str(j.get("name")), native_state=native,
            state=map_state(native, list(flags)), flags=flags,
            reason=_str(st.get("reason")) if isinstance(st, dict) else "",
            submit=_num(t.get("submission")), eligible=_num(t.get("eligible")),
            start=_num(t.get("start")), end=_num(t.get("end")), nodes=_str(j.get("nodes")),
            restarts=_num(j.get("restart_cnt")) or 0, comment=_comment(j.get("comment")),
            exit_code=_exit(j.get("exit_code"))))
    return out


def parsable(text: str) -> list[dict[str, str]]:
    """``sacct``/``squeue`` ``--parsable2`` output with a header line -> one dict per row."""
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    if not lines:
        return []
    head = lines[0].split("|")
    return [dict(zip(head, ln.split("|"), strict=False)) for ln in lines[1:]]   # short rows keep what they have


# No "Restarts": 22.05's sacct refuses it. With -D there is one row per attempt anyway.
SACCT_FIELDS = ("JobID", "JobName", "State", "ExitCode", "NNodes", "NodeList", "Submit", "Eligible",
                "Start", "End", "Comment")


def _digits(v: str) -> int | None:
    v = (v or "").strip()
    return int(v) if v.isascii() and v.isdigit() else None   # "Unknown", "None", "N/A", "²"...


def _epoch(v: str) -> int | None:
    return _digits(v) or None


def sacct_attempts(text: str) -> list[SlurmJob]:
    """Rows of ``SLURM_TIME_FORMAT=%s sacct -D -X -P -o <SACCT_FIELDS>``: one per attempt
    (requeues), oldest first per job. Steps (``123.batch``) are skipped if present."""
    out = []
    for row in parsable(text):
        jid = row.get("JobID", "")
        if not jid or "." in jid:
            continue
        native = row.get("State", "")
        out.append(SlurmJob(
            job_id=jid, name=row.get("JobName", ""), native_state=(native.split() or [""])[0],
            state=map_state(native), submit=_epoch(row.get("Submit", "")),
            eligible=_epoch(row.get("Eligible", "")), start=_epoch(row.get("Start", "")),
            end=_epoch(row.get("End", "")), nodes=row.get("NodeList", ""),
            restarts=_digits(row.get("Restarts", "")) or 0,
            exit_code=row.get("ExitCode", ""),
            comment=row.get("Comment", "")))
    return out


def sinfo_nodes(text: str) -> list[dict[str, str]]:
    """``sinfo -h -N -o %N|%T|%c|%m`` -> one dict per node line (lines without a name are skipped)."""
    rows = [ln.split("|") for ln in (text or "").splitlines()]
    keys = ("node", "state", "cpus", "memory_mb")
    return [dict(zip(keys, (w.strip() for w in r), strict=False)) for r in rows if r[0].strip()]


def node_usable(text: str) -> bool:
    """``sinfo -h -n NODE -o %T``: True when the node takes jobs and answers (idle, mixed, allocated,
    with no '*' for not responding, no power-saving or reboot suffix)."""
    words = (text or "").split()
    return len(words) == 1 and words[0].rstrip("$-") in ("idle", "mixed", "allocated")


def jobs_in_dir(text: str, workdir: str) -> list[str]:
    """``squeue -h -o %i|%Z`` -> the ids of the jobs whose working directory is workdir."""
    want = workdir.rstrip("/")
    out = []
    for line in (text or "").splitlines():
        jid, _, wd = line.strip().partition("|")
        if jid and wd.rstrip("/") == want:
            out.append(jid)
    return out


def show_config(text: str) -> dict[str, str]:
    """``scontrol show config`` -> {key: value} (the 'Slurmctld(primary) at ...' tail is ignored)."""
    out = {}
    for line in (text or "").splitlines():
        m = re.match(r"^([A-Za-z][A-Za-z0-9_]*(?:\[\d+\])?)\s*=\s?(.*)$", line)   # SlurmctldHost[0] too
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


# Settings that shape queue, startup and recovery times; stored with every run.
TIMING_SETTINGS = ("SLURM_VERSION", "SchedulerType", "SchedulerParameters", "AuthInfo", "SlurmctldTimeout",
                   "SlurmdTimeout", "MessageTimeout", "KillWait", "ProctrackType", "TaskPlugin", "SelectType",
                   "SelectTypeParameters", "PriorityType", "MinJobAge", "BatchStartTimeout",
                   "PrologFlags", "ReturnToService", "JobRequeue", "ClusterName")


def timing_settings(config: dict[str, str]) -> dict[str, str]:
    return {k: config[k] for k in TIMING_SETTINGS if k in config}
