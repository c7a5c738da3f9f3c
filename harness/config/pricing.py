"""The pricing section: what holding a platform's resources costs, per platform."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .base import Model


class Price(Model):
    """What holding a platform's resources costs (harness/metrics/cost.py has the formulas)."""
    usd_per_hour: float = Field(1.0, ge=0)        # per unit-hour, when no price set is chosen
    unit: Literal["node", "gpu"] = "node"
    sets: dict[str, float] = Field(default_factory=dict)   # named USD per unit-hour: on_demand, reserved, spot...
    price_set: str | None = None                  # which of `sets` applies; null: usd_per_hour
    # the platform's fixed cost per hour that a job of this size carries (control plane, login
    # nodes, slurmctld/slurmdbd hosts), amortised over the fraction of time the platform is busy
    overhead_usd_per_hour: float = Field(0.0, ge=0)
    utilisation: float = Field(1.0, gt=0, le=1)

    @model_validator(mode="after")
    def _set(self) -> Price:
        bad = {k: v for k, v in self.sets.items() if v < 0}
        if bad:
            raise ValueError(f"price sets must not be negative: {bad}")
        if self.price_set is not None and self.price_set not in self.sets:
            known = ", ".join(self.sets) or "none defined"
            raise ValueError(f"price_set {self.price_set!r} is not one of sets ({known})")
        return self
