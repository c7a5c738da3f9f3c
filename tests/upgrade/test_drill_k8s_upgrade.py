"""The version-upgrade drill on the native cluster: Kubernetes v1.34 -> v1.35 (control plane, then each
kubelet), Kueue v0.14 -> v0.15 and JobSet v0.10 -> v0.11, while a JobSet runs and a same-shape one waits
in Kueue; then the cluster is recreated at the pinned releases (stored state is not downgraded).

Minutes (the newer releases are built once, about 15 minutes cold on 2 cores; the cluster is recreated
after), so not in the default run: tests/upgrade is collected only by name, `flock /tmp/poc-k8s.lock
.venv/bin/pytest tests/upgrade/test_drill_k8s_upgrade.py`; benchmarks/upgrade_drill.py runs the same
drill through `poc run` and its output is committed with results/drills-2026-12-03.
"""
from __future__ import annotations

import os
import time

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.k8s, pytest.mark.upgrade]

if os.geteuid() != 0:  # pragma: no cover - depends on the machine
    pytest.skip("the native cluster needs root", allow_module_level=True)

pytest.importorskip("kubernetes")
from _drill_k8s import Bed, Probes, check_survived, wait_for  # noqa: E402
from _native import native_cluster  # noqa: E402

from harness.clusters import native_k8s as nk  # noqa: E402
from harness.clusters.k8s import builds, upgrade  # noqa: E402
from harness.config.drills import Drills  # noqa: E402
from harness.drills.k8s import K8sDrill  # noqa: E402


def test_upgrade_drill_keeps_the_running_jobset_and_the_cluster_goes_back():
    info = native_cluster()
    bed = Bed(info)
    drill = K8sDrill(bed.backend, Drills(component_timeout_s=180))
    prepared = drill.prepare("upgrade")          # before any job: no build inside the drill
    print(f"\nprepare: {prepared}")
    try:
        bed.open()
        ok, why = drill.owned()
        assert ok, why
        handles = [bed.handles["drill-a"], bed.handles["drill-b"]]
        before = drill.snapshot(handles)
        probes = Probes(drill)
        probes.start()
        time.sleep(1.5)
        steps = []
        try:
            for component in drill.plan("upgrade"):
                steps.append(drill.step("upgrade", component))
                print(f"{component}: ok={steps[-1].ok} {steps[-1].version_before}->{steps[-1].version_after} "
                      f"back after {round(steps[-1].back - steps[-1].started, 1) if steps[-1].back else None} s "
                      f"{steps[-1].error or ''}")
            time.sleep(1.5)
        finally:
            probes.stop()
        print(f"submit refused {probes.refused_s('submit')} s: {probes.refusals('submit')}")
        print(f"status refused {probes.refused_s('status')} s: {probes.refusals('status')}")
        for s in steps:
            assert s.ok and s.back is not None, s
        want = {"kubernetes": builds.KUBERNETES_UPGRADE_VERSION, "kueue": builds.KUEUE_UPGRADE_VERSION,
                "jobset": builds.JOBSET_UPGRADE_VERSION}
        assert all(s.version_after == want[upgrade.build_of(s.component.replace("@", "-"))] for s in steps)
        node_versions = {n.status.node_info.kubelet_version for n in bed.core.list_node().items}
        assert node_versions == {builds.KUBERNETES_UPGRADE_VERSION}
        assert [m for _, _, m in probes.seen][-2:] == [None, None]

        after = drill.snapshot(handles)
        print(f"pods before {[(p['uid'], p['restarts']) for p in before['drill-a']['pods']]}; "
              f"after {[(p['uid'], p['restarts']) for p in after['drill-a']['pods']]}")
        check_survived(before, after, "drill-a")
        assert after["drill-b"]["workloads"][0]["uid"] == before["drill-b"]["workloads"][0]["uid"]
        bed.delete("drill-a")
        t0 = time.monotonic()
        wait_for("drill-b admitted once drill-a is gone", lambda: bed.admitted("drill-b"), 90)
        wait_for("drill-b's pods Running", lambda: len(bed.running("drill-b")) == 2, 90)
        print(f"queued one admitted and running {time.monotonic() - t0:.1f} s after the delete")
        wait_for("nothing of drill-a left", lambda: drill.leftovers([bed.handles["drill-a"]]) == [], 90)
        bed.close()
    finally:
        restored = drill.restore("upgrade")
        print(f"restore: {restored}")
    assert restored["recreated"] and nk.is_up() and upgrade.at_pinned_versions(upgrade.Layout(nk.state_root()))
    assert nk.info().restricted, "the restricted tenant came back with the new cluster"
