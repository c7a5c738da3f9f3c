"""A GPU request against the GPUs Slurm's nodes have (their gres), so an impossible one fails fast.

Preflight asks ``sinfo -h -o %G`` (of slurm.partition, if set) once: GPUs asked for where no node
has a ``gpu`` gres (of slurm.gpu_type, if set) is an error before anything is submitted. When
sbatch (or slurmrestd) refuses a job ("Requested node configuration is not available": more GPUs
per node than any node has), the refusal gets a TIP that names the GPUs per node sinfo reports. If
sinfo cannot be asked (slurmrestd with a mounted run directory has no shell), both say no more.
"""
from __future__ import annotations

import re

from ...errors import BackendError, CommandError, SubmitError, TransportError

# gpu[:type]:count, as sinfo %G prints a node's gres: "gpu:4", "gpu:a100:8(S:0-1)", "gpu:h100:4,nvme:1"
_GPU = re.compile(r"(?:^|,)gpu(?::([A-Za-z0-9_.+-]+))?:(\d+)")


def gres_text(t, partition: str | None) -> str | None:
    """What ``sinfo -h -o %G`` prints (one line per distinct gres), or None if it could not be asked."""
    argv = ["sinfo", "-h", "-o", "%G", *(["-p", partition] if partition else [])]
    try:
        res = t.run(argv, timeout=30, check=True)
    except (TransportError, CommandError):
        return None
    return res.stdout


def per_node(text: str, gpu_type: str | None = None) -> list[int]:
    """GPUs per node for each line of sinfo %G (of gpu_type, if given); 0 for a line without any."""
    counts = []
    for line in (text or "").splitlines():
        if line.strip():
            counts.append(sum(int(n) for typ, n in _GPU.findall(line.strip()) if gpu_type is None or typ == gpu_type))
    return counts


def _shown(text: str) -> str:
    return ", ".join(sorted({ln.strip() for ln in text.splitlines() if ln.strip()})) or "nothing"


def problem(gpus_per_node: int, gpu_type: str | None, partition: str | None,
            text: str | None) -> tuple[str, str] | None:
    """(message, tip) when the request cannot fit any node, else None (also when sinfo was not read)."""
    if not gpus_per_node or text is None:
        return None
    counts = per_node(text, gpu_type)
    where = f"partition {partition!r}" if partition else "the cluster"   # sinfo without -p: every partition
    asked = f"{gpus_per_node} {gpu_type + ' ' if gpu_type else ''}GPU(s) per node"
    seen = f"sinfo -o %G: {_shown(text)}"
    if not any(counts):
        kind = f"a gpu:{gpu_type} gres" if gpu_type else "a gpu gres"
        return (f"{asked} were asked for, but no node of {where} has {kind} ({seen})",
                "pick a partition with GPU nodes (slurm.partition), fix slurm.gpu_type, or set "
                "resources.gpus_per_node: 0 for a CPU run")
    most = max(counts)
    if gpus_per_node > most:
        return (f"{asked} were asked for, but no node of {where} has more than {most} ({seen})",
                f"set resources.gpus_per_node (and procs_per_node) to {most} or less, and add nodes instead")
    return None


def preflight_check(t, gpus_per_node: int, gpu_type: str | None, partition: str | None) -> str | None:
    """Raise BackendError when no node has GPUs (of the type); return what sinfo said (for the record)."""
    if not gpus_per_node:
        return None
    text = gres_text(t, partition)
    found = problem(gpus_per_node, gpu_type, partition, text)
    # Too many per node is left to sbatch, whose refusal explain_refusal() annotates: the scheduler
    # has the last word (a node's gres can change under us), and its message is what users search for.
    if found and not any(per_node(text or "", gpu_type)):
        raise BackendError(found[0], tip=found[1])
    return None if text is None else _shown(text)


def explain_refusal(exc: SubmitError, t, gpus_per_node: int, gpu_type: str | None,
                    partition: str | None) -> SubmitError:
    """The scheduler's refusal, with a TIP naming the nodes' GPUs when the GPU request is why."""
    if not gpus_per_node:
        return exc
    text = gres_text(t, partition)
    found = problem(gpus_per_node, gpu_type, partition, text)
    if found:
        return SubmitError(f"{exc.message}; {found[0]}", tip=found[1])
    if text is not None and "node configuration is not available" in exc.message:
        return SubmitError(exc.message, tip=f"the nodes report GPUs per node as {_shown(text)} (sinfo -o %G); "
                                            "check resources.gpus_per_node, slurm.gpu_type, slurm.gres and "
                                            "slurm.constraint against them")
    return exc
