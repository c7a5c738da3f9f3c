"""Golden tests of the rendered JobSet and Kueue objects, validated against the CRDs' own schemas.

POC_UPDATE_GOLDEN=1 rewrites the golden files (tests/fixtures/k8s/golden) and manifests/*.yaml
but kind-cluster.yaml (tests/unit/test_package_data.py).
The CRD schemas (tests/fixtures/k8s/crd-schemas) are the openAPIV3Schema of JobSet v0.10.1 and
Kueue v0.14.5 from their modules' config/components/crd/bases; a test checks them against the
module cache when the local cluster's build has fetched it.
"""
from __future__ import annotations

import copy
import json
import os

import jsonschema
import pytest
import yaml
from support.paths import FIXTURES, ROOT

from harness import config, scenarios, spec
from harness.backends.k8s import KubernetesBackend
from harness.errors import ConfigError
from harness.render import jobset as rj

FIX = FIXTURES / "k8s"
GOLDEN = FIX / "golden"
SCHEMAS = FIX / "crd-schemas"
MANIFESTS = ROOT / "manifests"
IMAGE = "k8s-slurm-poc/worker:trixie"
CKPT_ROOT = "/var/lib/poc/checkpoints"
UPDATE = os.environ.get("POC_UPDATE_GOLDEN") == "1"

CASES = {
    "default-clean": ({"platforms": ["k8s"]}, 0, None),
    "default-kill-rank": ({"platforms": ["k8s"]}, 1, None),
    "gpu-pvc": ({"platforms": ["k8s"], "campaign": "a100",
                 "resources": {"nodes": 4, "procs_per_node": 8, "gpus_per_node": 8, "cpus_per_node": 64,
                               "memory_mb": 512000},
                 "workload": {"backend": "nccl"}, "faults": [{"kind": "lose_node", "at_step": 20, "rank": 9}],
                 "allow_destructive_faults": True,
                 "kubernetes": {"namespace": "ml", "local_queue": "team-a", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                                "image_pull_policy": "Always", "max_restarts": 5, "toleration_seconds": 60}},
                1, "poc-checkpoints"),
    # a GPU-operator cluster with RDMA: every kubernetes.pod field set, host network, Kueue topology
    "gpu-rdma-all-fields": ({"platforms": ["k8s"], "campaign": "h100",
                             "resources": {"nodes": 2, "procs_per_node": 8, "gpus_per_node": 8, "cpus_per_node": 96,
                                           "memory_mb": 1024000},
                             "workload": {"backend": "nccl", "model": "transformer", "precision": "bf16"},
                             "faults": [{"kind": "lose_node", "at_step": 20, "rank": 9}],
                             "allow_destructive_faults": True,
                             "fabric": {"env": {"NCCL_IB_HCA": "^mlx5_2", "NCCL_SOCKET_IFNAME": "bond0",
                                                "GLOO_SOCKET_IFNAME": "bond0"}},
                             "kubernetes": {
                                 "namespace": "team-ml", "local_queue": "team-ml-gpu",
                                 "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                                 "topology_required": "cloud.provider.com/topology-block",
                                 "create_cluster_role": True,
                                 "pod": {
                                     "node_selector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                                      "effect": "NoSchedule"}],
                                     "affinity": {
                                         "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                                             "nodeSelectorTerms": [{"matchExpressions": [
                                                 {"key": "node.kubernetes.io/instance-type", "operator": "In",
                                                  "values": ["p5.48xlarge"]}]}]}},
                                         "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                                             {"weight": 50, "podAffinityTerm": {
                                                 "labelSelector": {"matchLabels": {"app": "inference"}},
                                                 "topologyKey": "kubernetes.io/hostname"}}]}},
                                     "priority_class": "training-high", "service_account": "ml-runner",
                                     "image_pull_secrets": ["ngc-pull"],
                                     "labels": {"team.example.com/project": "poc"},
                                     "annotations": {"k8s.v1.cni.cncf.io/networks": "rdma-net"},
                                     "shm_size": "64Gi", "host_network": True, "capabilities": ["IPC_LOCK"],
                                     "extra_resources": {"rdma/ib": "1"}}}},
                            1, "poc-checkpoints"),
}


