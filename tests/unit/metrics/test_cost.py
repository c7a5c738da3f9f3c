"""Cost rule 2: billed from each attempt's allocation to its release, summed over attempts; the queue and the
waits between attempts (a requeue's) are their own figures and never billed. Rule 1 (submission -> release) is
kept for the runs stored under it: `poc rederive` re-derives each run by the rule its derive_inputs name."""
from __future__ import annotations

import pytest
from support.requeue import event as _e

from harness import metrics
from harness.metrics.cost import COST_RULE, COST_RULES, cost
from harness.rederive import derive_inputs
from harness.timing import Stamp

T = Stamp.truncated
PRICE = {"usd_per_hour": 3.6, "unit": "node"}      # 2 nodes: 0.002 USD a second
PER_S = 3.6 * 2 / 3600


def requeued() -> dict:
    """Submitted at 100, queued to 110, the first attempt held 110 -> 150, requeued, waited to 190, held to 230."""
    a0 = {"attempt": 0, "allocated": T(110, "Start"), "released": T(150, "End"), "ended": T(150, "End")}
    a1 = {"attempt": 1, "allocated": T(190, "Start"), "released": T(230, "End"), "ended": T(230, "End")}
    return {"submitted": T(100, "Submit"), "allocated": a0["allocated"], "released": a1["released"],
            "ended": a1["ended"], "attempts": [a0, a1], "checks": []}


def test_a_requeued_job_pays_for_its_two_allocations_not_for_its_waits():
    m = cost([], requeued(), PRICE, 2, 0, 10, None, rule=2)
    run = m["cost_run_usd"]
    assert run["value"] == pytest.approx(PER_S * 80) and run["detail"]["wall_s"] == pytest.approx(80)
    assert (run["lo"], run["hi"]) == pytest.approx((PER_S * 78, PER_S * 82))   # four whole-second stamps
    d = run["detail"]
    assert d["queue_wait_s"] == pytest.approx(10) and d["between_attempts_s"] == [pytest.approx(40)]
    assert d["attempts_billed"] == 2 and d["rule"] == 2 and d["rule_text"] == COST_RULES[2]
    # rule 1, as runs stored before the rules: submission -> release, both waits charged
    old = cost([], requeued(), PRICE, 2, 0, 10, None, rule=1)["cost_run_usd"]
    assert old["value"] == pytest.approx(PER_S * 130) and "rule" not in old["detail"]


def test_without_per_attempt_records_the_run_is_billed_from_its_allocation():
    events = [_e("done", 108.2, r) for r in (0, 1)]
    m = cost(events, {"submitted": T(100, "s"), "allocated": T(101, "a"), "attempts": []}, PRICE, 2, 0, 3, None)
    assert m["cost_run_usd"]["value"] == pytest.approx(PER_S * (108.2 - 101.5))
    assert "no release record" in m["cost_run_usd"]["detail"]["billed_until"]


def test_derive_bills_by_the_newest_rule_unless_told_the_runs_own():
    st = requeued()
    new, _ = metrics.derive([], st, world=2, nodes=2, gpus_per_node=0, steps=10, price=PRICE, faults=[])
    old, _ = metrics.derive([], st, world=2, nodes=2, gpus_per_node=0, steps=10, price=PRICE, faults=[], cost_rule=1)
    assert COST_RULE == 2 and new["cost_run_usd"]["value"] < old["cost_run_usd"]["value"]


def test_a_stored_run_re_derives_by_the_rule_it_was_derived_by():
    inputs = {"world": 2, "nodes": 2, "gpus_per_node": 0, "steps": 10, "price": PRICE}
    assert derive_inputs({"derive_inputs": inputs}, {})["cost_rule"] == 1            # before there were rules
    assert derive_inputs({"derive_inputs": {**inputs, "cost_rule": 2}}, {})["cost_rule"] == 2
    config = {"resources": {"nodes": 2, "procs_per_node": 1, "gpus_per_node": 0}, "workload": {"steps": 10},
              "pricing": {"slurm": PRICE}}
    assert derive_inputs({"platform": "slurm"}, config)["cost_rule"] == 1


def test_a_new_run_records_the_rule_it_is_derived_by():
    from harness import config as cfgmod
    from harness import pipeline, scenarios
    cfg = cfgmod.from_mapping({"platforms": ["slurm"]})
    s = scenarios.job_spec(cfg, "slurm", scenarios.plan(cfg, "slurm")[0])
    assert pipeline.derive_inputs(cfg, s)["cost_rule"] == COST_RULE
