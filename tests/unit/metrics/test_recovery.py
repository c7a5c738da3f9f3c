"""Recovery broken down into phases, lost steps, step times by attempt (hand-built stamps and recorded events)."""
import gzip
import json

import pytest
from support.paths import RESULTS
from support.requeue import EVENTS, FAULT, STAMPS
from support.requeue import attempt_events as _attempt

from harness import events as ev
from harness import evidence, metrics
from harness.timing import Stamp

SMOKE = RESULTS / "smoke-2026-12-02" / "smoke-poc"
T = Stamp.truncated
NODE_PRICE = {"usd_per_hour": 3.6, "unit": "node"}   # 2 nodes: 0.002 USD/s


def _derive(events=EVENTS, stamps=STAMPS, faults=(FAULT,), price=NODE_PRICE, world=2):
    return metrics.derive(events, stamps, world=world, nodes=2, gpus_per_node=0, steps=20, price=price,
                          faults=list(faults))


def test_phases_of_a_requeue_with_their_intervals():
    m, timeline = _derive()
    expect = {  # value, lo, hi: a whole-second record widens its phase by up to 1 s on each side it touches
        "recovery_detection_s": (120.5 - 116.2, 120 - 116.2, 121 - 116.2),
        "recovery_teardown_s": (1.0, 0.0, 2.0),
        "recovery_rescheduling_s": (4.0, 3.0, 5.0),
        "recovery_restart_s": (127 - 125.5, 127 - 126, 127 - 125),
        "recovery_checkpoint_load_s": (1.0, 1.0, 1.0),
        "recovery_recompute_s": (129.3 - 128, 1.3, 1.3),     # every rank has done step 11 again
    }
    for name, (v, lo, hi) in expect.items():
        r = m[name]
        assert (r["value"], r["lo"], r["hi"]) == pytest.approx((v, lo, hi), abs=2e-6), name
        assert r["uncertainty"] == pytest.approx((r["hi"] - r["lo"]) / 2, abs=1e-9)
        assert r["unit"] == "s" and set(r["stamps"]) == {r["detail"]["from"], r["detail"]["to"]}
    rec = m["recovery_s"]
    assert rec["value"] == pytest.approx(129.3 - 116.2, abs=2e-6)
    assert sum(m[p]["value"] for p in rec["detail"]["phases"]) == pytest.approx(rec["value"], abs=1e-6)
    assert rec["detail"]["scheduler_restart"] is True and rec["detail"]["attempt_after"] == [0, 1, 0]
    assert m["resume_s"]["value"] == pytest.approx(129.3 - 116.2, abs=2e-6)
    assert timeline["detected"] == 120.5 and timeline["caught_up"] == pytest.approx(129.3)


def test_lost_steps_with_the_fault_landing_mid_step():
    m, _ = _derive()
    lost = m["lost_steps"]
    # every rank had finished step 11 before the fault; rank 1's step 12 finished after it does not count
    assert lost["value"] == 11 - 10 == 1
    assert (lost["lo"], lost["hi"], lost["uncertainty"]) == (1, 1, 0)
    landed = lost["detail"]["fault_landed"]
    assert landed["at_injection"] == {"0": 12, "1": 11}
    assert landed["last_in_failed_attempt"] == {"0": 12, "1": 12}
    assert landed["trigger"] == {"rank": 1, "step": 11}
    assert lost["detail"]["resumed_from_step"] == 10


def test_recovery_cost_is_the_wall_time_the_fault_took():
    m, _ = _derive()
    rc = m["recovery_cost_usd"]
    # from every rank's last common step before the fault (step 11, 115.3) to every rank back at it (129.3)
    assert rc["value"] == pytest.approx(0.002 * (129.3 - 115.3), rel=1e-6)
    assert rc["detail"]["window_s"] == pytest.approx(14.0)
    assert rc["unit"] == "USD" and rc["lo"] <= rc["value"] <= rc["hi"]


def test_missing_scheduler_evidence_moves_time_into_the_next_phase():
    stamps = {k: v for k, v in STAMPS.items() if k != "attempts"}
    m, _ = _derive(stamps=stamps)
    for p in ("detection", "teardown", "rescheduling"):
        assert m[f"recovery_{p}_s"]["value"] is None
        assert "next phase" in m[f"recovery_{p}_s"]["detail"]["note"]
    restart = m["recovery_restart_s"]
    assert restart["detail"]["from"] == "fault"
    assert restart["detail"]["includes"] == ["detection", "teardown", "rescheduling"]
    assert restart["value"] == pytest.approx(127 - 116.2, abs=2e-6)
    assert m["recovery_s"]["value"] == pytest.approx(129.3 - 116.2, abs=2e-6)


def test_overlapping_attempts_say_so():
    # the next attempt allocated before the failed one's last resources were released (JobSet recreate)
    stamps = json.loads(json.dumps(evidence.to_json(STAMPS)))
    stamps["attempts"][0]["released"] = Stamp.exact(125.8, "last pod deleted").to_json()
    m, _ = _derive(stamps=stamps)
    r = m["recovery_rescheduling_s"]
    assert r["value"] < 0 and "overlap" in r["detail"]["note"]
    assert sum(m[p]["value"] for p in m["recovery_s"]["detail"]["phases"]) == pytest.approx(
        m["recovery_s"]["value"], abs=1e-6)


