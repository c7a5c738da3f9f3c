"""harness.evidence.k8s on raw evidence recorded from real runs on the native cluster.

tests/fixtures/k8s/recorded/<run>.raw.json is what KubernetesBackend.collect() kept (Collected.raw)
for a clean run, a kill_rank run and a delete_pod run (both restart the JobSet), written by
scripts/record_k8s_objects.py against Kubernetes 1.34 + JobSet 0.10.1 + Kueue 0.14.5. The
expectations are what the records mean: the kube-scheduler's Scheduled eventTime has microseconds,
the API server's creationTimestamp whole seconds, and the harness clock brackets the create call.
"""
from __future__ import annotations

import copy
import json

import pytest
from support.paths import FIXTURES, RESULTS

from harness import evidence
from harness.backends.k8s.api import parse_time
from harness.evidence import k8s
from harness.store import load_raw
from harness.timing import Span, Stamp

REC = FIXTURES / "k8s" / "recorded"
RUNS = ["k8s-clean-01", "k8s-kill-rank-01", "k8s-delete-pod-02"]


def raw_of(name: str) -> dict:
    return json.loads((REC / f"{name}.raw.json").read_text())


@pytest.mark.parametrize("name", RUNS)
def test_allocated_is_the_scheduled_events_microseconds_after_the_submit(name):
    raw = raw_of(name)
    st = k8s.stamps(raw)
    sub, alloc = st["submitted"], st["allocated"]
    assert alloc.width < 1e-5 and "Scheduled eventTime" in alloc.source and "PodScheduled" not in alloc.source
    sched = [parse_time(e["eventTime"]) for e in raw["events"] if e["reason"] == "Scheduled"
             and e["involvedObject"]["uid"] in {p["metadata"]["uid"] for p in raw["pods"]
                                                if k8s.attempt_of(p) == 0}]
    assert alloc.t == pytest.approx(max(sched), abs=1e-6)
    assert alloc.lo > sub.hi, "every pod was bound after the create call returned"
    assert st["admitted"] is not None and st["admitted"].hi >= sub.lo and st["admitted"].lo <= alloc.hi
    assert all(c["ok"] for c in st["checks"]), [c for c in st["checks"] if not c["ok"]]


@pytest.mark.parametrize("name", RUNS)
def test_queue_from_the_bracket_is_below_the_creation_timestamp_arithmetic(name):
    """The old queue_s: Scheduled eventTime minus the whole-second creationTimestamp, up to 1 s high."""
    raw = raw_of(name)
    st = k8s.stamps(raw)
    old = st["allocated"].t - parse_time(raw["jobset"]["metadata"]["creationTimestamp"])
    q = Span.between(st["submitted"], st["allocated"])
    assert 0 < q.lo <= q.value <= q.hi < old
    assert q.uncertainty < 0.05, "the submit call takes milliseconds"


def test_submitted_is_the_bracket_narrowed_by_creation_timestamp():
    raw = raw_of("k8s-clean-01")
    t = parse_time(raw["submit"]["scheduler_record"])
    raw["submit"].update(before=t - 0.3, after=t + 0.2)           # a call that straddles a second boundary
    st = k8s.stamps(raw)
    assert (st["submitted"].lo, st["submitted"].hi) == (t, t + 0.2)
    assert "creationTimestamp" in st["submitted"].source
    raw["submit"].update(before=t - 5.3, after=t - 5.2)           # another clock: disjoint, the bracket stands
    st = k8s.stamps(raw)
    assert (st["submitted"].lo, st["submitted"].hi) == (t - 5.3, t - 5.2)
    c = next(c for c in st["checks"] if c["what"].startswith("submitted"))
    assert not c["ok"] and "disjoint" in c["detail"]


def test_submitted_without_bracket_falls_back_to_creation_timestamp():
    raw = raw_of("k8s-clean-01")
    del raw["submit"]
    st = k8s.stamps(raw)
    assert st["submitted"].width == 1.0 and "creationTimestamp" in st["submitted"].source
    assert any(not c["ok"] and "bracket" in c["what"] for c in st["checks"])