def job_of(name: str) -> tuple[spec.JobSpec, config.Config, rj.K8sJob]:
    data, index, pvc = CASES[name]
    cfg = config.from_mapping(data)
    s = scenarios.job_spec(cfg, "k8s", scenarios.plan(cfg, "k8s")[index])
    image = cfg.kubernetes.image or IMAGE
    return s, cfg, rj.render_jobset(s, cfg.kubernetes, image, CKPT_ROOT, checkpoint_pvc=pvc)


def golden_docs(name: str) -> list[dict]:
    s, cfg, job = job_of(name)
    cm, js = copy.deepcopy(job.configmap), copy.deepcopy(job.jobset)
    cm["data"] = {k: "<the text of workloads/ddp_train.py>" for k in cm["data"]}
    # the workload's own edits do not churn these files (test_workload_hash_annotation checks the hash)
    for o in (cm, js):
        o["metadata"]["annotations"]["poc/workload-sha256"] = "<sha256 of workloads/ddp_train.py>"
    node_faults = cfg.allow_destructive_faults and any(f.kind == "lose_node" for f in cfg.faults)
    return [js, cm, *rj.setup_objects(s, cfg.kubernetes, node_faults=node_faults)]


def test_workload_hash_annotation():
    import hashlib
    _, _, job = job_of("default-clean")
    sha = hashlib.sha256(job.configmap["data"]["ddp_train.py"].encode()).hexdigest()
    assert job.jobset["metadata"]["annotations"]["poc/workload-sha256"] == sha == job.workload_sha256
    assert job.configmap["metadata"]["annotations"]["poc/workload-sha256"] == sha


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name):
    text = rj.to_yaml(golden_docs(name))
    path = GOLDEN / f"{name}.yaml"
    if UPDATE:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{path} differs; POC_UPDATE_GOLDEN=1 rewrites it after review"


def test_configmap_carries_the_workload_verbatim():
    _, _, job = job_of("default-clean")
    text = (ROOT / "workloads" / "ddp_train.py").read_text()
    assert job.configmap["data"]["ddp_train.py"] == text
    assert next(yaml.safe_load_all(rj.to_yaml([job.configmap])))["data"]["ddp_train.py"] == text


# ------------------------------------------------------------------ CRD schema validation

