"""A Slurm site's own job history, read into a Trace.

Export it with either command, as any user who may see all jobs (``-a``), one line each:

    sacct -a -X --json -S 2026-01-01 -E 2026-02-01 > history.json
    SLURM_TIME_FORMAT=%s sacct -a -X -P -S 2026-01-01 -E 2026-02-01 \\
        --format=JobID,User,Account,Submit,Start,End,Timelimit,NNodes,AllocTRES,QOS,State > history.txt

``--json`` needs Slurm 23.02 or later for the shapes read here (22.05's openapi v0.0.38 output is
read too, as far as it carries the same fields). ``-P`` reads its header line, so the fields may come
in any order and extra ones are ignored. ``SLURM_TIME_FORMAT=%s`` makes sacct print epoch seconds;
without it, sacct prints the local time of the machine it ran on with no zone, and ``parse_pipe``
then needs that zone (``tz="Europe/Berlin"``, or ``"UTC"``): offsets across a daylight-saving change
would otherwise be an hour off.

What is kept, and how (each count lands in the trace's notes):

* ``-X`` gives one line per job allocation; a step (JobID with a dot) is skipped if one slips in.
* An array task is its own job, ``<array id>_<task>``: each ran on its own. Tasks that never started
  are printed collapsed (``123_[5-9]``) and are dropped with the other never-started jobs.
* A heterogeneous job's components (``123+0``, ``123+1``) stay separate jobs: the demand is kept but
  a replay does not start them together.
* A job that never started (cancelled while pending) is dropped: it held no nodes, and a replay
  that ran it would add work the site never did. A job still running or pending at export time is
  dropped: its run time is not known yet.
* Run time is End - Start (suspended time included); under 1 s is kept as 1 s. Over the limit
  (KillWait, OverTimeLimit) is clamped to the limit. No limit recorded (UNLIMITED,
  Partition_Limit) uses the run time as the limit, which gives backfill a perfect estimate for
  that job: the note counts them.
* GPUs per node: the allocated ``gres/gpu`` count / nodes, rounded up if uneven.
* The tenant is the account (fair-share is per account), else the user; the QOS is kept; Slurm's
  numeric priority is not, since each scheduler computes its own from QOS and usage.
* Offsets count from the first kept submit; ``params["zero_epoch"]`` keeps that instant.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import ValidationError

from ..errors import ConfigError
from .trace import NodeShape, Trace, TraceJob

PIPE_FIELDS = ("JobID", "User", "Account", "Submit", "Start", "End", "Timelimit", "NNodes", "AllocTRES", "QOS",
               "State")
PIPE_COMMAND = ("SLURM_TIME_FORMAT=%s sacct -a -X -P -S START -E END --format=" + ",".join(PIPE_FIELDS))
JSON_COMMAND = "sacct -a -X --json -S START -E END"
_NOT_ENDED = {"PENDING", "RUNNING", "SUSPENDED", "REQUEUED", "RESIZING", "COMPLETING", "CONFIGURING"}
_TIP = f"export with `{JSON_COMMAND}` or `{PIPE_COMMAND}` (docs/scale-traces.md)"


@dataclass(frozen=True)
class _Row:
    """One allocation as either format gives it; times are epoch seconds, None where not set."""

    job_id: str
    user: str
    account: str
    submit: int | None
    start: int | None
    end: int | None
    limit_s: int | None
    nodes: int
    gpus: int
    qos: str
    state: str


# ---- sacct --json -----------------------------------------------------------------------------------

def _num(v: Any) -> int | None:
    """A number as 22.05 prints it (a plain int) or 23.02+ does ({"set", "infinite", "number"})."""
    if v is None:
        return None
    if isinstance(v, dict):
        return int(v["number"]) if v.get("set") and not v.get("infinite") and "number" in v else None
    if isinstance(v, int | float) and not isinstance(v, bool):
        return int(v)
    raise TypeError(f"{v!r} where Slurm prints a number")


def _gpus(tres: list[dict[str, Any]] | None) -> int:
    plain = typed = 0
    for t in tres or []:
        if t.get("type") == "gres" and str(t.get("name") or "").split(":")[0] == "gpu":
            n = int(t.get("count") or 0)
            plain, typed = (n, typed) if t.get("name") == "gpu" else (plain, typed + n)
    return plain or typed   # "gpu" is the total; typed entries ("gpu:a100") only add up when it is absent


def _json_row(j: dict[str, Any]) -> _Row:
    t = j.get("time") or {}
    arr, het = j.get("array") or {}, j.get("het") or {}
    job_id = str(j.get("job_id"))
    if (arr.get("job_id") or 0) and _num(arr.get("task_id")) is not None:
        job_id = f"{arr['job_id']}_{_num(arr.get('task_id'))}"
    elif (arr.get("job_id") or 0) and arr.get("task"):
        job_id = f"{arr['job_id']}_[{arr['task']}]"
    elif (het.get("job_id") or 0) and _num(het.get("job_offset")) is not None:
        job_id = f"{het['job_id']}+{_num(het.get('job_offset'))}"
    state = (j.get("state") or {}).get("current")
    state = (state[0] if state else "") if isinstance(state, list) else str(state or "")
    tres = j.get("tres") or {}
    nodes = _num(j.get("allocation_nodes")) or next(
        (int(x.get("count") or 0) for x in tres.get("allocated") or [] if x.get("type") == "node"), 0)
    limit = _num(t.get("limit"))
    return _Row(job_id=job_id, user=str(j.get("user") or ""), account=str(j.get("account") or ""),
                submit=_num(t.get("submission")) or None, start=_num(t.get("start")) or None,
                end=_num(t.get("end")) or None, limit_s=None if limit is None else limit * 60, nodes=nodes,
                gpus=_gpus(tres.get("allocated")), qos=str(j.get("qos") or ""), state=state)


def parse_json(text: str, *, name: str = "sacct", shape: NodeShape | None = None, tenant: str = "account") -> Trace:
    """``sacct --json`` output → Trace."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"sacct --json output is not JSON ({e.msg} at line {e.lineno})", _TIP) from e
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise ConfigError("sacct --json output has no \"jobs\" list", _TIP)
    meta = doc.get("meta") or {}
    slurm = meta.get("slurm") or meta.get("Slurm") or {}
    source = f"sacct --json, cluster {slurm.get('cluster') or '?'}, Slurm {slurm.get('release') or '?'}"
    rows = []
    for n, j in enumerate(doc["jobs"]):
        try:
            rows.append(_json_row(j))
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as e:
            raise ConfigError(f"sacct --json: jobs[{n}] (job {j.get('job_id') if isinstance(j, dict) else '?'}) "
                              f"is not a job record Slurm prints: {e}", _TIP) from e
    return _trace(rows, name=name, source=source, shape=shape, tenant=tenant, fmt="json")


