"""The Slurm backend's scheduler operations, behind one small interface with two implementations.

``SlurmBackend`` (backend.py) talks to slurmctld/slurmdbd only through a ``Scheduler``: the version,
settings, partitions and nodes (preflight), submitting a rendered job, job states, accounting
records, cancel, requeue and node state updates. *File* operations (putting the workload and the
script, reading event files and outputs, removing the run directory, ``srun`` for kill_rank) go
through a Transport of their own (the "files" channel).

* ``CliScheduler``: Slurm's commands over a Transport (local, ssh): sbatch, squeue --json,
  sacct, scancel, scontrol. With it the files channel is the same transport, and one poll asks
  squeue inside the event-file command (``combined_look``: one round trip, eventfiles.py).
* ``RestScheduler`` (rest.py): slurmrestd's OpenAPI with a JWT; the files channel is ssh to a login
  node or a local mount of ``slurm.workdir`` (files.py).

Every method answers in the shapes the CLI prints, so the backend parses both alike
(harness/slurm_parse.py): ``squeue`` returns ``(rc, text)`` of a ``squeue --json``-shaped document,
``accounting``/``attempts`` return ``SlurmJob`` rows, and the raw records keep what the scheduler
answered (records.py documents their layout).

Every scheduler counts what it asks of the cluster in ``calls`` (a Counter): the CLI by command
(``command_name``: sbatch, squeue, sacct, scancel, ...), slurmrestd by request (``GET job``,
``POST job/submit``; rest.py). ``counting(transport, calls)`` makes the backend's files channel count
into the same Counter, so one Counter holds every call a run's stages made.
"""
from __future__ import annotations

import posixpath
import time
from collections import Counter
from typing import Protocol

from ... import capabilities as cap
from ... import slurm_parse as sp
from ...errors import CommandError, SubmitError
from ...transports import Transport
from . import eventfiles, records
from .guard import NodeReason
from .records import TIME_ENV


def command_name(argv) -> str:
    """The name a command is counted under: its program's basename (``/usr/bin/sacct`` -> sacct).
    A ``sh -c`` script is named by what it is: the poll's event-file script (eventfiles.py) as
    ``squeue+event files`` when it runs squeue too, else ``event files``; any other script as
    ``sh -c`` and its first word (``sh -c cat``, ``sh -c mkdir``)."""
    if not argv:
        return "?"
    name = posixpath.basename(str(argv[0])) or str(argv[0])
    if name in ("sh", "bash") and len(argv) > 2 and argv[1] == "-c":
        if argv[2] == eventfiles.SCRIPT:   # argv: sh -c SCRIPT sh NONCE JOB_IDS ...
            return "squeue+event files" if len(argv) > 5 and argv[5] else "event files"
        words = str(argv[2]).split()
        return f"{name} -c {words[0]}" if words else f"{name} -c"
    return name


class CountingTransport:
    """A Transport that counts each command it runs in ``calls`` (by ``command_name``), before
    running it: a command that failed was still asked of the cluster."""

    def __init__(self, inner: Transport, counts: Counter):
        # not `calls`: a recording transport (tests) keeps its own `calls`, reached through __getattr__
        self.inner, self.counts = inner, counts

    @property
    def name(self) -> str:
        return self.inner.name

    def run(self, argv, *, input=None, env=None, timeout=60, check=True):
        self.counts[command_name(argv)] += 1
        return self.inner.run(argv, input=input, env=env, timeout=timeout, check=check)

    def describe(self) -> dict:
        return self.inner.describe()

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, attr):   # anything else a transport offers (SshTransport's host, ...)
        if attr in ("inner", "counts"):   # not set yet (copy, pickle): no recursion through self.inner
            raise AttributeError(attr)
        return getattr(self.inner, attr)


def counting(t: Transport, calls: Counter) -> Transport:
    """``t``, counting into ``calls``; a transport that already counts into ``calls`` as it is."""
    if isinstance(t, CountingTransport) and t.counts is calls:
        return t
    return CountingTransport(t, calls)


class Scheduler(Protocol):
    name: str
    combined_look: bool      # True: squeue runs inside the files channel's event-file command
    faults: frozenset[str]   # what it can inject (capabilities.faults("slurm", shell=...))
    calls: Counter           # what it asked of the cluster, by command or request kind

    def describe(self) -> dict: ...
    def version(self) -> str: ...
    def settings(self) -> dict[str, str]: ...
    def partitions(self) -> list[str]: ...
    def nodes(self) -> list[dict[str, str]]: ...
    def submit(self, script: str, run_dir: str) -> str: ...
    def squeue(self, job_ids: list[str]) -> tuple[int, str, str]: ...
    def find_jobs(self, name: str, workdir: str) -> list[str]: ...
    def accounting(self, job_ids: list[str]) -> list[sp.SlurmJob]: ...
    def attempts(self, job_id: str) -> tuple[list[sp.SlurmJob], dict]: ...
    def accounting_record(self, job_id: str) -> dict: ...
    def node_record(self, node: str, when: str) -> dict: ...
    def node_usable(self, node: str) -> tuple[bool, str]: ...
    def node_reason(self, node: str) -> NodeReason | None: ...
    def set_node_state(self, node: str, state: str, reason: str | None = None, check: bool = True) -> None: ...
    def requeue(self, job_id: str) -> None: ...
    def cancel(self, job_ids: list[str]) -> None: ...
    def close(self) -> None: ...