def _strict(schema):
    """CRD schemas prune unknown fields silently; for tests, an unknown field is an error (typos)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if out.get("type") == "object" and "properties" in out and not out.get("x-kubernetes-preserve-unknown-fields"):
            out.setdefault("additionalProperties", False)
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def _validator(kind: str, version: str):
    doc = next(json.loads(p.read_text()) for p in SCHEMAS.glob("*.json") if json.loads(p.read_text())["kind"] == kind)
    return jsonschema.Draft7Validator(_strict(doc["versions"][version]))


def validate(obj: dict) -> list[str]:
    _, version = obj["apiVersion"].split("/")
    v = _validator(obj["kind"], version)
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(obj)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_objects_validate_against_crd_schemas(name):
    s, cfg, job = job_of(name)
    crs = [job.jobset] + [o for o in rj.setup_objects(s, cfg.kubernetes) if o["apiVersion"].startswith("kueue")]
    assert [o["kind"] for o in crs] == ["JobSet", "ResourceFlavor", "ClusterQueue", "LocalQueue"]
    for o in crs:
        assert validate(o) == [], o["kind"]


def test_schema_validation_catches_mistakes():
    _, _, job = job_of("default-clean")
    bad = copy.deepcopy(job.jobset)
    bad["spec"]["failurePolicy"]["restartStrategy"] = "Sometimes"
    bad["spec"]["network"]["enableDnsHostnames"] = True          # wrong spelling
    bad["spec"]["replicatedJobs"][0]["replicas"] = "one"
    errs = "\n".join(validate(bad))
    assert "Sometimes" in errs and "enableDnsHostnames" in errs and "'one'" in errs


def test_vendored_schemas_match_module_cache():
    from harness.clusters.k8s import builds
    root = builds.cache_dir() / "go" / "mod"
    for p in SCHEMAS.glob("*.json"):
        doc = json.loads(p.read_text())
        src = root / doc["source"]
        if not src.exists():
            pytest.skip(f"{src} not fetched (the native cluster's build fetches it)")
        crd = yaml.safe_load(src.read_text())
        assert {v["name"]: v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v.get("served")} \
            == doc["versions"], p.name


# ------------------------------------------------------------------ what the JobSet must say

def test_jobset_shape():
    s, _, job = job_of("default-kill-rank")
    js = job.jobset
    assert js["apiVersion"] == "jobset.x-k8s.io/v1alpha2" and js["spec"]["suspend"] is True
    assert js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "poc-queue"
    assert js["metadata"]["labels"]["poc/run-id"] == s.run_id == js["metadata"]["name"]
    assert js["spec"]["failurePolicy"] == {"maxRestarts": 3, "restartStrategy": "Recreate"}
    assert js["spec"]["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True,
                                     "subdomain": s.run_id}
    rjob = js["spec"]["replicatedJobs"][0]
    jspec = rjob["template"]["spec"]
    assert (jspec["parallelism"], jspec["completions"], jspec["backoffLimit"]) == (2, 2, 0)
    pod = jspec["template"]["spec"]
    c = pod["containers"][0]
    assert f"--rdzv_endpoint={s.run_id}-w-0-0.{s.run_id}:29500" in c["command"]
    assert "--max_restarts=0" in c["command"]        # JobSet, not torchrun, recovers
    env = {e["name"]: e for e in c["env"]}
    assert env["JOBSET_RESTART_ATTEMPT"]["valueFrom"]["fieldRef"]["fieldPath"] == \
        "metadata.annotations['jobset.sigs.k8s.io/restart-attempt']"
    assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"]["value"] == "1"
    assert c["resources"]["requests"] == {"cpu": "1", "memory": "3072Mi"} == c["resources"]["limits"]
    assert {t["key"]: t["tolerationSeconds"] for t in pod["tolerations"] if t["effect"] == "NoExecute"} == \
        {"node.kubernetes.io/not-ready": 30, "node.kubernetes.io/unreachable": 30}
    # the default config targets the native cluster, whose nodes carry the GPU taint
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["run"]["hostPath"]["path"] == f"{CKPT_ROOT}/smoke/{s.run_id}"
    assert vols["workload"]["configMap"]["name"] == job.configmap["metadata"]["name"]


def test_gpu_and_pvc():
    s, cfg, job = job_of("gpu-pvc")
    pod = job.jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert c["image"] == "nvcr.io/nvidia/pytorch:24.05-py3" and c["imagePullPolicy"] == "Always"
    assert {v["name"]: v for v in pod["volumes"]}["run"] == {"name": "run",
                                                            "persistentVolumeClaim": {"claimName": "poc-checkpoints"}}
    assert {m["name"]: m for m in c["volumeMounts"]}["run"]["subPath"] == f"a100/{s.run_id}"
    q = {r["name"]: r["nominalQuota"] for r in rj.kueue_objects(s, cfg.kubernetes)[1]["spec"]["resourceGroups"][0]
         ["flavors"][0]["resources"]}
    assert q == {"cpu": "256", "memory": "2048000Mi", "nvidia.com/gpu": "32"}
    assert job.jobset["spec"]["failurePolicy"]["maxRestarts"] == 5


def test_quota_fits_n_jobs():
    s, _, _ = job_of("default-clean")
    assert rj.quota(s, 1) == {"cpu": "2", "memory": "6144Mi", "nvidia.com/gpu": "0"}
    assert rj.quota(s, 2)["cpu"] == "4"


@pytest.mark.parametrize("image", ["bad image; rm -rf /", "$(reboot)", "example.com/Team/torch:1", ""])
def test_config_and_renderer_refuse_the_same_images(image):
    """One check (harness/imageref.py) behind both: what the config refuses, the renderer refuses too."""
    with pytest.raises(ConfigError, match=r"kubernetes\.image"):
        config.from_mapping({"platforms": ["k8s"], "kubernetes": {"image": image}})
    s, cfg, _ = job_of("default-clean")
    with pytest.raises(ConfigError, match="image"):
        rj.render_jobset(s, cfg.kubernetes, image, CKPT_ROOT)


def test_bad_inputs_are_config_errors():
    s, cfg, _ = job_of("default-clean")
    import dataclasses
    long = dataclasses.replace(s, run_id="x" * 60)
    with pytest.raises(ConfigError, match="longer than 63"):
        rj.render_jobset(long, cfg.kubernetes, IMAGE, CKPT_ROOT)


def test_render_is_pure_and_backend_needs_no_cluster(tmp_path, monkeypatch):
    monkeypatch.setenv("POC_STATE_DIR", str(tmp_path))
    cfg = config.from_mapping({"platforms": ["k8s"], "kubernetes": {"image": IMAGE}})
    b = KubernetesBackend.from_config(cfg)      # no kubeconfig exists: construction must not need one
    s = spec.build(cfg, "k8s", "k8s-clean-01", None)
    r1, r2 = b.render(s), b.render(s)
    assert r1.files == r2.files
    # each file holds exactly its objects, in apply order (an empty or short file fails here)
    objects = {name: [(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(text)]
               for name, text in r1.files.items()}
    assert objects == {
        "workload-configmap.yaml": [("ConfigMap", "k8s-clean-01-workload")],
        "jobset.yaml": [("JobSet", "k8s-clean-01")],
        "kueue.yaml": [("Namespace", "poc"), ("ResourceFlavor", "poc-default"), ("ClusterQueue", "poc-cluster-queue"),
                       ("LocalQueue", "poc-queue")],
        "rbac.yaml": [("ServiceAccount", "poc-harness"), ("Role", "poc-harness"), ("RoleBinding", "poc-harness")],
    }
    assert "create rolebinding poc-harness-user --role=poc-harness --user=NAME" in r1.files["rbac.yaml"]
    assert str(tmp_path) in r1.files["jobset.yaml"]


# ------------------------------------------------------------------ manifests/ stay what the renderer writes

def manifest_docs() -> dict[str, list[dict]]:
    s, cfg, job = job_of("default-clean")
    setup = rj.setup_objects(s, cfg.kubernetes)
    queues = ("Namespace", "ResourceFlavor", "ClusterQueue", "LocalQueue")
    return {"jobset.yaml": [job.jobset],
            "kueue.yaml": [o for o in setup if o["kind"] in queues],
            "rbac.yaml": [o for o in setup if o["apiVersion"].startswith("rbac") or o["kind"] == "ServiceAccount"]}


@pytest.mark.parametrize("name", ["jobset.yaml", "kueue.yaml", "rbac.yaml"])
def test_manifests_match_renderer(name):
    docs = manifest_docs()[name]
    path = MANIFESTS / name
    header = ("# Rendered by harness/render/jobset.py from the built-in default config (run k8s-clean-01);\n"
              "# tests/unit/render/test_jobset.py keeps it in step (see manifests/README.md). Regenerate:\n"
              "# POC_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/render/test_jobset.py\n")
    if UPDATE:
        path.write_text(header + rj.to_yaml(docs))
    assert path.read_text() == header + rj.to_yaml(docs), f"{path} differs; POC_UPDATE_GOLDEN=1 rewrites it"


# ------------------------------------------------------------------ kubernetes.pod placement (GPU clusters)

def _pod(name: str) -> dict:
    return job_of(name)[2].jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]


def _render_with(**kube) -> dict:
    cfg = config.from_mapping({"platforms": ["k8s"], "kubernetes": {"image": IMAGE, **kube}})
    s = spec.build(cfg, "k8s", "k8s-clean-01", None)
    return rj.render_jobset(s, cfg.kubernetes, IMAGE, CKPT_ROOT).jobset["spec"]["replicatedJobs"][0][
        "template"]["spec"]["template"]


def test_every_pod_field_reaches_the_pod_template():
    t = _pod("gpu-rdma-all-fields")
    pod, c = t["spec"], t["spec"]["containers"][0]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    # the harness's own tolerations first (lost-node eviction), then the user's
    assert [tol["key"] for tol in pod["tolerations"]] == ["node.kubernetes.io/not-ready",
                                                           "node.kubernetes.io/unreachable", "nvidia.com/gpu"]
    aff = pod["affinity"]
    assert aff["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    anti = aff["podAntiAffinity"]
    assert anti["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"]["matchLabels"] == \
        {rj.JOBSET_NAME_LABEL: t["metadata"]["labels"]["poc/run-id"]}
    assert anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] == 50
    assert (pod["priorityClassName"], pod["serviceAccountName"]) == ("training-high", "ml-runner")
    assert pod["imagePullSecrets"] == [{"name": "ngc-pull"}]
    assert (pod["hostNetwork"], pod["dnsPolicy"]) == (True, "ClusterFirstWithHostNet")
    assert t["metadata"]["labels"]["team.example.com/project"] == "poc"
    assert t["metadata"]["annotations"] == {"k8s.v1.cni.cncf.io/networks": "rdma-net",
                                            rj.TOPOLOGY_REQUIRED: "cloud.provider.com/topology-block"}
    assert {v["name"]: v for v in pod["volumes"]}["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "64Gi"}
    assert c["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    assert c["resources"]["requests"]["rdma/ib"] == "1" == c["resources"]["limits"]["rdma/ib"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["NCCL_IB_HCA"] == "^mlx5_2" and env["GLOO_SOCKET_IFNAME"] == "bond0"   # fabric.env decides


def test_defaults_add_nothing_and_pod_network_names_eth0():
    t = _render_with()
    pod = t["spec"]
    for key in ("nodeSelector", "priorityClassName", "serviceAccountName", "imagePullSecrets", "hostNetwork",
                "dnsPolicy"):
        assert key not in pod
    assert "annotations" not in t["metadata"] and "securityContext" not in pod["containers"][0]
    assert {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}["GLOO_SOCKET_IFNAME"] == "eth0"


def test_host_network_does_not_force_an_interface():
    env = {e["name"] for e in _render_with(pod={"host_network": True})["spec"]["containers"][0]["env"]}
    assert "GLOO_SOCKET_IFNAME" not in env


def _env_with_fabric(fabric: dict, **pod) -> dict:
    cfg = config.from_mapping({"platforms": ["k8s"], "kubernetes": {"image": IMAGE, "pod": pod},
                               "fabric": {"env": fabric}})
    s = spec.build(cfg, "k8s", "k8s-clean-01", None)
    t = rj.render_jobset(s, cfg.kubernetes, IMAGE, CKPT_ROOT).jobset["spec"]["replicatedJobs"][0]["template"]
    return {e["name"]: e.get("value") for e in t["spec"]["template"]["spec"]["containers"][0]["env"]}


def test_host_network_gives_gloo_the_interface_named_for_nccl():
    """With hostNetwork the pod has the host's /etc/hosts, where the host name may be 127.0.1.1: gloo would bind
    loopback. The interface the user named for NCCL is gloo's too, unless they named gloo's."""
    assert _env_with_fabric({"NCCL_SOCKET_IFNAME": "ib0"}, host_network=True)["GLOO_SOCKET_IFNAME"] == "ib0"
    assert _env_with_fabric({"NCCL_SOCKET_IFNAME": "ib0", "GLOO_SOCKET_IFNAME": "bond0"},
                            host_network=True)["GLOO_SOCKET_IFNAME"] == "bond0"
    assert "GLOO_SOCKET_IFNAME" not in _env_with_fabric({"NCCL_SOCKET_IFNAME": "^docker,lo"}, host_network=True)


def test_the_pod_network_keeps_eth0_for_gloo_whatever_nccl_uses():
    # a secondary network (net1) for NCCL: gloo stays on the pod network's eth0, which every pod has
    assert _env_with_fabric({"NCCL_SOCKET_IFNAME": "net1"})["GLOO_SOCKET_IFNAME"] == "eth0"


def test_preferred_topology_annotation():
    t = _render_with(topology_preferred="cloud.provider.com/topology-rack")
    assert t["metadata"]["annotations"] == {rj.TOPOLOGY_PREFERRED: "cloud.provider.com/topology-rack"}


@pytest.mark.parametrize("pod,match", [
    ({"labels": {"poc/run-id": "x"}}, "label the harness"),
    ({"labels": {"jobset.sigs.k8s.io/jobset-name": "x"}}, "label the harness"),
    ({"annotations": {rj.TOPOLOGY_REQUIRED: "x"}}, "topology_required"),
    ({"extra_resources": {"nvidia.com/gpu": "8"}}, "gpus_per_node"),
    ({"affinity": {"podAffinityy": {}}}, "unknown keys"),
])
def test_pod_fields_that_would_override_the_harness_are_refused(pod, match):
    with pytest.raises(ConfigError, match=match):
        _render_with(pod=pod)


def test_rbac_is_namespaced_unless_asked():
    k = config.from_mapping({"platforms": ["k8s"]}).kubernetes
    kinds = [o["kind"] for o in rj.rbac_objects(k)]
    assert kinds == ["ServiceAccount", "Role", "RoleBinding"]
    role = rj.rbac_objects(k)[1]
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}
    assert ("", "namespaces", "get") not in granted and ("", "pods/eviction", "create") not in granted
    # `poc validate --server-dry-run` sends each pod template as a Pod (dryRun=All), whatever the config;
    # with checkpoints on a PVC the run's sub-path is also removed by a short pod
    assert ("", "pods", "create") in granted
    pvc_role = rj.rbac_objects(k.model_copy(update={"checkpoint_pvc": "ckpt"}))[1]
    assert pvc_role["rules"] == role["rules"]
    with_faults = rj.rbac_objects(k, node_faults=True)
    assert [o["kind"] for o in with_faults][-4:] == ["ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                                                    "ValidatingAdmissionPolicyBinding"]
    assert with_faults[3]["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}]
    reads = rj.rbac_objects(k.model_copy(update={"create_cluster_role": True}))
    assert {r["resources"][0] for r in reads[3]["rules"]} == {"customresourcedefinitions", "clusterqueues", "nodes"}
    assert reads[3]["rules"][-1]["verbs"] == ["get", "list"]


def test_host_network_tells_the_first_pod_to_host_the_rendezvous():
    """With hostNetwork the pod's host name is the node's: torchrun cannot recognise itself in the
    endpoint, so index 0 hosts the store explicitly and agents advertise their pod IP."""
    c = _render_with(pod={"host_network": True})["spec"]["containers"][0]
    cmd = c["command"]
    assert cmd[:3] == ["sh", "-c", rj.HOST_NETWORK_LAUNCH] and cmd[3] == "torchrun"
    assert cmd[4:] == rj.container_command(spec.build(config.from_mapping(
        {"platforms": ["k8s"], "kubernetes": {"image": IMAGE}}), "k8s", "k8s-clean-01", None))[4:]
    assert {e["name"]: e.get("valueFrom") for e in c["env"]}["POC_POD_IP"] == \
        {"fieldRef": {"fieldPath": "status.podIP"}}
    import subprocess
    for index, want in (("0", "is_host=1"), ("1", "is_host=0")):
        out = subprocess.run(["sh", "-c", rj.HOST_NETWORK_LAUNCH.replace("exec python3", "echo python3"), "torchrun",
                              "--nnodes=2", "a b"], env={"JOB_COMPLETION_INDEX": index, "POC_POD_IP": "10.0.0.7"},
                             capture_output=True, text=True, check=True).stdout
        assert out.strip() == (f"python3 -m torch.distributed.run --rdzv_conf={want} --local_addr=10.0.0.7 "
                               "--nnodes=2 a b")


def test_the_first_pod_hosts_the_rendezvous_store_whatever_dns_says():
    """On the pod network torchrun would decide from a DNS lookup of the endpoint that can come before
    the first pod's record exists: index 0 is told it hosts the store, the others that they do not."""
    import subprocess
    cmd = rj.container_command(spec.build(config.from_mapping({"platforms": ["k8s"]}), "k8s", "k8s-clean-01", None))
    assert cmd[:4] == ["sh", "-c", rj.POD_NETWORK_LAUNCH, "torchrun"] and cmd[4].startswith("--nnodes=")
    for index, want in (("0", "is_host=1"), ("1", "is_host=0"), ("2", "is_host=0")):
        out = subprocess.run(["sh", "-c", rj.POD_NETWORK_LAUNCH.replace("exec python3", "echo python3"), "torchrun",
                              "--nnodes=3", "a b"], env={"JOB_COMPLETION_INDEX": index},
                             capture_output=True, text=True, check=True).stdout
        assert out.strip() == f"python3 -m torch.distributed.run --rdzv_conf={want} --nnodes=3 a b"


