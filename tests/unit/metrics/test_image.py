"""image_pull_s from the kubelet's Pulling/Pulled events (harness/metrics/image.py via evidence/k8s.py).

The already-present case is a committed run's recorded events (results/smoke-2026-12-05, the native
cluster's kubelet 1.34). No committed run pulled its image, so the pull cases are events whose messages are
built here from the kubelet's format strings (kubernetes/kubernetes, pkg/kubelet/images/image_manager.go):
  Pulled, current:  fmt.Sprintf("Successfully pulled image %q in %v (%v including waiting). Image size: %v bytes.",
                                image, pullDuration.Truncate(time.Millisecond), imagePullDuration, imageSize)
  Pulled, before the size (kubernetes#111772 .. #121719): "Successfully pulled image %q in %v (%v including waiting)"
  Pulled, older:    "Successfully pulled image %q in %v"   (time.Since the Pulling event, untruncated)
  present:          "Container image %q already present on machine" [" and can be accessed by the pod"]
  Pulling:          "Pulling image %q"
with Go's time.Duration.String() for %v ("1m31.002s", "850ms").
"""
from __future__ import annotations

import copy
import json

import pytest
from support.paths import RESULTS

from harness import evidence, metrics
from harness.evidence import k8s
from harness.metrics.common import normalise
from harness.metrics.image import go_duration, image_pull, image_pull_metrics
from harness.store import load_events, load_raw
from harness.timing import Stamp

RUNS = RESULTS / "smoke-2026-12-05" / "smoke-poc" / "runs"
IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"
T0 = 1_800_000_000.0


def raw_of(run: str) -> dict:
    return load_raw(RUNS / run)


def record_of(run: str) -> dict:
    return next(r for r in map(json.loads, (RUNS.parent / "runs.jsonl").read_text().splitlines())
                if r["run_id"] == run)


def derive_of(run: str) -> tuple[dict, dict, dict]:
    """(metrics, stamps, stored record) of a committed clean run, derived again as `poc rederive` does."""
    rec = record_of(run)
    st, d = evidence.stamps(rec["platform"], raw_of(run)), rec["derive_inputs"]
    m, _ = metrics.derive(load_events(RUNS / run), st, world=d["world"], nodes=d["nodes"],
                          gpus_per_node=d["gpus_per_node"], steps=d["steps"], price=d["price"], faults=[])
    return m, st, rec


def _pulled_new(pull: str, total: str, size: int, image: str = IMAGE) -> str:
    return f'Successfully pulled image "{image}" in {pull} ({total} including waiting). Image size: {size} bytes.'


def _pod(name: str, node: str, slot: str | None = None) -> dict:
    return {"pod": name, "uid": f"uid-{name}", "node": node, "slot": slot or name}


def _ev(reason: str, pod: str, at: float, message: str, container: str = "spec.containers{torchrun}") -> dict:
    return {"reason": reason, "pod": pod, "uid": f"uid-{pod}", "container": container, "message": message,
            "node": None, "at": Stamp.truncated(at, f"kubelet {reason} event")}


def _metric_of(raw: dict) -> dict | None:
    """What derive reads: the stamps as the record stores them (JSON), read back."""
    return image_pull_metrics(normalise(evidence.to_json(k8s.stamps(raw)))).get("image_pull_s")


def test_go_durations_as_the_kubelet_prints_them():
    assert go_duration("0s") == 0
    assert go_duration("850ms") == pytest.approx(0.85)
    assert go_duration("1m31.002s") == pytest.approx(91.002)
    assert go_duration("1h0m0.001s") == pytest.approx(3600.001)
    assert go_duration("49.18401355s") == pytest.approx(49.18401355)
    assert go_duration("500µs") == pytest.approx(5e-4)