class CliScheduler:
    """Slurm's command-line tools through a Transport: what the backend always did."""
    name = "cli"
    combined_look = True
    faults = cap.faults("slurm")

    def __init__(self, t: Transport, calls: Counter | None = None):
        self.calls: Counter = Counter() if calls is None else calls
        self.t = counting(t, self.calls)

    def describe(self) -> dict:
        return self.t.describe()

    def version(self) -> str:
        return self.t.run(["sinfo", "--version"], timeout=30).stdout.strip()

    def settings(self) -> dict[str, str]:
        return sp.show_config(self.t.run(["scontrol", "show", "config"], timeout=30).stdout)

    def partitions(self) -> list[str]:
        return self.t.run(["sinfo", "-h", "-o", "%R"], timeout=30).stdout.split()

    def nodes(self) -> list[dict[str, str]]:
        return sp.sinfo_nodes(self.t.run(["sinfo", "-h", "-N", "-o", "%N|%T|%c|%m"], timeout=30).stdout)

    def submit(self, script: str, run_dir: str) -> str:
        """The script is already in run_dir/job.sbatch (put there by the backend)."""
        try:
            res = self.t.run(["sbatch", "--parsable", f"{run_dir}/job.sbatch"], timeout=60)
        except CommandError as exc:
            raise SubmitError(f"sbatch refused the job: {exc.stderr.strip() or exc.stdout.strip()}",
                              tip="check partition, account, qos and resources against `sinfo`") from exc
        job_id = res.stdout.strip().split(";")[0]
        if not job_id.isdigit():
            raise SubmitError(f"sbatch printed no job id: {res.stdout!r} {res.stderr!r}")
        return job_id

    def squeue(self, job_ids: list[str]) -> tuple[int, str, str]:
        res = self.t.run(["squeue", "--json", "--jobs=" + ",".join(job_ids)], timeout=60, check=False)
        return res.returncode, res.stdout, res.stderr

    def find_jobs(self, name: str, workdir: str) -> list[str]:
        """This user's queued or running jobs of that name in that working directory (a run's own)."""
        res = self.t.run(["squeue", "--me", "-h", f"--name={name}", "-o", "%i|%Z"], timeout=60)
        return sp.jobs_in_dir(res.stdout, workdir)

    def accounting(self, job_ids: list[str]) -> list[sp.SlurmJob]:
        res = self.t.run(["sacct", "-X", "-P", "-j", ",".join(job_ids), "-o", ",".join(sp.SACCT_FIELDS)],
                         env=TIME_ENV, timeout=60, check=True)
        return sp.sacct_attempts(res.stdout)

    def attempts(self, job_id: str) -> tuple[list[sp.SlurmJob], dict]:
        """Every attempt (sacct -D -X -P), and the raw record of what sacct printed."""
        res = self.t.run(["sacct", "-D", "-X", "-P", "-j", job_id, "-o", ",".join(sp.SACCT_FIELDS)],
                         env=TIME_ENV, timeout=60, check=False)
        rows = sp.sacct_attempts(res.stdout) if res.ok else []
        return rows, {"sacct_parsable": {"argv": list(res.argv), "env": dict(TIME_ENV), "rc": res.returncode,
                                         "at": time.time(), "text": res.stdout}}

    def accounting_record(self, job_id: str) -> dict:
        return records.command(self.t, ["sacct", "-D", "--json", "-j", job_id])

    def node_record(self, node: str, when: str) -> dict:
        return records.node_record(self.t, node, when)

    def node_usable(self, node: str) -> tuple[bool, str]:
        res = self.t.run(["sinfo", "-h", "-n", node, "-o", "%T"], check=False)
        seen = one_per_node(res.stdout)
        return sp.node_usable(seen), seen.strip() or res.stderr.strip()

    def node_reason(self, node: str) -> NodeReason | None:
        """The reason on the node and who set it (sinfo %u|%E: "Unknown|none" when there is none); None
        when it cannot be read."""
        res = self.t.run(["sinfo", "-h", "-n", node, "-o", "%u|%E"], check=False)
        line = one_per_node(res.stdout).strip()
        if res.returncode != 0 or not line or "\n" in line:
            return None
        user, sep, text = line.partition("|")   # a user name holds no '|'; a reason may
        return NodeReason(text.strip(), user.strip()) if sep else None


    def set_node_state(self, node: str, state: str, reason: str | None = None, check: bool = True) -> None:
        argv = ["scontrol", "update", f"nodename={node}", f"state={state}"]
        if reason:
            argv.append(f"reason={reason}")
        self.t.run(argv, check=check)

    def requeue(self, job_id: str) -> None:
        self.t.run(["scontrol", "requeue", job_id], timeout=60)

    def cancel(self, job_ids: list[str]) -> None:
        self.t.run(["scancel", *job_ids], check=False, timeout=60)

    def close(self) -> None:
        pass


def one_per_node(text: str) -> str:
    """What sinfo printed for one node, once: sinfo prints a line per partition the node is in, and a
    node's state and reason are the node's, the same on each. Lines that differ are kept, one per line
    (nothing reads them as one node's state then)."""
    lines = list(dict.fromkeys(ln.strip() for ln in (text or "").splitlines() if ln.strip()))
    return "\n".join(lines) + ("\n" if lines else "")
