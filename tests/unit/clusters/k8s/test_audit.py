"""The native cluster's API-server audit policy and flags (harness/clusters/k8s/audit.py): what the
policy keeps, and when a running kube-apiserver must be restarted to get the flags."""
from __future__ import annotations

from pathlib import Path

import yaml

from harness.clusters.k8s import audit, commands

ROOT = Path("/state/k8s-native")


def _rules() -> list[dict]:
    doc = yaml.safe_load(audit.POLICY)
    assert doc["apiVersion"] == "audit.k8s.io/v1" and doc["kind"] == "Policy"
    assert doc["omitStages"] == ["RequestReceived"]
    return doc["rules"]


def _level(verb: str, group: str, resource: str) -> str:
    """The level of the first rule that matches (the API server's rule: first match wins)."""
    for r in _rules():
        if "verbs" in r and verb not in r["verbs"]:
            continue
        if "nonResourceURLs" in r:
            continue
        if "resources" in r and not any(g.get("group") == group and resource in g.get("resources", [])
                                        for g in r["resources"]):
            continue
        return r["level"]
    return "None"


def test_the_jobset_spec_is_kept_as_submitted_and_nothing_more_than_metadata_elsewhere():
    assert _level("create", "jobset.x-k8s.io", "jobsets") == "Request"
    assert _level("delete", "jobset.x-k8s.io", "jobsets") == "Metadata"
    assert _level("create", "", "pods/binding") == "Metadata"
    assert _level("delete", "", "pods") == "Metadata"
    assert _level("patch", "kueue.x-k8s.io", "workloads/status") == "Metadata"
    # a Secret's or ConfigMap's data never lands in the log, whatever later rules say
    assert _level("create", "", "secrets") == "Metadata"
    assert _level("create", "", "configmaps") == "Metadata"
    assert {r["level"] for r in _rules()} <= {"None", "Metadata", "Request"}   # never RequestResponse


def test_reads_events_leases_and_heartbeats_are_not_recorded():
    assert _level("get", "jobset.x-k8s.io", "jobsets") == "None"
    assert _level("watch", "", "pods") == "None"
    assert _level("list", "", "secrets") == "None"
    assert _level("create", "", "events") == "None"
    assert _level("update", "coordination.k8s.io", "leases") == "None"
    assert _level("patch", "", "nodes/status") == "None"
    assert _level("patch", "", "pods/status") == "None"


def test_flags_name_the_policy_and_the_log_with_rotation():
    f = audit.flags(ROOT)
    assert f"--audit-policy-file={ROOT}/audit/policy.yaml" in f
    assert f"--audit-log-path={ROOT}/audit/audit.log" in f
    assert {"--audit-log-maxsize=100", "--audit-log-maxbackup=5", "--audit-log-maxage=7"} <= set(f)
    certs = {n: type("C", (), {"cert": Path(f"/p/{n}.crt"), "key": Path(f"/p/{n}.key")})()
             for n in ("ca", "apiserver", "apiserver-kubelet-client", "sa")}
    argv = commands.kube_apiserver(certs, f).argv
    assert argv[-len(f):] == f
    assert not any(a.startswith("--audit") for a in commands.kube_apiserver(certs).argv)


def test_a_running_apiserver_without_the_flags_needs_a_restart_and_one_with_them_does_not(tmp_path):
    audit.prepare(tmp_path)                       # the policy file exists
    old = ["/bin/kube-apiserver", "--v=1"]
    assert audit.needs_restart(old, tmp_path)
    new = audit.with_flags(old, tmp_path)
    assert new[:2] == old and not audit.needs_restart(new, tmp_path)
    moved = audit.with_flags(old, Path("/elsewhere"))   # flags of another state dir are replaced, not doubled
    again = audit.with_flags(moved, tmp_path)
    assert again == new
    assert audit.policy_path(tmp_path).read_text() == audit.POLICY
