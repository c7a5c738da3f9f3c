"""The QOS classes' priorities and preemption on both schedulers (render/replay_priority.py and the two
replay renderers): the same classes and values on each side, Kueue's preemption policies, Slurm QOSes
made lowest first so each names only QOSes that exist, and nothing of it with preemption off."""
from __future__ import annotations

import pytest

from harness.render import replay_k8s as rr
from harness.render import replay_priority as rp
from harness.render import replay_slurm as rsl
from harness.scale.trace import TraceJob

CLASSES = rp.class_priorities(["normal", "high", "low", "high"], rp.DEFAULT_PRIORITIES)


def job(qos: str) -> TraceJob:
    return TraceJob(id="j1", submit_s=0, tenant="a", nodes=2, gpus_per_node=8, limit_s=60, runtime_s=30, qos=qos)


def target(mode: str, classes=tuple(CLASSES)) -> rr.Target:
    return rr.Target(namespace="ns", replay="r1", node_labels={"type": "kwok"}, tolerations=(), preemption=mode,
                     classes=classes)


def test_classes_take_the_table_and_unknown_ones_normal_s_priority():
    assert [(c.qos, c.priority) for c in CLASSES] == [("high", 10000), ("normal", 1000), ("low", 100)]
    site = rp.class_priorities(["debug", "urgent"], rp.parse_priorities("urgent=50000"))
    assert [(c.qos, c.priority) for c in site] == [("urgent", 50000), ("debug", 1000)]
    assert rp.class_priorities(["x"], {"low": 5, "high": 9}) == [rp.ClassPriority("x", 5)]   # no normal: the lowest
    assert rp.lower_than(CLASSES, CLASSES[0]) == ["low", "normal"] and rp.lower_than(CLASSES, CLASSES[2]) == []


@pytest.mark.parametrize("text", ["high", "high=x", "=5", "high=-1", "high=1000001"])
def test_a_bad_priority_is_refused_with_the_form_to_give(text):
    with pytest.raises(ValueError, match="NAME=PRIORITY"):
        rp.parse_priorities(text)


def test_kueue_gets_a_priority_class_per_class_and_preempting_cluster_queues():
    objs = rr.queue_objects(target("priority"), [rr.TenantQuota("a", 64), rr.TenantQuota("b", 64)])
    wpc = {o["metadata"]["name"]: o["value"] for o in objs if o["kind"] == "WorkloadPriorityClass"}
    assert wpc == {"r1-high": 10000, "r1-normal": 1000, "r1-low": 100}
    for cq in (o for o in objs if o["kind"] == "ClusterQueue"):
        assert cq["spec"]["preemption"] == {"withinClusterQueue": "LowerPriority",
                                            "reclaimWithinCohort": "LowerPriority",
                                            "borrowWithinCohort": {"policy": "LowerPriority"}}
    assert rr.jobset(job("high"), target("priority"))["metadata"]["labels"][rp.PRIORITY_CLASS_LABEL] == "r1-high"


def test_with_preemption_off_kueue_has_neither_classes_nor_preemption():
    objs = rr.queue_objects(target("off"), [rr.TenantQuota("a", 64)])
    assert not [o for o in objs if o["kind"] == "WorkloadPriorityClass"]
    assert all("preemption" not in o["spec"] for o in objs if o["kind"] == "ClusterQueue")
    assert rp.PRIORITY_CLASS_LABEL not in rr.jobset(job("high"), target("off"))["metadata"]["labels"]


def test_classes_that_clean_up_alike_or_an_unknown_mode_are_refused():
    with pytest.raises(ValueError, match="distinct"):
        target("priority", (rp.ClassPriority("Hi", 2), rp.ClassPriority("hi", 1)))
    with pytest.raises(ValueError, match="preemption"):
        target("always")


def test_slurm_qoses_are_made_lowest_first_and_an_existing_one_is_set():
    names = {c.qos: rsl.slurm_qos(c.qos) for c in CLASSES}
    argvs = rp.qos_setup(CLASSES, names, existing={"normal"})
    assert argvs == [
        ["sacctmgr", "-i", "add", "qos", "low", "priority=100", "preemptmode=requeue"],
        ["sacctmgr", "-i", "modify", "qos", "where", "name=normal", "set", "priority=1000", "preempt=low",
         "preemptmode=requeue"],
        ["sacctmgr", "-i", "add", "qos", "high", "priority=10000", "preempt=low,normal", "preemptmode=requeue"]]
    assert rp.qos_teardown(["low", "high"], ["normal"]) == [
        ["sacctmgr", "-i", "modify", "qos", "where", "name=normal", "set", "priority=0", "preempt=",
         "preemptmode=cluster"],
        ["sacctmgr", "-i", "delete", "qos", "name=low,high"]]
    assert rp.qos_teardown([], []) == []


def test_slurm_jobs_ask_for_their_class_and_may_be_requeued_only_with_qos_on():
    on = rsl.batch_script(job("High"), rsl.SlurmTarget(replay="r1", with_qos=True))
    assert "#SBATCH --qos=high\n#SBATCH --requeue\n" in on
    assert "--qos" not in rsl.batch_script(job("high"), rsl.SlurmTarget(replay="r1"))
    shares = [rsl.AccountShare("a", "a", 64)]
    assert rsl.account_setup(shares, qos=["low", "high"])[1] == [
        "sacctmgr", "-i", "add", "user", "root", "account=a", "qos=high,low,normal", "defaultqos=normal"]
    assert rsl.account_setup(shares)[1] == ["sacctmgr", "-i", "add", "user", "root", "account=a"]


def test_the_settings_name_the_classes_and_the_policies():
    assert "high=10000" in rp.settings_text("priority", CLASSES) and "preempt/qos" in rp.settings_text(
        "priority", CLASSES)
    assert rp.settings_text("off", CLASSES).startswith("off: no preemption")
