"""`poc cluster up --k8s --provider native --kueue-fair-sharing on|off` on the running native cluster: Kueue is
restarted with fairSharing in its Configuration (read back from the running process's config file), admits and
runs gangs of two tenants with it, a replay records it, and `off` puts it back. Needs root (the native
cluster); about half a minute.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.integration, pytest.mark.k8s]

if os.geteuid() != 0:  # pragma: no cover - depends on the machine
    pytest.skip("the native cluster needs root", allow_module_level=True)

from _kwok import kwok_nodes  # noqa: E402
from test_client_rate_limits import _running, _up  # noqa: E402

from harness.clusters.k8s.layout import Layout  # noqa: E402
from harness.clusters.native_k8s import state_root  # noqa: E402
from harness.replay import local  # noqa: E402
from harness.scale.trace import NodeShape, Trace, TraceJob  # noqa: E402

TRACE = Trace(name="fair-it", source="made for the fair-sharing test", shape=NodeShape(nodes=4, gpus_per_node=8),
              duration_s=4, jobs=tuple(TraceJob(id=f"{t}{i}", submit_s=i, tenant=t, nodes=2, gpus_per_node=8,
                                                limit_s=30, runtime_s=3) for i, t in enumerate("abab")))


def _kueue_config(L: Layout) -> dict:
    config = next(a.split("=", 1)[1] for a in _running(L, "kueue")[1] if a.startswith("--config="))
    return yaml.safe_load(Path(config).read_text())


def test_fair_sharing_restarts_kueue_with_it_a_replay_runs_and_records_it_and_off_puts_it_back(capsys):
    L = Layout(state_root())
    _up(capsys, "--kueue-fair-sharing", "off")
    kueue0, _ = _running(L, "kueue")
    assert "fairSharing" not in _kueue_config(L)
    try:
        _up(capsys, "--kueue-fair-sharing", "on")
        kueue1, _ = _running(L, "kueue")
        assert kueue1 != kueue0 and _kueue_config(L)["fairSharing"] == {"enable": True}
        _up(capsys, "--kueue-fair-sharing", "on")          # the same again restarts nothing
        assert _running(L, "kueue")[0] == kueue1
        with kwok_nodes(4, 8):
            result, _ = local.replay_k8s(TRACE, "it-fair", timeout_s=90, say=lambda _m: None)
        assert result["ended"], result.get("left")
        assert result["settings"]["client_rate_limits_qps_burst"]["kueue fairSharing"] == "enable"
    finally:
        _up(capsys, "--kueue-fair-sharing", "off")
    assert _running(L, "kueue")[0] != kueue1 and "fairSharing" not in _kueue_config(L)
