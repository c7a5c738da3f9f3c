"""A Kubernetes replay's raw records (recorded: tests/fixtures/replay/k8s_records.json, from
tests/integration/test_replay_k8s.py) reduce to the outcomes the run printed."""
from __future__ import annotations

import json
from pathlib import Path

from harness.replay import k8s_records
from harness.scale import outcome
from harness.scale.trace import loads

FIXTURE = Path(__file__).parents[2] / "fixtures" / "replay" / "k8s_records.json"


def recorded():
    d = json.loads(FIXTURE.read_text())
    return loads(d["trace"]), d["raw"]


def test_outcomes_from_the_api_servers_records():
    trace, raw = recorded()
    got = {o.id: o for o in k8s_records.outcomes(trace, raw["jobsets"], raw["pods"])}
    assert {k: (o.queue_s, o.end - o.start, o.state) for k, o in got.items()} == {
        "whole": (2.0, 13.0, "completed"), "b-four": (13.0, 5.0, "completed"),
        "a-one": (12.0, 4.0, "completed"), "b-two": (11.0, 4.0, "completed")}
    assert got["b-four"].start >= got["whole"].end
    assert outcome.queue_by_size(list(got.values()))["2-8"] == {
        "jobs": 2, "started": 2, "p50_s": 11.0, "p90_s": 13.0, "p99_s": 13.0, "max_s": 13.0}


def test_kueue_admits_each_jobset_no_later_than_its_gang_is_placed():
    trace, raw = recorded()
    admitted = k8s_records.admitted_times(raw["workloads"])
    got = k8s_records.outcomes(trace, raw["jobsets"], raw["pods"])
    assert len(admitted) == len(got) == 4
    for o in got:
        js = next(js["metadata"]["name"] for js in raw["jobsets"] if js["metadata"]["labels"]["poc.scale/job"] == o.id)
        assert o.submit <= admitted[js] <= o.start


def test_a_gang_not_wholly_placed_has_no_start_and_an_unknown_jobset_no_outcome():
    trace, raw = recorded()
    whole = next(js for js in raw["jobsets"] if js["metadata"]["name"] == "r-whole")
    pods = [p for p in raw["pods"] if p["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == "r-whole"]
    assert len(pods) == 16
    pods = pods[:15]           # one of its 16 pods never placed
    unfinished = {**whole, "status": {"conditions": []}}
    (o,) = k8s_records.outcomes(trace, [unfinished], pods)
    assert (o.id, o.start, o.end, o.state) == ("whole", None, None, "pending")
    assert k8s_records.outcomes(trace, [], raw["pods"]) == []


def test_records_keep_what_the_figures_need_and_drop_the_rest():
    obj = {"metadata": {"name": "p", "namespace": "n", "labels": {"a": "b"}, "creationTimestamp": "t",
                        "managedFields": [{"big": 1}], "uid": "u"},
           "spec": {"nodeName": "kwok-0001", "containers": [{}]},
           "status": {"phase": "Succeeded", "conditions": [{"type": "PodScheduled"}], "containerStatuses": [{}]}}
    assert k8s_records.trim(obj) == {
        "metadata": {"name": "p", "namespace": "n", "labels": {"a": "b"}, "creationTimestamp": "t"},
        "status": {"conditions": [{"type": "PodScheduled"}], "phase": "Succeeded"}, "spec": {"nodeName": "kwok-0001"}}


def test_a_nodes_place_comes_from_its_topology_labels():
    from harness.render import replay_k8s as rr
    node = {"metadata": {"name": "kwok-0009", "labels": {rr.BLOCK_LABEL: "b00", rr.RACK_LABEL: "b00-r01", "x": "y"}}}
    assert k8s_records.node_place(node) == {"name": "kwok-0009", "block": "b00", "rack": "b00-r01"}
    raw = {"nodes": [k8s_records.node_place(node), {"name": "plain", "block": None, "rack": None}]}
    assert k8s_records.block_of(raw) == {"kwok-0009": "b00"}
