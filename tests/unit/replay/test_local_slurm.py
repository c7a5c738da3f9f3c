"""The emulated Slurm replay's tenants as slurmdbd accounts (harness/replay/local.py), with a fake
cluster shell: the accounts are made with the equal-quota shares before the replay and removed after
it, also when the replay fails; accounts that existed before are used and never removed."""
from __future__ import annotations

import subprocess

import pytest

from harness.errors import BackendError, ConfigError
from harness.replay import local, slurm_tenancy
from harness.replay.slurm import SlurmReplay
from harness.scale.trace import NodeShape, Trace, TraceJob


def trace(*tenants: str) -> Trace:
    jobs = tuple(TraceJob(id=f"j{i}", submit_s=0, tenant=t, nodes=1, gpus_per_node=2, limit_s=60, runtime_s=5)
                 for i, t in enumerate(tenants))
    return Trace(name="t", source="unit", shape=NodeShape(nodes=2, gpus_per_node=4), duration_s=10, jobs=jobs)


class FakeSlurm:
    """Two nodes × 4 GPUs; sacctmgr and sshare over a set of accounts; every argv recorded."""

    def __init__(self, accounts=("root",), busy_deletes: int = 0):
        self.accounts = set(accounts)
        self.calls: list[list[str]] = []
        self.busy_deletes = busy_deletes     # deletes refused as if a job were still completing

    def __call__(self, argv, input=None, timeout=None):
        self.calls.append(list(argv))
        out, rc = "", 0
        if argv[0] == "sinfo":
            out = "e0001 gpu:4\ne0002 gpu:4\n"
        elif argv[:4] == ["sacctmgr", "-n", "-P", "list"]:
            out = "".join(f"{a}\n" for a in sorted(self.accounts))
        elif argv[:4] == ["sacctmgr", "-i", "add", "account"]:
            self.accounts.add(argv[4])
        elif argv[:4] == ["sacctmgr", "-i", "delete", "account"]:
            if self.busy_deletes:
                self.busy_deletes -= 1
                out, rc = " Error with request: Job(s) active, cancel job(s) before remove\n", 1
            else:
                self.accounts -= set(argv[4].removeprefix("name=").split(","))
        elif argv[0] == "sshare":
            out = "".join(f"{a}\n" for a in sorted(self.accounts))
        elif argv[:3] == ["scontrol", "show", "config"]:
            out = ("SchedulerType = sched/backfill\nPriorityWeightFairShare = 10000\nPriorityWeightAge = 1000\n"
                   "PriorityWeightJobSize = 1000\nPriorityDecayHalfLife   = 7-00:00:00\nOther = x\n")
        return subprocess.CompletedProcess(argv, rc, out, "")


def test_each_tenant_an_account_with_equal_shares_made_before_and_removed_after(monkeypatch):
    fake = FakeSlurm(accounts=("root", "b"))
    seen = {}

    def run(self, trace, timeout_s):
        seen["accounts_during"] = set(fake.accounts)
        return {"platform": "slurm"}

    monkeypatch.setattr(SlurmReplay, "run", run)
    result, gpus = local.replay_slurm(trace("a", "b", "a"), "n", timeout_s=5, say=lambda _: None, shell=fake)
    assert gpus == 8 and seen["accounts_during"] == {"root", "a", "b"}
    assert ["sacctmgr", "-i", "add", "account", "a", "fairshare=4"] in fake.calls
    assert ["sacctmgr", "-i", "add", "user", "root", "account=a"] in fake.calls
    # b existed before the replay: used as it is, never changed or removed
    assert not any("b" in c or "account=b" in c or "name=b" in c for c in fake.calls if c[:2] == ["sacctmgr", "-i"])
    assert fake.accounts == {"root", "b"}
    s = result["settings"]
    assert s["accounts"] == [
        {"account": "a", "tenant": "a", "fairshare": 4, "max_gpus": None, "made_for_replay": True},
        {"account": "b", "tenant": "b", "fairshare": 4, "max_gpus": None, "made_for_replay": False}]
    assert s["PriorityWeightFairShare"] == "10000" and "Other" not in s and s["accounts_removed"] is True
    assert s["sshare_at_end"] == ["a", "b", "root"]


def test_accounts_are_removed_when_the_replay_fails_and_removal_waits_for_active_jobs(monkeypatch):
    fake = FakeSlurm(busy_deletes=1)

    def run(self, trace, timeout_s):
        raise BackendError("squeue failed")

    monkeypatch.setattr(SlurmReplay, "run", run)
    monkeypatch.setattr(slurm_tenancy.time, "sleep", lambda _s: None)
    with pytest.raises(BackendError):
        local.replay_slurm(trace("a", "c"), "n", timeout_s=5, say=lambda _: None, shell=fake)
    assert fake.accounts == {"root"}
    deletes = [c for c in fake.calls if c[:4] == ["sacctmgr", "-i", "delete", "account"]]
    assert deletes == [["sacctmgr", "-i", "delete", "account", "name=a,c"]] * 2


