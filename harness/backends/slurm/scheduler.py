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
"""
from __future__ import annotations

import time
from typing import Protocol

from ... import slurm_parse as sp
from ...errors import CommandError, SubmitError
from ...transports import Transport
from . import records
from .records import TIME_ENV


class Scheduler(Protocol):
    name: str
    combined_look: bool      # True: squeue runs inside the files channel's event-file command

    def describe(self) -> dict: ...
    def version(self) -> str: ...
    def settings(self) -> dict[str, str]: ...
    def partitions(self) -> list[str]: ...
    def nodes(self) -> list[dict[str, str]]: ...
    def submit(self, script: str, run_dir: str) -> str: ...
    def squeue(self, job_ids: list[str]) -> tuple[int, str, str]: ...
    def accounting(self, job_ids: list[str]) -> list[sp.SlurmJob]: ...
    def attempts(self, job_id: str) -> tuple[list[sp.SlurmJob], dict]: ...
    def accounting_record(self, job_id: str) -> dict: ...
    def node_record(self, node: str, when: str) -> dict: ...
    def node_usable(self, node: str) -> tuple[bool, str]: ...
    def set_node_state(self, node: str, state: str, reason: str | None = None, check: bool = True) -> None: ...
    def requeue(self, job_id: str) -> None: ...
    def cancel(self, job_ids: list[str]) -> None: ...
    def close(self) -> None: ...


class CliScheduler:
    """Slurm's command-line tools through a Transport: what the backend always did."""
    name = "cli"
    combined_look = True

    def __init__(self, t: Transport):
        self.t = t

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
        return sp.node_usable(res.stdout), res.stdout.strip() or res.stderr.strip()

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
