"""The native Kubernetes cluster (harness/clusters/native_k8s.py) against real upstream components.

Needs root, Docker, containerd, Debian's CNI plugins and busybox-static; the first run builds the
Go components (long). Tests run in file order; the last one takes the cluster down and checks
that nothing is left.
"""
from __future__ import annotations

import ipaddress
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.k8s]

if os.geteuid() != 0:  # pragma: no cover - depends on the machine
    pytest.skip("the native cluster needs root", allow_module_level=True)

k8s = pytest.importorskip("kubernetes")
from kubernetes import client, config  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

from harness.clusters import native_k8s as nk  # noqa: E402
from harness.clusters.k8s import host  # noqa: E402
from harness.clusters.k8s.gpu_shape import GPU_TOLERATION  # noqa: E402

NODES = 3
# every node carries the GPU pool taint (gpu_shape.py): each pod here tolerates it
TOLERATIONS = [GPU_TOLERATION]


def _worker_image(build: bool = False) -> str | None:
    """The shared worker image (Python + torch); built (cached) when `build`, else only if present."""
    from harness.clusters import images
    ref = images.worker_ref()
    if images.image_exists(ref):
        return ref
    return images.ensure_worker_image() if build else None


def wait_for(what: str, fn, timeout: float, interval: float = 1.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            got = fn()
            if got:
                return got
        except ApiException as e:
            last = e
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {what} (last: {last})")


@pytest.fixture(scope="session")
def cluster():
    t0 = time.monotonic()
    info = nk.up(nodes=NODES)
    print(f"\nnative cluster up in {time.monotonic() - t0:.1f}s (reported {info.up_seconds}s, reused={info.reused})")
    nk.import_image(nk.ensure_busybox_image())
    worker = _worker_image()
    if worker:
        t1 = time.monotonic()
        print(f"worker image {worker}: {nk.import_image(worker)} in {time.monotonic() - t1:.1f}s")
    yield info
    nk.down()


@pytest.fixture(scope="session")
def api(cluster):
    return config.new_client_from_config(config_file=str(cluster.kubeconfig))


@pytest.fixture()
def namespace(api):
    name = f"poc-test-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": name}})
    wait_for("the namespace's default service account",
             lambda: any(sa.metadata.name == "default" for sa in core.list_namespaced_service_account(name).items), 60)
    yield name
    core.delete_namespace(name, propagation_policy="Background")


def _node_ready(core, name: str) -> str:
    node = core.read_node(name)
    return next(c.status for c in node.status.conditions if c.type == "Ready")


