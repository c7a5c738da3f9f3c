"""Power loss of one node of the native cluster, and power back on (host side, as root).

The node dies as in a power loss: its pods' network goes first (the node's bridge down, so no
peer sees a FIN or RST), then its kubelet (SIGKILL: the node stops reporting), then every process
of its pods (SIGKILL through the node's pod cgroup). Peers hang in their collective; only
Kubernetes' node lifecycle notices.

A bridge taken down takes its connected route with it, and the node's pod addresses would then
follow the host's default route off this machine (seen: a Service client got HTTP 404s from the
default gateway for 17 s of a node loss). A blackhole route for the node's pod network, below the
connected route, is in place before the bridge goes down and removed after it is back: the lost
node's addresses answer nothing, as a dead node's do, and nothing leaves the machine.

A lost node must come back even if the harness dies between the fault and its cancel, and even if
the next campaign writes to another results directory: every power-off is noted in a ledger on
the cluster's side (beside the checkpoints) before anything is switched off, and the backend's
preflight powers back on whatever the ledger lists.
"""
from __future__ import annotations

import ipaddress
import json
import subprocess
from pathlib import Path

from ..errors import ClusterError, CommandError
from ..fsutil import atomic_write_json
from . import native_k8s
from .k8s import gpu_shape, host
from .k8s.layout import Layout, state_root


class Ledger:
    """run id -> {"nodes": [...], "links": [...]} of nodes powered off and not yet back."""

    def __init__(self, path: Path):
        self.path = path

    def read(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def add(self, run_id: str, node: str, link: str) -> None:
        data = self.read()
        entry = data.setdefault(run_id, {"nodes": [], "links": []})
        entry["nodes"] = sorted(set(entry.get("nodes", [])) | {node})
        entry["links"] = sorted(set(entry.get("links", [])) | {link})
        atomic_write_json(self.path, data)

    def drop(self, run_id: str) -> None:
        data = self.read()
        if data.pop(run_id, None) is not None:
            atomic_write_json(self.path, data)


def bridge_of(node: str) -> str:
    return f"{native_k8s.BRIDGE_PREFIX}{list(native_k8s.info().nodes).index(node) + 1}"


def native_nodes() -> list[str]:
    """The native cluster's nodes on this host; [] when there is none."""
    try:
        return list(native_k8s.info().nodes)
    except Exception:  # noqa: BLE001 - no native cluster here: no node of it can be powered off
        return []


BLACKHOLE_METRIC = 4242    # after the connected route (metric 0): it routes only while the bridge is down


def pod_network(link: str, runner=subprocess.run) -> str | None:
    """The node's pod network, from the bridge's own address ("10.244.1.1/24" -> "10.244.1.0/24")."""
    p = runner(["ip", "-o", "-4", "addr", "show", "dev", link], capture_output=True, text=True, timeout=30,
               check=False)
    words = p.stdout.split() if p.returncode == 0 else []
    for i, w in enumerate(words[:-1]):
        if w == "inet":
            return str(ipaddress.ip_interface(words[i + 1]).network)
    return None


def blackhole_argv(action: str, network: str) -> list[str]:
    return ["ip", "route", action, "blackhole", network, "metric", str(BLACKHOLE_METRIC)]


def power_off(node: str, link: str, runner=subprocess.run) -> dict:
    """Cut the node's network, kill its kubelet and its pods' processes. Returns what it did."""
    net = pod_network(link, runner)
    if net is None:
        raise ClusterError(f"no IPv4 network on {link}: its pod addresses would leave this machine once it is down",
                           tip="`poc cluster up --k8s` remakes the node's bridge")
    p = runner(blackhole_argv("replace", net), capture_output=True, text=True, timeout=30, check=False)
    if p.returncode != 0:
        raise ClusterError(f"ip route replace blackhole {net} failed: {p.stderr.strip()}", tip="run as root")
    p = runner(["ip", "link", "set", link, "down"], capture_output=True, text=True, timeout=30, check=False)
    if p.returncode != 0:
        raise ClusterError(f"ip link set {link} down failed: {p.stderr.strip()}", tip="run as root")
    kubelet_pid = native_k8s.stop_kubelet(node)
    killed = host.kill_cgroup_tree(f"{native_k8s.CGROUP_PARENT}/{node}")
    return {"how": f"power loss of {node}: bridge {link} down, kubelet SIGKILL, every pod process SIGKILL",
            "kubelet_pid": kubelet_pid, "pod_processes_killed": len(killed), "blackholed": net}


def power_on(nodes: list[str], links: list[str], runner=subprocess.run) -> None:
    """Links up, kubelets started, fake GPUs and the GPU taint back; idempotent (a node that is up
    stays as it is)."""
    for link in links:
        runner(["ip", "link", "set", link, "up"], capture_output=True, timeout=30, check=False)
        if (net := pod_network(link, runner)) is not None:     # the connected route is back: it routes again
            runner(blackhole_argv("del", net), capture_output=True, timeout=30, check=False)
    for node in nodes:
        native_k8s.start_kubelet(node)
    try:
        gpu_shape.apply(Layout(state_root()), nodes)
    except (CommandError, OSError, ValueError, subprocess.TimeoutExpired):
        # never let the fake GPUs stand in the way of a node's return: the next `poc cluster up --k8s`
        # re-applies them (the kubelet keeps them across a restart anyway)
        pass
