"""kube-proxy of the native cluster (harness/clusters/k8s/kube_proxy.py): its build entry, configuration
and command line, read back from the files it writes (the routing itself is tested on the real
cluster by tests/integration/test_serve_k8s.py, through a Service's ClusterIP)."""
from __future__ import annotations

from pathlib import Path

import yaml

from harness.clusters.k8s import builds, kube_proxy, teardown
from harness.clusters.k8s.layout import CLUSTER_CIDR, KUBE_PROXY_HEALTHZ, KUBE_PROXY_METRICS, Layout


def test_it_is_built_from_the_same_kubernetes_release_as_the_other_binaries_and_cached_by_version(monkeypatch):
    monkeypatch.setenv("POC_CACHE_DIR", "/CACHE")
    assert builds.KUBE_PROXY in builds.ALL
    assert builds.KUBE_PROXY.version == builds.KUBERNETES.version
    assert builds.KUBE_PROXY.path("kube-proxy") == Path(f"/CACHE/bin/kube-proxy-{builds.KUBERNETES_VERSION}/kube-proxy")
    # its own build entry: a cache with the other Kubernetes binaries builds only kube-proxy
    assert "kube-proxy" not in builds.KUBERNETES.binaries
    assert builds.BUILDERS["kube-proxy"] is builds.build_kubernetes


def test_the_configuration_routes_the_service_range_in_iptables_mode_and_leaves_the_host_alone(tmp_path):
    L = Layout(tmp_path)
    cfg = yaml.safe_load(kube_proxy.config(L, tmp_path / "kp.kubeconfig").read_text())
    assert cfg["kind"] == "KubeProxyConfiguration"
    assert cfg["mode"] == "iptables"
    assert cfg["clusterCIDR"] == CLUSTER_CIDR == "10.244.0.0/16"
    assert cfg["clientConnection"]["kubeconfig"] == str(tmp_path / "kp.kubeconfig")
    assert cfg["healthzBindAddress"] == f"127.0.0.1:{KUBE_PROXY_HEALTHZ}"
    assert cfg["metricsBindAddress"] == f"127.0.0.1:{KUBE_PROXY_METRICS}"
    # NodePorts only on the bridges, not on the machine's outward interface
    assert cfg["nodePortAddresses"] == [CLUSTER_CIDR]
    # no host-wide sysctl changes: conntrack size and timeouts left as they are (0 = leave)
    assert cfg["conntrack"] == {"maxPerCore": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s",
                                "udpTimeout": "0s", "udpStreamTimeout": "0s"}
    assert cfg["iptables"]["localhostNodePorts"] is False


def test_the_command_line_names_the_cached_binary_and_the_config(monkeypatch, tmp_path):
    monkeypatch.setenv("POC_CACHE_DIR", "/CACHE")
    cmd = kube_proxy.command(tmp_path / "kube-proxy.yaml")
    assert cmd.name == "kube-proxy"
    assert cmd.argv == [f"/CACHE/bin/kube-proxy-{builds.KUBERNETES_VERSION}/kube-proxy",
                        f"--config={tmp_path / 'kube-proxy.yaml'}", "--v=1"]


def test_teardown_stops_it_with_the_controllers_and_cleanup_without_a_binary_says_so(monkeypatch, tmp_path):
    assert "kube-proxy" in teardown.STOP_FIRST
    monkeypatch.setenv("POC_CACHE_DIR", str(tmp_path))
    assert kube_proxy.cleanup() == {"cleanup": "skipped: no kube-proxy binary"}
