"""Ownership on a shared namespace and a shared cluster's nodes, on the native cluster (JobSet + Kueue).

* Two users, one campaign name (the default one repeats), one namespace, the same run id: Alice's run
  (its JobSet and ConfigMap through the real backend, its serving Deployment/Service/ConfigMap through the
  real serving code, a cleanup pod of hers on the claim) and Bob's resume, `poc cleanup` and cleanup pod.
  Nothing of Alice's is deleted or adopted by Bob: the objects keep their uids. Then Alice's own
  `poc cleanup` removes hers. The namespace has a claim (the cleanup pods' volume) and no LocalQueue, so
  Kueue never admits the JobSets: the API objects are the point, not a training run.
* An operator's cordon after a lose_node fault survives `poc cleanup`: a real JobSet's pod is running,
  the fault cordons its node (as on a cluster without the native cluster's power control), the harness
  dies, an operator runs `kubectl cordon` on that node; `poc cleanup` lifts the harness's own cordon and
  leaves the operator's, saying so.
* An in-flight record naming a checkpoint path outside the checkpoint root, or no cluster, is refused by
  `poc cleanup` with ERROR/TIP, and nothing is removed.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from _native import native_cluster
from _poc import poc_argv, write_config

pytestmark = [pytest.mark.integration, pytest.mark.k8s]

if os.geteuid() != 0:  # pragma: no cover - depends on the machine
    pytest.skip("the native cluster needs root", allow_module_level=True)

from harness import config  # noqa: E402
from harness.backends.base import Handle  # noqa: E402
from harness.backends.k8s import KubernetesBackend, faults  # noqa: E402
from harness.backends.k8s.api import JOBSETS  # noqa: E402
from harness.clusters.images import worker_ref  # noqa: E402
from harness.clusters.k8s.gpu_shape import GPU_TOLERATION  # noqa: E402
from harness.errors import BackendError, SubmitError  # noqa: E402
from harness.render import cleanup as rc  # noqa: E402
from harness.render.owned_dir import OWNER_MARK  # noqa: E402
from harness.serve.k8s import K8sServe  # noqa: E402
from harness.spec import build, campaign_dir  # noqa: E402
from harness.store import Store  # noqa: E402

RUN = "k8s-clean-01"


def _admin(kubeconfig):
    from kubernetes import client
    from kubernetes import config as kconfig
    api = kconfig.new_client_from_config(config_file=str(kubeconfig))
    return api, client.CoreV1Api(api), client.AppsV1Api(api)


@pytest.fixture(scope="module")
def shared_ns(tmp_path_factory):
    """(namespace, claim, the claim's directory, admin kubeconfig): a namespace with a claim of this
    machine's directory (the native kubelets all run here) and no LocalQueue."""
    from harness.clusters import images, native_k8s
    info = native_cluster()
    native_k8s.import_image(images.ensure_worker_image())   # the cleanup pods run the worker image
    api, core, _ = _admin(info.kubeconfig)
    suffix = uuid.uuid4().hex[:6]
    ns, pv, pvc = f"poc-owners-{suffix}", f"poc-owners-{suffix}", "team-ckpt"
    root = tmp_path_factory.mktemp("claim")
    core.create_namespace({"metadata": {"name": ns, "labels": {"poc/test": "ownership"}}})
    core.create_persistent_volume({
        "metadata": {"name": pv, "labels": {"poc/test": "ownership"}},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
                 "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": str(root), "type": "Directory"},
                 "claimRef": {"namespace": ns, "name": pvc}}})
    try:
        core.create_namespaced_persistent_volume_claim(ns, {
            "metadata": {"name": pvc},
            "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": pv,
                     "resources": {"requests": {"storage": "1Gi"}}}})
        deadline = time.monotonic() + 60
        while (core.read_namespaced_persistent_volume_claim(pvc, ns).status.phase != "Bound"
               or not [s for s in core.list_namespaced_service_account(ns).items if s.metadata.name == "default"]):
            assert time.monotonic() < deadline, f"claim {ns}/{pvc} not bound in 60 s"
            time.sleep(0.5)
        yield ns, pvc, root, info.kubeconfig
    finally:
        core.delete_namespace(ns)
        core.delete_persistent_volume(pv)
        api.close()


