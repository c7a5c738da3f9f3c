"""Serving on Kubernetes without a cluster: what render/serving.py prints, the launch line's crash
semantics in a real sh, and serve/k8s.py's reading of objects recorded from a real run on the native
cluster (tests/fixtures/serve/k8s/, written by tests/integration/test_serve_k8s.py)."""
from __future__ import annotations

import copy
import json
import subprocess

import pytest
from support.paths import FIXTURES

from harness import config as cfgmod
from harness.errors import ConfigError
from harness.render import jobset as rj
from harness.render import serving as rs
from harness.serve import k8s as sk
from harness.spec import build

FIX = FIXTURES / "serve" / "k8s"
TOL = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _cfg(**k8s):
    return cfgmod.Config.model_validate({"campaign": "camp", "kubernetes": {"pod": {"tolerations": [TOL]}, **k8s}})


def _render(**kw):
    cfg = _cfg()
    spec = build(cfg, "k8s", "k8s-serve-1", None, scenario="serve")
    return spec, rs.render_serving(spec, cfg.kubernetes, "img:1", "/ckpts", server_text="SERVER\n",
                                   workload_text="WORKLOAD\n", **kw)


def test_render_gives_configmap_deployment_and_clusterip_service_for_the_runs_checkpoint():
    spec, s = _render()
    assert [o["kind"] for o in s.objects] == ["ConfigMap", "Deployment", "Service"]
    cm, dep, svc = s.objects
    assert cm["data"] == {"serve_model.py": "SERVER\n", "ddp_train.py": "WORKLOAD\n"}
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    # not python as pid 1: sh runs it as a child (a SIGKILL of python is then a crash the kubelet sees)
    assert c["command"][:3] == ["sh", "-c", rs.LAUNCH]
    assert c["command"][4:] == ["--ckpt-dir", "/poc-run/ckpt", "--host", "$(POC_POD_IP)", "--port", "8000",
                                "--workload", "/poc-serve/ddp_train.py", "--run-id", "k8s-serve-1", "--threads", "1"]
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["resources"] == {"requests": {"cpu": "1", "memory": f"{spec.memory_mb}Mi"},
                              "limits": {"memory": f"{spec.memory_mb}Mi"}}
    # the training run's own directory, read-only, and never created empty
    vol = next(v for v in pod["volumes"] if v["name"] == "run")
    assert vol["hostPath"] == {"path": "/ckpts/camp/k8s-serve-1", "type": "Directory"}
    assert {"name": "run", "mountPath": "/poc-run", "readOnly": True} in c["volumeMounts"]
    # cluster defaults for not-ready/unreachable: only the user's tolerations
    assert pod["tolerations"] == [TOL]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert labels["poc/run-id"] == "k8s-serve-1" and labels["poc/campaign"] == "camp"
    assert rj.QUEUE_LABEL not in labels            # Kueue here manages Jobs and JobSets only
    assert dep["spec"]["selector"]["matchLabels"] == svc["spec"]["selector"] == s.selector
    assert svc["spec"]["type"] == "ClusterIP" and svc["spec"]["ports"][0]["port"] == 8000
    assert dep["metadata"]["namespace"] == svc["metadata"]["namespace"] == cm["metadata"]["namespace"] == "poc"


def test_render_with_kueue_pod_integration_a_replica_count_and_another_port():
    _, s = _render(kueue_pods=True, replicas=2, port=9000)
    dep, svc = s.of("Deployment"), s.of("Service")
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["template"]["metadata"]["labels"][rj.QUEUE_LABEL] == "poc-queue"
    assert svc["spec"]["ports"][0]["port"] == 9000 and "9000" in dep["spec"]["template"]["spec"]["containers"][0][
        "command"]


@pytest.mark.parametrize("run_id", ["1abc", "a" * 60])
def test_a_run_id_that_makes_no_service_name_is_refused(run_id):
    with pytest.raises(ConfigError, match="Service name"):
        rs.serving_name(run_id)


def test_the_launch_line_exits_with_the_servers_sigkill_status_in_a_real_sh(tmp_path):
    # a python3 on PATH that SIGKILLs itself, as kill_server does to the real one
    (tmp_path / "python3").write_text("#!/bin/sh\nkill -9 $$\n")
    (tmp_path / "python3").chmod(0o755)
    p = subprocess.run(["sh", "-c", rs.LAUNCH, "poc-serve", "--port", "8000"], capture_output=True, text=True,
                       env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, timeout=30, check=False)
    assert p.returncode == 137
    assert "exited with status 137" in p.stderr


def test_replicas_read_from_the_recorded_pods_and_endpointslices():
    ev = json.loads((FIX / "evidence.json").read_text())
    got = sk.replicas_of(ev["pods"], ev["endpointslices"])
    assert got == ev["replicas"]
    assert [r["ready"] and r["in_service"] for r in got] == [True, True]
    assert sum(r["restarts"] for r in got) == 1           # the killed server's container, restarted once
    # a pod being deleted is not ready; an endpoint the slice marks not ready is out of service
    pods, slices = copy.deepcopy(ev["pods"]), copy.deepcopy(ev["endpointslices"])
    pods[0]["metadata"]["deletionTimestamp"] = "2026-12-03T23:00:00Z"
    for ep in slices[0]["endpoints"]:
        ep["conditions"]["ready"] = False
    again = sk.replicas_of(pods, slices)
    assert again[0]["ready"] is False and again[0]["terminating"] is True and again[0]["since"] is None
    assert [r["in_service"] for r in again] == [False, False]


def test_the_kill_output_gives_the_pid_and_nothing_else_counts_as_a_kill():
    k = json.loads((FIX / "kill.json").read_text())
    assert sk.parse_killed(k["output"]) == k["pid_in_container"] == 8
    assert sk.parse_killed("no serve_model.py process in the container") is None
    assert sk.parse_killed("") is None


def test_the_recorded_evidence_is_redacted_and_has_the_native_records():
    ev = json.loads((FIX / "evidence.json").read_text())
    assert "managedFields" not in json.dumps(ev)
    assert {"ScalingReplicaSet", "Scheduled", "Started"} <= {e["reason"] for e in ev["events"]}
    assert ev["deployment"]["spec"]["replicas"] == 2 and ev["service"]["spec"]["type"] == "ClusterIP"


def test_beyond_counts_the_lines_a_user_writes_and_no_harness_parts():
    _, s = _render()
    b = sk.beyond_of(s)
    assert set(b) >= {"discovery", "balancing", "restarts", "scaling", "written", "harness_parts"}
    assert b["written"]["deployment.yaml"] == len(rj.to_yaml([s.of("Deployment")]).splitlines()) > 20
    assert b["harness_parts"] == []
