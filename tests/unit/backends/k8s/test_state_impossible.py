"""An impossible GPU request ends fast (FAILED, with the scheduler's own words), a busy cluster waits.

Fed by objects recorded on the GPU-shaped native cluster as the restricted user (3 nodes x 4
nvidia.com/gpu; its queue holds 8): tests/fixtures/k8s/impossible/record.py made them.
"""
from __future__ import annotations

import json

import pytest
from support.paths import FIXTURES

from harness.backends.k8s import state as st
from harness.states import JobState

FIX = FIXTURES / "k8s" / "impossible"


def look(case: str) -> tuple[int, dict, dict, list[dict]]:
    d = json.loads((FIX / f"{case}.json").read_text())
    return len(d["pods"]) or 2, d["jobset"], d["workload"], d["pods"]


def test_over_the_queues_capacity_fails_at_once():
    nodes, j, w, pods = look("over-quota")
    v = st.native_state(nodes, j, w, pods)
    assert (v.native, v.state) == ("Unrunnable", JobState.FAILED)
    assert "current podset request (16) > maximum capacity (8)" in v.reason and v.reason.startswith("Kueue: ")


def test_no_node_with_that_many_gpus_fails_without_reading_nodes():
    """The restricted user cannot list nodes: the scheduler's message alone decides."""
    nodes, j, w, pods = look("no-node")
    v = st.native_state(nodes, j, w, pods)
    assert (v.native, v.state) == ("Unrunnable", JobState.FAILED)
    assert "3 Insufficient nvidia.com/gpu" in v.reason and "Preemption is not helpful" in v.reason
    assert st.with_capacity(v, None) == v


def test_busy_gpus_wait():
    nodes, j, w, pods = look("busy")
    v = st.native_state(nodes, j, w, pods)
    assert (v.native, v.state) == ("PodsUnscheduled", JobState.PENDING)
    assert "No preemption victims found" in v.reason
    # a node with 4 GPUs can hold the 2-GPU pod once they are free: capacity does not fail it either
    assert st.with_capacity(v, [{"cpu": "2", "memory": "24581264Ki", "nvidia.com/gpu": "4", "pods": "60"}]) == v


def test_no_node_with_admin_rights_fails_from_allocatable_too():
    pod = look("no-node")[3][0]
    alloc = [{"cpu": "2", "memory": "24581264Ki", "nvidia.com/gpu": "4", "pods": "60"}] * 3
    assert st.fits_no_node(pod, alloc)


@pytest.mark.parametrize("message,never", [
    ("0/3 nodes are available: 3 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/3 nodes "
     "are available: 3 Preemption is not helpful for scheduling.", True),
    ("0/3 nodes are available: 3 node(s) had untolerated taint {nvidia.com/gpu: present}. preemption: 0/3 nodes "
     "are available: 3 Preemption is not helpful for scheduling.", True),
    # one node could help after preemption: wait
    ("0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 Insufficient cpu. preemption: 0/3 nodes are "
     "available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.", False),
    ("0/3 nodes are available: 3 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/3 nodes "
     "are available: 3 No preemption victims found for incoming pod.", False),
    ("0/0 nodes are available. preemption: 0/0 nodes are available: 0 Preemption is not helpful for scheduling.",
     False),
    # measured with the tenant's priority class (preemptionPolicy: Never): no per-node preemption verdict,
    # so "never" and "busy" read the same and the pod waits (for the queue timeout, which quotes this)
    ("0/3 nodes are available: 3 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: not "
     "eligible due to preemptionPolicy=Never.", False),
    ("", False),
])
def test_no_node_can_ever(message, never):
    assert st.no_node_can_ever(message) is never


def test_a_restarted_set_is_not_failed_by_the_message():
    """After a lost node the recreated pods may briefly find no node; the run is Restarting, not failed."""
    nodes, j, w, pods = look("no-node")
    j = json.loads(json.dumps(j))
    j.setdefault("status", {})["restarts"] = 1
    pods = json.loads(json.dumps(pods))
    for p in pods:
        p["metadata"]["labels"][st.RESTART_LABEL] = "1"
    assert st.native_state(nodes, j, w, pods).native == "Restarting"
