"""The Kubernetes drill's pure parts (harness/drills/k8s.py, harness/clusters/k8s/upgrade.py): the order,
the owned() decision, the health poll, and what is read from real objects (tests/fixtures/k8s/drill/,
recorded by record.py there from the native cluster: drill-a admitted and running, drill-b pending)."""
from __future__ import annotations

import copy
import json
from types import SimpleNamespace

import pytest
from support.paths import FIXTURES

from harness.clusters.k8s import builds, upgrade
from harness.drills import k8s as d

FIX = FIXTURES / "k8s" / "drill"


def load(name: str) -> dict:
    return json.loads((FIX / f"{name}.json").read_text())


def test_plan_is_control_plane_then_controllers_then_each_kubelet():
    plan = d.plan_for(["poc-n1", "poc-n2"])
    assert plan == ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kueue", "jobset",
                    "kubelet@poc-n1", "kubelet@poc-n2"]
    assert [d.group_of(c) for c in plan] == ["control plane"] * 3 + ["controllers"] * 2 + ["nodes"] * 2
    assert d.state_name("kubelet@poc-n2") == "kubelet-poc-n2" and d.state_name("kueue") == "kueue"


KUBE_DOC = {"current-context": "poc", "contexts": [{"name": "poc", "context": {"cluster": "team-a", "user": "u"}},
                                                   {"name": "other", "context": {"cluster": "prod", "user": "u"}}]}


@pytest.mark.parametrize("kw, ok, why", [
    ({"native": True, "native_state": {"ready": True, "components": {"etcd": {}}}, "kubeconfig": "/s/kubeconfig"},
     True, "own native cluster"),
    ({"native": True, "native_state": {"components": {}}, "kubeconfig": "/s/kubeconfig"}, False, "no state file"),
    ({"native": False, "confirm": "team-a"}, True, "'team-a'"),
    ({"native": False, "confirm": "team-a", "context": "other"}, False, "is 'prod'"),
    ({"native": False, "confirm": None}, False, "confirm_cluster is not set"),
    # the native marker alone does not cover another kubeconfig
    ({"native": True, "native_state": {"ready": True, "components": {"etcd": {}}}, "kubeconfig": "/x/kc"},
     False, "not set"),
])
def test_owned_decision(kw, ok, why):
    args = {"native_state": None, "kubeconfig": "/k", "native_kubeconfig": "/s/kubeconfig", "kube_doc": KUBE_DOC,
            "context": None, "confirm": None, **kw}
    got, reason = d.decide_owned(**args)
    assert got is ok and why in reason, reason


def test_kubeconfig_cluster_of_current_and_named_context():
    assert d.kubeconfig_cluster(KUBE_DOC, None) == "team-a"
    assert d.kubeconfig_cluster(KUBE_DOC, "other") == "prod"
    assert d.kubeconfig_cluster({}, None) is None


def test_poll_reports_when_and_its_resolution():
    t = [100.0]
    answers = iter([False, RuntimeError("refused"), True])

    def check():
        a = next(answers)
        if isinstance(a, Exception):
            raise a
        return a

    def sleep(s):
        t[0] += s + 0.2        # each check costs 0.2 s on top of the interval

    back, gap, err = d.poll(check, 30, 0.5, clock=lambda: t[0], sleep=sleep)
    assert back == pytest.approx(101.4) and gap == pytest.approx(0.7) and err is None


def test_poll_gives_up_when_the_process_dies_or_time_runs_out():
    t = [0.0]
    sleep = lambda s: t.__setitem__(0, t[0] + s)   # noqa: E731
    assert d.poll(lambda: False, 5, 1, clock=lambda: t[0], sleep=sleep, alive=lambda: False)[2].startswith(
        "the process exited")
    back, _, err = d.poll(lambda: False, 3, 1, clock=lambda: t[0], sleep=sleep)
    assert back is None and err == "not yet"


