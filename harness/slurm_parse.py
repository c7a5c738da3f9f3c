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


def map_state(native: str | list[str] | None, flags: list[str] | None = None) -> JobState:
    """A Slurm state ('CANCELLED by 1000', ['PENDING', 'REQUEUED'], 'OUT_OF_ME+') -> JobState."""
    if isinstance(native, list):
        flags = list(native[1:]) + list(flags or [])
        native = native[0] if native else ""
    base = (native or "").split()[0].rstrip("+") if native else ""
    if base == "OUT_OF_ME":
        base = "OUT_OF_MEMORY"
    state = STATE_MAP.get(base, JobState.UNKNOWN)
    if state == JobState.PENDING and _FLAG_RESTARTING & set(flags or []):
        return JobState.RESTARTING
    return state


def parse_version(text: str) -> tuple[int, ...]:
    """'slurm 24.11.5', 'slurm-wlm 22.05.8' or '24.11.5' -> (24, 11, 5)."""
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    if not m:
        raise ValueError(f"no Slurm version in {text!r}")
    return tuple(int(x) for x in m.groups() if x is not None)


def _num(v: Any) -> int | None:
    """A plain number, or a 23.02+ {"set","infinite","number"} object; None when unset/infinite/0."""
    if isinstance(v, dict):
        if not v.get("set", True) or v.get("infinite"):
            return None
        v = v.get("number")
    if v is None or v == "":
        return None
    try:
        n = int(v)
    except (TypeError, ValueError):
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
        return (raw[0] if raw else ""), tuple(raw[1:])
    return str(raw or ""), ()


def _exit(raw: Any) -> str:
    if isinstance(raw, dict):
        rc = raw.get("return_code")
        sig = (raw.get("signal") or {}).get("id") if isinstance(raw.get("signal"), dict) else raw.get("signal")
        rc_n = _num(rc) if isinstance(rc, dict) else rc
        sig_n = _num(sig) if isinstance(sig, dict) else sig
        return f"{rc_n or 0}:{sig_n or 0}"
    return str(raw or "")


def squeue_json(text: str) -> list[SlurmJob]:
    """``squeue --json`` of Slurm 22.05 (v0.0.38) or 23.02+ (data_parser)."""
    doc = json.loads(text)
    out = []
    for j in doc.get("jobs", []):
        native, flags = _state_of(j.get("job_state"))
        comment = j.get("comment")
        if isinstance(comment, dict):
            comment = comment.get("job", "")
        restarts = _num(j.get("restart_cnt")) or 0
        out.append(SlurmJob(
            job_id=str(j.get("job_id")), name=j.get("name", ""), native_state=native,
            state=map_state(native, list(flags)), flags=flags, reason=j.get("state_reason", "") or "",
            submit=_num(j.get("submit_time")), eligible=_num(j.get("eligible_time")),
            start=_num(j.get("start_time")), end=_num(j.get("end_time")),
            nodes=j.get("nodes", "") or "", restarts=restarts, comment=comment or "",
            exit_code=_exit(j.get("exit_code"))))
    return out


def sacct_json(text: str) -> list[SlurmJob]:
    """``sacct --json`` of Slurm 22.05 (v0.0.38) or 23.02+ (data_parser); one record per job
    (sacct's JSON holds the latest attempt only; use ``sacct -D -P`` for every attempt)."""
    doc = json.loads(text)
    out = []
    for j in doc.get("jobs", []):
        st = j.get("state") or {}
        native, flags = _state_of(st)
        t = j.get("time") or {}
        comment = j.get("comment")
        if isinstance(comment, dict):
            comment = comment.get("job", "")
        out.append(SlurmJob(
            job_id=str(j.get("job_id")), name=j.get("name", ""), native_state=native,
            state=map_state(native, list(flags)), flags=flags,
            reason=(st.get("reason") if isinstance(st, dict) else "") or "",
            submit=_num(t.get("submission")), eligible=_num(t.get("eligible")),
            start=_num(t.get("start")), end=_num(t.get("end")), nodes=j.get("nodes", "") or "",
            restarts=_num(j.get("restart_cnt")) or 0, comment=comment or "",
            exit_code=_exit(j.get("exit_code"))))
    return out


def parsable(text: str) -> list[dict[str, str]]:
    """``sacct``/``squeue`` ``--parsable2`` output with a header line -> one dict per row."""
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    if not lines:
        return []
    head = lines[0].split("|")
    return [dict(zip(head, ln.split("|"))) for ln in lines[1:]]


# No "Restarts": 22.05's sacct refuses it. With -D there is one row per attempt anyway.
SACCT_FIELDS = ("JobID", "JobName", "State", "ExitCode", "NNodes", "NodeList", "Submit", "Eligible",
                "Start", "End", "Comment")


def _epoch(v: str) -> int | None:
    v = (v or "").strip()
    if not v or v in ("Unknown", "None", "N/A") or not v.isdigit():
        return None
    return int(v) or None


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
            job_id=jid, name=row.get("JobName", ""), native_state=native.split()[0] if native else "",
            state=map_state(native), submit=_epoch(row.get("Submit", "")),
            eligible=_epoch(row.get("Eligible", "")), start=_epoch(row.get("Start", "")),
            end=_epoch(row.get("End", "")), nodes=row.get("NodeList", ""),
            restarts=int(row.get("Restarts") or 0) if (row.get("Restarts") or "0").isdigit() else 0,
            exit_code=row.get("ExitCode", ""),
            comment=row.get("Comment", "")))
    return out


def show_config(text: str) -> dict[str, str]:
    """``scontrol show config`` -> {key: value} (the 'Slurmctld(primary) at ...' tail is ignored)."""
    out = {}
    for line in (text or "").splitlines():
        m = re.match(r"^([A-Za-z][A-Za-z0-9_]*)\s*=\s?(.*)$", line)
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