def _user(tmp_path: Path, who: str, campaign: str, shared_ns) -> tuple[Path, Path, Store, config.Config]:
    """A user's config file, results dir and opened store: the same campaign name, each its own key."""
    ns, pvc, _root, kubeconfig = shared_ns
    data = {"campaign": campaign, "platforms": ["k8s"], "faults": [], "repetitions": 0,
            "resources": {"nodes": 1, "memory_mb": 512},
            "kubernetes": {"kubeconfig": str(kubeconfig), "namespace": ns, "local_queue": "none-in-this-namespace",
                           "image": worker_ref(), "checkpoint_pvc": pvc, "pod": {"tolerations": [GPU_TOLERATION]}}}
    cfg_path = write_config(tmp_path / f"{who}.yaml", data)
    cfg = config.from_mapping(data)
    store = Store(tmp_path / who, campaign)
    store.open(cfg.config_hash(), cfg.redacted(), resume=False)
    return cfg_path, tmp_path / who, store, cfg


def _spec(cfg, store):
    return replace(build(cfg, "k8s", RUN, None), owner=store.owner_id, owner_key=store.owner_key)


def _cleanup(cfg_path: Path, results: Path) -> subprocess.CompletedProcess:
    return subprocess.run(poc_argv("cleanup", "--config", str(cfg_path), "--results", str(results), "--json"),
                          capture_output=True, text=True, timeout=300, check=False)


def _uids(core, apps, co, ns: str) -> dict[str, str]:
    """Every object of the namespace the harness made, by kind and name: its uid and owner label."""
    out = {}
    for kind, items in (("JobSet", co.list_namespaced_custom_object(*JOBSETS[:2], ns, JOBSETS.plural)["items"]),
                        ("ConfigMap", [o.to_dict() for o in core.list_namespaced_config_map(ns).items]),
                        ("Deployment", [o.to_dict() for o in apps.list_namespaced_deployment(ns).items]),
                        ("Service", [o.to_dict() for o in core.list_namespaced_service(ns).items]),
                        ("Pod", [o.to_dict() for o in core.list_namespaced_pod(
                            ns, label_selector="poc/role=cleanup").items if o.metadata.deletion_timestamp is None])):
        for o in items:
            meta = o["metadata"]
            labels = meta.get("labels") or {}
            if "poc/run-id" in labels:
                out[f"{kind}/{meta['name']}"] = (meta["uid"], labels.get("poc/owner"))
    return out


