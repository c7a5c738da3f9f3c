"""Metric intervals from Stamps, goodput, and cost billed to release (price sets, overhead)."""
import json

import pytest
from support.requeue import EVENTS, FAULT, STAMPS
from support.requeue import event as _e

from harness import config as cfgmod
from harness import evidence, metrics
from harness.timing import Stamp

T = Stamp.truncated


def _run(stamps, events=None, world=2, price=None, contention=None, faults=(), nodes=2, gpus=0, steps=3, **kw):
    events = events if events is not None else [
        *[_e("process_start", 103.0, r) for r in (0, 1)], *[_e("rendezvous_done", 104.0, r) for r in (0, 1)],
        *[_e("step", 105.0 + s, r, step=s, dur_s=0.5) for r in (0, 1) for s in (1, 2, 3)],
        *[_e("done", 108.2, r) for r in (0, 1)]]
    return metrics.derive(events, stamps, world=world, nodes=nodes, gpus_per_node=gpus, steps=steps,
                          price=price or {"usd_per_hour": 3.6, "unit": "node"}, faults=list(faults),
                          contention=contention, **kw)


def test_whole_second_records_widen_queue_by_their_resolution():
    # Slurm: Submit and Start both whole seconds -> 2 s reads as anything in (1, 3)
    m, _ = _run({"submitted": T(100, "Submit"), "allocated": T(102, "Start")})
    q = m["queue_s"]
    assert (q["value"], q["lo"], q["hi"], q["uncertainty"]) == (2.0, 1.0, 3.0, 1.0)
    assert q["stamps"]["allocated"] == {"t": 102.5, "lo": 102, "hi": 103, "source": "Start", "resolution_s": 1.0}
    assert q["sources"] == {"submitted": 100.5, "allocated": 102.5}


def test_harness_bracket_and_microsecond_event():
    # k8s: submit bracketed by the harness clock, PodScheduled eventTime in microseconds
    m, _ = _run({"submitted": Stamp.between(100.00, 100.04, "create call"),
                 "allocated": Stamp.exact(100.4, "PodScheduled"),
                 "admitted": T(100, "Kueue Admitted")})
    q = m["queue_s"]
    assert q["value"] == pytest.approx(0.38) and q["lo"] == pytest.approx(0.36)
    assert q["hi"] == pytest.approx(0.400001) and q["uncertainty"] == pytest.approx(0.0200005)
    assert m["queue_admission_s"]["lo"] == pytest.approx(-0.04)   # admission could be before the call returned


def test_startup_parts_against_a_truncated_allocation():
    m, _ = _run({"submitted": T(100, "Submit"), "allocated": T(101, "Start")})
    # allocated in [101, 102), every process started at 103: launch 1.5 s, anything in (1, 2)
    assert (m["launch_s"]["value"], m["launch_s"]["lo"], m["launch_s"]["hi"]) == pytest.approx((1.5, 1.0, 2.0),
                                                                                                abs=2e-6)
    assert m["rendezvous_s"]["uncertainty"] < 1e-5        # two workload events: microseconds
    s = m["startup_s"]
    parts = sum(m[k]["value"] for k in ("launch_s", "rendezvous_s", "first_step_s"))
    assert s["value"] == pytest.approx(parts) and s["lo"] <= s["value"] <= s["hi"]
    assert s["hi"] - s["lo"] == pytest.approx(1.0, abs=1e-5)


def test_handover_from_the_blockers_done_event():
    m, _ = _run({"submitted": T(90, "Submit"), "allocated": T(103, "Start")},
                contention={"released": 102.2, "blocker_run_id": "b"})
    h = m["handover_s"]
    assert (h["value"], h["lo"], h["hi"]) == pytest.approx((1.3, 0.8, 1.8), abs=2e-6)
    assert h["detail"]["blocker_run_id"] == "b"


def test_flat_times_are_exact_and_json_stamps_equal_stamp_objects():
    m, _ = _run({"submitted": 100.0, "allocated": 101.25})
    assert (m["queue_s"]["value"], m["queue_s"]["lo"], m["queue_s"]["hi"]) == (1.25, 1.25, 1.25)
    as_objects, tl1 = metrics.derive(EVENTS, STAMPS, world=2, nodes=2, gpus_per_node=0, steps=20,
                                     price={"usd_per_hour": 1.0, "unit": "node"}, faults=[FAULT])
    as_json, tl2 = metrics.derive(EVENTS, json.loads(json.dumps(evidence.to_json(STAMPS))), world=2, nodes=2,
                                  gpus_per_node=0, steps=20, price={"usd_per_hour": 1.0, "unit": "node"},
                                  faults=[FAULT])
    assert as_objects == as_json and tl1 == tl2
    json.dumps(as_objects, allow_nan=False)     # every record is plain JSON
    for name, rec in as_objects.items():
        assert {"value", "unit", "lo", "hi", "uncertainty", "sources", "stamps", "detail"} <= rec.keys(), name
        assert rec["unit"] == metrics.UNITS[name]
        if rec["value"] is not None:
            assert rec["lo"] <= rec["value"] <= rec["hi"], name


