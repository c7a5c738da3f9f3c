"""Cost: of the run, per step, and of a recovery, billed while the job held its resources.

Price (config `pricing.<platform>`, passed as its model_dump; the old {usd_per_hour, unit} still works):
  rate      USD per unit-hour: sets[price_set] when a named price set is chosen (e.g. on_demand,
            reserved, spot), otherwise usd_per_hour; unit is a node or a GPU (units = nodes or
            nodes x gpus_per_node).
  overhead  the platform's fixed cost per hour that this job carries (control-plane nodes, login
            nodes, slurmctld/slurmdbd hosts), amortised over the platform's stated utilisation u:
            overhead_usd = overhead_usd_per_hour x billed hours / u (at u = 0.5 every busy hour also
            pays for an idle one).
  per second: (rate x units + overhead_usd_per_hour / u) / 3600.

What is billed is a rule with a version (COST_RULES); a run records the rule it was derived by (the pipeline's
derive_inputs["cost_rule"]), and `poc rederive` re-derives each stored run by its own rule (a record without one
was made under rule 1), as harness/evidence/k8s.py READER_RULES does for the allocation stamp.
  rule 1  submitted -> released: queue and requeue waits charged at the GPU rate.
  rule 2  each attempt's allocation -> its release, summed over attempts: a node is paid for while the job holds
          it, not while it waits for one. The wait is its own figure in the detail (queue_wait_s: submitted ->
          first allocated; between_attempts_s: each release -> the next allocation), never billed.
  Either way the end falls back to the last rank's done event (then the teardown after it is not billed: noted),
  then the job's end.
cost_run_usd = per-second x held; cost_per_step_usd = cost_run_usd / steps done; cost_per_step_steady_usd =
per-second x median step time. recovery_cost_usd = per-second x (every rank's last common step before the fault
-> every rank back at it after the restart): the partial step the fault destroyed, the recovery, and the redone
steps. Every interval comes from the held-time interval (the price is taken as exact).
"""
from __future__ import annotations

from .. import events as ev
from ..timing import Span
from .common import _metric, _scaled, held_until, span

COST_RULES = {1: "billed from submission to release: queue and requeue waits at the job's rate",
              2: "billed from each attempt's allocation to its release; the queue and the waits between attempts "
                 "are not billed (queue_wait_s, between_attempts_s)"}
COST_RULE = max(COST_RULES)


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


def held(events: list[dict], st: dict) -> tuple[Span | None, dict, dict]:
    """Rule 2: (the time the job held its resources, summed over attempts; the stamps; the waits not billed)."""
    atts = [a for a in st.get("attempts") or [] if isinstance(a, dict) and a.get("allocated") is not None]
    end_name, end, until = held_until(events, st)
    if not atts:    # no per-attempt records (the local baseline): the run's own allocation -> release
        stamps = {"allocated": st.get("allocated"), end_name: end}
        return span(*stamps.values()), stamps, {"billed_until": until}
    total, stamps, gaps, waits = Span(0.0, 0.0, 0.0), {}, [], {}
    for i, a in enumerate(atts):
        last = i == len(atts) - 1
        stop = a.get("released") or a.get("ended")
        if last:
            stop = st.get("released") or (end if end_name != "released" else None) or stop
        part = span(a["allocated"], stop)
        if part is None:
            return None, stamps, {"billed_until": until, "note": f"attempt {a.get('attempt', i)} has no release "
                                                                  "or end stamp: the held time is unknown"}
        total = total.plus(part)
        stamps[f"attempt{i}_allocated"], stamps[f"attempt{i}_released"] = a["allocated"], stop
        if not last and atts[i + 1].get("allocated") is not None:
            gap = span(stop, atts[i + 1]["allocated"])
            gaps.append(round(gap.value, 9) if gap else None)
    queue = span(st.get("submitted"), atts[0]["allocated"])
    waits = {"billed_until": until if len(atts) == 1 else f"each attempt's release; the last: {until}",
             "queue_wait_s": None if queue is None else round(queue.value, 9), "between_attempts_s": gaps,
             "attempts_billed": len(atts)}
    return total, stamps, waits


def cost(events: list[dict], st: dict, price: dict, nodes: int, gpus_per_node: int, steps: int,
         median_step: float | None, rule: int = COST_RULE) -> dict:
    per_s, how = rate(price, nodes, gpus_per_node)
    done = ev.of_kind(events, "done")
    steps_done = steps if done else max((e["step"] for e in ev.of_kind(events, "step")), default=0)
    if rule == 1:
        end_name, end, until = held_until(events, st)
        stamps = {"submitted": st.get("submitted"), end_name: end}
        wall, extra = span(*stamps.values()), {"billed_until": until}
    else:
        wall, stamps, extra = held(events, st)
    wall_s = wall.value if wall else None
    overhead_usd = wall_s * how["overhead_usd_per_hour"] / how["utilisation"] / 3600.0 if wall else None
    common = {**how, "usd_per_s": per_s, **extra}
    # the rule's number and words only from rule 2 on: a record of rule 1 re-derives to the detail it stored
    ruled = {} if rule == 1 else {"rule": rule, "rule_text": COST_RULES[rule]}
    run = _scaled("cost_run_usd", wall, per_s, stamps, wall_s=wall_s, overhead_usd=overhead_usd, **common, **ruled)
    per_step = _scaled("cost_per_step_usd", wall if steps_done else None, per_s / max(steps_done, 1), stamps,
                       wall_s=wall_s, steps=steps_done, **common, **ruled)
    steady = per_s * median_step if median_step is not None else None
    per_step["detail"]["steady"] = steady
    return {
        "cost_run_usd": run,
        "cost_per_step_usd": per_step,
        "cost_per_step_steady_usd": _metric("cost_per_step_steady_usd", steady, {}, median_step_s=median_step,
                                            **common, **ruled),
    }


def recovery_cost(inst: dict, price: dict, nodes: int, gpus_per_node: int) -> dict:
    """What one recovery cost, on its own line: the rate x the wall time the fault took from the job."""
    per_s, how = rate(price, nodes, gpus_per_node)
    a, b = inst.get("last_common_step"), inst.get("caught_up")
    window = span(a, b)
    return _scaled("recovery_cost_usd", window, per_s, {"last_common_step": a, "caught_up": b},
                   window_s=window.value if window else None, usd_per_s=per_s, **how,
                   **({} if window else {"note": "the run never got back to the pre-fault step"}))
