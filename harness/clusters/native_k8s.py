"""A real Kubernetes cluster on this one machine that needs no container registry.

Every part is an upstream component built from the Go module proxy (see ``k8s/builds.py``):
etcd, kube-apiserver, kube-controller-manager, kube-scheduler, N kubelets (each on its own
containerd), CoreDNS, and the JobSet and Kueue controllers with their webhooks. Pods get their
network from Debian's CNI plugins (one bridge per node; the host routes between bridges).

Python API (what ``poc cluster up --k8s --provider native`` calls, through ``NativeK8s``)::

    ci = up(nodes=3)            # -> ClusterInfo(kubeconfig, server, nodes, versions, settings, up_seconds, restricted)
    is_up(); info()             # cheap checks; info() reads the state file
    status()                    # -> [ComponentStatus(name, pid, alive, log)]
    import_image("ref:tag")     # docker save | ctr import, on every node where it is missing
    prune_images(keep=[ref])    # drop other images from the nodes (kubelet image GC is off)
    stop_kubelet("poc-n2"); start_kubelet("poc-n2")   # node-loss fault injection (SIGKILL)
    memory_mib()                # RSS per component and in total
    down()                      # kills by pid, unmounts, deletes devices, iptables rules, cgroups

Where the parts are: command lines in ``k8s/commands.py``, configuration files in
``k8s/components.py``, starting and waiting in ``k8s/procs.py``, readiness checks in
``k8s/readiness.py``, teardown in ``k8s/teardown.py``; this module puts them in order. Every ``up``
adds the fake GPUs and GPU taint (``k8s/gpu_shape.py``) and the restricted user (``k8s/tenant.py``).

State lives in ``$POC_STATE_DIR/k8s-native`` (default ``~/.local/state/k8s-slurm-poc``); logs in
``<state>/logs/<name>.log``. Must run as root (containerd, mounts, network devices, cgroups).
`poc cluster up|down|status --k8s --provider native` drives it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import shutil
import time
from pathlib import Path

from harness.clusters.base import ComponentStatus, Say
from harness.clusters.k8s import audit as api_audit
from harness.clusters.k8s import (
    builds,
    commands,
    components,
    gpu_shape,
    host,
    kube_proxy,
    pki,
    procs,
    readiness,
    teardown,
    tenant,
    upgrade,
)
from harness.clusters.k8s.layout import (
    APISERVER_PORT,
    BRIDGE_PREFIX,
    CGROUP_PARENT,
    CLUSTER_CIDR,
    COREDNS_READY,
    DNS_IP,
    DNS_LINK,
    ETCD_CLIENT_PORT,
    IPTABLES_CHAIN,
    JOBSET_PORTS,
    KCM_PORT,
    KUEUE_PORTS,
    NODE_LEASE_DURATION_SECONDS,
    NODE_MONITOR_GRACE_PERIOD,
    NODE_STATUS_UPDATE_FREQUENCY,
    PAUSE_IMAGE,
    SCHEDULER_PORT,
    SERVICE_CIDR,
    TOLERATION_SECONDS,
    ClusterInfo,
    Layout,
    load_state,
    node_ip,
    node_name,
    save_state,
    state_root,
)
from harness.clusters.k8s.node_images import (
    BUSYBOX_IMAGE,
    ctr,
    ensure_busybox_image,
    ensure_pause_image,
    import_image,
    prune_images,
)
from harness.clusters.progress import stderr_say
from harness.errors import ClusterError
from harness.paths import NATIVE_K8S_CLUSTER

# The API; the layout's names here are what callers (the Kubernetes backend, tests) read.
__all__ = [
    "BRIDGE_PREFIX", "BUSYBOX_IMAGE", "CGROUP_PARENT", "DNS_LINK", "IPTABLES_CHAIN", "NODE_MONITOR_GRACE_PERIOD",
    "PAUSE_IMAGE", "TOLERATION_SECONDS", "ClusterInfo", "ComponentStatus", "Layout", "NativeK8s", "builds",
    "describe", "down", "ensure_busybox_image", "ensure_pause_image", "import_image", "info", "is_up", "load_state",
    "memory_mib", "prune_images", "restore_pinned", "start_kubelet", "state_root", "status", "stop_kubelet", "up",
]

# Components `up` restarts in place when they died (or were killed by a fault injection) while
# the rest of the cluster runs; anything else dead (etcd, apiserver, a containerd) means a new cluster.
RESTARTABLE = ("kube-controller-manager", "kube-scheduler", "coredns", "jobset", "kueue", "kube-proxy", "kwok")


def _start(L: Layout, state: dict, cmd: commands.Command) -> int:
    return procs.spawn(L, state, cmd.name, cmd.argv, extra_env=cmd.env or None, cgroup=cmd.cgroup)


def _healthy(url: str, https: bool = False) -> bool:
    return (procs.https_get(url) if https else procs.http_get(url))[0] == 200


def _repair(L: Layout, nodes: int) -> bool:
    """Restart dead restartable components of a ready cluster. False when it cannot be repaired."""
    state = load_state(L)
    if not state.get("ready") or len(state.get("nodes", [])) != nodes:
        return False
    dead = [n for n, e in state["components"].items() if not procs.alive(e)]
    if not dead or not all(n in RESTARTABLE or n.startswith("kubelet-") for n in dead):
        return False
    for name in dead:
        e = state["components"][name]
        procs.spawn(L, state, name, e["argv"], extra_env=e.get("extra_env"),
                    cgroup=e.get("cgroup", name).split("/")[-1])
    state.setdefault("repairs", []).append({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                            "restarted": dead})
    save_state(L, state)
    names = tuple(state["components"])
    procs.wait(f"{nodes} nodes Ready", lambda: readiness.nodes_ready(L, nodes), 120, L, names, interval=1)
    if "jobset" in dead:
        procs.wait("JobSet readyz", lambda: _healthy(f"http://127.0.0.1:{JOBSET_PORTS['health']}/readyz"),
                   120, L, names)
    if "kueue" in dead:
        procs.wait("Kueue readyz", lambda: _healthy(f"http://127.0.0.1:{KUEUE_PORTS['health']}/readyz"),
                   120, L, names)
    return True


def is_up(state_dir: str | Path | None = None) -> bool:
    L = Layout(state_root(state_dir))
    state = load_state(L)
    return (bool(state.get("ready")) and bool(state["components"])
            and all(procs.alive(e) for e in state["components"].values()))


def info(state_dir: str | Path | None = None) -> ClusterInfo:
    L = Layout(state_root(state_dir))
    state = load_state(L)
    return ClusterInfo(kubeconfig=L.kubeconfig, state_dir=L.root, server=f"https://127.0.0.1:{APISERVER_PORT}",
                       nodes=tuple(state.get("nodes", [])), versions=state.get("versions", {}),
                       settings=state.get("settings", {}), up_seconds=state.get("up_seconds", 0.0), reused=True,
                       restricted=tenant.describe(L))


def _preflight() -> None:
    if os.geteuid() != 0:
        raise ClusterError("the native cluster must run as root (containerd, mounts, network devices, cgroups)",
                           tip="run as root, or use `--provider kind` where a registry is reachable")
    missing = [b for b in ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "ip", "iptables", "docker", "mount")
               if not shutil.which(b)]
    if not Path("/usr/lib/cni/bridge").exists():
        missing.append("/usr/lib/cni/bridge")
    if missing:
        raise ClusterError(f"missing host tools: {', '.join(missing)}",
                           tip="apt-get install containerd runc containernetworking-plugins iptables iproute2 "
                               "docker.io")
    if not host.hierarchies():
        raise ClusterError("no cgroup hierarchy is mounted under /sys/fs/cgroup")


@contextlib.contextmanager
def _locked(L: Layout):
    """One up/down at a time on this machine (two processes' fixtures may both call up)."""
    L.root.mkdir(parents=True, exist_ok=True)
    with open(L.root / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def up(nodes: int = 3, state_dir: str | Path | None = None, say: Say | None = None) -> ClusterInfo:
    """Bring the cluster up (building what is missing) and return once it is usable.

    Returns at once when it is already up; restarts dead kubelets/controllers of a running
    cluster in place; otherwise (re)creates it. The first call builds the Go components (about
    30 min on 2 cores): `say` (default: stderr) gets progress lines; the build log is
    $POC_CACHE_DIR/build.log.
    """
    _preflight()
    L = Layout(state_root(state_dir))
    with _locked(L):
        ci = _up(L, nodes, state_dir, say or stderr_say)
        api_audit.ensure(L)   # a running cluster started before the audit policy existed gets it (restart)
        # a new cluster, and a running one started before kube-proxy was part of it, get it started here
        kube_proxy.ensure(L, say or stderr_say)
        st = load_state(L)
        ci = dataclasses.replace(ci, settings=st.get("settings", ci.settings), versions=st.get("versions", ci.versions))
        # idempotent, so a running cluster started before these existed gets them too
        gpu_shape.apply(L, ci.nodes)
        return dataclasses.replace(ci, restricted=tenant.ensure(L))


def _settings() -> dict:
    """What decides how fast a lost node is noticed and its pods replaced (kept with every result)."""
    return {
        "node_monitor_grace_period": NODE_MONITOR_GRACE_PERIOD,
        "node_lease_duration_seconds": NODE_LEASE_DURATION_SECONDS,
        "node_status_update_frequency": NODE_STATUS_UPDATE_FREQUENCY,
        "default_not_ready_toleration_seconds": TOLERATION_SECONDS,
        "default_unreachable_toleration_seconds": TOLERATION_SECONDS,
        "cluster_cidr": CLUSTER_CIDR, "service_cidr": SERVICE_CIDR, "cluster_dns": DNS_IP,
        "kube_proxy": f"{kube_proxy.MODE} mode, one proxy for the host, clusterCIDR {CLUSTER_CIDR}",
    }


def _up(L: Layout, nodes: int, state_dir, say: Say) -> ClusterInfo:
    if is_up(state_dir) and len(load_state(L).get("nodes", [])) == nodes:
        return info(state_dir)
    if _repair(L, nodes):
        return info(state_dir)
    if L.state_file.exists() or host.cgroup_pids(CGROUP_PARENT) or host.links_with_prefix(BRIDGE_PREFIX):
        teardown.down_layout(L)   # a half-started or crashed instance: clear it before reusing its ports and devices
    t0 = time.monotonic()
    build_times = builds.ensure_built(say=say)
    ensure_pause_image()
    for d in (L.root, L.logs, L.manifests, L.config, L.nodes_dir):
        d.mkdir(parents=True, exist_ok=True)
    names = [node_name(i) for i in range(1, nodes + 1)]
    say(f"[k8s] starting the native cluster ({nodes} nodes; logs in {L.logs})")
    certs = pki.ensure_cluster_certs(L, nodes)
    versions = {b.component: b.version for b in builds.ALL}
    state = {"components": {}, "nodes": names, "ready": False, "settings": _settings(), "versions": versions,
             "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "build_seconds": build_times}
    save_state(L, state)
    _host_network(L, state, nodes)
    _start_runtime(L, state, names)
    _start_control_plane(L, state, names, certs)
    _start_nodes_and_addons(L, state, nodes, certs)
    say("[k8s] waiting for nodes Ready, the controllers, the webhooks and a test pod")
    _wait_usable(L, state, nodes, certs)

    shutil.copyfile(L.admin_kubeconfig, L.kubeconfig)
    L.kubeconfig.chmod(0o600)
    state["ready"] = True
    state["up_seconds"] = round(time.monotonic() - t0, 1)
    save_state(L, state)
    return ClusterInfo(kubeconfig=L.kubeconfig, state_dir=L.root, server=f"https://127.0.0.1:{APISERVER_PORT}",
                       nodes=tuple(names), versions=versions, settings=state["settings"],
                       up_seconds=state["up_seconds"])


def _host_network(L: Layout, state: dict, nodes: int) -> None:
    """One bridge per node (its gateway is the node's IP), DNS on a device of its own, forwarding."""
    Path("/proc/sys/net/ipv4/ip_forward").write_text("1")
    for i in range(1, nodes + 1):
        host.ensure_bridge(f"{BRIDGE_PREFIX}{i}", f"{node_ip(i)}/24")
    host.ensure_local_address(DNS_LINK, f"{DNS_IP}/32")
    # seen: a Service client got HTTP 404s from the default gateway while kube-proxy had no rule for it
    host.ensure_local_route(SERVICE_CIDR, DNS_LINK)
    host.ensure_forward_accept(IPTABLES_CHAIN, CLUSTER_CIDR)
    host.make_cgroup(CGROUP_PARENT)
    for fixed in (teardown.CNI_CACHE, teardown.KUBELET_FIXED_DIR):
        if not fixed.exists():
            state.setdefault("created_paths", []).append(str(fixed))
    save_state(L, state)


def _start_runtime(L: Layout, state: dict, names: list[str]) -> None:
    """etcd and every node's containerd."""
    L.etcd.mkdir(parents=True, exist_ok=True)
    _start(L, state, commands.etcd(L))
    for i, node in enumerate(names, 1):
        cfg = components.containerd_config(L, node)
        components.cni_config(L, node, i)
        _start(L, state, commands.containerd(node, cfg))
    procs.wait("etcd", lambda: '"health":"true"' in procs.http_get(f"http://127.0.0.1:{ETCD_CLIENT_PORT}/health")[1],
               60, L, ("etcd",))


def _start_control_plane(L: Layout, state: dict, names: list[str], certs: dict) -> None:
    _start(L, state, commands.kube_apiserver(certs, api_audit.prepare(L.root)))
    # while the apiserver starts: the pause image into every containerd
    for node in names:
        procs.wait(f"containerd on {node}", lambda node=node: ctr(L, node, "version", check=False).returncode == 0,
                   60, L, (f"containerd-{node}",))
    import_image(PAUSE_IMAGE, state_dir=L.root, nodes=names)
    procs.wait("kube-apiserver /readyz",
               lambda: procs.https_get(f"https://127.0.0.1:{APISERVER_PORT}/readyz", certs["admin"],
                                       certs["ca"].cert)[0] == 200,
               120, L, ("kube-apiserver",))
    _start(L, state, commands.kube_controller_manager(L, certs))
    _start(L, state, commands.kube_scheduler(L))


def _start_nodes_and_addons(L: Layout, state: dict, nodes: int, certs: dict) -> None:
    """Kubelets, CoreDNS, then JobSet and Kueue: CRDs first, then the controllers."""
    for i in range(1, nodes + 1):
        host.make_cgroup(f"{CGROUP_PARENT}/{node_name(i)}")
        components.kubelet_config(L, node_name(i), i, certs)
        _start(L, state, commands.kubelet(L, i))
    _start(L, state, commands.coredns(components.coredns_config(L)))
    procs.kubectl(L, "apply", "--server-side", "--force-conflicts", "-f", str(components.crd_manifests(L)),
                  timeout=120)
    procs.kubectl(L, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all", timeout=90)
    _start(L, state, commands.jobset(L, components.jobset_config(L)))
    components.install_kueue_metrics_cert(L, state, certs)
    _start(L, state, commands.kueue(L, components.kueue_config(L)))


def _wait_usable(L: Layout, state: dict, nodes: int, certs: dict) -> None:
    """Every component healthy, then the webhook configurations, then proof that they and a pod work."""
    names = tuple(state["components"])
    procs.wait(f"{nodes} nodes Ready", lambda: readiness.nodes_ready(L, nodes), 180, L, names, interval=1)
    procs.wait("kube-controller-manager /healthz",
               lambda: _healthy(f"https://127.0.0.1:{KCM_PORT}/healthz", https=True), 60, L, names)
    procs.wait("kube-scheduler /healthz",
               lambda: _healthy(f"https://127.0.0.1:{SCHEDULER_PORT}/healthz", https=True), 60, L, names)
    procs.wait("JobSet readyz", lambda: _healthy(f"http://127.0.0.1:{JOBSET_PORTS['health']}/readyz"), 120, L, names)
    procs.wait("Kueue readyz", lambda: _healthy(f"http://127.0.0.1:{KUEUE_PORTS['health']}/readyz"), 120, L, names)
    procs.kubectl(L, "apply", "--server-side", "--force-conflicts", "-f",
                  str(components.webhook_manifests(L, certs)))
    procs.wait("JobSet's webhook to reject a bad JobSet", lambda: readiness.jobset_webhook_answers(L), 60, L, names)
    procs.wait("Kueue's webhook to suspend a queued Job", lambda: readiness.kueue_webhook_answers(L), 60, L, names)
    procs.wait("CoreDNS ready", lambda: _healthy(f"http://127.0.0.1:{COREDNS_READY}/ready"), 60, L, names)
    readiness.smoke_pod_runs(L)


def status(state_dir: str | Path | None = None) -> list[ComponentStatus]:
    L = Layout(state_root(state_dir))
    state = load_state(L)
    out = []
    for n, e in state["components"].items():
        ok = procs.alive(e)
        out.append(ComponentStatus(name=n, pid=e["pid"], alive=ok, log=e["log"], state="running" if ok else "dead"))
    return out


def memory_mib(state_dir: str | Path | None = None) -> dict[str, float]:
    """Resident memory (RSS, MiB) of each component, and in total of every process in the
    cluster's cgroups (components, containerd shims and pod processes)."""
    def rss(pid: int) -> float:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    out = {s.name: round(rss(s.pid), 1) for s in status(state_dir) if s.alive}
    out["total_in_cgroups"] = round(sum(rss(p) for p in host.cgroup_pids(CGROUP_PARENT)), 1)
    return out


def stop_kubelet(node: str, state_dir: str | Path | None = None) -> int:
    """Fault injection: SIGKILL one node's kubelet (its containers keep running, as on a real lost node)."""
    L = Layout(state_root(state_dir))
    state = load_state(L)
    entry = state["components"].get(f"kubelet-{node}")
    if not entry:
        raise ClusterError(f"no kubelet for node {node}", tip=f"nodes: {', '.join(state.get('nodes', []))}")
    if procs.alive(entry):
        os.kill(entry["pid"], 9)
        for _ in range(50):
            if not procs.alive(entry):
                break
            time.sleep(0.1)
        try:
            os.waitpid(entry["pid"], os.WNOHANG)   # reap it if it was our child
        except ChildProcessError:
            pass
    return entry["pid"]


def start_kubelet(node: str, state_dir: str | Path | None = None) -> int:
    L = Layout(state_root(state_dir))
    state = load_state(L)
    i = state["nodes"].index(node) + 1
    entry = state["components"].get(f"kubelet-{node}")
    if entry and procs.alive(entry):
        return entry["pid"]
    return _start(L, state, commands.kubelet(L, i))


def down(state_dir: str | Path | None = None) -> dict:
    """Stop everything `up` started and remove its mounts, devices, iptables rules and cgroups.

    Keeps the certificates and each node's containerd image store (so images are not re-imported).
    Returns what was found and removed.
    """
    L = Layout(state_root(state_dir))
    with _locked(L):
        return teardown.down_layout(L)


def restore_pinned(state_dir: str | Path | None = None, nodes: int | None = None, say: Say | None = None) -> dict:
    """The cluster at its pinned releases again after an upgrade drill: a new cluster when anything
    was upgraded (stored state is not downgraded), made as `up` makes it (the restricted tenant, fake
    GPUs and audit policy come back with it)."""
    L = Layout(state_root(state_dir))
    n = nodes or len(load_state(L).get("nodes", [])) or 3
    if is_up(state_dir) and upgrade.at_pinned_versions(L):
        return {"recreated": False}
    t0 = time.monotonic()
    down(state_dir)
    up(nodes=n, state_dir=state_dir, say=say)
    return {"recreated": True, "seconds": round(time.monotonic() - t0, 1)}


def describe() -> dict:
    """Versions and settings, without starting anything (for reports)."""
    return {"versions": {b.component: b.version for b in builds.ALL}}


class NativeK8s:
    """The native cluster behind the LocalCluster interface (``harness.clusters.base``)."""

    name = NATIVE_K8S_CLUSTER

    def __init__(self, nodes: int = 3, state_dir: str | Path | None = None, say: Say | None = None):
        self.nodes, self.state_dir, self.say = nodes, state_dir, say

    def up(self) -> ClusterInfo:
        return up(self.nodes, self.state_dir, self.say)

    def down(self) -> dict:
        return down(self.state_dir)

    def status(self) -> list[ComponentStatus]:
        return status(self.state_dir)

    def is_up(self) -> bool:
        return is_up(self.state_dir)