def _queue(api, ns: str, name: str, cpu: str) -> None:
    """ResourceFlavor + ClusterQueue(name, cpu quota) + LocalQueue(name) in ns."""
    co = client.CustomObjectsApi(api)
    g, v = "kueue.x-k8s.io", "v1beta1"
    try:
        co.create_cluster_custom_object(g, v, "resourceflavors",
                                        {"apiVersion": f"{g}/{v}", "kind": "ResourceFlavor",
                                         "metadata": {"name": "poc-default"}})
    except ApiException as e:
        if e.status != 409:
            raise
    co.create_cluster_custom_object(g, v, "clusterqueues", {
        "apiVersion": f"{g}/{v}", "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["cpu", "memory"],
            "flavors": [{"name": "poc-default", "resources": [
                {"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "16Gi"}]}]}]}})
    co.create_namespaced_custom_object(g, v, ns, "localqueues", {
        "apiVersion": f"{g}/{v}", "kind": "LocalQueue", "metadata": {"name": name, "namespace": ns},
        "spec": {"clusterQueue": name}})


def _delete_cq(api, name: str) -> None:
    try:
        client.CustomObjectsApi(api).delete_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues", name)
    except ApiException:
        pass


# ---------------------------------------------------------------------------------------------

def test_cluster_is_up(cluster, api):
    core = client.CoreV1Api(api)
    nodes = core.list_node().items
    assert sorted(n.metadata.name for n in nodes) == sorted(cluster.nodes)
    assert all(_node_ready(core, n.metadata.name) == "True" for n in nodes)
    assert all(s.alive for s in nk.status()), nk.status()
    assert cluster.settings["node_monitor_grace_period"] == nk.NODE_MONITOR_GRACE_PERIOD
    version = client.VersionApi(api).get_code()
    assert version.git_version == nk.builds.KUBERNETES_VERSION
    # a Service address kube-proxy has no rule for stays on this machine (the local DNS device)
    unused = str(ipaddress.ip_network(nk.SERVICE_CIDR)[-2])
    route = subprocess.run(["ip", "route", "get", unused], capture_output=True, text=True, check=True).stdout
    assert f"dev {nk.DNS_LINK}" in route, route


def test_lost_node_pods_replaced_on_spare(cluster, api, namespace):
    """(a) kill one node's kubelet: the node goes NotReady and the Deployment's pod moves."""
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    labels = {"app": "survivor"}
    apps.create_namespaced_deployment(namespace, {
        "metadata": {"name": "survivor"},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"terminationGracePeriodSeconds": 0, "tolerations": TOLERATIONS, "containers": [
                {"name": "c", "image": nk.BUSYBOX_IMAGE, "imagePullPolicy": "Never",
                 "command": ["sleep", "3600"]}]}}}})

    def running_pods():
        return [p for p in core.list_namespaced_pod(namespace, label_selector="app=survivor").items
                if p.status.phase == "Running" and not p.metadata.deletion_timestamp]

    first = wait_for("the first pod to run", running_pods, 120)[0]
    lost = first.spec.node_name
    t_kill = time.monotonic()
    nk.stop_kubelet(lost)
    try:
        wait_for(f"{lost} to go NotReady", lambda: _node_ready(core, lost) != "True", 90)
        t_notready = time.monotonic() - t_kill
        moved = wait_for("a replacement pod on another node",
                         lambda: [p for p in running_pods() if p.spec.node_name != lost], 180)
        t_moved = time.monotonic() - t_kill
        print(f"\n{lost}: NotReady after {t_notready:.1f}s, pod running on {moved[0].spec.node_name} after "
              f"{t_moved:.1f}s (grace {nk.NODE_MONITOR_GRACE_PERIOD}, toleration {nk.TOLERATION_SECONDS}s)")
        assert moved[0].spec.node_name in cluster.nodes
    finally:
        nk.start_kubelet(lost)
        wait_for(f"{lost} Ready again", lambda: _node_ready(core, lost) == "True", 120)


def _jobset(name: str, queue: str, image: str, command: list[str], pods: int = 2) -> dict:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"failurePolicy": {"maxRestarts": 0}, "replicatedJobs": [{
            "name": "w", "replicas": 1, "template": {"spec": {
                "parallelism": pods, "completions": pods, "completionMode": "Indexed", "backoffLimit": 0,
                "template": {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 5,
                                      "tolerations": TOLERATIONS, "containers": [{
                                          "name": "w", "image": image, "imagePullPolicy": "Never",
                                          "command": command,
                                          "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}}}}}]},
    }


def _wait_jobset_done(api, ns: str, name: str, timeout: float) -> str:
    co = client.CustomObjectsApi(api)

    def done():
        js = co.get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", ns, "jobsets", name)
        for c in js.get("status", {}).get("conditions", []):
            if c["type"] in ("Completed", "Failed") and c["status"] == "True":
                return c["type"]
        return None

    return wait_for(f"JobSet {name} to finish", done, timeout, interval=2)


def _endpoint_slices(api, ns: str) -> list[str]:
    """Each EndpointSlice's endpoints as 'hostname ip ready', for a failure message."""
    slices = client.DiscoveryV1Api(api).list_namespaced_endpoint_slice(ns).items
    return [f"{s.metadata.name}: " + ", ".join(f"{e.hostname} {e.addresses} ready={e.conditions.ready}"
                                              for e in s.endpoints or []) for s in slices]


def _pod_logs(api, ns: str, selector: str) -> dict[str, str]:
    core = client.CoreV1Api(api)
    return {p.metadata.name: core.read_namespaced_pod_log(p.metadata.name, ns)
            for p in core.list_namespaced_pod(ns, label_selector=selector).items}


def _pod_states(api, ns: str, selector: str) -> dict[str, str]:
    """Each pod's node, phase and container end state: what a failure message needs besides logs."""
    core = client.CoreV1Api(api)
    out = {}
    for p in core.list_namespaced_pod(ns, label_selector=selector).items:
        ends = [f"{c.name}: {c.state.terminated.reason} exit {c.state.terminated.exit_code}"
                for c in (p.status.container_statuses or []) if c.state and c.state.terminated]
        out[p.metadata.name] = f"node={p.spec.node_name} phase={p.status.phase} {'; '.join(ends)}"
    return out


def test_jobset_pods_resolve_each_other_by_dns(api, namespace):
    """(b, part 1) both pods of a JobSet admitted by Kueue find each other by their DNS names."""
    _queue(api, namespace, f"cq-{namespace}", "4")
    try:
        peer = "dns-w-0-{}.dns." + namespace + ".svc.cluster.local"
        # Each pod stays up 45 s after it has resolved both names, so that a slower peer can still
        # resolve it (a CI saw a pod fail when its peer left 20 s after resolving). A failing pod
        # prints its last nslookup answer, and the assertion shows the Service's EndpointSlices,
        # so the log says why. (the busybox image has no /tmp: answers are kept in shell variables)
        resolved = ("echo RESOLVED $(hostname) $(date +%T) after $i tries; echo \"$b\"; sleep 45;"
                    " echo END $(date +%T); exit 0")
        script = ("echo START $(date +%T); for i in $(seq 120); do a=$(nslookup " + peer.format(0)
                  + " 2>&1) && b=$(nslookup " + peer.format(1) + " 2>&1) && { " + resolved + "; };"
                  " sleep 1; done; echo UNRESOLVED $(hostname); echo \"$a\"; echo \"$b\"; exit 1")
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets",
            _jobset("dns", f"cq-{namespace}", nk.BUSYBOX_IMAGE, ["sh", "-c", script]))
        result = _wait_jobset_done(api, namespace, "dns", 360)
        logs = _pod_logs(api, namespace, "jobset.sigs.k8s.io/jobset-name=dns")
        assert result == "Completed", (logs, _pod_states(api, namespace, "jobset.sigs.k8s.io/jobset-name=dns"),
                                       _endpoint_slices(api, namespace))
        assert len(logs) == 2 and all("RESOLVED" in text for text in logs.values()), logs
    finally:
        _delete_cq(api, f"cq-{namespace}")


ALLREDUCE = r"""
import os, socket, time, torch, torch.distributed as dist
rank = int(os.environ["JOB_COMPLETION_INDEX"])
master = "ar-w-0-0.ar"
for _ in range(120):
    try:
        socket.gethostbyname(master); break
    except OSError:
        time.sleep(1)
dist.init_process_group("gloo", init_method=f"tcp://{master}:29500", rank=rank, world_size=2)
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
dist.barrier()
print(f"ALLREDUCE_OK rank={rank} sum={t.item()} host={socket.gethostname()}", flush=True)
dist.destroy_process_group()
assert t.item() == 3.0
"""


def test_jobset_gloo_all_reduce_through_kueue(api, namespace):
    """(b, part 2) a 2-pod JobSet through a Kueue LocalQueue completes a real gloo all_reduce."""
    worker = _worker_image(build=True)
    t0 = time.monotonic()
    print(f"\nworker image {worker}: {nk.import_image(worker)} in {time.monotonic() - t0:.1f}s")
    _queue(api, namespace, f"cq-{namespace}", "4")
    try:
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets",
            _jobset("ar", f"cq-{namespace}", worker, ["python3", "-c", ALLREDUCE]))
        result = _wait_jobset_done(api, namespace, "ar", 600)
        logs = _pod_logs(api, namespace, "jobset.sigs.k8s.io/jobset-name=ar")
        assert result == "Completed", logs
        assert sum("ALLREDUCE_OK" in t and "sum=3.0" in t for t in logs.values()) == 2, logs
        wl = client.CustomObjectsApi(api).list_namespaced_custom_object("kueue.x-k8s.io", "v1beta1", namespace,
                                                                        "workloads")["items"]
        assert wl and wl[0]["status"].get("admission"), wl
    finally:
        _delete_cq(api, f"cq-{namespace}")


def test_bad_jobset_rejected_by_webhook(api, namespace):
    """(c) JobSet's validating webhook rejects a JobSet whose successPolicy names a missing job."""
    bad = _jobset("bad", "none", nk.BUSYBOX_IMAGE, ["true"])
    del bad["metadata"]["labels"]
    bad["spec"]["successPolicy"] = {"operator": "All", "targetReplicatedJobs": ["does-not-exist"]}
    with pytest.raises(ApiException) as err:
        client.CustomObjectsApi(api).create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", namespace,
                                                                    "jobsets", bad)
    assert "denied the request" in err.value.body and "does-not-exist" in err.value.body, err.value.body


def _job(name: str, labels: dict | None = None) -> dict:
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "tolerations": TOLERATIONS,
                "containers": [{"name": "c", "image": nk.BUSYBOX_IMAGE, "imagePullPolicy": "Never",
                                "command": ["true"], "resources": {"requests": {"cpu": "100m"}}}]}}}}


def test_kueue_leaves_unlabelled_job_alone_and_holds_queued_job(api, namespace):
    """(d) without a queue label a Job runs at once; with one it is suspended until Kueue admits it."""
    batch = client.BatchV1Api(api)
    free = batch.create_namespaced_job(namespace, _job("free"))
    assert not free.spec.suspend

    cq = f"held-{namespace}"
    _queue(api, namespace, cq, "0")          # no quota: nothing can be admitted yet
    try:
        held = batch.create_namespaced_job(namespace, _job("held", {"kueue.x-k8s.io/queue-name": cq}))
        assert held.spec.suspend is True
        wait_for("the unlabelled Job to succeed",
                 lambda: (batch.read_namespaced_job("free", namespace).status.succeeded or 0) >= 1, 120)
        time.sleep(5)
        assert batch.read_namespaced_job("held", namespace).spec.suspend is True
        assert not client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector="job-name=held").items
        client.CustomObjectsApi(api).patch_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta1", "clusterqueues", cq,
            {"spec": {"resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{
                "name": "poc-default", "resources": [{"name": "cpu", "nominalQuota": "1"},
                                                     {"name": "memory", "nominalQuota": "16Gi"}]}]}]}})
        wait_for("the queued Job to be admitted and succeed",
                 lambda: (batch.read_namespaced_job("held", namespace).status.succeeded or 0) >= 1, 120)
        assert batch.read_namespaced_job("held", namespace).spec.suspend is False
    finally:
        _delete_cq(api, cq)


