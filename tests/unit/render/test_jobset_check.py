"""The JobSet's part of issue-class fixes on equal terms with Slurm: the allocation check as the pods' first command
(both parts, one process per pod, ranked by the Indexed Job's completion index, its gloo store on the first pod),
the modules shipped beside the workload in the ConfigMap, the join timeout, a grace period as long as Slurm's
USR1 warning, evictions that do not spend maxRestarts, and exclusivity against every other pod of the namespace."""
from __future__ import annotations

from harness import config, scenarios
from harness.render import jobset as rj
from harness.render.local import WORKLOAD_FILES

GPU = {"resources": {"nodes": 2, "procs_per_node": 8, "gpus_per_node": 8, "cpus_per_node": 96, "memory_mb": 512000},
       "workload": {"backend": "nccl"}, "kubernetes": {"image": "nvcr.io/nvidia/pytorch:24.05-py3"}}


def job(data: dict):
    cfg = config.from_mapping({"platforms": ["k8s"], **data})
    s = scenarios.job_spec(cfg, "k8s", scenarios.plan(cfg, "k8s")[0])
    return rj.render_jobset(s, cfg.kubernetes, cfg.kubernetes.image or "img:1", "/ckpt")


def pod(j) -> dict:
    return j.jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def test_the_pods_check_the_allocation_before_torchrun():
    j = job({"calibration": {"enabled": True}})
    script = pod(j)["containers"][0]["command"][2]
    check, _, rest = script.partition(" || exit $?; ")
    assert "python3 /opt/poc/poc_check.py all --run-id" in check and "--ranks-from k8s" in check
    assert "--master k8s-clean-01-w-0-0.k8s-clean-01:29501" in check and "--form=gloo" in check
    assert rest.startswith("exec python3 -m torch.distributed.run")
    assert {"name": "check", "containerPort": 29501, "protocol": "TCP"} in pod(j)["containers"][0]["ports"]
    assert "poc_check.py" not in pod(job({}))["containers"][0]["command"][2]


def test_on_gpus_the_check_is_the_first_pods_mpirun_over_ssh():
    script = pod(job({**GPU, "calibration": {"enabled": True, "ssh_port": 2022}}))["containers"][0]["command"][2]
    assert "--form=mpirun-ssh" in script and "--ssh-port 2022" in script and "--gpus-per-node 8" in script


def test_every_module_ships_beside_the_workload():
    j = job({"calibration": {"enabled": True}})
    assert sorted(j.configmap["data"]) == sorted(WORKLOAD_FILES)


def test_the_join_timeout_grace_period_and_failure_policy():
    j = job({"workload": {"rdzv_join_timeout_s": 1500, "stop_grace_s": 90}})
    p = pod(j)
    assert 'is_host=$host,join_timeout=1500"' in p["containers"][0]["command"][2]
    assert p["terminationGracePeriodSeconds"] == 90
    assert pod(job({}))["terminationGracePeriodSeconds"] == 60      # Slurm's --signal=B:USR1@60, by default
    spec = j.jobset["spec"]
    assert spec["failurePolicy"]["rules"] == [{"name": "EvictedOrPreempted",
                                                "action": "RestartJobSetAndIgnoreMaxRestarts",
                                                "onJobFailureReasons": ["PodFailurePolicy"]}]
    job_spec = spec["replicatedJobs"][0]["template"]["spec"]
    assert job_spec["podFailurePolicy"] == {"rules": [{"action": "FailJob",
                                                       "onPodConditions": [{"type": "DisruptionTarget",
                                                                            "status": "True"}]}]}


def test_host_network_pods_name_their_pod_ip_and_wait_alike():
    script = pod(job({"kubernetes": {"pod": {"host_network": True}}}))["containers"][0]["command"][2]
    assert '--local_addr="$POC_POD_IP"' in script and "join_timeout=600" in script


def test_exclusive_keeps_every_other_pod_of_the_namespace_and_other_jobsets_off_the_nodes():
    terms = pod(job({**GPU}))["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    _own, namespace, jobsets = terms
    assert namespace == {"labelSelector": {"matchExpressions": [
        {"key": "jobset.sigs.k8s.io/jobset-name", "operator": "NotIn", "values": ["k8s-clean-01"]}]},
        "topologyKey": "kubernetes.io/hostname"}                       # NotIn: pods without the label too
    assert jobsets["namespaceSelector"] == {}
    assert jobsets["labelSelector"]["matchExpressions"][0]["operator"] == "Exists"
