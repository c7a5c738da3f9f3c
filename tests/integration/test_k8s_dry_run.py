"""The Kubernetes examples (examples/*.yaml) pass a server-side dry-run on the real native cluster.

Through harness/backends/k8s/dryrun.py, as `poc validate --server-dry-run` does: every planned run's
ConfigMap and JobSet, and a Pod from its pod template, go to the API server with dryRun=All and
fieldValidation=Strict: RBAC, the CRD schema, JobSet's defaulting and validating webhooks, Kueue's
JobSet webhook and the pod admission (ServiceAccount, Priority, Pod Security) all see them, nothing
is created. The examples name a namespace, LocalQueue and kubeconfig of a team's cluster; the test keeps
everything else and points them at the native cluster: its admin kubeconfig and a scratch namespace
made for the test (deleted after), with the PriorityClasses the examples name (created if missing,
deleted after if the test made them). A negative case proves the webhooks are in the path: Kueue's
refuses a pod template with two topology annotations, which only it checks.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.integration, pytest.mark.k8s]

if os.geteuid() != 0:  # pragma: no cover - depends on the machine
    pytest.skip("the native cluster needs root", allow_module_level=True)

from harness import config, scenarios  # noqa: E402
from harness.backends.k8s import KubernetesBackend, dryrun  # noqa: E402
from harness.backends.k8s.api import JOBSETS  # noqa: E402
from harness.errors import BackendError, ClusterError  # noqa: E402
from harness.render import jobset as rj  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
K8S_EXAMPLES = [p for p in sorted((ROOT / "examples").glob("*.yaml"))
                if "k8s" in (yaml.safe_load(p.read_text()).get("platforms") or [])]


@pytest.fixture(scope="module")
def cluster():
    from harness.clusters import native_k8s as nk
    last = None
    for _attempt in range(3):   # the cluster's owner may be restarting it: be patient
        try:
            return nk.up(nodes=3) if not nk.is_up() else nk.info()
        except ClusterError as exc:
            last = exc
            time.sleep(10)
    pytest.fail(f"the native cluster did not come up: {last}")


@pytest.fixture(scope="module")
def admin(cluster):
    from kubernetes import client
    from kubernetes import config as kconfig
    api = kconfig.new_client_from_config(config_file=str(cluster.kubeconfig))
    yield client.CoreV1Api(api), client.SchedulingV1Api(api)
    api.close()


@pytest.fixture(scope="module")
def scratch(admin):
    """A namespace of the test's own, and the PriorityClasses the examples name."""
    from kubernetes.client.exceptions import ApiException
    core, sched = admin
    ns = f"poc-dryrun-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns, "labels": {"poc/test": "dry-run"}}})
    deadline = time.monotonic() + 60   # the ServiceAccount admission refuses pods until `default` exists
    while not [s for s in core.list_namespaced_service_account(ns).items if s.metadata.name == "default"]:
        assert time.monotonic() < deadline, f"no default ServiceAccount in {ns} after 60 s"
        time.sleep(0.5)
    made = []
    wanted = {config.load(p).kubernetes.pod.priority_class for p in K8S_EXAMPLES} - {None}
    for name in sorted(wanted):
        try:
            sched.read_priority_class(name)
        except ApiException as exc:
            if exc.status != 404:
                raise
            sched.create_priority_class({"metadata": {"name": name, "labels": {"poc/test": "dry-run"}},
                                         "value": 1000, "description": "test_k8s_dry_run"})
            made.append(name)
    yield ns
    for name in made:
        sched.delete_priority_class(name)
    core.delete_namespace(ns)


def on_native(path: Path, namespace: str, kubeconfig: Path) -> config.Config:
    """The example as it is, but for its namespace and kubeconfig (a team's, not this machine's)."""
    data = yaml.safe_load(path.read_text())
    data["kubernetes"].update(namespace=namespace, kubeconfig=str(kubeconfig), context=None)
    return config.from_mapping(data, f"{path.name} on the native cluster")


def rendered(cfg: config.Config) -> tuple[KubernetesBackend, rj.K8sJob]:
    backend = KubernetesBackend.from_config(cfg)
    first = scenarios.plan(cfg, "k8s")[0]
    job = backend.render(scenarios.job_spec(cfg, "k8s", first)).payload
    return backend, job


def admitted(backend: KubernetesBackend, job: rj.K8sJob) -> tuple[dict, dict]:
    """(ConfigMap, JobSet) as the API server would store them, after every admission webhook (dryrun.py
    returns verdicts only; this reads the objects the server answers with)."""
    c, ns = backend.client, job.namespace
    cm = c.call("CREATE ConfigMap (dry run)", c.core().create_namespaced_config_map, ns, job.configmap,
                dry_run="All")
    js = c.call("CREATE JobSet (dry run)", c.custom().create_namespaced_custom_object, *JOBSETS[:2], ns,
                JOBSETS.plural, job.jobset, dry_run="All")
    return c.to_dict(cm), js