# ---- sacct -P ---------------------------------------------------------------------------------------

_LIMIT = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def _limit(text: str) -> int | None:
    """Slurm's time-limit text (``2-00:00:00``, ``01:30:00``, ``15:00``, ``UNLIMITED``) in seconds."""
    m = _LIMIT.match(text.strip())
    if not m:
        return None   # UNLIMITED, Partition_Limit, INVALID: no limit the job set itself
    days, a, b, c = (int(x) if x else None for x in m.groups())
    if days is not None:   # D-HH[:MM[:SS]]
        return ((days * 24 + a) * 60 + (b or 0)) * 60 + (c or 0)
    if c is not None:      # HH:MM:SS
        return (a * 60 + b) * 60 + c
    return a * 60 + (b or 0) if b is not None else a * 60   # MM:SS, or MM alone


def _tres_gpus(text: str) -> int:
    parts = dict(p.split("=", 1) for p in text.split(",") if "=" in p)
    if "gres/gpu" in parts:
        return int(parts["gres/gpu"])
    return sum(int(v) for k, v in parts.items() if k.startswith("gres/gpu:"))


def _clock(text: str, zone: ZoneInfo | None, n: int) -> int | None:
    text = text.strip()
    if text in ("", "Unknown", "None", "0"):
        return None
    if text.isdigit():
        return int(text)
    if zone is None:
        raise ConfigError(f"sacct -P line {n}: {text!r} is a local time with no zone",
                          "pass the zone sacct ran in (tz='Europe/Berlin', or 'UTC'), or export with "
                          "SLURM_TIME_FORMAT=%s for epoch seconds")
    return int(datetime.fromisoformat(text).replace(tzinfo=zone).timestamp())


