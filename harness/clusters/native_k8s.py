"""A real Kubernetes cluster on this one machine that needs no container registry.

Every part is an upstream component built from the Go module proxy (see ``k8s/builds.py``):
etcd, kube-apiserver, kube-controller-manager, kube-scheduler, N kubelets (each on its own
containerd), CoreDNS, and the JobSet and Kueue controllers with their webhooks. Pods get their
network from Debian's CNI plugins (one bridge per node; the host routes between bridges).

Python API (what ``poc cluster up --k8s --provider native`` calls)::

    ci = up(nodes=3)            # -> ClusterInfo(kubeconfig, server, nodes, versions, settings, up_seconds)
    is_up(); info()             # cheap checks; info() reads the state file
    status()                    # -> [ComponentStatus(name, pid, alive, log)]
    import_image("ref:tag")     # docker save | ctr import, on every node where it is missing
    prune_images(keep=[ref])    # drop other images from the nodes (kubelet image GC is off)
    stop_kubelet("poc-n2"); start_kubelet("poc-n2")   # node-loss fault injection (SIGKILL)
    memory_mib()                # RSS per component and in total
    down()                      # kills by pid, unmounts, deletes devices, iptables rules, cgroups

Command line for debugging: ``python -m harness.clusters.native_k8s up|down|status|import IMAGE``.

State lives in ``$POC_STATE_DIR/k8s-native`` (default ``~/.local/state/k8s-slurm-poc``); logs in
``<state>/logs/<name>.log``. Must run as root (containerd, mounts, network devices, cgroups).
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import asdict
from pathlib import Path

from harness.clusters.k8s import builds, components, host, pki
from harness.clusters.k8s.layout import (  # noqa: F401 - re-exported: the settings are part of the API
    APISERVER_PORT, BRIDGE_PREFIX, CGROUP_PARENT, CLUSTER_CIDR, CLUSTER_DOMAIN, COREDNS_READY, DNS_IP,
    DNS_LINK, ETCD_CLIENT_PORT, ETCD_PEER_PORT, IPTABLES_CHAIN, JOBSET_PORTS, KCM_PORT, KUEUE_PORTS,
    NODE_LEASE_DURATION_SECONDS, NODE_MONITOR_GRACE_PERIOD, NODE_STATUS_UPDATE_FREQUENCY, PAUSE_IMAGE,
    SCHEDULER_PORT, SERVICE_CIDR, TOLERATION_SECONDS, ClusterInfo, ComponentStatus, Layout, load_state,
    node_ip, node_name, save_state, state_root,
)
from harness.clusters.k8s.node_images import (  # noqa: F401 - re-exported
    BUSYBOX_IMAGE, ctr, ensure_busybox_image, ensure_pause_image, import_image, prune_images,
)
from harness.errors import ClusterError, CommandError, PocError

__all__ = [
    "up", "down", "status", "info", "is_up", "import_image", "prune_images", "stop_kubelet", "start_kubelet", "memory_mib",
    "ensure_busybox_image", "ensure_pause_image", "ClusterInfo", "ComponentStatus", "BUSYBOX_IMAGE", "PAUSE_IMAGE",
    "NODE_MONITOR_GRACE_PERIOD", "TOLERATION_SECONDS", "state_root", "main",
]


# ------------------------------------------------------------------ processes

def _component_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["NO_PROXY"] = "127.0.0.1,localhost,10.0.0.0/8"
    env["PATH"] = env.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
    return env


def _spawn(L: Layout, state: dict, name: str, argv: list[str], extra_env: dict | None = None,
           cgroup: str | None = None) -> int:
    """Start a component detached (own session, own cgroup, logging to logs/<name>.log) and record its pid.

    A plain fork+exec rather than subprocess.Popen: the component outlives this call (and this
    Python process), so there is no Popen object to keep; `down` stops it by pid.
    """
    L.logs.mkdir(parents=True, exist_ok=True)
    cg = f"{CGROUP_PARENT}/{cgroup or name}"
    host.make_cgroup(cg)
    procs_files = [str(h / cg / "cgroup.procs") for h in host.hierarchies()]
    env = _component_env() | (extra_env or {})
    log_path = str(L.log(name))
    with open(log_path, "ab") as log:
        log.write(f"\n==== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {' '.join(argv)}\n".encode())
    r, w = os.pipe()                      # close-on-exec: carries an exec failure back to us
    pid = os.fork()
    if pid == 0:                          # child: only os-level calls until exec
        try:
            os.close(r)
            os.setsid()
            for f in procs_files:
                try:
                    fd = os.open(f, os.O_WRONLY)
                    os.write(fd, str(os.getpid()).encode())
                    os.close(fd)
                except OSError:
                    pass
            devnull = os.open(os.devnull, os.O_RDONLY)
            out = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.dup2(devnull, 0)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.closerange(3, w)
            os.closerange(w + 1, 4096)
            os.execvpe(argv[0], argv, env)
        except BaseException as e:  # noqa: BLE001 - report anything, then leave without cleanup
            try:
                os.write(w, f"{type(e).__name__}: {e}".encode())
            finally:
                os._exit(127)
    os.close(w)
    with os.fdopen(r, "rb") as rf:
        err = rf.read()
    if err:
        os.waitpid(pid, 0)
        raise ClusterError(f"could not start {name} ({argv[0]}): {err.decode(errors='replace')}",
                           tip="run the build again: python -m harness.clusters.k8s.builds")
    state["components"][name] = {"pid": pid, "exe": Path(argv[0]).name, "argv": argv, "log": log_path,
                                 "cgroup": cgroup or name, "extra_env": extra_env or {}}
    save_state(L, state)
    return pid


def _alive(entry: dict) -> bool:
    return host.pid_alive(entry["pid"], entry.get("exe"))


def _log_tail(path: str | Path, lines: int = 15) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# ------------------------------------------------------------------ waiting

def _wait(what: str, check, timeout: float, L: Layout | None = None, logs: tuple[str, ...] = (),
          interval: float = 0.5):
    deadline = time.monotonic() + timeout
    last_err = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except Exception as e:  # noqa: BLE001 - any failure means "not yet"
            last_err = e
        if L is not None:
            state = load_state(L)
            for name in logs:
                entry = state["components"].get(name)
                if entry and not _alive(entry):
                    raise ClusterError(f"{name} exited while waiting for {what}:\n{_log_tail(entry['log'])}",
                                       tip=f"see {entry['log']}; then `poc cluster down --k8s`")
        time.sleep(interval)
    detail = f" (last error: {last_err})" if last_err else ""
    hints = "; ".join(str(L.log(n)) for n in logs) if L else ""
    raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}{detail}",
                       tip=f"see {hints or 'the logs'}; then `poc cluster down --k8s`")


def _https_get(url: str, cert: pki.CertPair | None = None, ca: Path | None = None, timeout: float = 3) -> tuple[int, str]:
    ctx = ssl.create_default_context(cafile=str(ca)) if ca else ssl._create_unverified_context()  # noqa: S323
    if cert:
        ctx.load_cert_chain(str(cert.cert), str(cert.key))
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=timeout) as r:  # noqa: S310 - loopback only
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def _http_get(url: str, timeout: float = 3) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - loopback only
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def _kubectl(L: Layout, *args: str, input: str | None = None, check: bool = True, timeout: float = 60):
    argv = [str(builds.KUBERNETES.path("kubectl")), "--kubeconfig", str(L.admin_kubeconfig), *args]
    proc = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout, env=_component_env())
    if check and proc.returncode != 0:
        raise CommandError(argv, proc.returncode, proc.stdout, proc.stderr)
    return proc


# ------------------------------------------------------------------ certificates and kubeconfigs

def _ensure_pki(L: Layout, n: int) -> dict:
    P = L.pki
    ca = pki.ensure_ca(P)
    c = {"ca": ca}
    server = f"https://127.0.0.1:{APISERVER_PORT}"
    c["apiserver"] = pki.ensure_cert(
        P, "apiserver", ca, "kube-apiserver", server=True, client=False,
        dns=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
             f"kubernetes.default.svc.{CLUSTER_DOMAIN}"),
        ips=("127.0.0.1", "10.96.0.1"))
    c["apiserver-kubelet-client"] = pki.ensure_cert(P, "apiserver-kubelet-client", ca, "kube-apiserver-kubelet-client",
                                                    orgs=("system:masters",))
    c["sa"] = pki.ensure_service_account_keys(P)
    c["webhook"] = pki.ensure_cert(P, "webhook", ca, "poc-webhooks", server=True, client=False,
                                   dns=("localhost",), ips=("127.0.0.1",))
    # (name, CN, O). The host-run controllers (CoreDNS, JobSet, Kueue) get system:masters: they
    # run outside the cluster with a certificate, not as a service account with their RBAC.
    users = [
        ("admin", "poc-admin", ("system:masters",)),
        ("controller-manager", "system:kube-controller-manager", ()),
        ("scheduler", "system:kube-scheduler", ()),
        ("coredns", "poc:coredns", ("system:masters",)),
        ("jobset", "poc:jobset-controller", ("system:masters",)),
        ("kueue", "poc:kueue-controller", ("system:masters",)),
    ]
    for i in range(1, n + 1):
        users.append((f"kubelet-{node_name(i)}", f"system:node:{node_name(i)}", ("system:nodes",)))
        c[f"kubelet-server-{node_name(i)}"] = pki.ensure_cert(
            P, f"kubelet-server-{node_name(i)}", ca, f"system:node:{node_name(i)}", server=True, client=False,
            dns=(node_name(i), "localhost"), ips=(node_ip(i), "127.0.0.1"))
    for name, cn, orgs in users:
        pair = pki.ensure_cert(P, name, ca, cn, orgs=orgs)
        c[name] = pair
        pki.write_kubeconfig(P / f"{name}.kubeconfig", server, ca, pair, cn)
    # controller-runtime reads tls.crt / tls.key from a directory
    wh = P / "webhook-certs"
    wh.mkdir(exist_ok=True)
    shutil.copyfile(c["webhook"].cert, wh / "tls.crt")
    shutil.copyfile(c["webhook"].key, wh / "tls.key")
    return c


# ------------------------------------------------------------------ starting components

def _start_kubelet(L: Layout, state: dict, i: int) -> int:
    node = node_name(i)
    d = L.node(node)
    argv = [str(builds.KUBERNETES.path("kubelet")),
            f"--config={d / 'kubelet-config.yaml'}",
            f"--kubeconfig={L.pki / f'kubelet-{node}.kubeconfig'}",
            f"--root-dir={d / 'kubelet'}",
            f"--cert-dir={d / 'kubelet-pki'}",
            f"--hostname-override={node}",
            f"--node-ip={node_ip(i)}",
            f"--node-labels=poc.k8s-slurm/node-index={i}",
            "--v=1"]
    return _spawn(L, state, f"kubelet-{node}", argv, cgroup=f"kubelet-{node}")


def _tls_port_open(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        return True


def _nodes_ready(L: Layout, n: int) -> bool:
    out = _kubectl(L, "get", "nodes", "-o", "json", check=False)
    if out.returncode != 0:
        return False
    ready = 0
    for item in json.loads(out.stdout)["items"]:
        for cond in item["status"].get("conditions", []):
            if cond["type"] == "Ready" and cond["status"] == "True":
                ready += 1
    return ready >= n


BAD_JOBSET = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
    "metadata": {"name": "poc-webhook-probe", "namespace": "default"},
    "spec": {"successPolicy": {"operator": "All", "targetReplicatedJobs": ["does-not-exist"]},
             "replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": {"spec": {
                 "restartPolicy": "Never", "containers": [{"name": "c", "image": PAUSE_IMAGE}]}}}}}]},
}

QUEUED_JOB = {
    "apiVersion": "batch/v1", "kind": "Job",
    "metadata": {"name": "poc-webhook-probe", "namespace": "default",
                 "labels": {"kueue.x-k8s.io/queue-name": "poc-probe"}},
    "spec": {"template": {"spec": {"restartPolicy": "Never",
                                   "containers": [{"name": "c", "image": PAUSE_IMAGE}]}}},
}


def _jobset_webhook_answers(L: Layout) -> bool:
    out = _kubectl(L, "create", "--dry-run=server", "-f", "-", input=json.dumps(BAD_JOBSET), check=False)
    return out.returncode != 0 and "does-not-exist" in out.stderr and "admission webhook" in out.stderr


def _kueue_webhook_answers(L: Layout) -> bool:
    out = _kubectl(L, "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(QUEUED_JOB), check=False)
    return out.returncode == 0 and json.loads(out.stdout)["spec"].get("suspend") is True


def _test_pod_runs(L: Layout) -> bool:
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "poc-smoke", "namespace": "default"},
           "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "pause", "image": PAUSE_IMAGE, "imagePullPolicy": "Never"}]}}
    _kubectl(L, "delete", "pod", "poc-smoke", "--ignore-not-found", "--grace-period=0", "--force", check=False)
    _wait("the default service account",
          lambda: _kubectl(L, "get", "serviceaccount", "default", check=False).returncode == 0, 60, L)
    _kubectl(L, "create", "-f", "-", input=json.dumps(pod))
    try:
        _wait("the smoke-test pod to run",
              lambda: _kubectl(L, "get", "pod", "poc-smoke", "-o", "jsonpath={.status.phase}").stdout == "Running",
              120, L)
    finally:
        _kubectl(L, "delete", "pod", "poc-smoke", "--ignore-not-found", "--wait=false", check=False)
    return True


# ------------------------------------------------------------------ public API

# Components `up` restarts in place when they died (or were killed by a fault injection) while
# the rest of the cluster runs; anything else dead (etcd, apiserver, a containerd) means a new cluster.
RESTARTABLE = ("kube-controller-manager", "kube-scheduler", "coredns", "jobset", "kueue")


def _repair(L: Layout, nodes: int) -> bool:
    """Restart dead restartable components of a ready cluster. False when it cannot be repaired."""
    state = load_state(L)
    if not state.get("ready") or len(state.get("nodes", [])) != nodes:
        return False
    dead = [n for n, e in state["components"].items() if not _alive(e)]
    if not dead or not all(n in RESTARTABLE or n.startswith("kubelet-") for n in dead):
        return False
    for name in dead:
        e = state["components"][name]
        _spawn(L, state, name, e["argv"], extra_env=e.get("extra_env"), cgroup=e.get("cgroup", name).split("/")[-1])
    state.setdefault("repairs", []).append({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                            "restarted": dead})
    save_state(L, state)
    names = tuple(state["components"])
    _wait(f"{nodes} nodes Ready", lambda: _nodes_ready(L, nodes), 120, L, names, interval=1)
    if "jobset" in dead:
        _wait("JobSet readyz", lambda: _http_get(f"http://127.0.0.1:{JOBSET_PORTS['health']}/readyz")[0] == 200,
              120, L, names)
    if "kueue" in dead:
        _wait("Kueue readyz", lambda: _http_get(f"http://127.0.0.1:{KUEUE_PORTS['health']}/readyz")[0] == 200,
              120, L, names)
    return True


def is_up(state_dir: str | Path | None = None) -> bool:
    L = Layout(state_root(state_dir))
    state = load_state(L)
    return bool(state.get("ready")) and bool(state["components"]) and all(_alive(e) for e in state["components"].values())


def info(state_dir: str | Path | None = None) -> ClusterInfo:
    L = Layout(state_root(state_dir))
    state = load_state(L)
    return ClusterInfo(kubeconfig=L.kubeconfig, state_dir=L.root, server=f"https://127.0.0.1:{APISERVER_PORT}",
                       nodes=tuple(state.get("nodes", [])), versions=state.get("versions", {}),
                       settings=state.get("settings", {}), up_seconds=state.get("up_seconds", 0.0), reused=True)


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
                           tip="apt-get install containerd runc containernetworking-plugins iptables iproute2 docker.io")
    if not hasattr(host, "hierarchies") or not host.hierarchies():
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


def up(nodes: int = 3, state_dir: str | Path | None = None) -> ClusterInfo:
    """Bring the cluster up (building what is missing) and return once it is usable.

    Returns at once when it is already up; restarts dead kubelets/controllers of a running
    cluster in place; otherwise (re)creates it. The first call builds the Go components (about
    30 min on 2 cores); progress goes to $POC_CACHE_DIR/build.log.
    """
    _preflight()
    L = Layout(state_root(state_dir))
    with _locked(L):
        return _up(L, nodes, state_dir)


def _up(L: Layout, nodes: int, state_dir) -> ClusterInfo:
    if is_up(state_dir) and len(load_state(L).get("nodes", [])) == nodes:
        return info(state_dir)
    if _repair(L, nodes):
        return info(state_dir)
    if L.state_file.exists() or host.cgroup_pids(CGROUP_PARENT) or host.links_with_prefix(BRIDGE_PREFIX):
        _down(L)   # a half-started or crashed instance: clear it before reusing its ports and devices
    t0 = time.monotonic()
    build_times = builds.ensure_built()
    ensure_pause_image()
    for d in (L.root, L.logs, L.manifests, L.config, L.nodes_dir):
        d.mkdir(parents=True, exist_ok=True)
    names = [node_name(i) for i in range(1, nodes + 1)]
    certs = _ensure_pki(L, nodes)
    settings = {
        "node_monitor_grace_period": NODE_MONITOR_GRACE_PERIOD,
        "node_lease_duration_seconds": NODE_LEASE_DURATION_SECONDS,
        "node_status_update_frequency": NODE_STATUS_UPDATE_FREQUENCY,
        "default_not_ready_toleration_seconds": TOLERATION_SECONDS,
        "default_unreachable_toleration_seconds": TOLERATION_SECONDS,
        "cluster_cidr": CLUSTER_CIDR, "service_cidr": SERVICE_CIDR, "cluster_dns": DNS_IP,
        "kube_proxy": "none (headless services and DNS only)",
    }
    versions = {b.component: b.version for b in builds.ALL}
    state = {"components": {}, "nodes": names, "ready": False, "settings": settings, "versions": versions,
             "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "build_seconds": build_times}
    save_state(L, state)

    # host network: one bridge per node (its gateway is the node's IP), DNS on a device of its own
    Path("/proc/sys/net/ipv4/ip_forward").write_text("1")
    for i in range(1, nodes + 1):
        host.ensure_bridge(f"{BRIDGE_PREFIX}{i}", f"{node_ip(i)}/24")
    host.ensure_local_address(DNS_LINK, f"{DNS_IP}/32")
    host.ensure_forward_accept(IPTABLES_CHAIN, CLUSTER_CIDR)
    host.make_cgroup(CGROUP_PARENT)

    for fixed in (CNI_CACHE, KUBELET_FIXED_DIR):
        if not fixed.exists():
            state.setdefault("created_paths", []).append(str(fixed))
    save_state(L, state)

    # etcd, containerds
    L.etcd.mkdir(parents=True, exist_ok=True)
    _spawn(L, state, "etcd", [
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
    for i, node in enumerate(names, 1):
        cfg = components.containerd_config(L, node)
        components.cni_config(L, node, i)
        _spawn(L, state, f"containerd-{node}", ["containerd", "--config", str(cfg), "--log-level", "warn"],
               cgroup=f"containerd-{node}")
    _wait("etcd", lambda: '"health":"true"' in _http_get(f"http://127.0.0.1:{ETCD_CLIENT_PORT}/health")[1],
          60, L, ("etcd",))

    P = L.pki
    _spawn(L, state, "kube-apiserver", [
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
        "--profiling=false", "--v=1"])

    # while the apiserver starts: the pause image into every containerd
    for node in names:
        _wait(f"containerd on {node}", lambda node=node: ctr(L, node, "version", check=False).returncode == 0,
              60, L, (f"containerd-{node}",))
    import_image(PAUSE_IMAGE, state_dir=L.root, nodes=names)

    _wait("kube-apiserver /readyz",
          lambda: _https_get(f"https://127.0.0.1:{APISERVER_PORT}/readyz", certs["admin"], certs["ca"].cert)[0] == 200,
          120, L, ("kube-apiserver",))

    _spawn(L, state, "kube-controller-manager", [
        str(builds.KUBERNETES.path("kube-controller-manager")),
        f"--kubeconfig={P / 'controller-manager.kubeconfig'}",
        f"--authentication-kubeconfig={P / 'controller-manager.kubeconfig'}",
        f"--authorization-kubeconfig={P / 'controller-manager.kubeconfig'}",
        "--bind-address=127.0.0.1", f"--secure-port={KCM_PORT}", "--leader-elect=false",
        f"--root-ca-file={certs['ca'].cert}",
        f"--service-account-private-key-file={certs['sa'].key}",
        f"--cluster-signing-cert-file={certs['ca'].cert}", f"--cluster-signing-key-file={certs['ca'].key}",
        "--use-service-account-credentials=true",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        f"--node-monitor-grace-period={NODE_MONITOR_GRACE_PERIOD}",
        "--node-monitor-period=2s",
        "--profiling=false", "--v=1"])
    _spawn(L, state, "kube-scheduler", [
        str(builds.KUBERNETES.path("kube-scheduler")),
        f"--kubeconfig={P / 'scheduler.kubeconfig'}",
        f"--authentication-kubeconfig={P / 'scheduler.kubeconfig'}",
        f"--authorization-kubeconfig={P / 'scheduler.kubeconfig'}",
        "--bind-address=127.0.0.1", f"--secure-port={SCHEDULER_PORT}", "--leader-elect=false",
        "--profiling=false", "--v=1"])
    for i in range(1, nodes + 1):
        host.make_cgroup(f"{CGROUP_PARENT}/{node_name(i)}")
        components.kubelet_config(L, node_name(i), i, certs)
        _start_kubelet(L, state, i)
    _spawn(L, state, "coredns", [str(builds.COREDNS.path("coredns")), "-conf", str(components.coredns_config(L))])

    # JobSet and Kueue: CRDs first, then the controllers, then their webhook configurations
    _kubectl(L, "apply", "--server-side", "--force-conflicts", "-f", str(components.crd_manifests(L)), timeout=120)
    _kubectl(L, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all", timeout=90)
    jobset_env = {"KUBECONFIG": str(P / "jobset.kubeconfig")}
    _spawn(L, state, "jobset", [str(builds.JOBSET.path("jobset-manager")), f"--config={components.jobset_config(L)}",
                                "--zap-log-level=info"], extra_env=jobset_env)
    components.install_kueue_metrics_cert(L, state, certs)
    kueue_env = {"KUBECONFIG": str(P / "kueue.kubeconfig")}
    _spawn(L, state, "kueue", [str(builds.KUEUE.path("kueue-manager")), f"--config={components.kueue_config(L)}",
                               "--feature-gates=VisibilityOnDemand=false", "--zap-log-level=2"], extra_env=kueue_env)

    all_names = tuple(state["components"])
    _wait(f"{nodes} nodes Ready", lambda: _nodes_ready(L, nodes), 180, L, all_names, interval=1)
    _wait("kube-controller-manager /healthz",
          lambda: _https_get(f"https://127.0.0.1:{KCM_PORT}/healthz")[0] == 200, 60, L, all_names)
    _wait("kube-scheduler /healthz",
          lambda: _https_get(f"https://127.0.0.1:{SCHEDULER_PORT}/healthz")[0] == 200, 60, L, all_names)
    _wait("JobSet readyz", lambda: _http_get(f"http://127.0.0.1:{JOBSET_PORTS['health']}/readyz")[0] == 200,
          120, L, all_names)
    _wait("Kueue readyz", lambda: _http_get(f"http://127.0.0.1:{KUEUE_PORTS['health']}/readyz")[0] == 200,
          120, L, all_names)
    _kubectl(L, "apply", "--server-side", "--force-conflicts", "-f", str(components.webhook_manifests(L, certs)))
    _wait("JobSet's webhook to reject a bad JobSet", lambda: _jobset_webhook_answers(L), 60, L, all_names)
    _wait("Kueue's webhook to suspend a queued Job", lambda: _kueue_webhook_answers(L), 60, L, all_names)
    _wait("CoreDNS ready", lambda: _http_get(f"http://127.0.0.1:{COREDNS_READY}/ready")[0] == 200, 60, L, all_names)
    _test_pod_runs(L)

    shutil.copyfile(L.admin_kubeconfig, L.kubeconfig)
    L.kubeconfig.chmod(0o600)
    state["ready"] = True
    state["up_seconds"] = round(time.monotonic() - t0, 1)
    save_state(L, state)
    return ClusterInfo(kubeconfig=L.kubeconfig, state_dir=L.root, server=f"https://127.0.0.1:{APISERVER_PORT}",
                       nodes=tuple(names), versions=versions, settings=settings, up_seconds=state["up_seconds"])


def status(state_dir: str | Path | None = None) -> list[ComponentStatus]:
    L = Layout(state_root(state_dir))
    state = load_state(L)
    return [ComponentStatus(name=n, pid=e["pid"], alive=_alive(e), log=e["log"])
            for n, e in state["components"].items()]


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
    if _alive(entry):
        os.kill(entry["pid"], 9)
        for _ in range(50):
            if not _alive(entry):
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
    if entry and _alive(entry):
        return entry["pid"]
    return _start_kubelet(L, state, i)


def down(state_dir: str | Path | None = None) -> dict:
    """Stop everything `up` started and remove its mounts, devices, iptables rules and cgroups.

    Keeps the certificates and each node's containerd image store (so images are not re-imported).
    Returns what was found and removed.
    """
    L = Layout(state_root(state_dir))
    with _locked(L):
        return _down(L)


def _down(L: Layout) -> dict:
    state = load_state(L)
    comps = state.get("components", {})
    report = {"stopped": [], "killed_in_cgroups": 0, "unmounted_left": [], "netns_removed": [], "links_removed": []}
    order = ["kueue", "jobset", "coredns", "kube-scheduler", "kube-controller-manager"]
    order += [n for n in comps if n.startswith("kubelet-")]
    for name in order:
        entry = comps.get(name)
        if entry:
            host.stop_pid(entry["pid"], entry.get("exe"), grace=5)
            report["stopped"].append(name)
    # containers: delete them through each containerd while it runs, so the image store stays clean
    container_ids: set[str] = set()
    for name, entry in comps.items():
        if name.startswith("containerd-") and _alive(entry):
            node = name[len("containerd-"):]
            container_ids.update(_delete_all_containers(L, node))
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
    if not host.other_kubelets_running(set()):
        report["iptables_removed"] = host.remove_kubelet_iptables()
    # kubelets link container logs from /var/log/containers (a fixed path) into their podLogsDir
    containers_logs = Path("/var/log/containers")
    if containers_logs.is_dir():
        for link in containers_logs.iterdir():
            if link.is_symlink() and os.readlink(link).startswith(str(L.nodes_dir)):
                link.unlink()
    host.remove_cgroup_tree(CGROUP_PARENT)
    # runtime state goes; certificates and image stores stay
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
    report["cni_cache_removed"] = len(_remove_cni_cache(container_ids))
    for path in state.get("created_paths", []):
        shutil.rmtree(path, ignore_errors=True)
    if L.state_file.exists():
        L.state_file.unlink()
    return report


def _delete_all_containers(L: Layout, node: str) -> list[str]:
    """Kill and remove every container (pods and sandboxes) in one node's containerd; their ids."""
    out = ctr(L, node, "containers", "ls", "-q", check=False, timeout=30)
    ids = out.stdout.decode().split()
    for cid in ids:
        ctr(L, node, "tasks", "kill", "-s", "SIGKILL", cid, check=False, timeout=30)
    for cid in ids:
        ctr(L, node, "tasks", "delete", "-f", cid, check=False, timeout=30)
        ctr(L, node, "containers", "delete", cid, check=False, timeout=30)
    return ids


