"""A stated model of the time limits a history without limits would have had (pure).

Slurm's backfill plans with each job's limit, so a replay needs one. A site whose scheduler kept none
(Kubernetes pods, Philly, Alibaba's PAI) leaves it to the importer, and "limit = run time" would hand
backfill perfect estimates no real user gives. The model here is the one the synthetic generator uses,
stated as a rule: a user asks for ``factor`` times the run time, rounded up to the next round value of
``menu_s`` (15 min ... 7 days, the modal requests Tsafrir et al. report), whole days beyond it. Chosen, not
measured; every trace imported with it names it in its notes and params.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

_H = 3600


@dataclass(frozen=True)
class LimitModel:
    factor: float = 2.0
    menu_s: tuple[int, ...] = (900, 1800, _H, 2 * _H, 4 * _H, 8 * _H, 12 * _H, 24 * _H, 48 * _H, 72 * _H, 168 * _H)

    def __post_init__(self) -> None:
        if not (self.factor >= 1 and self.menu_s and list(self.menu_s) == sorted(set(self.menu_s))
                and self.menu_s[0] >= 1):
            raise ValueError("a limit model needs factor >= 1 and increasing menu values of at least 1 s")

    def limit(self, runtime_s: int) -> int:
        want = runtime_s * self.factor
        for v in self.menu_s:
            if v >= want:
                return v
        return math.ceil(want / (24 * _H)) * 24 * _H

    def text(self) -> str:
        return (f"limit model: {self.factor:g} x the run time, rounded up to the next of "
                f"{', '.join(_dur(v) for v in self.menu_s)}, whole days beyond (chosen, not measured)")

    def params(self) -> dict:
        return asdict(self)


def _dur(s: int) -> str:
    if s % (24 * _H) == 0:
        return f"{s // (24 * _H)} d"
    if s % _H == 0:
        return f"{s // _H} h"
    return f"{s // 60} min"