def test_a_failed_account_setup_removes_what_it_made_and_says_which():
    fake = FakeSlurm()
    real = fake.__call__

    def shell(argv, input=None, timeout=None):
        if argv[:5] == ["sacctmgr", "-i", "add", "account", "c"]:
            return subprocess.CompletedProcess(argv, 1, "", "sacctmgr: error: Problem talking to the database")
        return real(argv, input, timeout)

    shares = local.rsl.account_shares(local.rr.equal_quotas(trace("a", "c"), 8))
    with pytest.raises(BackendError) as err:
        local.make_accounts(shares, shell, sleep=lambda _s: None)
    assert "Problem talking to the database" in err.value.message
    assert fake.accounts == {"root"}


class FakeQos:
    """sacctmgr over a set of QOSes (``normal`` to start with); `refuse` makes that QOS's add fail."""

    def __init__(self, refuse: str = ""):
        self.qos, self.calls, self.refuse = {"normal"}, [], refuse

    def __call__(self, argv, input=None, timeout=None):
        self.calls.append(list(argv))
        if argv[:5] == ["sacctmgr", "-n", "-P", "list", "qos"]:
            return subprocess.CompletedProcess(argv, 0, "".join(f"{q}\n" for q in sorted(self.qos)), "")
        if argv[:4] == ["sacctmgr", "-i", "add", "qos"]:
            if argv[4] == self.refuse:
                return subprocess.CompletedProcess(argv, 1, "", f"sacctmgr: error: You gave a bad qos '{argv[4]}'")
            self.qos.add(argv[4])
        if argv[:4] == ["sacctmgr", "-i", "delete", "qos"]:
            self.qos -= set(argv[4].removeprefix("name=").split(","))
        return subprocess.CompletedProcess(argv, 0, "", "")


def test_the_classes_qoses_are_made_and_removed_and_normal_is_set_back():
    fake = FakeQos()
    classes = local.rp.class_priorities(["high", "low", "normal"], local.rp.DEFAULT_PRIORITIES)
    made, modified = slurm_tenancy.make_qos(classes, fake)
    assert made == ["low", "high"] and modified == ["normal"] and fake.qos == {"normal", "low", "high"}
    assert slurm_tenancy.remove_qos(made, modified, fake) == "" and fake.qos == {"normal"}
    assert fake.calls[-2][-4:] == ["set", "priority=0", "preempt=", "preemptmode=cluster"]


def test_a_refused_qos_puts_back_what_was_made_and_says_why():
    fake = FakeQos(refuse="high")
    classes = local.rp.class_priorities(["high", "low", "normal"], local.rp.DEFAULT_PRIORITIES)
    with pytest.raises(BackendError, match="bad qos 'high'"):
        slurm_tenancy.make_qos(classes, fake)
    assert fake.qos == {"normal"}
    assert ["sacctmgr", "-i", "modify", "qos", "where", "name=normal", "set", "priority=0", "preempt=",
            "preemptmode=cluster"] in fake.calls


def test_preemption_on_a_cluster_started_without_preempt_qos_is_refused_before_anything_is_made():
    fake = FakeSlurm()       # its scontrol show config has no PreemptType: a cluster from before preemption
    with pytest.raises(ConfigError) as e:
        local.replay_slurm(trace("a"), "n", timeout_s=5, say=lambda _: None, shell=fake, preemption="priority")
    assert "preempt/qos" in e.value.message and "down --slurm --emulated" in e.value.tip
    assert not [c for c in fake.calls if c[:2] == ["sacctmgr", "-i"]]


def test_a_cluster_that_does_not_run_the_pairs_slurm_side_is_refused_before_anything_is_made():
    """The Slurm side of a queue policy pair is the cluster's configuration: a replay labelled strict-fifo on a
    cluster running backfill with size weight would compare the wrong policies."""
    fake = FakeSlurm()
    with pytest.raises(ConfigError, match="does not run the Slurm side of queue policy strict-fifo") as e:
        local.replay_slurm(trace("a"), "n", timeout_s=5, say=lambda _: None, shell=fake, policy="strict-fifo")
    assert "--queue-policy strict-fifo" in e.value.tip
    assert not any(c[:3] == ["sacctmgr", "-i", "add"] for c in fake.calls)
