"""The pricing section: what holding a platform's resources costs, per platform."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .base import Model

# USD per unit-hour (or per hour of a platform's overhead): the dearest GPU rents for about 100 an hour;
# past a million a price is a typing slip, and every cost figure would be drawn from it
MAX_USD_PER_HOUR = 1e6


class Price(Model):
    """What holding a platform's resources costs (harness/metrics/cost.py has the formulas)."""
    usd_per_hour: float = Field(1.0, ge=0, le=MAX_USD_PER_HOUR)   # per unit-hour, when no price set is chosen
    unit: Literal["node", "gpu"] = "node"
    sets: dict[str, float] = Field(default_factory=dict)   # named USD per unit-hour: on_demand, reserved, spot...
    price_set: str | None = None                  # which of `sets` applies; null: usd_per_hour
    # the platform's fixed cost per hour that a job of this size carries (control plane, login
    # nodes, slurmctld/slurmdbd hosts), amortised over the fraction of time the platform is busy
    overhead_usd_per_hour: float = Field(0.0, ge=0, le=MAX_USD_PER_HOUR)
    utilisation: float = Field(1.0, gt=0, le=1)

    @model_validator(mode="after")
    def _set(self) -> Price:
        bad = {k: v for k, v in self.sets.items() if v < 0}
        if bad:
            raise ValueError(f"price sets must not be negative: {bad}")
        bad = {k: v for k, v in self.sets.items() if v > MAX_USD_PER_HOUR}
        if bad:
            raise ValueError(f"price sets are at most {MAX_USD_PER_HOUR:g} USD per unit-hour: {bad}")
        if self.price_set is not None and self.price_set not in self.sets:
            known = ", ".join(self.sets) or "none defined"
            raise ValueError(f"price_set {self.price_set!r} is not one of sets ({known})")
        return self