# Fixed host paths the components write to whatever their configuration: libcni's result cache
# (containerd 1.6 has no setting for it) and the kubelet's device-plugin socket directory
# (hard-coded in the device plugin API). `up` records those it creates; `down` removes them.
CNI_CACHE = Path("/var/lib/cni")
KUBELET_FIXED_DIR = Path("/var/lib/kubelet")


def _remove_cni_cache(container_ids: set[str]) -> list[str]:
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


def main(argv: list[str] | None = None) -> int:
    """python -m harness.clusters.native_k8s up [--nodes N] | down | status | import IMAGE"""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m harness.clusters.native_k8s")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p_up = sub.add_parser("up")
    p_up.add_argument("--nodes", type=int, default=3)
    sub.add_parser("down")
    sub.add_parser("status")
    p_imp = sub.add_parser("import")
    p_imp.add_argument("image")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "up":
            ci = up(nodes=args.nodes)
            print(json.dumps(_asdict(ci), indent=2))
        elif args.cmd == "down":
            print(json.dumps(down(), indent=2))
        elif args.cmd == "status":
            for s in status():
                print(f"{s.name:28} {s.pid or '-':>8} {'alive' if s.alive else 'DEAD ':5} {s.log}")
        elif args.cmd == "import":
            print(json.dumps(import_image(args.image), indent=2))
    except PocError as e:
        print(f"ERROR {e.message}")
        if e.tip:
            print(f"TIP {e.tip}")
        return 1
    return 0


def describe() -> dict:
    """Versions and settings, without starting anything (for reports)."""
    return {"versions": {b.component: b.version for b in builds.ALL}}


def _asdict(ci: ClusterInfo) -> dict:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(ci).items()}


if __name__ == "__main__":
    raise SystemExit(main())
