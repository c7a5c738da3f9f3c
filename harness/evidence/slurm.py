"""Slurm's raw evidence (``Collected.raw``, harness/backends/slurm/records.py) -> time-stamps.

Pure: reads only ``raw``, never raises (odd input gives None for what it cannot tell, and a check
entry saying why). Sources, most precise first:

* **The batch script's own clock** (``batch-clock.txt``: ``date +%s.%N`` lines written by the
  rendered script, harness/data/sbatch/job.sbatch.tmpl). ``batch_start`` is its first action, and
  the batch script only runs once its nodes are allocated, so it bounds allocation from above.
  ``srun_exit`` is when the script saw srun end; ``requeue`` precedes the script's own
  ``scontrol requeue`` (a failed rank: the "detected" edge of a kill_rank recovery).
  These are the first node's clock; the harness and slurmctld are assumed to share time (one host
  for the local Docker cluster, NTP on a real one); a check fails when the clocks visibly disagree.
* **slurmctld's accounting** (``sacct -D --json``, one record per attempt; ``sacct -D -X -P`` as a
  fallback and cross-check): Submit, Start and End in whole seconds, so an instant T means [T, T+1).
  With ``slurm.transport: rest`` the same records come from slurmrestd (``GET /slurmdb/<v>/job/<id>``,
  the shape ``sacct --json`` prints) and there is no ``-P`` text to cross-check; a check names the source.
* **The harness clock** around ``sbatch``: slurmctld took the job between ``before`` and ``after``.

Allocation of an attempt therefore lies in [Start, batch_start] (and, for the first attempt, not
before the harness's submit bracket began); without a batch line, in [Start, Start + 1).
Start + 1 is NOT used as an upper bound when the batch clock is there: Start is the ``now`` that
slurmctld read when its scheduling pass began, and the periodic pass (sched_interval) wakes just
before a whole second, so it allocates just after Start + 1. Seen on 24.11 (slurmctld.log, ms):
"sched: Allocate JobId=5" at 09:03:33.001 for Start 09:03:32, batch script at 09:03:33.253; JobId=3
at 08:59:03.000 for Start 08:59:02. A job started at submit (idle nodes) is allocated within its
Start second, and the batch script follows within ~50 ms. A check says when the batch script began
more than 1 s after Start (the interval is then wider than the whole second, and right).
``released`` is End: slurmctld frees the nodes at End (an epilog, if any, runs after it and is not
measured here).
"""
from __future__ import annotations

import json
import math
import re

from .. import slurm_parse as sp
from ..states import JobState
from ..timing import Stamp

START_SRC = "slurmctld Start (sacct -D, whole s)"
END_SRC = "slurmctld End (sacct -D, whole s)"
SUBMIT_SRC = "slurmctld Submit (sacct -D, whole s)"
BRACKET_SRC = "harness clock around sbatch (before the call, after it returned)"
CLOCK_RES = 1e-9                                 # date +%s.%N
_KINDS = {"batch_start", "srun_start", "srun_exit", "requeue", "import_start", "import_done"}
_LIVE = {JobState.PENDING, JobState.STARTING, JobState.RUNNING, JobState.RESTARTING, JobState.UNKNOWN}


def _f(v) -> float | None:
    """A finite positive epoch time, or None."""
    if isinstance(v, bool):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return x if math.isfinite(x) and x > 0 else None


def _text(rec) -> str:
    t = rec.get("text") if isinstance(rec, dict) else rec
    return t if isinstance(t, str) else ""


