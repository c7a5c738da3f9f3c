"""Replay a trace on Slurm: each job's batch script submitted at its offset, the queue watched with one
squeue per look until none of the replay's jobs is left, then the job completion records of exactly
the job ids sbatch returned read once and kept; anything still queued at the end is cancelled.

``shell`` runs one argv on the cluster's login side (on the emulated cluster: ``docker exec -i`` into
its container) with optional stdin, and returns a CompletedProcess. Jobs due in the same look go in
one call: their scripts travel NUL-separated on stdin to a fixed loop that runs ``sbatch --parsable``
on each, so a burst costs one round trip, and no trace text is ever part of a command line.
"""
from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import BackendError
from ..render import replay_slurm as rs
from ..scale.trace import Trace, TraceJob
from . import slurm_records
from .pace import due_batches

Shell = Callable[..., subprocess.CompletedProcess]

# reads NUL-separated batch scripts on stdin; prints "ok<TAB>jobid" or "err<TAB>message" for each, in order
SUBMIT_LOOP = ("while IFS= read -r -d '' s; do "
               "if out=$(printf '%s' \"$s\" | sbatch --parsable 2>&1); then printf 'ok\\t%s\\n' \"${out%%;*}\"; "
               "else printf 'err\\t%s\\n' \"$(printf '%s' \"$out\" | tr '\\n' ' ')\"; fi; done")


@dataclass
class Submitted:
    job: str
    due_s: float
    sent_at: float                  # harness wall clock, from the replay's zero (the batch's send time)
    job_id: str = ""
    error: str = ""


@dataclass
class SlurmReplay:
    shell: Shell
    target: rs.SlurmTarget
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    cpu: Callable[[], float] = time.process_time
    poll_s: float = 2.0
    submitted: list[Submitted] = field(default_factory=list)
    looks: int = 0
    calls: dict[str, int] = field(default_factory=dict)

    def _run(self, what: str, argv: list[str], stdin: bytes | None = None, timeout: float = 300):
        self.calls[what] = self.calls.get(what, 0) + 1
        res = self.shell(argv, input=stdin, timeout=timeout)
        if res.returncode != 0:     # an empty squeue from a dead cluster must not read as "all ended"
            raise BackendError(f"{what} on the Slurm cluster failed (exit {res.returncode}): "
                               f"{(res.stderr or res.stdout).strip()[-500:]}",
                               tip="is the cluster up? `poc cluster up --slurm --emulated N` for the local one")
        return res

    def _send(self, jobs: list[TraceJob], t0: float) -> None:
        sent = round(self.clock() - t0, 6)
        stdin = b"".join(rs.batch_script(j, self.target).encode() + b"\0" for j in jobs)
        res = self._run("sbatch batch", ["bash", "-c", SUBMIT_LOOP], stdin, timeout=60 + 2 * len(jobs))
        answers = res.stdout.splitlines()
        for i, j in enumerate(jobs):
            status, _, text = (answers[i] if i < len(answers) else "err\tno answer").partition("\t")
            self.submitted.append(Submitted(j.id, j.submit_s, sent, job_id=text.strip() if status == "ok" else "",
                                            error="" if status == "ok" else text.strip() or res.stderr.strip()))

    def submit(self, trace: Trace) -> float:
        """Send every job at its offset from now (those due together in one call); the wall-clock zero."""
        t0 = self.clock()
        for due in due_batches(trace, t0, self.clock, self.sleep):
            self._send(due, t0)
        return t0

    def queued(self) -> dict[str, str]:
        """job id -> state, for the replay's jobs squeue still shows (pending, running, completing)."""
        res = self._run("squeue", ["squeue", "-h", "--name", rs.slurm_name(self.target.replay), "-o", "%i %T"])
        return dict(line.split(None, 1) for line in res.stdout.splitlines() if len(line.split(None, 1)) == 2)

    def wait_ended(self, timeout_s: float) -> bool:
        deadline = self.clock() + timeout_s
        while True:
            self.looks += 1
            if not self.queued():
                return True
            if self.clock() >= deadline:
                return False
            self.sleep(self.poll_s)

    def records(self) -> dict:
        """The completion records of the replay's job ids, the cluster clock's UTC offset (the records'
        times carry no zone) and the switch tree (which block each node is in)."""
        ids = {s.job_id for s in self.submitted if s.job_id}
        log = self._run("read jobcomp", ["cat", slurm_records.JOBCOMP_LOG], timeout=120).stdout
        zone = self._run("date", ["date", "+%z"]).stdout.strip()
        topology = self._run("scontrol show topology", ["scontrol", "show", "topology"]).stdout.splitlines()
        return {"jobcomp": [ln for ln in log.splitlines() if slurm_records.job_id(ln) in ids], "utc_offset": zone,
                "topology": [ln.strip() for ln in topology if ln.strip()]}

    def cancel(self) -> list[str]:
        """scancel the replay's jobs still queued; their ids."""
        left = sorted(self.queued())
        if left:
            self._run("scancel", ["scancel", *left])
        return left

    def run(self, trace: Trace, timeout_s: float) -> dict:
        """Submit, watch, read the records. Interrupted (Ctrl-C), the jobs left are cancelled and the records
        of what was submitted are still read and returned, marked interrupted; any other error cancels and
        raises."""
        cpu0 = self.cpu()
        t0, interrupted = self.clock(), False
        try:
            t0 = self.submit(trace)
            ended = self.wait_ended(timeout_s)
        except KeyboardInterrupt:
            ended, interrupted = False, True
        except BaseException:       # what was submitted must not stay on the cluster
            self.cancel()
            raise
        cpu_s = self.cpu() - cpu0
        cancelled = [] if ended else self.cancel()
        return {"platform": "slurm", "t0": t0, "ended": ended, "interrupted": interrupted, "raw": self.records(),
                "submitted": [vars(s) for s in self.submitted], "looks": self.looks, "cancelled": cancelled,
                "harness_cpu_s": round(cpu_s, 3), "calls": dict(self.calls),
                "resolution_s": slurm_records.RESOLUTION_S}
