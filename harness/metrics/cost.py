"""Cost per step."""
from __future__ import annotations

from .. import events as ev
from .common import _metric, _sub, _t


def cost(events: list[dict], times: dict, price: dict, nodes: int, gpus_per_node: int, steps: int,
         median_step: float | None) -> dict:
    units = nodes * gpus_per_node if price["unit"] == "gpu" else nodes
    per_s = price["usd_per_hour"] * units / 3600.0
    done = [_t(e) for e in ev.of_kind(events, "done")]
    end = max(done) if done else times.get("ended")
    submitted = times.get("submitted")
    steps_done = steps if done else max((e["step"] for e in ev.of_kind(events, "step")), default=0)
    wall = _sub(end, submitted)
    effective = per_s * wall / steps_done if wall is not None and steps_done else None
    steady = per_s * median_step if median_step is not None else None
    common = {"usd_per_hour": price["usd_per_hour"], "unit": price["unit"], "units": units}
    return {
        "cost_per_step_usd": _metric("cost_per_step_usd", effective, {"submitted": submitted, "done": end},
                                     wall_s=wall, steps=steps_done, steady=steady, **common),
        "cost_per_step_steady_usd": _metric("cost_per_step_steady_usd", steady, {},
                                            median_step_s=median_step, **common),
    }
