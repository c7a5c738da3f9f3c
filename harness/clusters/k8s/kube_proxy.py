"""kube-proxy for the native cluster: Service ClusterIPs that route, from the host and from pods.

One kube-proxy for the whole host, in iptables mode. The nodes are not machines of their own: every
kubelet's pods sit on a bridge of the host (pocbr<i>), and every packet between pods, the host and
the Service range passes the host's one network stack. So the host's nat table is every node's nat
table, and one proxy writing it serves them all; three proxies would rewrite the same chains against
each other. It runs with node poc-n1's name (kube-proxy wants a Node for its node IP and topology
hints) but outside every node's cgroup, so a node's power loss (power.py) does not take it down.

Routing, measured here: from the host, OUTPUT's DNAT sends a ClusterIP connection to a pod, and the
source (eth0's address, outside clusterCIDR) is masqueraded to the bridge's; from a pod, the packet
reaches the host through its bridge gateway and PREROUTING's DNAT. A pod that reaches a Service
endpoint on its own bridge needs the reply to pass conntrack: br_netfilter's bridge-nf-call-iptables
(1 on this host; checked by `preflight_notes`).

Identity: a client certificate with CN system:kube-proxy from the cluster CA, which the API server's
built-in ClusterRoleBinding system:node-proxier already authorises (no system:masters).

Teardown: `kube-proxy --cleanup` removes its chains and jump rules (iptables, ip6tables, nftables).
"""
from __future__ import annotations

import time
from pathlib import Path

import yaml

from harness.clusters.k8s import builds, host, pki, procs
from harness.clusters.k8s.commands import Command
from harness.clusters.k8s.layout import (
    APISERVER_PORT,
    CLUSTER_CIDR,
    KUBE_PROXY_HEALTHZ,
    KUBE_PROXY_METRICS,
    Layout,
    load_state,
    node_name,
    save_state,
)
from harness.errors import ClusterError

NAME = "kube-proxy"
MODE = "iptables"
BRIDGE_NF = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")


def kubeconfig(L: Layout) -> Path:
    """Its own identity (system:kube-proxy), issued from the cluster CA on first use."""
    ca = pki.ensure_ca(L.pki)
    pair = pki.ensure_cert(L.pki, NAME, ca, "system:kube-proxy")
    return pki.write_kubeconfig(L.pki / f"{NAME}.kubeconfig", f"https://127.0.0.1:{APISERVER_PORT}", ca, pair,
                                "system:kube-proxy")


def config(L: Layout, kc: Path) -> Path:
    cfg = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kc)},
        "hostnameOverride": node_name(1),
        "mode": MODE,
        "clusterCIDR": CLUSTER_CIDR,
        "healthzBindAddress": f"127.0.0.1:{KUBE_PROXY_HEALTHZ}",
        "metricsBindAddress": f"127.0.0.1:{KUBE_PROXY_METRICS}",
        # syncs follow Endpoint changes at once (minSyncPeriod 1 s: a restarted pod is back in the
        # rules about a second after it turns ready); the full resync is the default's
        "iptables": {"minSyncPeriod": "1s", "syncPeriod": "30s",
                     # no route_localnet sysctl change on the host: NodePorts on 127.0.0.1 are not needed
                     "localhostNodePorts": False},
        # NodePorts only on the node bridges' addresses, never on the host's outward interface
        "nodePortAddresses": [CLUSTER_CIDR],
        # leave the host's conntrack settings alone (a shared machine): by default kube-proxy sets the
        # table size and the TCP established/close-wait timeouts host-wide (seen here: 86400 s, 3600 s)
        "conntrack": {"maxPerCore": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s",
                      "udpTimeout": "0s", "udpStreamTimeout": "0s"},
    }
    L.config.mkdir(parents=True, exist_ok=True)
    path = L.config / "kube-proxy.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def command(cfg: Path) -> Command:
    return Command(NAME, [str(builds.KUBE_PROXY.path(NAME)), f"--config={cfg}", "--v=1"])


def healthy() -> bool:
    """200 once its first full sync of the rules is done (503 before, and when syncs stall)."""
    try:
        return procs.http_get(f"http://127.0.0.1:{KUBE_PROXY_HEALTHZ}/healthz")[0] == 200
    except OSError:
        return False


def preflight_notes() -> list[str]:
    """What would keep a Service from routing here, in words (empty when nothing)."""
    try:
        on = BRIDGE_NF.read_text().strip() == "1"
    except OSError:
        on = False
    return [] if on else ["br_netfilter's bridge-nf-call-iptables is off: a pod reaching a Service "
                          "endpoint on its own node's bridge gets no reply (modprobe br_netfilter)"]


def ensure(L: Layout, say=None) -> dict:
    """Start kube-proxy when it is not running (a new cluster, or one started before kube-proxy was
    part of it) and wait for its /healthz. Builds it when the cache lacks it. Returns what it did."""
    state = load_state(L)
    entry = state.get("components", {}).get(NAME)
    if entry and procs.alive(entry):
        try:   # just (re)started, e.g. by native_k8s._repair: /healthz says 503 until its first sync
            procs.wait("kube-proxy /healthz", healthy, 30, L, (NAME,))
            return {"started": False, "why": "running and healthy"}
        except ClusterError:
            host.stop_pid(entry["pid"], entry.get("exe"), grace=5)   # alive but never healthy: start afresh
    t0 = time.monotonic()
    built = builds.ensure_built(components=[NAME], say=say)
    procs.spawn(L, state, NAME, command(config(L, kubeconfig(L))).argv)
    state.setdefault("versions", {})[NAME] = builds.KUBE_PROXY.version
    state.setdefault("settings", {})["kube_proxy"] = (f"{MODE} mode, one proxy for the host (nodes share its "
                                                      f"network stack), clusterCIDR {CLUSTER_CIDR}")
    save_state(L, state)
    procs.wait("kube-proxy /healthz", healthy, 60, L, (NAME,))
    return {"started": True, "build_s": built.get(NAME), "seconds": round(time.monotonic() - t0, 1),
            "notes": preflight_notes()}


def cleanup() -> dict:
    """Remove kube-proxy's rules (its own --cleanup: iptables, ip6tables and nftables). Never raises."""
    binary = builds.KUBE_PROXY.path(NAME)
    if not binary.is_file():
        return {"cleanup": "skipped: no kube-proxy binary"}
    try:
        p = host.run([str(binary), "--cleanup", "--v=0"], check=False, timeout=60)
    except OSError as exc:
        return {"cleanup": f"failed: {exc}"}
    return {"cleanup": "done" if p.returncode == 0 else f"exit {p.returncode}: "
            f"{p.stderr.decode(errors='replace').strip()[-300:]}"}