def test_two_users_one_campaign_name_one_namespace_touch_only_their_own(tmp_path, shared_ns):
    from kubernetes import client

    ns, pvc, root, kubeconfig = shared_ns
    name = f"smoke-{os.getpid() % 100000}"                   # both users' campaign name
    a_cfg_path, a_results, alice, a_cfg = _user(tmp_path, "alice", name, shared_ns)
    b_cfg_path, b_results, bob, b_cfg = _user(tmp_path, "bob", name, shared_ns)
    assert alice.owner_id != bob.owner_id
    api, core, apps = _admin(kubeconfig)
    co = client.CustomObjectsApi(api)
    a_be, b_be = KubernetesBackend.from_config(a_cfg), KubernetesBackend.from_config(b_cfg)
    try:
        # Alice: a run (JobSet + ConfigMap, its directory prepared on the claim), its serving objects, and
        # a cleanup pod of hers on the claim (as mid-cleanup), each recorded as the harness records them
        a_spec = _spec(a_cfg, alice)
        alice.mark_inflight(a_be.intent(a_spec, a_be.render(a_spec)).to_json())
        mine = a_be.submit(a_spec, a_be.render(a_spec))
        serve = K8sServe(a_be.client, a_cfg.kubernetes, image=worker_ref(), checkpoint_root=str(root),
                         checkpoint_pvc=pvc)
        serve.deploy(mine, a_spec)
        serve.scale(0)                                       # the objects are the point, not replicas
        alice.mark_inflight(mine.to_json())
        _wait_pod_gone(core, ns, f"{RUN}-cleanup")          # the submit's own prepare pod (deleted, grace 0)
        a_pod = rc.cleanup_pod(a_cfg.kubernetes, worker_ref(), "no-such-claim", campaign_dir(name, alice.owner_id),
                               RUN, alice.owner_id, a_spec.owner_mark)
        core.create_namespaced_pod(ns, a_pod)                # pending for ever: its claim is missing
        # the Jobs JobSet makes from the template carry her owner label too (what the drill's evidence selects)
        batch = client.BatchV1Api(api)
        deadline = time.monotonic() + 60
        while not batch.list_namespaced_job(ns, label_selector=f"poc/owner={alice.owner_id},"
                                            f"jobset.sigs.k8s.io/jobset-name={RUN}").items:
            assert time.monotonic() < deadline, "no Job of Alice's JobSet carries her poc/owner label"
            time.sleep(1)
        alices = _uids(core, apps, co, ns)
        assert set(alices) == {f"JobSet/{RUN}", f"ConfigMap/{RUN}-workload", f"Deployment/{RUN}-serve",
                               f"Service/{RUN}-serve", f"ConfigMap/{RUN}-serve-scripts", f"Pod/{RUN}-cleanup"}
        assert {o for _, o in alices.values()} == {alice.owner_id}
        alice.close()

        # Bob resumes his campaign of the same name: his submit of the same run is refused, nothing touched
        b_spec = _spec(b_cfg, bob)
        b_intent = b_be.intent(b_spec, b_be.render(b_spec))
        with pytest.raises(SubmitError, match=f"owner id {alice.owner_id}") as e:
            b_be.submit(b_spec, b_be.render(b_spec))
        assert "nothing was deleted" in e.value.tip
        # his cleanup pod of the same run id: Alice's pod of that name is refused, not deleted
        b_run = Handle.from_json(b_intent.to_json())
        b_run.data.update(checkpoint_pvc=pvc)
        with pytest.raises(BackendError, match=r"a Pod named 'k8s-clean-01-cleanup'.*not this campaign's"):
            b_be.cleanup(b_run, ok=True, keep="never")
        # his crashed attempt's record names the run's JobSet, ConfigMap and serving objects by name
        b_intent.data["serving"] = {"namespace": ns, "deployment": f"{RUN}-serve", "service": f"{RUN}-serve",
                                    "configmap": f"{RUN}-serve-scripts"}
        bob.mark_inflight(b_intent.to_json())
        bob.close()
        p = _cleanup(b_cfg_path, b_results)
        assert p.returncode == 0, p.stderr[-3000:]
        assert json.loads(p.stdout)["undone"] == [RUN]
        assert _uids(core, apps, co, ns) == alices           # every object of Alice's, the same uids
        print(f"\nBob (owner {bob.owner_id}) left Alice's {len(alices)} objects (owner {alice.owner_id}) as they were")

        # Alice's own `poc cleanup` removes hers; her cleanup of the run's directory adopts her leftover
        # cleanup pod (deleted by its uid) and removes the directory with her run's mark
        p = _cleanup(a_cfg_path, a_results)
        assert p.returncode == 0, p.stderr[-3000:]
        assert json.loads(p.stdout)["undone"] == [RUN]
        deadline = time.monotonic() + 90
        while set(_uids(core, apps, co, ns)) - {f"Pod/{RUN}-cleanup"}:
            assert time.monotonic() < deadline, _uids(core, apps, co, ns)
            time.sleep(1)
        d = root / campaign_dir(name, alice.owner_id) / RUN
        assert (d / OWNER_MARK).read_text() == a_spec.owner_mark      # what her prepare pod wrote
        out = a_be.cleanup(Handle.from_json(mine.to_json()), ok=True, keep="never")
        assert out["removed"] and not d.exists()
        _wait_pod_gone(core, ns, f"{RUN}-cleanup")
        assert _uids(core, apps, co, ns) == {}
    finally:
        for be in (a_be, b_be):
            be.close()
        for o in core.list_namespaced_pod(ns).items:
            core.delete_namespaced_pod(o.metadata.name, ns, grace_period_seconds=0)
        api.close()


