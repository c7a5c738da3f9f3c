"""What the Kubernetes drill tests share: a queue whose quota fits one small JobSet, a running JobSet
admitted by Kueue and a same-shape one pending behind it, a probe thread, and the checks after."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from kubernetes import client as kc
from kubernetes import config as kconfig
from kubernetes.client.rest import ApiException

from harness.backends.base import Handle
from harness.backends.k8s.api import K8sClient
from harness.clusters import native_k8s as nk
from harness.clusters.k8s.gpu_shape import GPU_TOLERATION
from harness.render import jobset as rj

NS = "poc-drill-test"
RF, CQ, LQ = "poc-drill-flavor", "poc-drill-cq", "poc-drill-lq"
KUEUE = ("kueue.x-k8s.io", "v1beta1")
JOBSET = ("jobset.x-k8s.io", "v1alpha2")
PODS, CPU_M = 2, 100          # each JobSet: 2 pods x 100m; the queue's quota (200m) fits one


def wait_for(what: str, fn, timeout: float, interval: float = 0.5):
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


def jobset(name: str) -> dict:
    pod = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "tolerations": [GPU_TOLERATION],
           "containers": [{"name": "c", "image": nk.BUSYBOX_IMAGE, "imagePullPolicy": "Never",
                           "command": ["sleep", "3600"], "resources": {"requests": {"cpu": f"{CPU_M}m"}}}]}
    return {"apiVersion": "/".join(JOBSET), "kind": "JobSet",
            "metadata": {"name": name, "namespace": NS, "labels": {rj.QUEUE_LABEL: LQ}},
            "spec": {"suspend": True, "replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {
                "parallelism": PODS, "completions": PODS, "backoffLimit": 0, "template": {"spec": pod}}}}]}}


class Bed:
    """The queue, the running JobSet `a` and the pending `b`; `close()` removes them all."""

    def __init__(self, info):
        self.info = info
        api = kconfig.new_client_from_config(config_file=str(info.kubeconfig))
        self.core, self.co = kc.CoreV1Api(api), kc.CustomObjectsApi(api)
        self.backend = SimpleNamespace(local=True, client=K8sClient(str(info.kubeconfig)),
                                       cfg=SimpleNamespace(namespace=NS, local_queue=LQ))
        self.handles: dict[str, Handle] = {}

    def open(self) -> Bed:
        nk.ensure_busybox_image()
        nk.import_image(nk.BUSYBOX_IMAGE)
        self.close()
        self.core.create_namespace({"metadata": {"name": NS}})
        self.co.create_cluster_custom_object(*KUEUE, "resourceflavors", {
            "apiVersion": "/".join(KUEUE), "kind": "ResourceFlavor", "metadata": {"name": RF}, "spec": {}})
        self.co.create_cluster_custom_object(*KUEUE, "clusterqueues", {
            "apiVersion": "/".join(KUEUE), "kind": "ClusterQueue", "metadata": {"name": CQ},
            "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
                     "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                         {"name": RF, "resources": [{"name": "cpu", "nominalQuota": f"{PODS * CPU_M}m"}]}]}]}})
        self.co.create_namespaced_custom_object(*KUEUE, NS, "localqueues", {
            "apiVersion": "/".join(KUEUE), "kind": "LocalQueue", "metadata": {"name": LQ, "namespace": NS},
            "spec": {"clusterQueue": CQ}})
        wait_for("the default service account", lambda: self.core.read_namespaced_service_account("default", NS), 30)
        self.submit("drill-a")
        wait_for("drill-a's pods Running", lambda: len(self.running("drill-a")) == PODS, 90)
        self.submit("drill-b")
        wait_for("drill-b's Workload pending in Kueue", lambda: self.workload("drill-b") is not None
                 and not self.admitted("drill-b"), 30)
        return self

    def submit(self, name: str) -> None:
        for _ in range(20):   # the LocalQueue may take a moment to be known to Kueue's webhook
            try:
                js = self.co.create_namespaced_custom_object(*JOBSET, NS, "jobsets", jobset(name))
                break
            except ApiException as e:
                if e.status not in (400, 403, 500, 503):
                    raise
                time.sleep(1)
        else:
            pytest.fail(f"could not create JobSet {name}")
        self.handles[name] = Handle("k8s", name, [f"{NS}/{name}"], time.time(),
                                    data={"namespace": NS, "name": name, "uid": js["metadata"]["uid"]})

    def pods(self, name: str) -> list:
        return self.core.list_namespaced_pod(NS, label_selector=f"{rj.JOBSET_NAME_LABEL}={name}").items

    def running(self, name: str) -> list:
        return [p for p in self.pods(name) if p.status.phase == "Running"]

    def workload(self, name: str) -> dict | None:
        uid = self.handles[name].data["uid"]
        for w in self.co.list_namespaced_custom_object(*KUEUE, NS, "workloads")["items"]:
            if any(r["uid"] == uid for r in w["metadata"].get("ownerReferences", [])):
                return w
        return None

    def admitted(self, name: str) -> bool:
        w = self.workload(name) or {}
        return any(c["type"] == "Admitted" and c["status"] == "True" for c in w.get("status", {}).get("conditions", []))

    def delete(self, name: str) -> None:
        self.co.delete_namespaced_custom_object(*JOBSET, NS, "jobsets", name, propagation_policy="Foreground")

    def close(self) -> None:
        try:
            self.core.delete_namespace(NS, grace_period_seconds=0)
        except ApiException as e:
            if e.status != 404:
                raise
        wait_for(f"namespace {NS} to go", lambda: NS not in {n.metadata.name for n in self.core.list_namespace().items},
                 90)
        for plural, name in (("clusterqueues", CQ), ("resourceflavors", RF)):
            try:
                self.co.delete_cluster_custom_object(*KUEUE, plural, name)
            except ApiException as e:
                if e.status != 404:
                    raise
        wait_for("the drill's ClusterQueue and ResourceFlavor to go", lambda: not any(
            n in {o["metadata"]["name"] for o in self.co.list_cluster_custom_object(*KUEUE, p)["items"]}
            for p, n in (("clusterqueues", CQ), ("resourceflavors", RF))), 60)


class Probes(threading.Thread):
    """try_submit and try_status every `every` s, as the runner's probe thread does: (t, what, refusal)."""

    def __init__(self, drill, every: float = 0.5):
        super().__init__(daemon=True)
        self.drill, self.every = drill, every
        self.seen: list[tuple[float, str, str | None]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.seen.append((time.time(), "submit", self.drill.try_submit()))
            self.seen.append((time.time(), "status", self.drill.try_status()))
            self._halt.wait(self.every)

    def stop(self) -> None:
        self._halt.set()
        self.join(30)

    def refused_s(self, what: str) -> float:
        """Seconds from each first refusal to the next answer, summed."""
        total, since = 0.0, None
        for t, w, msg in self.seen:
            if w != what:
                continue
            if msg is not None and since is None:
                since = t
            elif msg is None and since is not None:
                total, since = total + t - since, None
        return round(total, 1)

    def refusals(self, what: str) -> list[str]:
        return sorted({msg[:160] for _, w, msg in self.seen if w == what and msg})


def check_survived(before: dict, after: dict, run: str) -> None:
    """The running JobSet's pods are the same pods, none restarted, and the JobSet is still active."""
    b, a = before[run], after[run]
    assert a["jobset"]["uid"] == b["jobset"]["uid"]
    assert not [c for c in a["jobset"]["conditions"] if c["type"] in ("Completed", "Failed") and c["status"] == "True"]
    assert a["jobset"]["restarts"] == 0
    assert {p["uid"] for p in a["pods"]} == {p["uid"] for p in b["pods"]}
    assert all(p["restarts"] == 0 and p["phase"] == "Running" for p in a["pods"]), a["pods"]
    assert [w["uid"] for w in a["workloads"]] == [w["uid"] for w in b["workloads"]]