def test_snapshot_facts_from_the_recorded_running_jobset():
    a = load("drill-a")
    pods = [d.pod_facts(p) for p in a["pods"]]
    assert len(pods) == 2 and all(p["phase"] == "Running" and p["restarts"] == 0 and p["node"] for p in pods)
    (wl,) = a["workloads"]
    assert d.owned_by(wl, a["jobset"]["metadata"]["uid"])
    assert d.is_true(wl, "Admitted") and d.is_true(wl, "QuotaReserved")
    facts = d.object_facts(wl)
    assert facts["uid"] == wl["metadata"]["uid"] and facts["resourceVersion"]
    assert {c["type"] for c in facts["conditions"]} >= {"Admitted", "QuotaReserved"}


def test_nothing_is_left_over_while_the_runs_are_active():
    a, b = load("drill-a"), load("drill-b")
    assert d.stale_pods(a["pods"], a["jobset"]) == [] and d.stale_workloads(a["workloads"], a["jobset"]) == []
    assert d.stale_workloads(b["workloads"], b["jobset"]) == []     # pending, but its JobSet is not ended


def test_leftovers_of_deleted_and_ended_jobsets():
    a, b = load("drill-a"), load("drill-b")
    # JobSet deleted: its pods and its admitted Workload are leftovers
    assert [p["why"] for p in d.stale_pods(a["pods"], None)] == ["a pod of an ended run"] * 2
    assert [w["why"] for w in d.stale_workloads(a["workloads"], None)] == ["still admitted after its JobSet ended"]
    assert [w["why"] for w in d.stale_workloads(b["workloads"], None)] == ["still pending after its JobSet ended"]
    # JobSet Completed: running pods are leftovers, a Finished Workload is not
    done = copy.deepcopy(a["jobset"])
    done.setdefault("status", {})["conditions"] = [{"type": "Completed", "status": "True"}]
    assert len(d.stale_pods(a["pods"], done)) == 2
    wl = copy.deepcopy(a["workloads"])
    wl[0]["status"]["conditions"].append({"type": "Finished", "status": "True"})
    assert d.stale_workloads(wl, done) == []


def test_probe_jobset_names_the_queue_and_goes_through_admission():
    js = d.probe_jobset("ns", "q")
    assert js["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "q" and js["metadata"]["namespace"] == "ns"
    assert js["spec"]["suspend"] is True


def test_upgrade_swaps_only_the_binary():
    argv = ["/c/bin/kubernetes-v1.34.4/kubelet", "--config=/x", "--v=1"]
    new = upgrade.swapped(argv, upgrade.NEXT["kubernetes"])
    assert new[1:] == argv[1:] and new[0].endswith(f"kubernetes-{builds.KUBERNETES_UPGRADE_VERSION}/kubelet")
    assert upgrade.version_of(argv[0]) == "v1.34.4" and upgrade.version_of("containerd") == ""
    assert upgrade.build_of("kubelet-poc-n1") == "kubernetes" and upgrade.build_of("kueue") == "kueue"
    with pytest.raises(KeyError):
        upgrade.build_of("etcd")


def test_next_releases_are_one_minor_up():
    def minor(v):
        return int(v.lstrip("v").split(".")[1])
    for b in builds.UPGRADES:
        assert minor(b.version) == minor(upgrade.PINNED[b.component].version) + 1, b


def test_a_users_cluster_runs_its_own_commands():
    drills = SimpleNamespace(commands={"k8s": {"restart": [{"component": "kube-apiserver", "argv": ["true"]}]}},
                             confirm_cluster=None, component_timeout_s=5, probe_s=0.1)
    drill = d.K8sDrill(SimpleNamespace(local=False, client=None), drills)
    assert drill.plan("restart") == ["kube-apiserver"]
    drill.try_status = lambda: None          # the platform answers again at once
    st = drill.step("restart", "kube-apiserver")
    assert st.ok and st.how == "true"
    assert drill.prepare("upgrade") == {} and drill.restore("upgrade") == {}
