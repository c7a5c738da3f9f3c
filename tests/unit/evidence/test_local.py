"""evidence/local.py from recorded raw evidence of real runs (tests/fixtures/local-evidence/, written by
the container and host runtimes of the local baseline on this machine: docker 20.10 inspect output with
Env reduced to names)."""
from __future__ import annotations

import copy
import json

import pytest
from support.paths import FIXTURES

from harness import evidence
from harness.backends.container import _trim_env
from harness.evidence.local import stamps
from harness.timing import Span, docker_time

FIX = FIXTURES / "local-evidence"


def raw(name: str) -> dict:
    return json.loads((FIX / f"{name}.raw.json").read_text())


def started(c: dict) -> float:
    return docker_time(c["State"]["StartedAt"])


def test_docker_time_keeps_nanoseconds_and_reads_go_zero_time_as_none():
    assert docker_time("2026-12-03T08:55:36.127215097Z") == pytest.approx(1796288136.127215097, abs=1e-6)
    assert docker_time("2026-12-03T08:55:36Z") == pytest.approx(1796288136.0)
    assert docker_time("2026-12-03T09:55:36.5+01:00") == pytest.approx(1796288136.5)
    assert docker_time("0001-01-01T00:00:00Z") is None
    assert docker_time("") is None and docker_time(None) is None and docker_time("yesterday") is None


@pytest.mark.parametrize("name", ["container-clean", "container-kill"])
def test_container_stamps_from_recorded_inspect(name):
    r = raw(name)
    st = stamps(r)
    assert all(c["ok"] for c in st["checks"]), st["checks"]
    cs = r["containers"]
    # allocated: the latest StartedAt, to the nanosecond; ended = released: the latest FinishedAt
    assert st["allocated"].t == max(started(c) for c in cs)
    assert st["allocated"].resolution_s == 1e-9 and "StartedAt" in st["allocated"].source
    assert st["ended"].t == max(docker_time(c["State"]["FinishedAt"]) for c in cs)
    assert st["released"] == st["ended"]
    # submitted: the harness's bracket narrowed to dockerd's Created of the first container
    first = min(docker_time(c["Created"]) for c in cs)
    assert r["submit"]["before"] <= st["submitted"].t == first <= r["submit"]["after"]
    assert "Created" in st["submitted"].source and "harness" in st["submitted"].source
    assert st["admitted"] is None
    (att,) = st["attempts"]
    assert att["attempt"] == 0 and att["nodes"] == [c["Name"].lstrip("/") for c in cs]
    queue = Span.between(st["submitted"], st["allocated"])
    assert 0 < queue.value < 5 and queue.uncertainty < 1e-6     # ns records: no whole-second floor


def test_container_stamps_flag_a_created_outside_the_bracket_and_keep_the_bracket():
    r = raw("container-clean")
    r["containers"][0]["Created"] = "2020-01-01T00:00:00.000000001Z"
    r["containers"][1]["Created"] = "2020-01-01T00:00:00.000000002Z"
    st = stamps(r)
    bad = [c for c in st["checks"] if not c["ok"]]
    assert [c["what"] for c in bad] == ["dockerd Created of the first container lies inside the harness's "
                                        "docker run bracket"]
    assert (st["submitted"].lo, st["submitted"].hi) == (r["submit"]["before"], r["submit"]["after"])


def test_a_running_container_has_no_end_and_a_restarted_one_is_flagged():
    r = raw("container-kill")
    r["containers"][1]["State"].update(Status="running", FinishedAt="0001-01-01T00:00:00Z")
    r["containers"][0]["RestartCount"] = 1
    st = stamps(r)
    assert st["ended"] is None and st["released"] is None and st["allocated"] is not None
    assert [c["ok"] for c in st["checks"] if "restarted" in c["what"]] == [False, True]


def test_a_container_that_never_started_gives_no_allocation():
    r = raw("container-clean")
    r["containers"][1]["State"]["StartedAt"] = "0001-01-01T00:00:00Z"
    assert stamps(r)["allocated"] is None


def test_host_stamps_from_recorded_spawns():
    r = raw("host-clean")
    st = stamps(r)
    procs = r["processes"]
    last = max(procs, key=lambda p: p["spawn_after"])
    assert (st["allocated"].lo, st["allocated"].hi) == (last["spawn_before"], last["spawn_after"])
    assert st["ended"].hi == max(p["exited_at"] for p in procs) and st["ended"].width > 0
    assert (st["submitted"].lo, st["submitted"].hi) == (r["submit"]["before"], r["submit"]["after"])
    assert all(c["ok"] for c in st["checks"])
    assert st["attempts"][0]["nodes"] == [str(p["pid"]) for p in procs]


def test_dispatch_and_json_round_trip():
    r = raw("container-kill")
    st = evidence.stamps("local", r)
    back = evidence.from_json(json.loads(json.dumps(evidence.to_json(st))))
    assert back["allocated"] == st["allocated"] and back["attempts"][0]["ended"] == st["ended"]
    assert evidence.stamps("local", {})["submitted"] is None


def test_raw_keeps_no_environment_values():
    for name in ("container-clean", "container-kill"):
        for c in raw(name)["containers"]:
            assert all("=" not in e for e in c["Config"]["Env"])
    obj = {"Config": {"Env": ["TOKEN=secret", "PATH=/bin"]}, "State": {}}
    assert _trim_env(obj)["Config"]["Env"] == ["TOKEN", "PATH"] and obj["Config"]["Env"][0] == "TOKEN=secret"


def test_stamps_do_not_change_their_input():
    r = raw("container-clean")
    before = copy.deepcopy(r)
    stamps(r)
    assert r == before