@pytest.mark.parametrize("path", K8S_EXAMPLES, ids=[p.stem for p in K8S_EXAMPLES])
def test_example_passes_a_server_side_dry_run(cluster, scratch, path):
    """Every object of every planned run (clean runs and fault runs) accepted, as `poc validate
    --server-dry-run` checks them."""
    cfg = on_native(path, scratch, cluster.kubeconfig)
    result = dryrun.validate_config(cfg, scenarios.submitted_specs(cfg, "k8s"))
    assert dryrun.failure(result) is None, dryrun.failure(result)
    runs = scenarios.plan(cfg, "k8s")
    assert [(v["run_id"], v["kind"]) for v in result["objects"]] == \
        [(p.run_id, kind) for p in runs for kind in ("ConfigMap", "JobSet", "Pod")]
    assert all(v["ok"] and "status" not in v for v in result["objects"]), result   # no 409 leftovers either


@pytest.mark.parametrize("path", K8S_EXAMPLES, ids=[p.stem for p in K8S_EXAMPLES])
def test_example_survives_admission_unchanged(cluster, scratch, path):
    """What the example is about (placement, fabric, topology) is what the server would store."""
    cfg = on_native(path, scratch, cluster.kubeconfig)
    backend, job = rendered(cfg)
    try:
        cm, js = admitted(backend, job)
    finally:
        backend.client.close()
    assert cm["metadata"]["name"] == job.configmap["metadata"]["name"]
    assert js["metadata"]["name"] == job.name and js["metadata"]["namespace"] == scratch
    # JobSet's defaulting webhook ran: it adds a startup policy the renderer does not write
    assert js["spec"]["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}
    assert js["spec"]["suspend"] is True
    assert js["metadata"]["labels"][rj.QUEUE_LABEL] == cfg.kubernetes.local_queue
    sent = job.jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    got = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod = cfg.kubernetes.pod
    assert got["metadata"].get("annotations") == sent["metadata"].get("annotations")
    for key in ("nodeSelector", "tolerations", "priorityClassName", "hostNetwork", "dnsPolicy"):
        assert got["spec"].get(key) == sent["spec"].get(key), key
    c = got["spec"]["containers"][0]
    assert c["resources"] == sent["spec"]["containers"][0]["resources"]
    for name, qty in {"nvidia.com/gpu": str(cfg.resources.gpus_per_node), **pod.extra_resources}.items():
        assert c["resources"]["limits"][name] == qty, name
    assert c["securityContext"]["capabilities"]["add"] == pod.capabilities
    assert {e["name"]: e.get("value") for e in c["env"]}.items() >= cfg.fabric.env.items()


def test_the_dry_run_reaches_kueues_webhook(cluster, scratch):
    """Two topology annotations on one pod set are refused by Kueue's JobSet webhook alone (the config
    refuses them too, so the rendered JobSet is edited here): the dry-run is not a schema check only."""
    path = next(p for p in K8S_EXAMPLES if config.load(p).kubernetes.topology_required)
    backend, job = rendered(on_native(path, scratch, cluster.kubeconfig))
    pod = job.jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-preferred-topology"] = "kubernetes.io/hostname"
    try:
        cm, js, _pod = dryrun.dry_run(backend.client, job)
    finally:
        backend.client.close()
    assert cm["kind"] == "ConfigMap" and cm["ok"], cm
    assert js["kind"] == "JobSet" and not js["ok"], js
    assert "topology annotation" in js["message"] and "vjobset.kb.io" in js["message"], js
    err = dryrun.failure({"api_server": "native", "objects": [dict(v, run_id=job.name) for v in (cm, js)]})
    assert isinstance(err, BackendError) and err.tip


def test_poc_validate_server_dry_run(cluster, scratch, tmp_path):
    """The command a user runs, on the campaign example: exit 0, every object accepted."""
    path = ROOT / "examples" / "gpu-campaign.yaml"
    data = yaml.safe_load(path.read_text())
    data["kubernetes"].update(namespace=scratch, kubeconfig=str(cluster.kubeconfig), context=None)
    cfg_path = tmp_path / "gpu-campaign.yaml"
    cfg_path.write_text(yaml.safe_dump(data))
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "validate", "--server-dry-run", "--json",
                           "--config", str(cfg_path)], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["ok"] and out["server_dry_run"]["ok"], out
    assert len(out["server_dry_run"]["objects"]) == 3 * len(scenarios.plan(config.load(path), "k8s"))


def test_the_printed_role_may_submit_every_example(cluster, scratch):
    """As the native cluster's restricted user (a client certificate bound only to the namespaced Role
    that `poc render` prints, in its own namespace): a dry-run create needs the same rights as a create.
    (scratch: the PriorityClasses the examples name, which the pod admission looks up.)"""
    from harness.clusters import native_k8s as nk
    r = nk.info().restricted
    assert r, "the native cluster has no restricted user (harness/clusters/k8s/tenant.py)"
    for path in K8S_EXAMPLES:
        cfg = on_native(path, r["namespace"], Path(r["kubeconfig"]))
        cfg.kubernetes.local_queue = r["local_queue"]
        result = dryrun.validate_config(cfg, scenarios.submitted_specs(cfg, "k8s"))
        assert dryrun.failure(result) is None, (path.name, dryrun.failure(result))