def test_the_recorded_run_had_its_image_on_every_node_already():
    raw = raw_of("k8s-clean-01")
    m = _metric_of(raw)
    assert (m["value"], m["lo"], m["hi"], m["uncertainty"]) == (0.0, 0.0, 0.0, 0.0)
    d = m["detail"]
    assert d["pre_staged"] is True and d["part_of"] == "launch_s"
    assert [(p["pod"], p["node"], p["source"]) for p in d["pods"]] == [
        ("k8s-clean-01-w-0-0-sg74d", "poc-n2", "already present"),
        ("k8s-clean-01-w-0-1-625kw", "poc-n3", "already present")]
    assert {p["image"] for p in d["pods"]} == {raw["image"]["ref"]}
    assert all(p["message"].endswith("already present on machine") for p in d["pods"])
    assert m["stamps"]["image_ready"]["resolution_s"] == 1.0      # the kubelet's events: whole seconds


def test_derive_gives_it_for_the_recorded_run_inside_launch_s():
    m, _, rec = derive_of("k8s-clean-01")
    assert m["image_pull_s"]["value"] == 0.0 <= m["launch_s"]["value"]
    assert m["launch_s"] == rec["metrics"]["launch_s"]    # nothing else moved


def test_a_pull_in_the_kubelets_current_words_through_the_evidence():
    raw = raw_of("k8s-clean-01")
    pulled = next(e for e in raw["events"] if e["reason"] == "Pulled")
    pulling = copy.deepcopy(pulled)
    pulling.update(reason="Pulling", message=f'Pulling image "{IMAGE}"', firstTimestamp="2026-12-05T21:52:40+00:00")
    pulled["message"] = _pulled_new("10.5s", "11.25s", 9_876_543_210)
    raw["events"].append(pulling)
    m = _metric_of(raw)
    assert (m["value"], m["lo"], m["hi"]) == pytest.approx((11.25, 11.25, 11.251))   # truncated to the ms
    d = m["detail"]
    assert d["pre_staged"] is False and d["slowest"] == pulled["involvedObject"]["name"]
    got = next(p for p in d["pods"] if p["source"] == "pulled")
    assert (got["seconds"], got["pull_s"], got["bytes"], got["image"]) == (11.25, 10.5, 9_876_543_210, IMAGE)
    assert got["message"] == pulled["message"] and "ms" in d["resolution"]


def test_several_pods_the_slowest_counts():
    pods = [_pod("a", "n1"), _pod("b", "n2"), _pod("c", "n3")]
    events = [_ev("Pulled", "a", T0 + 1, f'Container image "{IMAGE}" already present on machine'),
              _ev("Pulling", "b", T0, f'Pulling image "{IMAGE}"'),
              _ev("Pulled", "b", T0 + 13, _pulled_new("12.345s", "12.5s", 100)),
              _ev("Pulling", "c", T0, f'Pulling image "{IMAGE}"'),
              _ev("Pulled", "c", T0 + 91, _pulled_new("1m23.456s", "1m31.002s", 100))]
    m = image_pull(events, pods)
    assert (m["value"], m["lo"], m["hi"]) == pytest.approx((91.002, 91.002, 91.003))
    d = m["detail"]
    assert d["slowest"] == "c" and d["pre_staged"] is False
    assert {p["pod"]: (p["source"], p["seconds"]) for p in d["pods"]} == {
        "a": ("already present", 0.0), "b": ("pulled", 12.5), "c": ("pulled", 91.002)}
    assert m["sources"]["image_ready"] == T0 + 91.5


