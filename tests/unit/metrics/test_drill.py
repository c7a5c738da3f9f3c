"""The drill's figures from probes and events (harness/metrics/drill.py): bounds, not just values."""
from __future__ import annotations

import json

import pytest
from support.paths import FIXTURES

from harness.metrics.drill import derive_drill, identity, intact, outages, refused, steps_lost


def P(what, t0, t1, err=None):
    return {"what": what, "t0": t0, "t1": t1, "error": err}


def test_an_outage_is_bounded_by_the_tries_around_it():
    probes = [P("submit", 0.0, 0.1), P("submit", 1.0, 1.2, "refused"), P("submit", 2.0, 2.1, "refused"),
              P("submit", 3.0, 3.1), P("status", 0.0, 0.1)]
    (o,) = outages(probes, "submit")
    assert o["first"]["t0"] == 1.0 and o["last"]["t0"] == 2.0 and o["next_ok"]["t0"] == 3.0
    m = refused(probes, "submit", "upgrade_submit_refused_s")
    # seen from the first refusal asked to the first acceptance asked: 2 s; at least 2.0 - 1.2, at most 3.1 - 0.0
    assert m["value"] == pytest.approx(2.0) and m["lo"] == pytest.approx(0.8) and m["hi"] == pytest.approx(3.1)
    assert m["detail"]["refused_tries"] == 2 and m["detail"]["outages"] == 1 and not m["detail"]["open_ended"]
    assert refused(probes, "status", "upgrade_status_refused_s")["value"] == 0


def test_an_outage_never_closed_has_no_upper_bound():
    m = refused([P("submit", 0, 0.1), P("submit", 1, 1.5, "x")], "submit", "upgrade_submit_refused_s")
    assert m["value"] == pytest.approx(0.5) and m["hi"] is None and m["detail"]["open_ended"]


def test_no_probes_is_no_figure_not_zero():
    assert refused([], "submit", "upgrade_submit_refused_s")["value"] is None


def test_steps_run_twice_are_lost_steps():
    ev = [{"kind": "step", "rank": 0, "step": s, "ts_ns": i} for i, s in enumerate([1, 2, 3, 4, 3, 4, 5])]
    assert steps_lost(ev)["value"] == 2


def test_records_intact_compares_identity_only():
    before = {"identity": {"job": "12", "uid": "a"}, "state": "RUNNING"}
    assert intact(before, {"identity": {"job": "12", "uid": "a"}, "state": "COMPLETED"})["value"] == 1.0
    lost = intact(before, {"identity": {"job": "12"}})
    assert lost["value"] == 0.0 and lost["detail"]["missing"] == ["uid"]
    assert intact(before, {"error": "apiserver down"})["value"] is None


def test_a_component_that_never_came_back_leaves_the_drill_time_unknown():
    drill = {"steps": [{"component": "a", "started": 1.0, "back": 3.0, "ok": True},
                       {"component": "b", "started": 3.0, "back": None, "ok": False}], "job_state": "succeeded"}
    m = derive_drill([], drill, 2, None)
    assert m["upgrade_drill_s"]["value"] is None and m["upgrade_drill_s"]["detail"]["failed"] == ["b"]
    assert m["upgrade_queued_delay_s"]["value"] is None


FIX = FIXTURES


def test_slurm_records_are_intact_across_a_real_restart_drill_and_a_lost_step_row_is_not():
    # recorded by a real restart drill on the local cluster: job 16 running (batch step and srun step 0), 17 queued
    before, after = (json.loads((FIX / "slurm/drill" / f"snapshot_{w}.json").read_text()) for w in ("before", "after"))
    ids = identity(before)
    assert ids["sacct/16.0/NodeList"] == "c[1-2]" and "sacct/17/Submit" in ids and "sacct/17/Start" not in ids
    assert intact(before, after)["value"] == 1.0
    broken = json.loads(json.dumps(after))
    broken["sacct"]["rows"] = [r for r in broken["sacct"]["rows"] if r["JobID"] != "16.0"]
    m = intact(before, broken)
    assert m["value"] == 0.0 and "sacct/16.0/NodeList" in m["detail"]["missing"]


def test_the_outage_of_a_real_slurmctld_restart():
    probes = json.loads((FIX / "slurm/drill/probes.json").read_text())
    m = refused(probes, "status", "upgrade_status_refused_s")
    assert m["lo"] <= m["value"] <= m["hi"] and m["detail"]["outages"] >= 1