def test_goodput_counts_steps_not_redone_over_time_held():
    m, _ = metrics.derive(EVENTS, STAMPS, world=2, nodes=2, gpus_per_node=0, steps=20,
                          price={"usd_per_hour": 1.0, "unit": "node"}, faults=[FAULT])
    g = m["goodput"]
    # steps 1..10 of attempt 0 and 11..20 of attempt 1 count, 0.9 s each; held: allocated [101, 102)
    # -> released [140, 141)
    assert g["unit"] == "ratio" and g["detail"]["useful_s"] == pytest.approx(18.0)
    assert g["detail"]["steps_counted"] == 20 and g["detail"]["steps_redone"] == 2
    assert g["detail"]["redone_s"] == pytest.approx(1.8) and g["detail"]["held_until"] == "released"
    assert (g["value"], g["lo"], g["hi"]) == pytest.approx((18 / 39, 18 / 40, 18 / 38))


def test_goodput_without_a_release_record_stops_at_the_last_done():
    m, _ = _run({"submitted": 100.0, "allocated": 102.0})
    g = m["goodput"]
    assert g["value"] == pytest.approx(1.5 / (108.2 - 102.0), rel=1e-6)
    assert g["detail"]["held_until"].startswith("last rank done")


def test_cost_rule_1_billed_from_submission_until_released():
    """Rule 1, by which runs stored before cost rules re-derive: submitted -> released."""
    stamps = {"submitted": Stamp.between(99.9, 100.1, "sbatch call"), "allocated": T(101, "Start"),
              "released": T(110, "End")}
    m, _ = _run(stamps, cost_rule=1)
    per_s = 3.6 * 2 / 3600
    run = m["cost_run_usd"]
    assert (run["value"], run["lo"], run["hi"]) == pytest.approx((per_s * 10.5, per_s * 9.9, per_s * 11.1))
    assert run["detail"]["billed_until"] == "released"
    step = m["cost_per_step_usd"]
    assert step["value"] == pytest.approx(per_s * 10.5 / 3) and step["uncertainty"] == pytest.approx(per_s * 0.6 / 3)
    # without the release record: billed to the last done event, as older campaigns were
    m2, _ = _run({"submitted": 100.0, "allocated": 101.0}, cost_rule=1)
    assert m2["cost_run_usd"]["value"] == pytest.approx(per_s * 8.2)
    assert "no release record" in m2["cost_run_usd"]["detail"]["billed_until"]


def test_price_sets_and_gpu_hours():
    price = cfgmod.Price(usd_per_hour=9.0, unit="gpu", sets={"on_demand": 4.0, "reserved": 2.5, "spot": 1.2},
                         price_set="spot").model_dump()
    m, _ = _run({"submitted": 100.0, "allocated": 101.0, "released": 110.0}, price=price, gpus=4)
    assert m["cost_run_usd"]["value"] == pytest.approx(1.2 * 8 / 3600 * 9)       # allocated -> released
    assert m["cost_run_usd"]["detail"]["price_set"] == "spot"
    assert m["cost_run_usd"]["detail"]["usd_per_unit_hour"] == 1.2 and m["cost_run_usd"]["detail"]["units"] == 8
    price["price_set"] = None      # no set chosen: usd_per_hour
    m, _ = _run({"submitted": 100.0, "allocated": 101.0, "released": 110.0}, price=price, gpus=4)
    assert m["cost_run_usd"]["value"] == pytest.approx(9.0 * 8 / 3600 * 9)


def test_overhead_is_amortised_over_utilisation():
    price = {"usd_per_hour": 2.0, "unit": "node", "overhead_usd_per_hour": 3.0, "utilisation": 0.25}
    m, _ = _run({"submitted": 100.0, "allocated": 101.0, "released": 136.0}, price=price)
    hours = 35 / 3600     # allocated -> released
    run = m["cost_run_usd"]
    assert run["detail"]["overhead_usd"] == pytest.approx(3.0 * hours / 0.25)
    assert run["value"] == pytest.approx(2.0 * 2 * hours + 3.0 * hours / 0.25)
    assert m["cost_per_step_steady_usd"]["value"] == pytest.approx((2.0 * 2 + 3.0 / 0.25) / 3600 * 0.5)


@pytest.mark.parametrize("price, what", [
    ({"price_set": "spot"}, "not one of sets"),
    ({"sets": {"spot": -1.0}}, "must not be negative"),
    ({"utilisation": 0}, "greater than 0"),
    ({"utilisation": 1.5}, "less than or equal to 1"),
])
def test_price_config_is_checked(price, what):
    with pytest.raises(Exception, match=what):
        cfgmod.Config.model_validate({"pricing": {"k8s": price}})


def test_old_price_config_still_valid():
    cfg = cfgmod.Config.model_validate({"pricing": {"slurm": {"usd_per_hour": 2, "unit": "node"}}})
    assert cfg.pricing["slurm"].price_set is None and cfg.pricing["slurm"].overhead_usd_per_hour == 0.0
    assert metrics.rate(cfg.pricing["slurm"].model_dump(), 2, 0)[0] == pytest.approx(4 / 3600)


def test_headline_and_units():
    assert metrics.HEADLINE[:5] == ("queue_s", "startup_s", "allreduce_busbw_gbps", "recovery_s", "cost_per_step_usd")
    assert all(h in metrics.UNITS for h in metrics.HEADLINE)
    assert metrics.UNITS["goodput"] == "ratio" and metrics.UNITS["recovery_cost_usd"] == "USD"
