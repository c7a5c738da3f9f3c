"""A run's checkpoint sub-path on a PersistentVolumeClaim is made afresh at submit, on the native cluster.

`poc run --resume` re-runs an interrupted run with the campaign's token and the run id, so its pods
mount the same sub-path `<campaign>-<token>/<run id>` of the claim: without clearing it, the run would
resume from the interrupted attempt's checkpoints. KubernetesBackend.submit runs the cleanup pod
(backends/k8s/cleanup.py) in the owned-directory command's "prepare" mode first.

The test makes a namespace of its own, a PersistentVolume of this machine's directory (the native
cluster's kubelets all run here, so a hostPath volume is reachable from each) and a claim bound to it,
then submits through the real backend with an admin kubeconfig: a leftover with this campaign's mark
is gone, the directory holds only the mark, before the JobSet exists; a leftover with another
campaign's mark refuses the submit and is untouched. The namespace has no LocalQueue, so Kueue never
admits the JobSet and no run pod starts: the order is what is shown, not a training run on the claim.
"""
from __future__ import annotations

import os
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from _native import native_cluster

pytestmark = [pytest.mark.integration, pytest.mark.k8s]

if os.geteuid() != 0:  # pragma: no cover - depends on the machine
    pytest.skip("the native cluster needs root", allow_module_level=True)

from harness import config  # noqa: E402
from harness.backends.k8s import KubernetesBackend  # noqa: E402
from harness.backends.k8s.api import JOBSETS  # noqa: E402
from harness.clusters.images import worker_ref  # noqa: E402
from harness.clusters.k8s.gpu_shape import GPU_TOLERATION  # noqa: E402
from harness.errors import SubmitError  # noqa: E402
from harness.render.owned_dir import OWNER_MARK  # noqa: E402
from harness.spec import build, campaign_dir  # noqa: E402

TOKEN, THEIRS = "a1b2c3", "d4e5f6"
RUN = "k8s-clean-01"


@pytest.fixture(scope="module")
def claim(tmp_path_factory):
    """(namespace, claim name, the directory behind the claim, admin kubeconfig)."""
    from kubernetes import client
    from kubernetes import config as kconfig

    from harness.clusters import images, native_k8s
    info = native_cluster()
    native_k8s.import_image(images.ensure_worker_image())   # the cleanup pod runs the worker image
    api = kconfig.new_client_from_config(config_file=str(info.kubeconfig))
    core = client.CoreV1Api(api)
    suffix = uuid.uuid4().hex[:6]
    ns, pv, pvc = f"poc-ckpt-{suffix}", f"poc-ckpt-{suffix}", "team-ckpt"
    root = tmp_path_factory.mktemp("claim")
    core.create_namespace({"metadata": {"name": ns, "labels": {"poc/test": "checkpoint-pvc"}}})
    core.create_persistent_volume({
        "metadata": {"name": pv, "labels": {"poc/test": "checkpoint-pvc"}},
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
            assert time.monotonic() < deadline, f"claim {ns}/{pvc} not bound (or no default ServiceAccount) in 60 s"
            time.sleep(0.5)
        yield ns, pvc, root, info.kubeconfig
    finally:
        core.delete_namespace(ns)
        core.delete_persistent_volume(pv)
        api.close()


def submit_setup(claim):
    ns, pvc, root, kubeconfig = claim
    cfg = config.from_mapping({"campaign": "smoke", "platforms": ["k8s"], "faults": [],
                               "kubernetes": {"kubeconfig": str(kubeconfig), "namespace": ns,
                                              "local_queue": "none-in-this-namespace", "image": worker_ref(),
                                              "checkpoint_pvc": pvc,
                                              "pod": {"tolerations": [GPU_TOLERATION]}}})
    backend = KubernetesBackend.from_config(cfg)
    spec = replace(build(cfg, "k8s", RUN, None), owner=TOKEN)
    return backend, spec, root / campaign_dir("smoke", TOKEN) / RUN


def leftover(d: Path, mark: str) -> None:
    """What an interrupted attempt's pods left: a checkpoint, an event file and their mark."""
    (d / "ckpt").mkdir(parents=True)
    (d / "ckpt" / "ckpt-20.pt").write_bytes(b"the interrupted attempt's")
    (d / "events").mkdir()
    (d / "events" / "rank0.jsonl").write_text('{"kind": "step", "step": 20}\n')
    (d / OWNER_MARK).write_text(mark)


def jobset(backend, ns):
    return backend.client.get("GET JobSet", JOBSETS, RUN, ns, missing_ok=True)


def test_this_campaigns_leftover_on_the_claim_is_gone_before_the_jobset_exists(claim):
    ns = claim[0]
    backend, spec, d = submit_setup(claim)
    leftover(d, TOKEN)
    try:
        t0 = time.monotonic()
        handle = backend.submit(spec, backend.render(spec))
        took = time.monotonic() - t0
        print(f"submit with the cleanup pod's prepare on the claim: {took:.1f} s")
        assert sorted(p.name for p in d.iterdir()) == [OWNER_MARK] and (d / OWNER_MARK).read_text() == TOKEN
        js = jobset(backend, ns)
        assert js is not None and js["metadata"]["uid"] == handle.data["uid"] and js["spec"]["suspend"] is True
        run_pods = backend.client.core().list_namespaced_pod(ns, label_selector=f"poc/run-id={RUN}").items
        assert [p.metadata.name for p in run_pods if p.metadata.labels.get("poc/role") != "cleanup"] == []
        assert not [p for p in run_pods if p.metadata.deletion_timestamp is None], "the cleanup pod is deleted"
        backend.cancel(handle)
    finally:
        backend.close()


def test_another_campaigns_leftover_on_the_claim_refuses_the_submit(claim):
    ns = claim[0]
    backend, spec, d = submit_setup(claim)
    if d.exists():   # the test above's prepared directory
        import shutil
        shutil.rmtree(d)
    leftover(d, THEIRS)
    try:
        with pytest.raises(SubmitError) as e:
            backend.submit(spec, backend.render(spec))
        assert e.value.message.startswith(f"the run's checkpoint directory pvc {claim[1]}:smoke-{TOKEN}/{RUN} "
                                          "exists and is not this campaign's"), e.value.message
        assert e.value.tip.startswith("nothing was removed or submitted"), e.value.tip
        assert (d / "ckpt" / "ckpt-20.pt").read_bytes() == b"the interrupted attempt's"
        assert (d / OWNER_MARK).read_text() == THEIRS
        assert jobset(backend, ns) is None
        assert not [p for p in backend.client.core().list_namespaced_pod(ns).items
                    if p.metadata.deletion_timestamp is None], "the cleanup pod is deleted"
    finally:
        backend.close()
