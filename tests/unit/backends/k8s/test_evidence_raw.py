"""What the Kubernetes backend keeps as raw evidence (backends/k8s/evidence_raw.py), on recorded objects."""
from __future__ import annotations

import json
from types import SimpleNamespace

from support.paths import FIXTURES

from harness.backends.base import Handle
from harness.backends.k8s import evidence_raw as er
from harness.errors import BackendError

REC = FIXTURES / "k8s" / "recorded"


def raw_of(name: str) -> dict:
    return json.loads((REC / f"{name}.raw.json").read_text())


def test_slim_drops_bulk_and_secrets_but_keeps_the_rest():
    obj = {"kind": "Pod", "metadata": {"name": "p", "managedFields": [{"x": 1}],
                                       "annotations": {er.LAST_APPLIED: "{...}", "keep": "1"}},
           "spec": {"containers": [{"env": [{"name": "HF_TOKEN", "value": "s3cr3t"},
                                            {"name": "WORLD", "value": "2"}]}]}}
    out = er.slim(obj)
    assert "managedFields" not in out["metadata"] and out["metadata"]["annotations"] == {"keep": "1"}
    assert out["spec"]["containers"][0]["env"] == [{"name": "HF_TOKEN", "value": er.REDACTED},
                                                   {"name": "WORLD", "value": "2"}]
    assert "data" not in er.slim({"kind": "Secret", "data": {"k": "dg=="}})
    assert obj["metadata"]["managedFields"], "the input is not changed"


def test_run_events_match_by_uid_not_by_a_reused_name():
    raw = raw_of("k8s-kill-rank-01")
    mine = er.run_events(raw["events"], raw["namespace"], raw["name"], raw["jobset"], raw["workload"], raw["pods"])
    assert len(mine) == len(raw["events"])
    stray = json.loads(json.dumps(raw["events"][0]))
    stray["involvedObject"]["uid"] = "an-earlier-run"
    assert er.run_events([stray], raw["namespace"], raw["name"], raw["jobset"], raw["workload"], raw["pods"]) == []
    kinds = {e["involvedObject"]["kind"] for e in mine}
    assert kinds == {"JobSet", "Job", "Pod", "Workload"}


def test_keeper_keeps_the_first_deletion_request_and_the_last_copy():
    raw = raw_of("k8s-delete-pod-02")
    pod = raw["pods"][0]
    clock = iter([10.0, 20.0])
    k = er.RawKeeper(clock=lambda: next(clock))
    first = json.loads(json.dumps(pod))
    first["metadata"].update(deletionTimestamp="2026-12-03T09:02:16Z", deletionGracePeriodSeconds=5,
                             resourceVersion="1")
    last = json.loads(json.dumps(first))
    last["metadata"].update(deletionTimestamp="2026-12-03T09:02:12Z", deletionGracePeriodSeconds=0,
                            resourceVersion="2")
    k.note(None, None, [first])
    k.note(raw["jobset"], None, [last])
    uid = pod["metadata"]["uid"]
    assert k.pods[uid] is last and k.jobset is raw["jobset"]
    assert k.deletion_first_seen[uid] == {"deletionTimestamp": "2026-12-03T09:02:16Z",
                                          "deletionGracePeriodSeconds": 5, "seen_at": 10.0}


class FakeClient:
    """The K8sClient calls gather() makes, answered from a recorded run."""

    def __init__(self, raw: dict, fail_events: bool = False):
        self.raw, self.fail_events = raw, fail_events

    def get(self, what, res, name, ns=None, **kw):
        return self.raw["jobset"]

    def core(self):
        return SimpleNamespace(list_namespaced_event=lambda ns: None, read_node=lambda n: None)

    def call(self, what, fn, *args, missing_ok=False, **kw):
        if what == "LIST events":
            if self.fail_events:
                raise BackendError("LIST events: HTTP 403 Forbidden")
            return SimpleNamespace(items=self.raw["events"])
        if what == "GET node":
            return {"metadata": {"name": args[0]}, "status": {"conditions": [{"type": "Ready", "status": "False"}]},
                    "spec": {"unschedulable": True}}
        raise AssertionError(what)

    @staticmethod
    def to_dict(o):
        return o


def test_gather_merges_deleted_pods_and_is_json_able():
    raw = raw_of("k8s-kill-rank-01")
    attempt0 = [p for p in raw["pods"] if p["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "0"]
    later = [p for p in raw["pods"] if p not in attempt0]
    keeper = er.RawKeeper()
    keeper.note(raw["jobset"], raw["workload"], later)
    h = Handle("k8s", "k8s-kill-rank-01", [], raw["submit"]["before"],
               data={"namespace": raw["namespace"], "name": raw["name"], "uid": raw["jobset"]["metadata"]["uid"],
                     "nodes": 2, "submit_returned": raw["submit"]["after"], "lost_nodes": ["poc-n3"]})
    out = er.gather(FakeClient(raw), h, keeper, [(123.0, p) for p in attempt0], clock=lambda: 99.0)
    assert {p["metadata"]["uid"] for p in out["pods"]} == {p["metadata"]["uid"] for p in raw["pods"]}
    assert set(out["pod_deleted_seen"].values()) == {123.0}
    assert out["submit"] == {**raw["submit"]} and out["image"]["id"].startswith("sha256:")
    assert out["nodes"] == [{"name": "poc-n3", "why": "collect", "at": 99.0, "found": True,
                             "conditions": [{"type": "Ready", "status": "False"}], "taints": [],
                             "unschedulable": True}]
    json.dumps(out)
    out = er.gather(FakeClient(raw, fail_events=True), h, keeper, [], clock=lambda: 99.0)
    assert out["events"] == [] and "403" in out["errors"][0]
