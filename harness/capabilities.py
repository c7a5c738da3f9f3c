"""What each platform can do: the faults its backend injects and the scenarios it runs.

The one table. Config validation and the run plan read it (a run the platform cannot do is never
planned, and `poc run` says which were left out and why), each backend declares its faults from it,
and the scenarios' platform parts (drills/platforms.py, serve/platforms.py) are tested against it.
"""
from __future__ import annotations

PLATFORMS = ("local", "slurm", "k8s")

FAULTS: dict[str, frozenset[str]] = {
    "local": frozenset({"kill_rank"}),
    "slurm": frozenset({"kill_rank", "lose_node", "requeue"}),
    "k8s": frozenset({"kill_rank", "delete_pod", "lose_node"}),
}
# Slurm signals a rank with `srun --overlap` and requeues with `scontrol`: both need a shell on a login
# node, which slurmrestd alone (slurm.transport rest with rest.files mount) does not give
SLURM_SHELL_FAULTS = frozenset({"kill_rank", "requeue"})

# The scenarios beside clean and fault runs; the local baseline has no scheduler to make a job wait,
# to make a mistake with, to restart or to host a service.
SCENARIOS: dict[str, frozenset[str]] = {
    "contention": frozenset({"slurm", "k8s"}),
    "ux": frozenset({"slurm", "k8s"}),
    "drills": frozenset({"slurm", "k8s"}),
    "serve": frozenset({"slurm", "k8s"}),
    "scale": frozenset({"slurm", "k8s"}),
}


def faults(platform: str, *, shell: bool = True) -> frozenset[str]:
    """The faults ``platform``'s backend injects; ``shell``: whether Slurm commands can run on a login node."""
    have = FAULTS.get(platform, frozenset())
    return have if shell or platform != "slurm" else have - SLURM_SHELL_FAULTS


def fault_platforms(kind: str) -> frozenset[str]:
    """The platforms that inject ``kind`` at all."""
    return frozenset(p for p, kinds in FAULTS.items() if kind in kinds)


def runs(scenario: str, platform: str) -> bool:
    return platform in SCENARIOS[scenario]
