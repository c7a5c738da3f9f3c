"""`poc cluster up --k8s --provider native --client-qps ...` on the running native cluster: Kueue and
kube-controller-manager are restarted with the limits (read back from the running processes' config
and command line), the cluster is usable again (a JobSet runs through Kueue), and `--client-qps
default` puts both back. Needs root (the native cluster); about half a minute.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.integration, pytest.mark.k8s]

if os.geteuid() != 0:  # pragma: no cover - depends on the machine
    pytest.skip("the native cluster needs root", allow_module_level=True)

from _kwok import kwok_nodes  # noqa: E402

from harness.cli import main  # noqa: E402
from harness.clusters.k8s.layout import Layout, load_state  # noqa: E402
from harness.clusters.native_k8s import state_root  # noqa: E402
from harness.replay import local  # noqa: E402
from harness.scale.trace import NodeShape, Trace, TraceJob  # noqa: E402

TRACE = Trace(name="qps-it", source="made for the rate-limit test", shape=NodeShape(nodes=4, gpus_per_node=8),
              duration_s=1, jobs=(TraceJob(id="gang", submit_s=0, tenant="a", nodes=2, gpus_per_node=8, limit_s=30,
                                           runtime_s=3),))


def _running(L: Layout, name: str) -> tuple[int, list[str]]:
    pid = load_state(L)["components"][name]["pid"]
    return pid, Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def _up(capsys, *flags: str) -> dict:
    capsys.readouterr()
    assert main(["cluster", "up", "--k8s", "--provider", "native", *flags, "-o", "json"], env={}) == 0
    return json.loads(capsys.readouterr().out)["k8s"]


def test_client_rate_limits_restart_the_two_controllers_with_them_and_default_puts_them_back(capsys):
    L = Layout(state_root())
    _up(capsys)
    kueue0, _ = _running(L, "kueue")
    try:
        got = _up(capsys, "--client-qps", "kueue=200/300,kube-controller-manager=100/150")
        kueue1, _ = _running(L, "kueue")
        _, kcm = _running(L, "kube-controller-manager")
        assert kueue1 != kueue0 and "--kube-api-qps=100" in kcm and "--kube-api-burst=150" in kcm
        config = next(a.split("=", 1)[1] for a in _running(L, "kueue")[1] if a.startswith("--config="))
        assert yaml.safe_load(Path(config).read_text())["clientConnection"] == {"qps": 200, "burst": 300}
        limits = got["settings"]["client_rate_limits_qps_burst"]
        assert limits["kueue"].startswith("200/300") and "set by poc cluster up" in limits["kueue"]
        # the same setting again restarts nothing
        _up(capsys, "--client-qps", "kueue=200/300,kube-controller-manager=100/150")
        assert _running(L, "kueue")[0] == kueue1
        # the restarted controllers admit and run a gang, and the replay records the limits in force
        with kwok_nodes(4, 8):
            result, _ = local.replay_k8s(TRACE, "it-qps", timeout_s=60, say=lambda _m: None)
        assert result["ended"] and result["settings"]["client_rate_limits_qps_burst"] == limits
    finally:
        back = _up(capsys, "--client-qps", "default")
    _, kcm = _running(L, "kube-controller-manager")
    assert not [a for a in kcm if a.startswith("--kube-api-")]
    assert back["settings"]["client_rate_limits_qps_burst"]["kueue"].endswith(", default)")
