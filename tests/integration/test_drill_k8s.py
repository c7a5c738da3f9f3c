"""The restart drill on the native cluster (harness/drills/k8s.py): every component restarted in order
while a JobSet runs and a same-shape one waits in Kueue, with probes answering around it.

Run it holding the cluster lock: `flock /tmp/poc-k8s.lock .venv/bin/pytest tests/integration/test_drill_k8s.py`.
"""
from __future__ import annotations

import os
import time

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.k8s]

if os.geteuid() != 0:  # pragma: no cover - depends on the machine
    pytest.skip("the native cluster needs root", allow_module_level=True)

pytest.importorskip("kubernetes")
from _drill_k8s import Bed, Probes, check_survived, wait_for  # noqa: E402
from _native import native_cluster  # noqa: E402

from harness.config.drills import Drills  # noqa: E402
from harness.drills.k8s import CONTROL_PLANE, K8sDrill  # noqa: E402


@pytest.fixture()
def bed():
    b = Bed(native_cluster()).open()
    try:
        yield b
    finally:
        b.close()


def test_restart_drill_keeps_the_running_jobset_and_admits_the_queued_one(bed):
    drill = K8sDrill(bed.backend, Drills(component_timeout_s=120))
    ok, why = drill.owned()
    assert ok, why
    assert drill.prepare("restart") == {}
    plan = drill.plan("restart")
    assert plan[:5] == [*CONTROL_PLANE, "kueue", "jobset"] and all(p.startswith("kubelet@") for p in plan[5:])
    versions = drill.versions()
    handles = [bed.handles["drill-a"], bed.handles["drill-b"]]
    before = drill.snapshot(handles)
    assert before["drill-b"]["pods"] == []

    probes = Probes(drill)
    probes.start()
    time.sleep(1.5)
    steps = []
    try:
        for component in plan:
            steps.append(drill.step("restart", component))
        time.sleep(1.5)
    finally:
        probes.stop()

    report = {s.component: (round(s.back - s.started, 1) if s.back else None, s.resolution_s) for s in steps}
    print(f"\nback after (s, resolution): {report}")
    print(f"submit refused {probes.refused_s('submit')} s: {probes.refusals('submit')}")
    print(f"status refused {probes.refused_s('status')} s: {probes.refusals('status')}")
    for s in steps:
        assert s.ok and s.back is not None, s
        assert s.extra["pid_after"] != s.extra["pid_before"]
        assert s.version_before == s.version_after == versions[s.component]
    first = {w: next(m for _, ww, m in probes.seen if ww == w) for w in ("submit", "status")}
    last = {w: [m for _, ww, m in probes.seen if ww == w][-1] for w in ("submit", "status")}
    assert first == {"submit": None, "status": None} and last == {"submit": None, "status": None}, (first, last)

    after = drill.snapshot(handles)
    check_survived(before, after, "drill-a")
    assert not bed.admitted("drill-b") and after["drill-b"]["pods"] == []
    assert drill.leftovers([]) == []        # every node Ready, every component healthy

    bed.delete("drill-a")
    wait_for("drill-b admitted once drill-a is gone", lambda: bed.admitted("drill-b"), 60)
    wait_for("drill-b's pods Running", lambda: len(bed.running("drill-b")) == 2, 60)
    wait_for("nothing of drill-a left", lambda: drill.leftovers([bed.handles["drill-a"]]) == [], 60)
    assert drill.restore("restart") == {"recreated": False}