def expand_hostlist(s: str) -> list[str]:
    """'c[1-3,5],gpu-[01-02]' -> ['c1', 'c2', 'c3', 'c5', 'gpu-01', 'gpu-02'] (one bracket group per
    name, as Slurm prints node lists); what is not understood is kept as written."""
    out: list[str] = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]*)\])?([^,\[]*)", s or ""):
        pre, rng, post = m.group(1), m.group(2), m.group(3)
        if rng is None:
            out.append(pre + post)
            continue
        for part in rng.split(","):
            a, _, b = part.partition("-")
            if a.isdigit() and (b.isdigit() or not b) and (not b or int(b) - int(a) < 10000):
                for n in range(int(a), int(b or a) + 1):
                    out.append(f"{pre}{str(n).zfill(len(a))}{post}")
            else:
                out.append(f"{pre}[{part}]{post}")
    return [h for h in out if h]


def clock_lines(text: str) -> list[dict]:
    """``batch-clock.txt`` -> [{"kind", "t", "restart", "host", "job", "rc"}]; bad lines are skipped."""
    out = []
    for line in (text or "").splitlines():
        w = line.split()
        if len(w) < 5 or w[0] not in _KINDS or _f(w[1]) is None or not w[2].isdigit():
            continue
        rc = int(w[5]) if len(w) > 5 and w[5].lstrip("-").isdigit() else None
        out.append({"kind": w[0], "t": float(w[1]), "restart": int(w[2]), "host": w[3], "job": w[4], "rc": rc})
    return out


def _rows(raw: dict, checks: list) -> list[sp.SlurmJob]:
    """Every attempt, oldest first: sacct -D --json, else sacct -D -X -P; the two cross-checked."""
    jid = str(raw.get("job_id") or "")
    js = [r for r in sp.sacct_json(_text(raw.get("sacct_json"))) if not jid or r.job_id == jid]
    ps = [r for r in sp.sacct_attempts(_text(raw.get("sacct_parsable"))) if not jid or r.job_id == jid]

    def key(r):
        return (r.submit or 0, r.start or math.inf)
    js, ps = sorted(js, key=key), sorted(ps, key=key)
    if js and ps:
        a = [(r.submit, r.start, r.end) for r in js]
        b = [(r.submit, r.start, r.end) for r in ps]
        checks.append({"what": "sacct -D --json and -D -X -P agree on every attempt", "ok": a == b,
                       "detail": f"{len(js)} attempts" if a == b else f"json {a} vs parsable {b}"})
    elif not js:
        checks.append({"what": "sacct -D --json readable", "ok": False,
                       "detail": f"no JSON records; {len(ps)} rows from sacct -D -X -P used"})
    acct = raw.get("sacct_json")
    if isinstance(acct, dict) and acct.get("source") == "slurmrestd":   # slurm.transport rest (records.py)
        checks.append({"what": "accounting records from slurmrestd (sacct --json's shape, slurmdbd's clocks)",
                       "ok": bool(js), "detail": f"{acct.get('request')}: HTTP {acct.get('rc')}, {len(js)} attempts"})
    return js or ps


def _submitted(raw: dict, rows: list[sp.SlurmJob], checks: list) -> Stamp | None:
    sub = raw.get("submit") if isinstance(raw.get("submit"), dict) else {}
    before, after = _f(sub.get("before")), _f(sub.get("after"))
    s = rows[0].submit if rows and rows[0].submit else _f(sub.get("scheduler_record"))
    sched = Stamp.truncated(float(s), SUBMIT_SRC) if s else None
    bracket = Stamp.between(before, after, BRACKET_SRC) if before and after and before <= after else None
    if bracket is None:
        checks.append({"what": "submitted: harness bracket around sbatch", "ok": False,
                       "detail": f"before={sub.get('before')!r} after={sub.get('after')!r}: "
                                 "slurmctld Submit alone"})
        return sched
    if sched is None:
        checks.append({"what": "submitted: slurmctld Submit within the harness bracket", "ok": False,
                       "detail": "no Submit in sacct: the harness bracket alone"})
        return bracket
    both = bracket.narrowed(sched)
    checks.append({"what": "submitted: slurmctld Submit within the harness bracket", "ok": both is not None,
                   "detail": f"bracket [{before:.6f}, {after:.6f}], Submit [{s}, {s + 1})"
                             + ("" if both else ": clocks disagree, the harness bracket is kept")})
    return both or bracket


def _allocated(i: int, row: sp.SlurmJob, start_line: dict | None, floor: float | None,
               checks: list) -> Stamp | None:
    if not row.start:
        return None
    lo, hi, src = float(row.start), float(row.start) + 1.0, START_SRC
    res = 1.0
    if start_line is None:   # [Start, Start + 1): the whole second, a pass's run time aside (see above)
        checks.append({"what": f"attempt {i}: batch script start line", "ok": False,
                       "detail": f"no batch_start line for restart {i} of job {row.job_id}: Start alone is used"})
    else:
        b = start_line["t"]
        ok = b >= lo
        checks.append({"what": f"attempt {i}: batch script started at or after slurmctld Start", "ok": ok,
                       "detail": f"batch_start {b:.6f} on {start_line['host']}, Start {row.start}"
                                 + ("" if ok else ": clocks disagree, Start alone is used")
                                 + (": more than 1 s later, allocated after Start + 1 or waiting for its nodes"
                                    if ok and b >= hi else "")})
        if ok:
            hi, res = b, CLOCK_RES
            src = f"{START_SRC} .. batch script start (date +%s.%N on {start_line['host']}, upper bound)"
    if floor is not None and lo < floor < hi:      # nothing is allocated before it was submitted
        lo = floor
        src += " .. not before the submit bracket"
    return Stamp((lo + hi) / 2, lo, hi, src, res)


def _ended(i: int, row: sp.SlurmJob, last_line: dict | None, checks: list) -> Stamp | None:
    """End of an attempt; a line the script wrote just before it ended the attempt itself (its exit,
    or its own scontrol requeue) is a lower bound. After an outside end (node failure, scontrol
    requeue, cancel) the script may write after End, so no line is used then."""
    if not row.end:
        return None
    e = float(row.end)
    st = Stamp.truncated(e, END_SRC)
    if last_line is None:
        return st
    t = last_line["t"]
    ok = t < e + 1.0
    checks.append({"what": f"attempt {i}: batch script's last line before slurmctld End", "ok": ok,
                   "detail": f"{last_line['kind']} {t:.6f}, End {row.end}"})
    if ok and t > e:
        return Stamp((t + e + 1.0) / 2, t, e + 1.0, f"{END_SRC} .. after the batch script's {last_line['kind']} "
                                                     f"(date +%s.%N on {last_line['host']})", CLOCK_RES)
    return st


def _attempt(i: int, row: sp.SlurmJob, lines: list[dict], last: bool, floor: float | None, checks: list) -> dict:
    def first(kind):
        """The attempt's line of that kind: SLURM_RESTART_COUNT numbers the attempts as sacct -D lists
        them; a line from before the attempt began (a stale file) is not its own."""
        for ln in lines:
            if (ln["kind"] == kind and ln["restart"] == i and ln["job"] in ("", row.job_id)
                    and not (row.start and ln["t"] < row.start - 1)):
                return ln
        return None
    start_line, exit_line, requeue_line = first("batch_start"), first("srun_exit"), first("requeue")
    # NODE_FAIL is FAILED in the shared enum, but slurmctld ended that attempt: the batch script's srun
    # may end only then (killed with the job), so its lines are a consequence of End, not a bound on it
    outside = row.native_state.startswith("NODE_FAIL")
    own_end = None if outside else requeue_line or (
        exit_line if row.state in (JobState.SUCCEEDED, JobState.FAILED) else None)
    ended = _ended(i, row, own_end, checks)
    detected = None
    if requeue_line is not None and exit_line is not None and (not row.end or requeue_line["t"] < row.end + 1):
        detected = Stamp.exact(exit_line["t"], f"batch script saw srun fail, rc {exit_line['rc']} "
                                               f"(date +%s.%N on {exit_line['host']})")
    elif not last and row.end and row.state not in (JobState.SUCCEEDED,):
        # NODE_FAIL, an outside requeue, preemption: slurmctld acted at End
        detected = Stamp.truncated(float(row.end), f"{END_SRC}: slurmctld ended the attempt {row.native_state}")
    released = None if ended is None else Stamp(
        ended.t, ended.lo, ended.hi, f"{ended.source}: slurmctld frees the nodes at End (epilog not measured)",
        ended.resolution_s)
    out = {"attempt": i, "allocated": _allocated(i, row, start_line, floor, checks), "detected": detected,
           "ended": ended, "released": released, "nodes": expand_hostlist(row.nodes)}
    step = first("srun_start")
    if step is not None:    # batch scripts from before it was written have none
        out["step_requested"] = Stamp.exact(step["t"], f"batch script before srun (date +%s.%N on {step['host']})")
    began, ready = first("import_start"), first("import_done")
    if began is not None and ready is not None:   # the image import step (pyxis, apptainer; render/sbatch.py)
        out["image_import"] = {"start": Stamp.exact(began["t"], f"batch script before the import step (date "
                                                                f"+%s.%N on {began['host']})"),
                               "done": Stamp.exact(ready["t"], f"batch script after it (date +%s.%N on "
                                                               f"{ready['host']}), exit {ready['rc']}"),
                               "rc": ready["rc"]}
    return out


def _squeue_check(raw: dict, rows: list[sp.SlurmJob], checks: list) -> None:
    sq = raw.get("squeue") if isinstance(raw.get("squeue"), dict) else None
    if not sq or not isinstance(sq.get("doc"), dict):
        return
    seen = sp.squeue_json(json.dumps(sq["doc"]))
    if not seen or not seen[0].start or seen[0].state not in (JobState.RUNNING, JobState.STARTING):
        return
    j = seen[0]
    match = j.restarts < len(rows) and rows[j.restarts].start == j.start
    checks.append({"what": "squeue's start_time equals sacct's Start of that attempt", "ok": match,
                   "detail": f"squeue restart {j.restarts} start {j.start}; sacct starts {[r.start for r in rows]}"})


def stamps(raw: dict) -> dict:
    checks: list[dict] = []
    out: dict = {"submitted": None, "admitted": None, "allocated": None, "ended": None, "released": None,
                 "attempts": [], "checks": checks}
    if not isinstance(raw, dict):
        checks.append({"what": "raw evidence present", "ok": False, "detail": type(raw).__name__})
        return out
    try:
        rows = _rows(raw, checks)
        out["submitted"] = _submitted(raw, rows, checks)
        lines = clock_lines(_text(raw.get("alloc_evidence")))
        floor = out["submitted"].lo if out["submitted"] is not None else None
        out["attempts"] = [_attempt(i, r, lines, i == len(rows) - 1, floor if i == 0 else None, checks)
                           for i, r in enumerate(rows)]
        _squeue_check(raw, rows, checks)
    except Exception as exc:  # noqa: BLE001 - evidence must never stop a run's record; say what failed
        checks.append({"what": "evidence.slurm read the raw evidence", "ok": False, "detail": repr(exc)[:300]})
        return out
    if out["attempts"]:
        out["allocated"] = out["attempts"][0]["allocated"]
        last, row = out["attempts"][-1], rows[-1]
        if row.state not in _LIVE:
            out["ended"], out["released"] = last["ended"], last["released"]
    return out
