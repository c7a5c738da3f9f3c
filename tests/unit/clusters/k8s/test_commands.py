"""The native cluster's command lines (k8s/commands.py) against the ones a real cluster ran.

tests/fixtures/k8s/native-components.json is the state file of a 3-node native cluster brought up
by native_k8s.up before its command lines moved to k8s/commands.py (paths replaced by /STATE and
/CACHE): every component must start exactly as it did there.
"""
from __future__ import annotations

import json
from pathlib import Path

from support.paths import FIXTURES

from harness.clusters.k8s import commands
from harness.clusters.k8s.layout import Layout, node_name
from harness.clusters.k8s.pki import CertPair

RECORDED = FIXTURES / "k8s" / "native-components.json"
NODES = 3


def _certs(P: Path) -> dict:
    names = ["ca", "apiserver", "apiserver-kubelet-client", "webhook", "admin", *(
        f"kubelet-server-{node_name(i)}" for i in range(1, NODES + 1))]
    return {n: CertPair(P / f"{n}.crt", P / f"{n}.key") for n in names} | {"sa": CertPair(P / "sa.pub", P / "sa.key")}


def _all_commands(L: Layout) -> list[commands.Command]:
    certs = _certs(L.pki)
    names = [node_name(i) for i in range(1, NODES + 1)]
    return [
        commands.etcd(L),
        *(commands.containerd(n, L.node(n) / "containerd.toml") for n in names),
        commands.kube_apiserver(certs),
        commands.kube_controller_manager(L, certs),
        commands.kube_scheduler(L),
        *(commands.kubelet(L, i) for i in range(1, NODES + 1)),
        commands.coredns(L.config / "Corefile"),
        commands.jobset(L, L.config / "jobset.yaml"),
        commands.kueue(L, L.config / "kueue.yaml"),
    ]


def test_every_component_starts_as_the_recorded_cluster_started_it(monkeypatch):
    monkeypatch.setenv("POC_CACHE_DIR", "/CACHE")
    recorded = json.loads(RECORDED.read_text())["components"]
    built = {c.name: {"argv": c.argv, "cgroup": c.cgroup or c.name, "extra_env": c.env} for c in
             _all_commands(Layout(Path("/STATE")))}
    assert list(built) == list(recorded)
    for name, want in recorded.items():
        assert built[name] == want, name


def test_the_component_settings_that_recovery_times_depend_on_are_on_the_command_lines(monkeypatch):
    monkeypatch.setenv("POC_CACHE_DIR", "/CACHE")
    by_name = {c.name: c.argv for c in _all_commands(Layout(Path("/STATE")))}
    assert "--node-monitor-grace-period=20s" in by_name["kube-controller-manager"]
    assert "--default-unreachable-toleration-seconds=30" in by_name["kube-apiserver"]
    assert "--node-labels=poc.k8s-slurm/node-index=2" in by_name["kubelet-poc-n2"]