def parse_pipe(text: str, *, name: str = "sacct", shape: NodeShape | None = None, tenant: str = "account",
               tz: str | None = None) -> Trace:
    """``sacct -P`` output (with its header line) → Trace. ``tz``: the zone of printed local times."""
    try:
        zone = ZoneInfo(tz) if tz else None
    except (ZoneInfoNotFoundError, ValueError) as e:
        raise ConfigError(f"unknown time zone {tz!r}", "an IANA name such as 'UTC' or 'Europe/Berlin'") from e
    lines = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    if not lines:
        raise ConfigError("sacct -P output is empty", _TIP)
    header = lines[0][1].strip().split("|")
    missing = [f for f in PIPE_FIELDS if f not in header]
    if missing:
        raise ConfigError(f"sacct -P line {lines[0][0]}: header lacks {', '.join(missing)}", _TIP)
    rows = []
    for n, line in lines[1:]:
        cells = line.split("|")
        if len(cells) != len(header):
            raise ConfigError(f"sacct -P line {n}: {len(cells)} fields, the header has {len(header)}", _TIP)
        c = dict(zip(header, cells, strict=True))
        try:
            rows.append(_Row(job_id=c["JobID"], user=c["User"], account=c["Account"],
                             submit=_clock(c["Submit"], zone, n), start=_clock(c["Start"], zone, n),
                             end=_clock(c["End"], zone, n), limit_s=_limit(c["Timelimit"]),
                             nodes=int(c["NNodes"] or 0), gpus=_tres_gpus(c["AllocTRES"]), qos=c["QOS"],
                             state=(c["State"].split() or [""])[0]))
        except (ValueError, OverflowError) as e:
            raise ConfigError(f"sacct -P line {n}: {e}", _TIP) from e
    source = f"sacct -P ({'times in ' + tz if tz else 'epoch seconds'})"
    return _trace(rows, name=name, source=source, shape=shape, tenant=tenant, fmt="pipe")


# ---- both formats -----------------------------------------------------------------------------------

def _trace(rows: list[_Row], *, name: str, source: str, shape: NodeShape | None, tenant: str, fmt: str) -> Trace:
    if tenant not in ("account", "user"):
        raise ConfigError(f"tenant must be 'account' or 'user', got {tenant!r}", "fair-share is per account")
    counts: dict[str, int] = {}

    def count(what: str) -> None:
        counts[what] = counts.get(what, 0) + 1

    kept: dict[str, tuple[_Row, int, int, int]] = {}   # job id -> (row, limit, run time, GPUs per node)
    for r in rows:
        if "." in r.job_id:
            count("steps skipped")
            continue
        if r.start is None or r.submit is None or r.nodes < 1:
            count("never started, dropped")
            continue
        if r.end is None or r.state in _NOT_ENDED:
            count("not ended at export, dropped")
            continue
        runtime = r.end - r.start
        if runtime < 0:
            count("ended before it started, dropped")
            continue
        if runtime < 1:
            count("ran under 1 s, kept as 1 s")
        runtime = max(1, runtime)
        limit = r.limit_s
        if limit is None:
            count("no limit recorded, run time used as limit")
            limit = runtime
        if runtime > limit:
            count("ran past the limit, clamped to it")
            runtime = limit
        if r.gpus % r.nodes:
            count("GPUs uneven across nodes, rounded up per node")
        if "+" in r.job_id:
            count("heterogeneous components kept as separate jobs")
        if r.job_id in kept:
            count("repeated job ids, last record kept")
        kept[r.job_id] = (r, limit, runtime, math.ceil(r.gpus / r.nodes))
    zero = min((r.submit for r, *_ in kept.values()), default=0)
    jobs = []
    for r, limit, runtime, gpn in kept.values():
        owner = (r.account or r.user) if tenant == "account" else (r.user or r.account)
        if not owner:
            count("no account or user, tenant 'unknown'")
        try:
            jobs.append(TraceJob(id=r.job_id, submit_s=r.submit - zero, tenant=owner or "unknown", nodes=r.nodes,
                                 gpus_per_node=gpn, limit_s=limit, runtime_s=runtime, qos=r.qos or "normal"))
        except ValidationError as e:
            raise ConfigError(f"{source}: job {r.job_id!r}: {e.errors()[0]['msg']}", _TIP) from e
    last = max((j.submit_s for j in jobs), default=0)
    notes = tuple(f"{v} {k}" for k, v in counts.items())
    try:
        return Trace(name=name, source=source, shape=shape, duration_s=last + 1, notes=notes,
                     params={"format": fmt, "zero_epoch": zero, "tenant_from": tenant}, jobs=tuple(jobs))
    except ValidationError as e:
        raise ConfigError(f"{source}: {e.errors()[0]['msg']}",
                          "give the shape of the cluster the history came from, or none") from e
