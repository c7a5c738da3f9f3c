"""Cost: of the run, per step, and of a recovery, billed until the resources are released.

Price (config `pricing.<platform>`, passed as its model_dump; the old {usd_per_hour, unit} still works):
  rate      USD per unit-hour: sets[price_set] when a named price set is chosen (e.g. on_demand,
            reserved, spot), otherwise usd_per_hour; unit is a node or a GPU (units = nodes or
            nodes x gpus_per_node).
  overhead  the platform's fixed cost per hour that this job carries (control-plane nodes, login
            nodes, slurmctld/slurmdbd hosts), amortised over the platform's stated utilisation u:
            overhead_usd = overhead_usd_per_hour x run_hours / u (at u = 0.5 every busy hour also
            pays for an idle one).
  per second: (rate x units + overhead_usd_per_hour / u) / 3600.
cost_run_usd = per-second x (submitted -> released); released falls back to the last rank's done
  event (then the teardown after it is not billed: noted), then the job's end.
cost_per_step_usd = cost_run_usd / steps done. cost_per_step_steady_usd = per-second x median step time.
recovery_cost_usd = per-second x (every rank's last common step before the fault -> every rank back
  at it after the restart): the partial step the fault destroyed, the recovery, and the redone steps.
Every interval comes from the held-time interval (the price is taken as exact).
"""
from __future__ import annotations

from .. import events as ev
from .common import _metric, _scaled, held_until, span


def rate(price: dict, nodes: int, gpus_per_node: int) -> tuple[float, dict]:
    """USD per second of holding the job's resources, and what it was made of."""
    units = nodes * gpus_per_node if price.get("unit", "node") == "gpu" else nodes
    chosen = price.get("price_set")
    usd = float(price["sets"][chosen]) if chosen else float(price["usd_per_hour"])
    over = float(price.get("overhead_usd_per_hour") or 0.0)
    util = float(price.get("utilisation") or 1.0)
    per_s = (usd * units + over / util) / 3600.0
    return per_s, {"usd_per_unit_hour": usd, "unit": price.get("unit", "node"), "units": units,
                   "price_set": chosen, "overhead_usd_per_hour": over, "utilisation": util}


def cost(events: list[dict], st: dict, price: dict, nodes: int, gpus_per_node: int, steps: int,
         median_step: float | None) -> dict:
    per_s, how = rate(price, nodes, gpus_per_node)
    done = ev.of_kind(events, "done")
    steps_done = steps if done else max((e["step"] for e in ev.of_kind(events, "step")), default=0)
    end_name, end, until = held_until(events, st)
    stamps = {"submitted": st.get("submitted"), end_name: end}
    wall = span(*stamps.values())
    wall_s = wall.value if wall else None
    overhead_usd = wall_s * how["overhead_usd_per_hour"] / how["utilisation"] / 3600.0 if wall else None
    common = {**how, "usd_per_s": per_s, "billed_until": until}
    run = _scaled("cost_run_usd", wall, per_s, stamps, wall_s=wall_s, overhead_usd=overhead_usd, **common)
    per_step = _scaled("cost_per_step_usd", wall if steps_done else None, per_s / max(steps_done, 1), stamps,
                       wall_s=wall_s, steps=steps_done, **common)
    steady = per_s * median_step if median_step is not None else None
    per_step["detail"]["steady"] = steady
    return {
        "cost_run_usd": run,
        "cost_per_step_usd": per_step,
        "cost_per_step_steady_usd": _metric("cost_per_step_steady_usd", steady, {}, median_step_s=median_step,
                                            **common),
    }


def recovery_cost(inst: dict, price: dict, nodes: int, gpus_per_node: int) -> dict:
    """What one recovery cost, on its own line: the rate x the wall time the fault took from the job."""
    per_s, how = rate(price, nodes, gpus_per_node)
    a, b = inst.get("last_common_step"), inst.get("caught_up")
    window = span(a, b)
    return _scaled("recovery_cost_usd", window, per_s, {"last_common_step": a, "caught_up": b},
                   window_s=window.value if window else None, usd_per_s=per_s, **how,
                   **({} if window else {"note": "the run never got back to the pre-fault step"}))
