"""What the harness renders for a shared namespace and a shared cluster's nodes (pure):

* every object a campaign's run makes (ConfigMap, JobSet, its Jobs' and pods' templates, the serving
  ConfigMap/Deployment/Service and pod template, the PVC cleanup pod) carries the campaign's public owner
  id as poc/owner, which every delete and selector of the harness requires (backends/k8s/ownership.py);
* the ValidatingAdmissionPolicy that narrows the node rights of a lose_node fault applies to every
  identity bound to the harness's ClusterRole (Users, Groups, ServiceAccounts of any ClusterRoleBinding),
  not only to the harness's ServiceAccount, and leaves spec.unschedulable (an operator's cordon) alone.
tests/integration/test_k8s_node_fault_policy.py applies the same objects to the native cluster."""
from __future__ import annotations

from dataclasses import replace

import pytest

from harness import config, spec
from harness.errors import ConfigError
from harness.render import cleanup as rc
from harness.render import jobset as rj
from harness.render import rbac
from harness.render import serving as rs

OWNER = "0123456789abcdef"


def _spec(owner=OWNER):
    cfg = config.from_mapping({"campaign": "smoke-poc", "platforms": ["k8s"], "kubernetes": {"image": "img:1"}})
    return cfg, replace(spec.build(cfg, "k8s", "k8s-clean-01", None), owner=owner)


def test_every_object_of_a_campaigns_run_carries_its_owner_id():
    cfg, s = _spec()
    job = rj.render_jobset(s, cfg.kubernetes, "img:1", "/ckpt", workload_text="print()")
    js = job.jobset
    rjob = js["spec"]["replicatedJobs"][0]["template"]
    served = rs.render_serving(s, cfg.kubernetes, "img:1", "/ckpt", server_text="x", workload_text="y")
    pod = rc.cleanup_pod(cfg.kubernetes, "img:1", "pvc", spec.campaign_dir(s.campaign, s.owner), s.run_id, s.owner,
                         s.owner_mark)
    labelled = {"ConfigMap": job.configmap, "JobSet": js, "Job template": rjob,
                "pod template": rjob["spec"]["template"], "cleanup pod": pod,
                **{f"serving {o['kind']}": o for o in served.objects},
                "serving pod template": served.of("Deployment")["spec"]["template"]}
    for what, obj in labelled.items():
        assert obj["metadata"]["labels"]["poc/owner"] == OWNER, what
        assert obj["metadata"]["labels"]["poc/run-id"] == "k8s-clean-01", what


def test_outside_a_campaign_nothing_carries_an_owner_label_and_a_bad_owner_id_is_refused():
    cfg, s = _spec(owner="")
    job = rj.render_jobset(s, cfg.kubernetes, "img:1", "/ckpt", workload_text="print()")
    assert "poc/owner" not in job.jobset["metadata"]["labels"]
    for bad in ("x,poc/run-id=other", "ABC", "a" * 64):
        with pytest.raises(ConfigError, match="not an owner id"):
            rj.render_jobset(replace(s, owner=bad), cfg.kubernetes, "img:1", "/ckpt", workload_text="print()")


def _policy(k=None):
    k = k or config.Kubernetes(namespace="team-a", local_queue="q")
    objs = rbac.rbac_objects(k, node_faults=True)
    return (next(o for o in objs if o["kind"] == "ValidatingAdmissionPolicy"),
            next(o for o in objs if o["kind"] == "ValidatingAdmissionPolicyBinding"),
            next(o for o in objs if o["kind"] == "ClusterRole"))


def test_the_node_policy_covers_every_identity_bound_to_the_clusterrole():
    policy, binding, role = _policy()
    spec_ = policy["spec"]
    # every ClusterRoleBinding is a parameter (the policy is evaluated against each, the results ANDed):
    # an admin's own binding of the ClusterRole to a user or group narrows that user or group too
    assert spec_["paramKind"] == {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding"}
    assert binding["spec"]["paramRef"] == {"selector": {}, "parameterNotFoundAction": "Allow"}
    assert "matchConditions" not in spec_          # not the ServiceAccount alone
    bound = next(v["expression"] for v in spec_["variables"] if v["name"] == "bound")
    name = role["metadata"]["name"]
    for part in (f"params.roleRef.name == '{name}'", "params.roleRef.kind == 'ClusterRole'",
                 "s.kind == 'User' && s.name == request.userInfo.username",
                 "s.kind == 'Group' && s.name in request.userInfo.?groups.orValue([])",
                 "s.kind == 'ServiceAccount'",
                 "request.userInfo.username == 'system:serviceaccount:team-a:poc-harness'"):
        assert part in bound, part
    # every check applies to whoever is bound, and only to them (an admin's own node edits are not narrowed)
    assert all(v["expression"].startswith("!variables.bound || (") for v in spec_["validations"])


def test_the_node_policy_lets_the_harness_change_only_its_own_taints_and_mark_not_the_cordon():
    policy, _, _ = _policy()
    exprs = " ".join(v["expression"] for v in policy["spec"]["validations"])
    assert "object.spec.?unschedulable == oldObject.spec.?unschedulable" in exprs   # the operator's cordon
    assert f"t.key != '{rbac.CORDON_TAINT_KEY}'" in exprs and f"t.key != '{rbac.OUT_OF_SERVICE_KEY}'" in exprs
    assert f"k == '{rbac.CORDON_ANNOTATION}'" in exprs


def test_rbac_yaml_says_how_to_bind_the_clusterrole_and_that_the_policy_follows():
    k = config.Kubernetes(namespace="team-a", local_queue="q")
    note = rj.rbac_note(k, node_faults=True)
    assert "--clusterrole=poc-harness-team-a" in note and "narrows every identity" in note
    assert "clusterrolebinding" not in rj.rbac_note(k)     # no ClusterRole below without the fault