def test_a_drill_scenario_is_a_valid_label_value():
    from harness.render.jobset import labels
    cfg = config.from_mapping({"drills": {"kinds": ["restart"]}})
    s = scenarios.job_spec(cfg, "k8s", scenarios.plan(cfg, "k8s")[-1])
    assert s.scenario == "drill:restart"
    assert labels(s)["poc/scenario"] == "drill-restart"


def test_the_serving_scenario_adds_exactly_the_rights_its_platform_code_uses():
    k = config.Kubernetes(namespace="team-a", local_queue="q")
    plain = rj.rbac_objects(k)[1]["rules"]
    role = rj.rbac_objects(k, serving=True)[1]["rules"]
    added = [r for r in role if r not in plain]
    assert {(g, res) for r in added for g in r["apiGroups"] for res in r["resources"]} == {
        ("apps", "deployments"), ("apps", "deployments/scale"), ("apps", "replicasets"), ("", "services"),
        ("discovery.k8s.io", "endpointslices")}
    assert not any("*" in r["verbs"] for r in role)
    # every call harness/serve/k8s.py makes on those resources is one the Role grants
    # (serve/k8s.py deletes through backends/k8s/ownership.py: only the campaign's own objects, by uid)
    src = (ROOT / "harness" / "serve" / "k8s.py").read_text() + \
        (ROOT / "harness" / "backends" / "k8s" / "ownership.py").read_text()
    for call, (group, res, verb) in {"create_namespaced_deployment": ("apps", "deployments", "create"),
                                      "read_namespaced_deployment": ("apps", "deployments", "get"),
                                      "delete_namespaced_deployment": ("apps", "deployments", "delete"),
                                      "patch_namespaced_deployment_scale": ("apps", "deployments/scale", "patch"),
                                      "list_namespaced_replica_set": ("apps", "replicasets", "list"),
                                      "create_namespaced_service": ("", "services", "create"),
                                      "read_namespaced_service": ("", "services", "get"),
                                      "delete_namespaced_service": ("", "services", "delete"),
                                      "list_namespaced_endpoint_slice": ("discovery.k8s.io", "endpointslices",
                                                                         "list")}.items():
        assert call in src, call
        assert any(group in r["apiGroups"] and res in r["resources"] and verb in r["verbs"] for r in role), call


def test_the_runs_pods_write_the_campaigns_owner_mark_in_its_directory():
    from dataclasses import replace
    cfg = config.from_mapping({"platforms": ["k8s"]})
    s = spec.build(cfg, "k8s", "k8s-clean-01", None)
    cmd = rj.container_command(replace(s, owner="aa11"))
    at = cmd.index("--owner-mark")
    assert cmd[at:at + 4] == ["--owner-mark", f"{rj.CKPT_MOUNT}/.poc-owner", "--owner", "aa11"]
    assert "--owner-mark" not in rj.container_command(s)      # outside a campaign: no token, no mark
