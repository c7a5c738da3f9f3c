"""The Kubernetes state module replayed on API objects recorded from the real native cluster.

tests/fixtures/k8s/recorded/<run>.jsonl holds every distinct look the backend took at a real run
(JobSet, Workload, Pods, Scheduled events), written by scripts/record_k8s_objects.py against
Kubernetes 1.34 + JobSet 0.10.1 + Kueue 0.14.5. The expectations below are what those controllers
are documented to do, not what the code printed: a clean run goes Suspended -> ... -> Running ->
Completed with its times in causal order; a killed rank makes JobSet recreate the set as attempt 1.
"""
from __future__ import annotations

import json
from itertools import groupby, pairwise

import pytest
from support.paths import FIXTURES

from harness.backends.k8s import state as st
from harness.states import JobState

REC = FIXTURES / "k8s" / "recorded"
NODES = 2


def looks(name: str) -> list[dict]:
    return [json.loads(x) for x in (REC / f"{name}.jsonl").read_text().splitlines()]


def replay(run: list[dict]) -> tuple[list[str], dict, dict]:
    """Feed the looks in order, as observe() does; the states derived, and the times and attempts."""
    times, attempts, states = {}, {}, []
    for look in run:
        pods = look["pods"]
        want = st.awaiting_allocation(attempts, NODES, pods)
        st.update_times(times, attempts, NODES, look["jobset"], look["workload"], pods,
                        st.scheduled_event_times(look["scheduled_events"], want))
        v = st.with_capacity(st.native_state(NODES, look["jobset"], look["workload"], pods), look["allocatable"])
        states.append(v.native)
    return [k for k, _ in groupby(states)], times, attempts


@pytest.mark.parametrize("name", ["k8s-clean-01", "k8s-kill-rank-01"])
def test_replay_derives_what_the_backend_saw(name):
    """Each look derives the state the backend derived when it was recorded, except where a rule
    was corrected since (listed here with the reason)."""
    corrected = {("Restarting", "Running")}   # a mix of Running and Succeeded pods is still Running
    run = looks(name)
    assert len(run) >= 4
    for look in run:
        v = st.with_capacity(st.native_state(NODES, look["jobset"], look["workload"], look["pods"]),
                             look["allocatable"])
        assert v.native == look["native"] or (look["native"], v.native) in corrected, look["native"]


def test_clean_run_states_and_times_in_causal_order():
    states, t, attempts = replay(looks("k8s-clean-01"))
    assert states[0] in ("Suspended", "PodsUnscheduled", "PodsStarting") and states[-1] == "Completed"
    assert "Running" in states
    assert not {"Restarting", "Unrunnable", "Failed", "NotFound"} & set(states)
    assert st.STATE_TABLE[states[-1]] is JobState.SUCCEEDED
    order = ["submitted", "quota_reserved", "admitted", "allocated", "containers_started", "ended"]
    assert all(k in t for k in order), t
    # creationTimestamp and conditions have 1 s resolution, the Scheduled event microseconds
    for a, b in pairwise(order):
        assert t[a] <= t[b] + 1.0, (a, t[a], b, t[b])
    assert attempts[0]["allocated_from"] == "Scheduled events (eventTime)"
    assert t["allocated"] != int(t["allocated"]), "the allocation time kept its sub-second part"
    assert list(attempts) == [0] and len(attempts[0]["pods"]) == NODES and len(attempts[0]["nodes"]) == NODES


def test_killed_rank_makes_jobset_recreate_the_set_as_attempt_1():
    states, t, attempts = replay(looks("k8s-kill-rank-01"))
    assert states[-1] == "Completed"
    first_running = states.index("Running")
    assert "Restarting" in states[first_running:], states
    # once attempt 1 runs, nothing looks like a restart again (ranks finishing a moment apart included)
    assert "Restarting" not in states[len(states) - 1 - states[::-1].index("Running"):], states
    assert sorted(attempts) == [0, 1]
    a0, a1 = attempts[0], attempts[1]
    assert set(a0["pods"]).isdisjoint(a1["pods"]), "the restart made new pods"
    assert a1["allocated"] > a0["containers_started"]
    assert t["allocated"] == a0["allocated"], "the run's queue time is the first attempt's"
    restarts = [st.get(x["jobset"], "status", "restarts") for x in looks("k8s-kill-rank-01") if x["jobset"]]
    assert max(int(r or 0) for r in restarts) == 1