@pytest.mark.parametrize("message, seconds, lo, hi, has_pull_s", [
    # between kubernetes#111772 and #121719: both durations, no size
    (f'Successfully pulled image "{IMAGE}" in 796ms (1.594s including waiting)', 1.594, 1.594, 1.595, True),
    # older kubelets: one duration, untruncated
    (f'Successfully pulled image "{IMAGE}" in 49.18401355s', 49.18401355, 49.18401355, 49.18401355 + 1e-9, False),
    # no duration at all (the oldest, or another runtime's words): the two events' whole seconds
    (f'Successfully pulled image "{IMAGE}"', 20.0, 19.0, 21.0, False),
])
def test_older_wordings(message, seconds, lo, hi, has_pull_s):
    m = image_pull([_ev("Pulling", "a", T0, f'Pulling image "{IMAGE}"'), _ev("Pulled", "a", T0 + 20, message)],
                   [_pod("a", "n1")])
    assert (m["value"], m["lo"], m["hi"]) == pytest.approx((seconds, lo, hi))
    assert ("pull_s" in m["detail"]["pods"][0]) == has_pull_s


def test_newer_present_wording_and_a_retried_pull():
    present = f'Container image "{IMAGE}" already present on machine and can be accessed by the pod'
    m = image_pull([_ev("Pulled", "a", T0, present)], [_pod("a", "n1")])
    assert m["value"] == 0.0 and m["detail"]["pre_staged"] is True
    # a pull that failed once: the message times the last try only, so the events from the first Pulling count
    events = [_ev("Pulling", "a", T0, f'Pulling image "{IMAGE}"'),
              _ev("Pulling", "a", T0 + 30, f'Pulling image "{IMAGE}"'),
              _ev("Pulled", "a", T0 + 35, _pulled_new("4.9s", "5s", 1))]
    m = image_pull(events, [_pod("a", "n1")])
    assert (m["value"], m["lo"], m["hi"]) == (35.0, 34.0, 36.0)
    assert m["detail"]["pods"][0]["tries"] == 2 and "whole seconds" in m["detail"]["resolution"]


def test_a_replaced_pod_keeps_its_slot_and_a_slot_without_an_event_leaves_no_value():
    pods = [_pod("a", "n1", "w-0/0"), _pod("a2", "n1", "w-0/0"), _pod("b", "n2", "w-0/1")]
    present = f'Container image "{IMAGE}" already present on machine'
    events = [_ev("Pulled", "a", T0, present), _ev("Pulled", "a2", T0 + 60, _pulled_new("1s", "1s", 1)),
              _ev("Pulled", "b", T0, present)]
    m = image_pull(events, pods)
    assert m["value"] == 0.0 and [p["pod"] for p in m["detail"]["pods"]] == ["a", "b"]   # the slot's first pod
    m = image_pull(events[:2], pods)     # w-0/1's pod has no Pulled event kept: the slowest is unknown
    assert m["value"] is None and m["detail"]["no_pulled_event"] == ["w-0/1"] and m["detail"]["pre_staged"] is False


def test_absent_without_pulled_events_and_on_other_platforms():
    raw = raw_of("k8s-clean-01")
    raw["events"] = [e for e in raw["events"] if e["reason"] != "Pulled"]
    assert "image_pull" not in k8s.stamps(raw) and _metric_of(raw) is None
    assert image_pull([], [_pod("a", "n1")]) is None
    assert image_pull_metrics({"allocated": None}) == {}        # Slurm, local: no such facts
    for run in ("slurm-clean-01", "local-clean-01"):
        m, st, _ = derive_of(run)
        assert "image_pull" not in st and "image_pull_s" not in m, run


def test_only_the_first_attempts_pods_count():
    raw = raw_of("k8s-kill-rank-01")
    facts = k8s.stamps(raw)["image_pull"]
    first = {p["metadata"]["uid"] for p in raw["pods"] if k8s.attempt_of(p) == 0}
    later = {p["metadata"]["uid"] for p in raw["pods"] if k8s.attempt_of(p) > 0}
    assert later, "the run restarted its JobSet"
    assert {p["uid"] for p in facts["pods"]} == first
    assert {e["uid"] for e in facts["events"]} <= first
    # the restart's pods had their Pulled events too: left out, they belong to recovery, not startup
    assert any(e["reason"] == "Pulled" and e["involvedObject"]["uid"] in later for e in raw["events"])