def test_restart_inside_the_allocation_has_no_rescheduling():
    # torchrun restarts the workers (only the innermost counter changes); no scheduler attempts
    events = (_attempt((0, 0, 0), 102, 1, 12, ckpt_at=(10,)) + _attempt((0, 0, 1), 118, 11, 20, resumed_from=10))
    stamps = {"submitted": Stamp.exact(100, "harness"), "allocated": Stamp.exact(100.5, "spawn")}
    m, _ = _derive(events=events, stamps=stamps)
    for p in ("teardown", "rescheduling"):
        assert m[f"recovery_{p}_s"]["value"] is None
        assert "same allocation" in m[f"recovery_{p}_s"]["detail"]["note"]
    det = m["recovery_detection_s"]   # fault -> the first restarted worker process
    assert det["value"] == pytest.approx(118 - 116.2, abs=2e-6)
    assert "restarted workers" in det["stamps"]["detected"]["source"]
    assert m["recovery_restart_s"]["detail"] == {"from": "detected", "to": "rendezvous"}
    assert m["recovery_s"]["detail"]["scheduler_restart"] is False


def test_no_lost_steps_when_the_fault_lands_right_after_a_checkpoint():
    events = (_attempt((0, 0, 0), 102, 1, 10, ckpt_at=(10,)) + _attempt((0, 0, 1), 118, 11, 20, resumed_from=10))
    fault = {**FAULT, "injected_at": 114.5}
    m, _ = _derive(events=events, stamps={"submitted": 100.0, "allocated": 100.5}, faults=[fault])
    assert m["lost_steps"]["value"] == 0
    assert m["recovery_recompute_s"]["value"] == 0.0
    assert m["recovery_s"]["sources"]["caught_up"] == pytest.approx(120.0)   # back at step 10 once loaded


def _smoke(run_id):
    rec = next(json.loads(x) for x in (SMOKE / "runs.jsonl").read_text().splitlines() if f'"{run_id}"' in x)
    with gzip.open(SMOKE / "runs" / run_id / "events.jsonl.gz", "rt") as fh:
        return rec, [json.loads(x) for x in fh]


def test_k8s_restart_step_times_grouped_by_attempt():
    # a restarted JobSet's pods keep their hostnames, and PIDs repeat: rank 0 is pid 10 in both attempts
    rec, events = _smoke("k8s-kill-rank-01")
    r0 = {(tuple(e["attempt"]), e["host"], e["pid"]) for e in events if e["kind"] == "step" and e["rank"] == 0}
    assert len({(h, p) for _, h, p in r0}) == 1 and len(r0) == 2
    m, _ = metrics.derive(events, rec["scheduler"]["times"], world=2, nodes=2, gpus_per_node=0, steps=40,
                          price=NODE_PRICE, faults=rec["faults"])
    per_att_rank = {}
    for e in ev.of_kind(events, "step"):
        per_att_rank.setdefault((ev.attempt_of(e), e["rank"]), []).append(e)
    first_steps = {round(min(v, key=lambda e: e["ts_ns"])["dur_s"], 6) for v in per_att_rank.values()}
    st = m["step_time_s"]
    assert st["detail"]["n"] == sum(len(v) - 1 for v in per_att_rank.values()) == 2 * (14 + 29)
    assert not first_steps & set(st["detail"]["samples"])   # no warm-up step of either attempt
    assert m["lost_steps"]["value"] == 5 and m["lost_steps"]["detail"]["fault_landed"]["at_injection"] == {
        "0": 15, "1": 15}


def test_recorded_slurm_lose_node_phases_sum_to_recovery():
    rec, events = _smoke("slurm-lose-node-04")
    m, _ = metrics.derive(events, rec["scheduler"]["times"], world=2, nodes=2, gpus_per_node=0, steps=40,
                          price=NODE_PRICE, faults=rec["faults"])
    r = m["recovery_s"]
    assert r["detail"]["attempt_after"] == [0, 1, 0] and r["detail"]["scheduler_restart"]
    got = [m[p]["value"] for p in r["detail"]["phases"] if m[p]["value"] is not None]
    assert sum(got) == pytest.approx(r["value"], abs=1e-6)
    assert r["value"] > m["resume_s"]["value"] > 0


def test_fault_without_a_target_attempt_skips_the_survivors_last_step():
    # rank 1 finishes step 12 of the failed attempt after the fault: that is not the new attempt
    fault = {"kind": "kill_rank", "injected_at": 116.2}
    m, _ = _derive(faults=[fault])
    assert m["recovery_s"]["detail"]["attempt_before"] == [0, 0, 0]
    assert m["recovery_s"]["detail"]["attempt_after"] == [0, 1, 0]
    assert m["lost_steps"]["value"] == 1