def _wait_pod_gone(core, ns: str, name: str, wait_s: float = 60) -> None:
    from kubernetes.client.rest import ApiException
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            core.read_namespaced_pod(name, ns)
        except ApiException as exc:
            if exc.status == 404:
                return
            raise
        time.sleep(0.5)
    pytest.fail(f"pod {ns}/{name} still there after {wait_s:g} s")


def _native_cfg(tmp_path: Path, campaign: str, **over) -> tuple[Path, config.Config]:
    data = {"campaign": campaign, "platforms": ["k8s"], "faults": [], "repetitions": 0,
            "resources": {"nodes": 1, "memory_mb": 512},
            "workload": {"steps": 100000, "checkpoint_every": 100000, "sweep": "", "model_params": "1M"},
            "timeouts": {"queue_s": 180, "run_s": 600}, **over}
    return write_config(tmp_path / "poc.yaml", data), config.from_mapping(data)


def _node(core, name: str) -> dict:
    from kubernetes import client
    return client.ApiClient().sanitize_for_serialization(core.read_node(name))


def test_an_operators_cordon_after_the_fault_survives_poc_cleanup(tmp_path):
    from harness.clusters.k8s.layout import Layout
    from harness.clusters.k8s.procs import kubectl

    info = native_cluster()
    campaign = f"cordon-{os.getpid() % 100000}-{int(time.time()) % 100000}"
    cfg_path, cfg = _native_cfg(tmp_path, campaign)
    results = tmp_path / "results"
    store = Store(results, campaign)
    store.open(cfg.config_hash(), cfg.redacted(), resume=False)
    be = KubernetesBackend.from_config(cfg)
    api, core, _ = _admin(info.kubeconfig)
    h, node = None, None
    try:
        be.preflight()
        spec = replace(build(cfg, "k8s", "k8s-lose-node-01", None), owner=store.owner_id, owner_key=store.owner_key)
        h = be.submit(spec, be.render(spec))
        store.mark_inflight(h.to_json())
        deadline = time.monotonic() + 180
        while True:
            pods = [p for p in core.list_namespaced_pod(cfg.kubernetes.namespace,
                                                        label_selector=f"poc/owner={store.owner_id}").items
                    if p.status.phase == "Running"]
            if pods:
                break
            assert time.monotonic() < deadline, "the run's pod did not start in 180 s"
            time.sleep(1)
        pod = pods[0]
        node = pod.spec.node_name
        # the fault as on a cluster without power control: a cordon of the pod's node, journalled first
        faults.inject(be.client, h, "lose_node", {"host": pod.metadata.name, "attempt": [0]},
                      lambda hh: store.mark_inflight(hh.to_json()), power=None)
        n = _node(core, node)
        assert any(t["key"] == faults.CORDON_TAINT["key"] for t in n["spec"].get("taints") or [])
        store.close()                                        # the harness dies here
        # an operator cordons the node for maintenance, with kubectl, after the fault
        kubectl(Layout(info.state_dir), "cordon", node)
        p = _cleanup(cfg_path, results)
        assert p.returncode == 0, p.stderr[-3000:]
        assert json.loads(p.stdout)["undone"] == ["k8s-lose-node-01"]
        n = _node(core, node)
        assert n["spec"].get("unschedulable") is True, n["spec"]                  # the operator's cordon
        assert not any(t["key"] == faults.CORDON_TAINT["key"] for t in n["spec"].get("taints") or [])
        assert faults.CORDONED_BY not in (n["metadata"].get("annotations") or {})  # the harness's mark is gone
        assert f"node {node} left as it is" in p.stderr and "left cordoned" in p.stderr, p.stderr[-3000:]
        assert be.client.get("GET JobSet", JOBSETS, "k8s-lose-node-01", cfg.kubernetes.namespace,
                             missing_ok=True) is None
        print(f"\npoc cleanup lifted the harness's cordon of {node} and kept the operator's")
    finally:
        if node is not None:
            kubectl(Layout(info.state_dir), "uncordon", node, check=False)
            n = _node(core, node)
            left = [t for t in n["spec"].get("taints") or [] if t["key"] == faults.CORDON_TAINT["key"]]
            if left:
                core.patch_node(node, {"metadata": {"annotations": {faults.CORDONED_BY: None}},
                                       "spec": {"taints": [t for t in n["spec"]["taints"]
                                                           if t["key"] != faults.CORDON_TAINT["key"]] or None}})
        if h is not None:
            try:   # the run's JobSet and ConfigMap, whatever the test reached (done already when it passed)
                be.cancel(Handle.from_json(h.to_json()))
            except BackendError as exc:
                print(f"cancel after the test: {exc}")
        be.close()
        api.close()


