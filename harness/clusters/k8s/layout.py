"""Names, addresses, ports and paths of the native cluster: one place to read them all.

The settings here decide how fast a lost node is noticed and its pods replaced; `up` records
them in ClusterInfo.settings so a recovery-time number is never reported without them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from harness.fsutil import atomic_write_json
from harness.paths import NATIVE_K8S_CLUSTER, cluster_state_dir

CLUSTER_CIDR = "10.244.0.0/16"          # node i gets 10.244.i.0/24 on bridge pocbr<i>, gateway .1
SERVICE_CIDR = "10.96.0.0/16"
DNS_IP = "10.96.0.10"                   # CoreDNS on the host, on device pocdns0
CLUSTER_DOMAIN = "cluster.local"
BRIDGE_PREFIX = "pocbr"
DNS_LINK = "pocdns0"
IPTABLES_CHAIN = "POC-NATIVE-K8S"
CGROUP_PARENT = "poc-native-k8s"
PAUSE_IMAGE = "poc.local/pause:3.10"

ETCD_CLIENT_PORT, ETCD_PEER_PORT = 12379, 12380
APISERVER_PORT = 16443
KCM_PORT, SCHEDULER_PORT = 20257, 20259
JOBSET_PORTS = {"webhook": 29443, "metrics": 28443, "health": 28081}
KUEUE_PORTS = {"webhook": 29444, "metrics": 28444, "health": 28082}
COREDNS_HEALTH, COREDNS_READY = 28053, 28054
# one kube-proxy for the host (k8s/kube_proxy.py): its /healthz and /metrics, on loopback only
KUBE_PROXY_HEALTHZ, KUBE_PROXY_METRICS = 20256, 20249

# How fast a lost node is noticed and its pods are replaced. A recovery-time number means
# nothing without these beside it.
NODE_MONITOR_GRACE_PERIOD = "20s"
NODE_LEASE_DURATION_SECONDS = 20        # kubelet renews every quarter of this (5 s)
NODE_STATUS_UPDATE_FREQUENCY = "4s"
TOLERATION_SECONDS = 30                 # default not-ready / unreachable NoExecute toleration


def kubelet_port(i: int) -> int:
    return 21000 + 10 * i


def kubelet_healthz_port(i: int) -> int:
    return 21001 + 10 * i


def node_name(i: int) -> str:
    return f"poc-n{i}"


def node_ip(i: int) -> str:
    return f"10.244.{i}.1"


def state_root(state_dir: str | Path | None = None) -> Path:
    """The cluster's own directory: state_dir itself when given, else ``$POC_STATE_DIR/k8s-native``."""
    return Path(state_dir) if state_dir else cluster_state_dir(NATIVE_K8S_CLUSTER)


@dataclass(frozen=True)
class ClusterInfo:
    kubeconfig: Path
    state_dir: Path
    server: str
    nodes: tuple[str, ...]
    versions: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    up_seconds: float = 0.0
    reused: bool = False
    # the restricted user (k8s/tenant.py): kubeconfig, namespace, local_queue, priority_class, ...
    restricted: dict = field(default_factory=dict)


class Layout:
    """Every path of one cluster instance."""

    def __init__(self, root: Path):
        self.root = root
        self.pki = root / "pki"
        self.logs = root / "logs"
        self.etcd = root / "etcd"
        self.manifests = root / "manifests"
        self.config = root / "config"
        self.nodes_dir = root / "nodes"
        self.state_file = root / "state.json"
        self.kubeconfig = root / "kubeconfig"
        self.admin_kubeconfig = self.pki / "admin.kubeconfig"

    def node(self, name: str) -> Path:
        return self.nodes_dir / name

    def containerd_sock(self, name: str) -> Path:
        return self.node(name) / "containerd.sock"

    def log(self, component: str) -> Path:
        return self.logs / f"{component}.log"


# ------------------------------------------------------------------ state file

def load_state(L: Layout) -> dict:
    if L.state_file.exists():
        return json.loads(L.state_file.read_text())
    return {"components": {}}


def save_state(L: Layout, state: dict) -> None:
    atomic_write_json(L.state_file, state, default=str)