def test_allocated_falls_back_to_pod_scheduled_and_says_so():
    raw = raw_of("k8s-clean-01")
    raw["events"] = [e for e in raw["events"] if e["reason"] != "Scheduled"]
    st = k8s.stamps(raw)
    assert st["allocated"].width == 1.0 and "PodScheduled" in st["allocated"].source
    assert any(not c["ok"] and "Scheduled event" in c["what"] for c in st["checks"])


@pytest.mark.parametrize("name", ["k8s-kill-rank-01", "k8s-delete-pod-02"])
def test_a_restart_is_two_attempts_in_causal_order(name):
    st = k8s.stamps(raw_of(name))
    a0, a1 = st["attempts"]
    assert (a0["attempt"], a1["attempt"]) == (0, 1)
    assert a0["detected"] is not None and a1["detected"] is None, "only the failed attempt has a detection"
    assert a0["allocated"].hi <= a0["detected"].hi and a0["detected"].lo <= a0["ended"].hi
    assert a0["ended"].lo <= a1["allocated"].hi and a0["released"].lo <= a1["allocated"].hi + 1
    assert a1["ended"] is st["ended"] and st["released"] is a1["released"] and st["allocated"] is a0["allocated"]
    assert all(len(a["nodes"]) == 2 for a in st["attempts"])
    assert "BackoffLimitExceeded" in a0["ended"].source


def test_kill_rank_is_detected_by_the_container_that_exited():
    a0 = k8s.stamps(raw_of("k8s-kill-rank-01"))["attempts"][0]
    assert "exited 1" in a0["detected"].source and a0["detected"].width == 1.0


def test_delete_pod_is_detected_by_the_deletion_request_bounded_by_the_harness():
    raw = raw_of("k8s-delete-pod-02")
    a0 = k8s.stamps(raw)["attempts"][0]
    assert "deletion requested" in a0["detected"].source and a0["detected"].width < 1.0
    raw.pop("pod_deletion_first_seen")       # only the last copies: the final delete's time, or the kubelet
    a0 = k8s.stamps(raw)["attempts"][0]
    assert a0["detected"] is not None and a0["detected"].width == 1.0


def test_a_lost_node_going_not_ready_counts_as_detection():
    raw = raw_of("k8s-kill-rank-01")
    st = k8s.stamps(raw)
    a0 = st["attempts"][0]
    node = a0["nodes"][0]
    early = a0["detected"].lo - 3
    import datetime as dt
    when = dt.datetime.fromtimestamp(early, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    raw["nodes"] = [{"name": node, "why": "node controller noticed (remediation)", "at": early + 5,
                     "conditions": [{"type": "Ready", "status": "Unknown", "lastTransitionTime": when}]}]
    a0 = k8s.stamps(raw)["attempts"][0]
    assert a0["detected"].lo == early and f"{node} Ready=Unknown" in a0["detected"].source


def test_events_of_another_run_of_the_same_name_are_not_used():
    raw = raw_of("k8s-clean-01")
    stray = copy.deepcopy(next(e for e in raw["events"] if e["reason"] == "Scheduled"))
    stray["involvedObject"]["uid"] = "someone-else"
    stray["eventTime"] = "2099-01-01T00:00:00.000001Z"
    raw["events"].append(stray)
    before = k8s.stamps(raw_of("k8s-clean-01"))["allocated"]
    assert k8s.stamps(raw)["allocated"] == before


@pytest.mark.parametrize("odd", [None, {}, {"pods": "x"}, {"pods": [1, None, {"metadata": 3}]},
                                 {"jobset": [], "workload": 7, "events": [None, {"eventTime": "bad"}]},
                                 {"submit": {"before": "x", "after": None}, "expected_pods": "two"},
                                 {"pods": [{"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z",
                                                         "deletionGracePeriodSeconds": "x"}}],
                                  "pod_deleted_seen": {"": "nan"}}])
def test_odd_input_never_raises(odd):
    st = k8s.stamps(odd)
    assert set(st) == {"submitted", "admitted", "allocated", "ended", "released", "attempts", "checks"}
    assert not [c for c in st["checks"] if c["what"] == "raw evidence readable"], "read, not caught"


