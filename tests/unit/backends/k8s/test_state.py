"""The Kubernetes backend's pure parts: states, times, quantities and timestamps, without a cluster.

Hand-made objects here pin single rules; tests/unit/backends/k8s/test_state_recorded.py replays objects recorded
from the real cluster.
"""
from __future__ import annotations

import math

import pytest

from harness.backends.k8s import api
from harness.backends.k8s import state as st
from harness.states import JobState


def pod(i, phase, attempt=0, waiting=None, scheduled=True, node="n1", requests=None):
    cs = [{"name": "torchrun", "state": {"waiting": {"reason": waiting, "message": "back-off"}}}] if waiting else []
    return {"metadata": {"name": f"r-w-0-{i}-x", "labels": {st.RESTART_LABEL: str(attempt)},
                         "creationTimestamp": "2026-12-02T14:09:24Z"},
            "spec": {"nodeName": node, "containers": [{"name": "torchrun",
                                                        "resources": {"requests": requests or {"cpu": "1"}}}]},
            "status": {"phase": phase, "containerStatuses": cs,
                       "conditions": [{"type": "PodScheduled", "status": "True" if scheduled else "False",
                                       "message": "" if scheduled else "0/3 nodes are available",
                                       "lastTransitionTime": "2026-12-02T14:09:25Z"}]}}


def js(suspend=False, conds=(), restarts=0):
    return {"metadata": {"name": "r", "creationTimestamp": "2026-12-02T14:09:24Z"}, "spec": {"suspend": suspend},
            "status": {"restarts": restarts,
                       "conditions": [{"type": c, "status": "True", "lastTransitionTime": "2026-12-02T14:10:00Z"}
                                      for c in conds]}}


def state(j, w, ps, nodes=2):
    v = st.native_state(nodes, j, w, ps)
    return v.native, v.state


def test_parse_time_and_quantities():
    assert api.parse_time("2026-12-02T14:09:24Z") == 1796220564.0
    assert api.parse_time("2026-12-02T14:09:24.860832Z") == pytest.approx(1796220564.860832)
    assert api.parse_time("2026-12-02T14:09:24.860832123Z") == pytest.approx(1796220564.860832)  # kubelet: 9 digits
    assert api.parse_time("2026-12-02T14:09:24+00:00") == 1796220564.0
    # what crashed the log reader: text that is no timestamp is missing, not an exception
    for bad in ("unable", "unable+00:00", "", "2026-13-02T14:09:24Z", "2026-12-02T14:09:24", None, "Z"):
        assert api.parse_time(bad) is None
    assert api.qty("1500m") == 1.5 and api.qty("3072Mi") == 3072 * 1024**2 and api.qty("2") == 2
    assert math.isnan(api.qty("lots"))


def test_states_map_through_one_table():
    full = {"status": {"conditions": [{"type": "QuotaReserved", "status": "False",
                                       "message": "insufficient quota ... > maximum capacity (2)"}]}}
    assert state(js(suspend=True), None, []) == ("Suspended", JobState.PENDING)
    assert state(js(suspend=True), full, []) == ("Unrunnable", JobState.FAILED)
    assert state(js(), None, [pod(0, "Pending"), pod(1, "Pending")]) == ("PodsStarting", JobState.STARTING)
    assert state(js(), None, [pod(0, "Running"), pod(1, "Running")]) == ("Running", JobState.RUNNING)
    assert state(js(), None, [pod(0, "Running"), pod(1, "Failed")]) == ("Restarting", JobState.RESTARTING)
    assert state(js(restarts=1), None, [pod(0, "Running", 1), pod(1, "Pending", 1)]) == \
        ("Restarting", JobState.RESTARTING)
    assert state(js(), None, [pod(0, "Pending", waiting="ImagePullBackOff"), pod(1, "Running")])[1] is JobState.FAILED
    assert state(js(conds=("Completed",)), None, []) == ("Completed", JobState.SUCCEEDED)
    assert state(js(conds=("Failed",)), None, []) == ("Failed", JobState.FAILED)
    assert state(None, None, []) == ("NotFound", JobState.CANCELLED)
    assert state(js(), None, [pod(0, "Running")]) == ("PodsUnscheduled", JobState.PENDING)   # one pod of two


def test_unrunnable_only_when_no_node_could_ever_hold_the_pod():
    waiting = pod(1, "Pending", scheduled=False, requests={"cpu": "8", "memory": "1Gi"})
    v = st.native_state(2, js(), None, [pod(0, "Running"), waiting])
    assert v.native == "PodsUnscheduled" and v.unscheduled is waiting and "0/3 nodes" in v.reason
    small = [{"cpu": "2", "memory": "4Gi"}, {"cpu": "4", "memory": "8Gi"}]
    assert st.with_capacity(v, small).native == "Unrunnable"
    assert st.with_capacity(v, small + [{"cpu": "16", "memory": "64Gi"}]).native == "PodsUnscheduled"
    assert st.with_capacity(v, None).native == "PodsUnscheduled"   # may not list nodes: do not guess
    assert st.with_capacity(v, [{"cpu": "garbage", "memory": "64Gi"}]).native == "Unrunnable"


def test_times_first_attempt_feeds_the_run_and_scheduled_events_beat_conditions():
    times, attempts = {}, {}
    ps = [pod(0, "Running"), pod(1, "Running")]
    assert st.awaiting_allocation(attempts, 2, ps) == ["r-w-0-0-x", "r-w-0-1-x"]
    events = [{"involvedObject": {"name": "r-w-0-0-x"}, "reason": "Scheduled",
               "eventTime": "2026-12-02T14:09:24.250000Z"},
              {"involvedObject": {"name": "r-w-0-1-x"}, "reason": "Scheduled",
               "eventTime": "2026-12-02T14:09:24.750000Z"},
              {"involvedObject": {"name": "other"}, "reason": "Scheduled", "eventTime": "2026-12-02T14:09:30Z"}]
    sched = st.scheduled_event_times(events, st.awaiting_allocation(attempts, 2, ps))
    st.update_times(times, attempts, 2, js(), None, ps, sched)
    assert times["allocated"] == pytest.approx(1796220564.75)
    assert attempts[0]["allocated_from"] == "Scheduled events (eventTime)"
    assert times["submitted"] == 1796220564.0
    assert st.awaiting_allocation(attempts, 2, ps) == []
    # a restart: attempt 1 gets its own record; the run's allocation stays the first attempt's
    st.update_times(times, attempts, 2, js(conds=("Completed",)), None, [pod(0, "Running", 1), pod(1, "Running", 1)])
    assert attempts[1]["allocated_from"] == "PodScheduled (1 s)"
    assert times["allocated"] == pytest.approx(1796220564.75)
    assert times["ended"] == 1796220600.0


def test_garbage_objects_do_not_raise():
    junk = [{}, {"metadata": None}, {"status": {"conditions": [None, 3, "x"]}},
            {"metadata": {"labels": {st.RESTART_LABEL: "not-a-number"}}}]
    st.native_state(2, {"status": {"restarts": "x"}}, {"status": None}, junk)
    st.update_times({}, {}, 2, {"metadata": {"creationTimestamp": "unable"}}, {}, junk, {})
    assert st.workload_of([{"metadata": {"ownerReferences": [{"kind": "JobSet"}]}}]) == {}
    assert st.quota_of({"spec": None}) == {}
