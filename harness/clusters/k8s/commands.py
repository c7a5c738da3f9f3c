"""The command line of each native-cluster component: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, the kubelets and their containerds, CoreDNS, JobSet and Kueue.

Pure: paths come from the Layout and the certificate set, so the command lines can be checked
without starting anything. ``native_k8s.up`` starts them in order (``procs.spawn``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.clusters.k8s import builds, rate_limits
from harness.clusters.k8s.layout import (
    APISERVER_PORT,
    CLUSTER_DOMAIN,
    ETCD_CLIENT_PORT,
    ETCD_PEER_PORT,
    KCM_PORT,
    NODE_MONITOR_GRACE_PERIOD,
    SCHEDULER_PORT,
    SERVICE_CIDR,
    TOLERATION_SECONDS,
    Layout,
    node_ip,
    node_name,
)


@dataclass(frozen=True)
class Command:
    """How to start one component: its name (log file, state entry), argv, extra environment, cgroup."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cgroup: str | None = None     # under CGROUP_PARENT; default: the name


def etcd(L: Layout) -> Command:
    return Command("etcd", [
        str(builds.ETCD.path("etcd")), "--name=poc", f"--data-dir={L.etcd / 'data'}",
        f"--listen-client-urls=http://127.0.0.1:{ETCD_CLIENT_PORT}",
        f"--advertise-client-urls=http://127.0.0.1:{ETCD_CLIENT_PORT}",
        f"--listen-peer-urls=http://127.0.0.1:{ETCD_PEER_PORT}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{ETCD_PEER_PORT}",
        f"--initial-cluster=poc=http://127.0.0.1:{ETCD_PEER_PORT}",
        "--listen-metrics-urls=", "--log-level=warn", "--quota-backend-bytes=2147483648",
        # Its data is thrown away by `down`; without fsync a busy shared disk no longer turns
        # into "etcdserver: request timed out" (seen here while other jobs wrote heavily).
        "--unsafe-no-fsync"])


def containerd(node: str, config: Path) -> Command:
    """Debian's containerd, one per node (its own root, state, socket and CNI config)."""
    return Command(f"containerd-{node}", ["containerd", "--config", str(config), "--log-level", "warn"],
                   cgroup=f"containerd-{node}")


def kube_apiserver(certs: dict, audit: list[str] | tuple[str, ...] = ()) -> Command:
    """audit: the audit-log flags (audit.flags: policy file, log path, rotation); none turns it off."""
    return Command("kube-apiserver", [
        str(builds.KUBERNETES.path("kube-apiserver")),
        f"--etcd-servers=http://127.0.0.1:{ETCD_CLIENT_PORT}",
        "--bind-address=127.0.0.1", f"--secure-port={APISERVER_PORT}",
        "--endpoint-reconciler-type=none",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        f"--client-ca-file={certs['ca'].cert}",
        f"--tls-cert-file={certs['apiserver'].cert}", f"--tls-private-key-file={certs['apiserver'].key}",
        f"--kubelet-client-certificate={certs['apiserver-kubelet-client'].cert}",
        f"--kubelet-client-key={certs['apiserver-kubelet-client'].key}",
        f"--kubelet-certificate-authority={certs['ca'].cert}",
        "--kubelet-preferred-address-types=InternalIP",
        f"--service-account-issuer=https://kubernetes.default.svc.{CLUSTER_DOMAIN}",
        f"--service-account-key-file={certs['sa'].cert}",
        f"--service-account-signing-key-file={certs['sa'].key}",
        "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
        "--allow-privileged=true",
        f"--default-not-ready-toleration-seconds={TOLERATION_SECONDS}",
        f"--default-unreachable-toleration-seconds={TOLERATION_SECONDS}",
        "--profiling=false", "--v=1", *audit])


def kube_controller_manager(L: Layout, certs: dict) -> Command:
    kc = L.pki / "controller-manager.kubeconfig"
    return Command("kube-controller-manager", [
        str(builds.KUBERNETES.path("kube-controller-manager")),
        f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
        "--bind-address=127.0.0.1", f"--secure-port={KCM_PORT}", "--leader-elect=false",
        f"--root-ca-file={certs['ca'].cert}",
        f"--service-account-private-key-file={certs['sa'].key}",
        f"--cluster-signing-cert-file={certs['ca'].cert}", f"--cluster-signing-key-file={certs['ca'].key}",
        "--use-service-account-credentials=true",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        f"--node-monitor-grace-period={NODE_MONITOR_GRACE_PERIOD}",
        "--node-monitor-period=2s",
        "--profiling=false", "--v=1", *rate_limits.kcm_flags(L)])


def kube_scheduler(L: Layout) -> Command:
    kc = L.pki / "scheduler.kubeconfig"
    return Command("kube-scheduler", [
        str(builds.KUBERNETES.path("kube-scheduler")),
        f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
        "--bind-address=127.0.0.1", f"--secure-port={SCHEDULER_PORT}", "--leader-elect=false",
        "--profiling=false", "--v=1"])


def kubelet(L: Layout, i: int) -> Command:
    """Node i's kubelet (its config file is written by components.kubelet_config)."""
    node = node_name(i)
    d = L.node(node)
    return Command(f"kubelet-{node}", [
        str(builds.KUBERNETES.path("kubelet")),
        f"--config={d / 'kubelet-config.yaml'}",
        f"--kubeconfig={L.pki / f'kubelet-{node}.kubeconfig'}",
        f"--root-dir={d / 'kubelet'}",
        f"--cert-dir={d / 'kubelet-pki'}",
        f"--hostname-override={node}",
        f"--node-ip={node_ip(i)}",
        f"--node-labels=poc.k8s-slurm/node-index={i}",
        "--v=1"], cgroup=f"kubelet-{node}")


def coredns(corefile: Path) -> Command:
    return Command("coredns", [str(builds.COREDNS.path("coredns")), "-conf", str(corefile)])


def jobset(L: Layout, config: Path) -> Command:
    return Command("jobset", [str(builds.JOBSET.path("jobset-manager")), f"--config={config}", "--zap-log-level=info"],
                   env={"KUBECONFIG": str(L.pki / "jobset.kubeconfig")})


def kueue(L: Layout, config: Path) -> Command:
    return Command("kueue", [str(builds.KUEUE.path("kueue-manager")), f"--config={config}",
                             "--feature-gates=VisibilityOnDemand=false", "--zap-log-level=2"],
                   env={"KUBECONFIG": str(L.pki / "kueue.kubeconfig")})
