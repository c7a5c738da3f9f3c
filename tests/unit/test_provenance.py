"""provenance.build / same_build: every run records its torch build and image, and the report compares
two runs only when they ran the same torch (recorded torch_imported events of real runs)."""
from __future__ import annotations

import json

from support.paths import FIXTURES

from harness import provenance

FIX = FIXTURES / "local-evidence"


def load(name: str) -> tuple[list[dict], dict]:
    events = json.loads((FIX / f"{name}.torch_imported.json").read_text())
    return events, json.loads((FIX / f"{name}.raw.json").read_text())


def test_container_baseline_build_is_the_worker_images_debian_torch():
    events, raw = load("container-clean")
    b = provenance.build(events, raw)
    assert b["torch"] == "2.6.0+debian" and b["git_version"] == "Unknown" and b["cuda"] is None
    assert b["image"]["ref"].startswith("k8s-slurm-poc/worker:") and b["image"]["id"].startswith("sha256:")
    assert "mismatch" not in b


def test_the_host_build_differs_and_the_report_must_not_compare_them():
    c = provenance.build(*load("container-clean"))
    h = provenance.build(*load("host-clean"))
    assert h["torch"].startswith("2.15") and h["image"]["id"] is None
    assert not provenance.same_build(c, h)
    assert provenance.same_build(c, provenance.build(*load("container-kill")))


def test_same_torch_in_another_image_is_the_same_build():
    events, raw = load("container-clean")
    slurm_like = provenance.build(events, {"image": {"ref": "k8s-slurm-poc/slurm:x", "id": "sha256:other"}})
    assert provenance.same_build(provenance.build(events, raw), slurm_like)


def test_older_events_fall_back_to_the_torch_field_and_unknowns_never_match():
    old = [{"kind": "torch_imported", "torch": "2.6.0+debian", "cuda": None}]
    b = provenance.build(old, {})
    assert (b["torch"], b["git_version"], b["image"]) == ("2.6.0+debian", None, None)
    assert provenance.same_build(b, provenance.build(old, None))
    none = provenance.build([], {})
    assert none["torch"] is None and not provenance.same_build(none, none) and not provenance.same_build(b, None)


def test_ranks_with_different_builds_are_a_mismatch():
    events, raw = load("container-clean")
    other = dict(events[0], torch_build=dict(events[0]["torch_build"], version="2.15.0"))
    b = provenance.build([events[0], other], raw)
    assert len(b["mismatch"]) == 2 and not provenance.same_build(b, b)


def test_environment_carries_the_build():
    events, raw = load("container-kill")
    env = provenance.environment({"scheduler": "none"}, events, raw)
    assert env["build"] == provenance.build(events, raw)
    assert provenance.environment({}, events)["build"]["image"] is None   # the call without raw still works
