"""A running job's output so far, read where the job writes it, for `poc logs` on a run in flight:
the store keeps a run's output only once the run is collected, and a user watching a campaign in
another terminal wants it now.

Slurm: the batch output file (render/sbatch.py: --output=<run_dir>/slurm-%j.out), read through the
backend's files channel (ssh to the login node, the local cluster's login container, or the mount
with slurmrestd), the same way the run's collect reads it at the end. Local (host processes): the
agents' log files in the run's work directory on this machine. Other platforms and runtimes have no
reader here; `poc logs` then says where their output is meanwhile.

Nothing here changes the job or the store: only files are read, and the backend is closed after.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..errors import PocError

MAX_BYTES = 200_000          # as much of each file as the store keeps of a finished run's output


class LiveReadError(PocError):
    """The job's output could not be read where it is (the cluster did not answer, a path is unknown)."""


def readable(handle: dict) -> bool:
    """Whether this module can read the output of the job `handle` names."""
    data = handle.get("data") or {}
    if handle.get("platform") == "slurm":
        return bool(data.get("run_dir") and data.get("job_id"))
    if handle.get("platform") == "local":
        return data.get("runtime", "host") == "host" and bool(data.get("work_dir"))
    return False


def read(handle: dict, make_backend: Callable[[str], object]) -> dict[str, str]:
    """{name: text} of the job's output so far, named as the store names it when the run is collected
    (slurm.out; agent-N.log); {} when the job has written nothing yet."""
    data = handle.get("data") or {}
    if handle.get("platform") == "local":
        work = Path(data["work_dir"])
        return {p.name: _tail_file(p) for p in sorted(work.glob("agent-*.log")) if p.is_file()}
    from ..backends.slurm.userview import output_name

    path = f"{str(data['run_dir']).rstrip('/')}/{output_name(str(data['job_id']))}"
    backend = make_backend("slurm")
    try:
        # tail exits 1 when the file is not there yet (the job has not started): nothing written
        res = backend.t.run(["tail", "-c", str(MAX_BYTES), "--", path], timeout=60, check=False)
    except PocError as exc:
        raise LiveReadError(f"the output of job {data['job_id']} ({path}) could not be read: {exc.message}",
                            tip=exc.tip or "check that the Slurm login node answers (`poc check`)") from None
    finally:
        backend.close()
    return {"slurm.out": res.stdout} if res.returncode == 0 and res.stdout else {}


def _tail_file(p: Path) -> str:
    with open(p, "rb") as fh:
        size = fh.seek(0, 2)
        fh.seek(max(0, size - MAX_BYTES))
        return fh.read().decode("utf-8", errors="replace")
