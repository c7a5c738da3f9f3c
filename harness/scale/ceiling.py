"""Each platform's placement ceiling on this host, and where a replay's offered rate stands against it (pure).

A ceiling is measured by a saturation sweep (benchmarks/replay_throughput.py): steady traces at rising
offered rates, repeated, per platform, cluster size and the controllers' client rate limits. It is the
highest offered rate that every repeat kept up with (saturation.py's saturation point); where no rate was
missed, the sweep's highest rate is a lower bound and is said to be one. A replay whose busiest 10 s
(load.py) offer more than a platform's ceiling is **throughput-bound** on that platform: its queue is the
backlog of a server fed faster than it serves, and it never feeds a queue-policy verdict. So is one with
no ceiling measured for its platform, size and rate limits (``unknown``): it cannot show that it is not.

Ceilings are looked up by (platform, nodes, client rate limits): Kueue's and kube-controller-manager's
QPS/burst on Kubernetes (clusters/k8s/rate_limits.py, as each replay recorded them), none on Slurm.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from .saturation import saturation

SLURM_LIMITS = "-"                      # Slurm has no client rate limit in the path of a placement
DEFAULT_K8S_LIMITS = "kueue 20/30, kube-controller-manager 20/30"
_PAIR = re.compile(r"^\s*(\d+)/(\d+)")


def limits_label(platform: str, described: dict | None) -> str:
    """The rate-limit part of a ceiling's key, from what a replay or sweep recorded
    (rate_limits.describe: {"kueue": "20/30 (..., default)", ...}). Not recorded: the defaults, which is
    what a cluster ran before the setting existed."""
    if platform != "k8s":
        return SLURM_LIMITS
    if not described:
        return DEFAULT_K8S_LIMITS
    parts = []
    for name in ("kueue", "kube-controller-manager"):
        m = _PAIR.match(str(described.get(name, "")))
        parts.append(f"{name} {m.group(1)}/{m.group(2)}" if m else f"{name} 20/30")
    return ", ".join(parts)


@dataclass(frozen=True)
class Ceiling:
    platform: str
    nodes: int
    limits: str                     # limits_label
    jobs_per_s: float | None        # the saturation point: the highest offered rate every repeat kept up with
    reached: bool                   # False: no rate was missed, jobs_per_s is a lower bound
    plateau_jobs_per_s: float | None   # the most achieved at any rate
    points: int
    repeats: int
    reason: str | None

    def text(self) -> str:
        if self.jobs_per_s is None:
            return f"no ceiling ({self.reason})"
        bound = "" if self.reached else " (a lower bound: no rate was missed)"
        return f"{self.jobs_per_s:g} jobs/s{bound}, most placed {self.plateau_jobs_per_s:.3g}"

    def as_dict(self) -> dict:
        return asdict(self)


def ceilings(rows: list[dict]) -> list[Ceiling]:
    """One ceiling per (platform, nodes, limits) of a sweep's rows: {"platform", "nodes", "limits", "repeat",
    "offered", "achieved"} (offered and achieved jobs/s as report/throughput.py reads them)."""
    groups: dict[tuple[str, int, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["platform"], int(r["nodes"]), r["limits"]), []).append(r)
    out = []
    for (p, n, lim), rs in sorted(groups.items()):
        s = saturation([(r["offered"], r["achieved"]) for r in rs])
        out.append(Ceiling(p, n, lim, s.saturation_jobs_per_s, s.reached, s.plateau_jobs_per_s, s.points,
                           len({r.get("repeat", 1) for r in rs}), s.reason))
    return out


def from_dicts(items: list[dict]) -> list[Ceiling]:
    return [Ceiling(**{k: d.get(k) for k in Ceiling.__dataclass_fields__}) for d in items]


def find(found: list[Ceiling], platform: str, nodes: int, limits: str) -> Ceiling | None:
    return next((c for c in found if (c.platform, c.nodes, c.limits) == (platform, nodes, limits)), None)


@dataclass(frozen=True)
class Standing:
    """Where one replay's offered rate stands against one platform's ceiling."""

    platform: str
    busiest_jobs_per_s: float
    ceiling: Ceiling | None
    state: str          # "below" | "throughput-bound" | "unknown"

    @property
    def share(self) -> float | None:
        c = self.ceiling
        return None if c is None or not c.jobs_per_s else self.busiest_jobs_per_s / c.jobs_per_s

    def text(self) -> str:
        if self.ceiling is None or self.ceiling.jobs_per_s is None:
            return f"{self.busiest_jobs_per_s:g} jobs/s offered, no ceiling measured: unknown"
        return (f"{self.busiest_jobs_per_s:g} jobs/s offered = {self.share:.0%} of its ceiling "
                f"{self.ceiling.jobs_per_s:g}{'' if self.ceiling.reached else '+'}: {self.state}")


def standing(platform: str, busiest: float, c: Ceiling | None) -> Standing:
    if c is None or c.jobs_per_s is None:
        return Standing(platform, busiest, c, "unknown")
    return Standing(platform, busiest, c, "below" if busiest <= c.jobs_per_s + 1e-9 else "throughput-bound")
