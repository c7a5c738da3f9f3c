"""The drills' refused seconds split into the harness's stop wait, the platform's start and the rest
(harness/report/drills_outage.py), on made-up probes and on the committed drill campaign."""
from __future__ import annotations

import pytest
from support.paths import RESULTS

from harness.report import drills as drillmod
from harness.report import drills_outage as do
from harness.report.sections import fmt

DRILLS = RESULTS / "drills-2026-12-03"


def _probes(refused: set[int]) -> list[dict]:
    # a submission try every second from t = 100, answering in 0.1 s
    return [{"what": "submit", "t0": 100.0 + i, "t1": 100.1 + i, "error": "refused" if i in refused else None}
            for i in range(30)]


def _step(name, started, stop_s, back, grace=10):
    return {"component": name, "started": started, "back": back, "extra": {"stop_s": stop_s},
            "how": f"stop pid 1 (SIGTERM, SIGKILL after {grace}s); start x"}


def test_an_outage_splits_into_the_stop_wait_the_start_and_what_came_after():
    # refused from t 101 to 115 (next accepted try asked at 115): 14 s
    ev = {"probes": _probes(set(range(1, 15))),
          "steps": [_step("kube-apiserver", 101.0, 10.0, 113.0), _step("jobset", 120.0, 1.0, 121.0)]}
    sp = do.split(ev)
    assert sp["total"] == pytest.approx(14.0)
    assert sp["stopping"] == pytest.approx(10.0) and sp["starting"] == pytest.approx(2.0)
    assert sp["after"] == pytest.approx(2.0)
    assert sp["grace_hits"] == ["kube-apiserver (10 s)"] and set(sp["by_component"]) == {"kube-apiserver"}
    # a stop that ended inside the grace is the component's own shutdown, not the harness's cap
    assert do.split({**ev, "steps": [_step("kube-apiserver", 101.0, 3.0, 113.0)]})["grace_hits"] == []
    # a step that does not time its stop apart counts whole as starting
    no_stop = {"component": "slurmctld", "started": 101.0, "back": 113.0, "how": "docker restart -t 30 x"}
    sp = do.split({**ev, "steps": [no_stop]})
    assert (sp["stopping"], sp["starting"]) == (0.0, pytest.approx(12.0))
    assert do.split({"steps": []}) is None and do.text(None, fmt).startswith("–")


def test_the_committed_kubernetes_restart_owes_ten_seconds_to_the_harnesss_grace():
    by = {(d.platform, d.kind): d for d in drillmod.load(str(DRILLS))}
    k8s = do.split(by[("k8s", "restart")].evidence)
    assert k8s["total"] == pytest.approx(by[("k8s", "restart")].value("upgrade_submit_refused_s"), abs=1e-6)
    assert k8s["by_component"]["kube-apiserver"]["stopping"] == pytest.approx(10.08, abs=0.01)
    assert k8s["grace_hits"] == ["kube-apiserver (10 s)"]
    slurm = do.split(by[("slurm", "restart")].evidence)
    assert slurm["stopping"] == 0.0 and slurm["total"] == pytest.approx(
        by[("slurm", "restart")].value("upgrade_submit_refused_s"), abs=1e-6)