def test_down_leaves_nothing(cluster):
    """(e) after down: no process, mount, network device, iptables chain or cgroup of the cluster."""
    pids = [s.pid for s in nk.status()]
    created = nk.load_state(nk.Layout(nk.state_root())).get("created_paths", [])
    report = nk.down()
    root = cluster.state_dir
    assert not [p for p in pids if host.pid_alive(p)], report
    assert not host.cgroup_pids(nk.CGROUP_PARENT)
    assert not any((h / nk.CGROUP_PARENT).exists() for h in host.hierarchies())
    assert not host.mounts_under([Path(root)]), host.mounts_under([Path(root)])
    assert not host.netns_with_addresses_in("10.244.")
    assert not host.links_with_prefix(nk.BRIDGE_PREFIX) and not host.link_exists(nk.DNS_LINK)
    veths = [p.name for p in Path("/sys/class/net").iterdir()
             if (p / "master").exists() and (p / "master").resolve().name.startswith(nk.BRIDGE_PREFIX)]
    assert not veths
    assert not host.iptables_chain_exists(nk.IPTABLES_CHAIN)
    if not host.other_kubelets_running(set()):
        assert not [c for c in host.KUBELET_CHAINS if host.iptables_chain_exists(c)]
        assert not [c for c in host.KUBELET_CHAINS if host.iptables_chain_exists(c, "mangle")]
    assert not nk.status()
    assert not [p for p in created if Path(p).exists()], created
    results = Path("/var/lib/cni/results")
    if results.is_dir():
        assert not [f.name for f in results.iterdir() if '"poc-native"' in f.read_text()]
