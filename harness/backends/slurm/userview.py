"""What a Slurm user can read about a run right now, in Slurm's own words (the mistake probe's eyes).

A user watching a job runs ``squeue`` (state and, while it waits, the Reason: ``(PartitionConfig)``,
``(ReqNodeNotAvail, ...)``, ``(BeginTime)`` after a requeue), ``sacct`` once squeue has forgotten it
(State and ExitCode: ``FAILED 1:0``), and reads the job's output file ``slurm-<id>.out``, where
bash, python and srun write what went wrong: a venv that is not there (``.../bin/activate: No such
file or directory``), an entrypoint typo (``can't open file '.../ddp_trian.py'``), a checkpoint
directory that cannot be made (``PermissionError: [Errno 13] Permission denied: '/lustre'``).

One look costs two requests, whatever the transport: the job's state (squeue; sacct only on the look
that finds squeue no longer lists it, once: a finished job's record does not change, so it is kept in
``handle.data["user_view_ended"]``) and one read of the output file. The state goes through the
backend's scheduler (``squeue --json``/``sacct -P`` over ssh or locally; ``GET job/<id>`` and
``GET slurmdb job/<id>`` with ``slurm.transport: rest``), the file through its files channel (the
same transport; ssh to a login node or the local mount with rest).

The output file is read with ``grep -E``, not ``tail``: the cause is the *first* error a job prints,
and a job that requeues itself (--requeue with restarts left) buries it under 100 KB of later
attempts' tracebacks, out of reach of any tail a 1 s poll can afford (tests/fixtures/slurm/mistakes/).
grep sends the candidate lines; ``error_lines`` (pure) keeps the messages among them.
"""
from __future__ import annotations

import re

from ... import slurm_parse as sp
from ...errors import CommandError, TransportError
from ..base import Handle

ENDED_KEY = "user_view_ended"
MAX_LINES = 8            # distinct error lines kept from the output file, first first
_GREP_MAX = "400"        # candidate lines grep sends at most (a requeued job repeats its error per attempt)

# What grep sends (POSIX ERE, so any grep on a login node reads it): lines that may say what went wrong.
OUTPUT_ERE = (r"(Error|Exception|error:|can't open file|No such file or directory|Permission denied"
              r"|command not found|[Ff]ailed|CANCELLED|DUE TO|Killed|[Oo]ut of memory)")
# ... and of those, the ones a user would read as the message, not as a traceback's furniture.
_MESSAGE = re.compile(
    r"\b\w+(Error|Exception)\b: \S"                 # a python exception with its text: PermissionError: [Errno 13] ...
    r"|can't open file|No such file or directory|Permission denied|command not found"
    r"|\berror: \S"                                 # srun: error: ..., slurmstepd-c1: error: *** JOB ... CANCELLED
    r"|^poc: .* failed on "                         # the batch script's own setup check (render/sbatch.py: _fail)
    r"|[Oo]ut of memory|\bKilled\b")
_NOISE = re.compile(r"^POC_EVENT |^\s+File \"|^\s+raise |To enable traceback|error_file:|^\s*\^|^\s*~")
_PREFIX = re.compile(r"^(\[rank\d+\]:\s*|[EWI]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+\] )")   # per-rank and glog prefixes


def output_name(job_id: str) -> str:
    return f"slurm-{job_id}.out"


def output_argv(run_dir: str, job_id: str) -> list[str]:
    """The one read of the output file (render/sbatch.py: --output=<run_dir>/slurm-%j.out)."""
    return ["grep", "-a", "-m", _GREP_MAX, "-E", OUTPUT_ERE, f"{run_dir.rstrip('/')}/{output_name(job_id)}"]


def error_lines(text: str, limit: int = MAX_LINES) -> list[str]:
    """The distinct lines of a job's output that say what went wrong, in the order written. A rank's
    ``[rank0]:`` prefix and torch's glog prefix are dropped, so two ranks' same error is one line."""
    out: list[str] = []
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        if not line or _NOISE.search(line) or not _MESSAGE.search(line):
            continue
        line = _PREFIX.sub("", line).strip()
        if line not in out:
            out.append(line)
            if len(out) >= limit:
                break
    return out


def squeue_text(job: sp.SlurmJob) -> str:
    """As squeue's ST and NODELIST(REASON) columns read: ``PENDING (BeginTime)``, ``RUNNING c[1-2]``."""
    state = job.native_state or "UNKNOWN"
    if state == "PENDING" or not job.nodes:
        return f"{state} ({job.reason or 'None'})"
    return f"{state} {job.nodes}"


def sacct_text(job: sp.SlurmJob) -> str:
    """sacct's State and ExitCode (``FAILED 1:0``: exit status 1, no signal)."""
    return f"{job.native_state or 'UNKNOWN'} ExitCode {job.exit_code or '?'}"


def state_messages(squeue: list[sp.SlurmJob] | None, sacct: list[sp.SlurmJob] | None,
                   job_id: str) -> list[dict]:
    """The job's state messages from what squeue and (when asked) sacct answered; pure."""
    msgs = []
    mine = [j for j in squeue or [] if j.job_id == job_id]
    if mine:
        msgs.append({"source": "squeue", "text": squeue_text(mine[-1])})
    rows = [j for j in sacct or [] if j.job_id == job_id]
    if rows:
        msgs.append({"source": "sacct State/ExitCode", "text": sacct_text(rows[-1])})
    return msgs


def output_messages(job_id: str, text: str) -> list[dict]:
    source = f"job output {output_name(job_id)}"
    return [{"source": source, "text": line} for line in error_lines(text)]


def _squeue(sched, job_id: str) -> list[sp.SlurmJob] | None:
    """squeue's entries for the job ([] when it no longer lists it), None when squeue did not answer."""
    try:
        rc, out, _ = sched.squeue([job_id])
    except (TransportError, CommandError):
        return None
    return sp.squeue_json(out) if rc == 0 else None


def _sacct(sched, job_id: str) -> list[sp.SlurmJob] | None:
    try:
        return sched.accounting([job_id])
    except (TransportError, CommandError):
        return None


def _output(t, run_dir: str, job_id: str) -> str:
    """grep's lines; "" when the file is not there yet (rc 2) or holds no candidate (rc 1)."""
    try:
        res = t.run(output_argv(run_dir, job_id), timeout=30, check=False)
    except TransportError:
        return ""
    return res.stdout if res.returncode == 0 else ""


def view(backend, handle: Handle) -> list[dict]:
    """What the user can read now: [{"source", "text"}], the job's state first, then the output
    file's error lines. Never raises for a request that failed: that part is left out."""
    job_id, run_dir = str(handle.data["job_id"]), handle.data["run_dir"]
    ended = handle.data.get(ENDED_KEY)
    if ended:
        msgs = [dict(ended)]
    else:
        queued = _squeue(backend.sched, job_id)
        in_queue = [j for j in queued or [] if j.job_id == job_id and not j.state.terminal]
        # squeue drops a finished job within a second or two here (and may list it ended, with
        # MinJobAge): sacct then says how it ended
        acct = _sacct(backend.sched, job_id) if queued is not None and not in_queue else None
        msgs = state_messages(queued, acct, job_id)
        last = [j for j in acct or [] if j.job_id == job_id][-1:]
        if last and last[0].state.terminal:
            handle.data[ENDED_KEY] = msgs[-1]
    return msgs + output_messages(job_id, _output(backend.t, run_dir, job_id))