@pytest.mark.parametrize("record", ["a path outside the checkpoint root", "no cluster identity"])
def test_poc_cleanup_refuses_a_record_outside_the_root_or_of_no_cluster_and_removes_nothing(tmp_path, record):
    native_cluster()
    campaign = f"record-{os.getpid() % 100000}-{int(time.time()) % 100000}"
    cfg_path, cfg = _native_cfg(tmp_path, campaign)
    results = tmp_path / "results"
    store = Store(results, campaign)
    store.open(cfg.config_hash(), cfg.redacted(), resume=False)
    be = KubernetesBackend.from_config(cfg)
    victim = tmp_path / "someone" / "project"
    (victim / "ckpt").mkdir(parents=True)
    (victim / "ckpt" / "weights.pt").write_bytes(b"not the harness's")
    own = Path(be.checkpoint_root) / campaign_dir(campaign, store.owner_id) / "k8s-clean-01"
    try:
        spec = replace(build(cfg, "k8s", "k8s-clean-01", None), owner=store.owner_id, owner_key=store.owner_key)
        h = be.intent(spec, be.render(spec))
        if record == "no cluster identity":
            (own / "ckpt").mkdir(parents=True)               # the run's own directory, with its own mark
            (own / "ckpt" / "ckpt-10.pt").write_bytes(b"x")
            (own / OWNER_MARK).write_text(spec.owner_mark)
            h.data.pop("cluster")
            h.data["checkpoint_path"] = str(own)
            victim = own
        else:
            h.data["checkpoint_path"] = str(victim)
            (victim / OWNER_MARK).write_text(spec.owner_mark)
        store.mark_inflight(h.to_json())
        store.close()
        p = _cleanup(cfg_path, results)
        assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
        err = p.stderr.splitlines()
        at = next(i for i, line in enumerate(err) if line.startswith("ERROR "))
        assert ("refusing to remove" if record != "no cluster identity" else "names no cluster") in err[at], p.stderr
        assert any(line.startswith("TIP ") for line in err[at:]), p.stderr
        assert (victim / "ckpt").is_dir() and any((victim / "ckpt").iterdir())    # nothing removed
        assert (results / campaign / "inflight" / "k8s-clean-01.json").exists()    # the record stays
    finally:
        be.close()
        import shutil
        shutil.rmtree(own.parent, ignore_errors=True)
