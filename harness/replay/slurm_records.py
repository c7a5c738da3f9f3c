"""A Slurm replay's raw records -> one JobOutcome per trace job (pure).

The records are slurmctld's job completion log (``jobcomp/filetxt``), one line per finished job:
``SubmitTime``, ``StartTime`` (the whole allocation granted: the gang placed) and ``EndTime``, whole
seconds in the cluster's local time with no zone, so the replay keeps the cluster clock's UTC offset
beside them. The harness's submission log maps each job id sbatch returned to its trace job.
"""
from __future__ import annotations

import datetime as dt

from ..scale.outcome import JobOutcome
from ..scale.trace import Trace

JOBCOMP_LOG = "/var/log/slurm/jobcomp.log"
RESOLUTION_S = 1.0
# Slurm's job states -> the outcome's: a job that ran out of its limit held its nodes to the end, as a
# completed one did
STATES = {"COMPLETED": "completed", "TIMEOUT": "timeout", "FAILED": "failed", "CANCELLED": "cancelled",
          "NODE_FAIL": "failed", "OUT_OF_MEMORY": "failed", "PREEMPTED": "preempted", "BOOT_FAIL": "failed",
          "DEADLINE": "failed"}


def fields(line: str) -> dict[str, str]:
    """``Key=value Key=value …`` -> dict; values hold no spaces (job names are the replay's, made safe)."""
    out = {}
    for part in line.split():
        key, eq, value = part.partition("=")
        if eq:
            out[key] = value
    return out


def _split_top(text: str) -> list[str]:
    """Split at the commas outside brackets: "e1,e[2-3,5]" -> ["e1", "e[2-3,5]"]."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return [p for p in [*parts, cur] if p]


def hostnames(hostlist: str) -> list[str]:
    """Slurm's compact host list (``e[0001-0003,0007]``, ``e0001,e0002``) -> names, zero padding kept;
    Slurm prints one bracket group per name, which is all this reads."""
    out = []
    for part in _split_top(hostlist.strip()):
        head, br, rest = part.partition("[")
        if not br:
            out.append(part)
            continue
        ranges, _, tail = rest.partition("]")
        for r in ranges.split(","):
            lo, dash, hi = r.partition("-")
            for i in range(int(lo), int(hi if dash else lo) + 1):
                out.append(f"{head}{i:0{len(lo)}d}{tail}")
    return out


def block_of(raw: dict) -> dict[str, str]:
    """node -> block from ``scontrol show topology`` (kept raw): a block is a switch one level above the
    leaves (Level=1), as harness/clusters/slurm/emulated.py builds racks under blocks."""
    out = {}
    for line in raw.get("topology") or []:
        f = fields(line)
        if f.get("Level") == "1" and f.get("Nodes"):
            for n in hostnames(f["Nodes"]):
                out[n] = f["SwitchName"]
    return out


def job_id(line: str) -> str | None:
    return fields(line).get("JobId")


def parse_time(text: str | None, utc_offset: str) -> float | None:
    """``2026-12-06T19:14:11`` in the cluster's zone (``+0000``) -> epoch seconds; None for Unknown/None."""
    if not text or text in ("Unknown", "None"):
        return None
    try:
        t = dt.datetime.strptime(text + utc_offset, "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        return None
    return t.timestamp()


def outcomes(trace: Trace, submitted: list[dict], raw: dict) -> list[JobOutcome]:
    """One outcome per trace job that sbatch accepted and that has a completion record, in trace order
    (a replay cancels what is left before it reads the records, so every accepted job should have one).
    A job cancelled before it started has no start: slurmctld writes its cancel time there.

    A preempted and requeued job has a line per attempt, each ``JobState=PREEMPTED`` but the last (which
    is too when the job was preempted and not requeued).
    Slurm rewrites ``SubmitTime`` at each requeue, so the submission is the first line's and the start,
    end and nodes are the last attempt's: its queue time runs from the submission to the run that
    finished, as on Kubernetes, where the JobSet keeps its creation time and its pods are made again."""
    lines: dict[str | None, list[dict[str, str]]] = {}
    for ln in raw.get("jobcomp", []):
        f = fields(ln)
        lines.setdefault(f.get("JobId"), []).append(f)
    slurm_id = {s["job"]: s["job_id"] for s in submitted if s.get("job_id")}
    zone = raw.get("utc_offset") or "+0000"
    out = []
    for job in trace.jobs:
        recs = lines.get(slurm_id.get(job.id, ""), [])
        if not recs:
            continue
        first, rec = recs[0], recs[-1]
        state = STATES.get(rec.get("JobState", ""), rec.get("JobState", "").lower() or "unknown")
        held = rec.get("NodeList", "") not in ("", "(null)", "None")
        start = parse_time(rec.get("StartTime"), zone) if held else None
        out.append(JobOutcome(job.id, job.tenant, job.nodes, job.gpus_per_node,
                              parse_time(first.get("SubmitTime"), zone), start,
                              parse_time(rec.get("EndTime"), zone) if start is not None else None, state,
                              tuple(sorted(hostnames(rec["NodeList"]))) if held else (),
                              preemptions=sum(r.get("JobState") == "PREEMPTED" for r in recs)))
    return out
