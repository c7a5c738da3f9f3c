"""Taking the native cluster down: every process it started (by pid and by cgroup), its
containers, mounts, network namespaces and devices, iptables rules, cgroups and runtime files.

Certificates and each node's containerd image store stay, so the next `up` neither re-issues
identities nor re-imports images.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from harness.clusters.k8s import host, kube_proxy
from harness.clusters.k8s.layout import BRIDGE_PREFIX, CGROUP_PARENT, DNS_LINK, IPTABLES_CHAIN, Layout, load_state
from harness.clusters.k8s.node_images import ctr
from harness.clusters.k8s.procs import alive

# Fixed host paths the components write to whatever their configuration: libcni's result cache
# (containerd 1.6 has no setting for it) and the kubelet's device-plugin socket directory
# (hard-coded in the device plugin API). `up` records those it creates; `down` removes them.
CNI_CACHE = Path("/var/lib/cni")
KUBELET_FIXED_DIR = Path("/var/lib/kubelet")

# Controllers first (they would react to what follows), then the kubelets.
STOP_FIRST = ("kwok", "kueue", "jobset", "coredns", "kube-proxy", "kube-scheduler", "kube-controller-manager")


def down_layout(L: Layout) -> dict:
    """Stop and remove everything of the cluster in L; return what was found and removed."""
    state = load_state(L)
    comps = state.get("components", {})
    report = {"stopped": [], "killed_in_cgroups": 0, "unmounted_left": [], "netns_removed": [], "links_removed": []}
    order = [*STOP_FIRST, *(n for n in comps if n.startswith("kubelet-"))]
    for name in order:
        entry = comps.get(name)
        if entry:
            host.stop_pid(entry["pid"], entry.get("exe"), grace=5)
            report["stopped"].append(name)
    # containers: delete them through each containerd while it runs, so the image store stays clean
    container_ids: set[str] = set()
    for name, entry in comps.items():
        if name.startswith("containerd-") and alive(entry):
            container_ids.update(delete_all_containers(L, name[len("containerd-"):]))
    for name in ("kube-apiserver", "etcd"):
        entry = comps.get(name)
        if entry:
            host.stop_pid(entry["pid"], entry.get("exe"), grace=10)
            report["stopped"].append(name)
    for name, entry in comps.items():
        if name.startswith("containerd-"):
            host.stop_pid(entry["pid"], entry.get("exe"), grace=10)
            report["stopped"].append(name)
    # anything left in our cgroups (containers, shims) is killed by pid
    report["killed_in_cgroups"] = len(host.kill_cgroup_tree(CGROUP_PARENT))
    _remove_host_network(L, report)
    host.remove_cgroup_tree(CGROUP_PARENT)
    _remove_runtime_files(L)
    report["cni_cache_removed"] = len(remove_cni_cache(container_ids))
    for path in state.get("created_paths", []):
        shutil.rmtree(path, ignore_errors=True)
    if L.state_file.exists():
        L.state_file.unlink()
    return report


def _remove_host_network(L: Layout, report: dict) -> None:
    for ns in host.netns_with_addresses_in("10.244."):
        host.remove_netns(ns)
        report["netns_removed"].append(ns)
    report["unmounted_left"] = host.unmount_under([L.root])
    for link in host.links_with_prefix(BRIDGE_PREFIX) + ([DNS_LINK] if host.link_exists(DNS_LINK) else []):
        for port in host.bridge_ports(link):
            host.delete_link(port)
        host.delete_link(link)
        report["links_removed"].append(link)
    host.remove_forward_accept(IPTABLES_CHAIN)
    # kube-proxy is stopped by now (STOP_FIRST): its chains would otherwise keep DNAT-ing the Service
    # range on this host after the cluster is gone
    report["kube_proxy"] = kube_proxy.cleanup()
    if not host.other_kubelets_running(set()):
        report["iptables_removed"] = host.remove_kubelet_iptables()


def _remove_runtime_files(L: Layout) -> None:
    """Runtime state goes; certificates and image stores stay."""
    # kubelets link container logs from /var/log/containers (a fixed path) into their podLogsDir
    containers_logs = Path("/var/log/containers")
    if containers_logs.is_dir():
        for link in containers_logs.iterdir():
            if link.is_symlink() and os.readlink(link).startswith(str(L.nodes_dir)):
                link.unlink()
    for path in (L.etcd, L.manifests, L.config, L.kubeconfig):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists():
            path.unlink()
    if L.nodes_dir.exists():
        for node_dir in L.nodes_dir.iterdir():
            for sub in node_dir.iterdir():
                if sub.name in ("containerd-root", "images.json"):
                    continue
                if sub.is_dir():
                    shutil.rmtree(sub, ignore_errors=True)
                else:
                    sub.unlink(missing_ok=True)


def delete_all_containers(L: Layout, node: str) -> list[str]:
    """Kill and remove every container (pods and sandboxes) in one node's containerd; their ids."""
    out = ctr(L, node, "containers", "ls", "-q", check=False, timeout=30)
    ids = out.stdout.decode().split()
    for cid in ids:
        ctr(L, node, "tasks", "kill", "-s", "SIGKILL", cid, check=False, timeout=30)
    for cid in ids:
        ctr(L, node, "tasks", "delete", "-f", cid, check=False, timeout=30)
        ctr(L, node, "containers", "delete", cid, check=False, timeout=30)
    return ids


def remove_cni_cache(container_ids: set[str]) -> list[str]:
    """Result-cache entries of our sandboxes (by id, or by our network's name)."""
    removed = []
    results = CNI_CACHE / "results"
    if not results.is_dir():
        return removed
    for f in results.iterdir():
        ours = any(cid in f.name for cid in container_ids)
        if not ours:
            try:
                ours = json.loads(f.read_text()).get("networkName") == "poc-native"
            except (OSError, ValueError):
                ours = False
        if ours:
            f.unlink(missing_ok=True)
            removed.append(f.name)
    return removed