@pytest.mark.parametrize("name", RUNS)
def test_stamps_round_trip_through_json(name):
    st = evidence.stamps("k8s", raw_of(name))
    back = evidence.from_json(json.loads(json.dumps(evidence.to_json(st))))
    assert back["allocated"] == st["allocated"] and back["attempts"][-1]["released"] == st["attempts"][-1]["released"]
    assert isinstance(back["submitted"], Stamp)


def test_image_and_submit_are_kept():
    raw = raw_of("k8s-clean-01")
    assert raw["image"]["id"].startswith("sha256:") and raw["image"]["ref"]
    assert raw["submit"]["before"] <= raw["submit"]["after"] and raw["submit"]["scheduler_record"]


def test_an_allocation_never_excludes_the_pods_own_pod_scheduled_condition():
    """Recorded: the restart of a committed kill_rank run, where one pod's Scheduled eventTime came 1.021 s
    after the start of its PodScheduled condition's second (the scheduler writes the event after the bind).
    Read by the rules of evidence version 1 the attempt's allocation excludes that second; from version 2
    the pod's stamp is the hull of both. A pod whose event lies inside its second keeps the microseconds."""
    raw = load_raw(RESULTS / "smoke-2026-12-03-ux-audit" / "smoke-poc" / "runs" / "k8s-kill-rank-01")
    restart = k8s._by_attempt(list(raw["pods"]))[1]
    seconds = [k8s._pod_scheduled(p) for p in restart]
    bound_lo, bound_hi = max(s.lo for s in seconds), max(s.hi for s in seconds)   # when the last pod was bound
    old, new = (k8s.stamps(dict(raw, evidence_version=v)) for v in (1, 2))
    a1, a2 = old["attempts"][1]["allocated"], new["attempts"][1]["allocated"]
    assert a1.lo > bound_hi                                          # version 1: outside the conditions' second
    assert a2.lo <= bound_hi and a2.hi >= bound_lo and a2.width < 0.1
    assert "k8s-kill-rank-01-w-0-1-7p9p6 (+1.021 s" in a2.source
    assert new["attempts"][0]["allocated"] == old["attempts"][0]["allocated"]
    assert k8s.stamps(raw)["attempts"][1]["allocated"] == a1         # kept before the change: read as it was


def test_from_version_3_the_allocation_is_the_binds_own_bounds_not_the_hull():
    """The same recorded restart read by version 3's rule: the bind lay in the PodScheduled condition's second and
    no later than the event the scheduler wrote after it, so the pod's stamp is that intersection, its point in the
    middle, instead of the hull that kept the event's microsecond as its point though the bind could have been
    anywhere in the second before it."""
    raw = load_raw(RESULTS / "smoke-2026-12-03-ux-audit" / "smoke-poc" / "runs" / "k8s-kill-rank-01")
    restart = k8s._by_attempt(list(raw["pods"]))[1]
    late = next(p for p in restart if k8s._name(p) == "k8s-kill-rank-01-w-0-1-7p9p6")
    cond = k8s._pod_scheduled(late)
    event = Stamp.exact(cond.lo + 1.021, "Scheduled eventTime")
    hull, within = k8s._hull(event, cond), k8s._within(event, cond)
    assert (hull.t, hull.lo, hull.hi) == (event.t, cond.lo, event.hi)   # version 2: the point outside the second
    assert (within.lo, within.hi) == (cond.lo, cond.hi) and within.t == (cond.lo + cond.hi) / 2
    early = Stamp.exact(cond.lo - 0.5, "Scheduled eventTime")           # clocks that disagree: no intersection
    assert k8s._within(early, cond) == k8s._hull(early, cond)
    v2, v3 = (k8s.stamps(dict(raw, evidence_version=v))["attempts"][1]["allocated"] for v in (2, 3))
    assert v3.lo <= v2.lo and v3.t < v2.t and v3.lo <= v3.t <= v3.hi


def test_the_collector_marks_the_newest_evidence_version_the_reader_knows():
    # a rule the reader gained but the collector never marks applies to no run ever made
    from harness.backends.k8s.evidence_raw import EVIDENCE_VERSION
    assert max(k8s.READER_RULES) == EVIDENCE_VERSION
