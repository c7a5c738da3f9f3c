"""Shared-cluster safety of lose_node on Slurm (harness/backends/slurm/guard.py, nodes.py): only a node
the run holds alone, only with the opt-in, and a lost node resumed only while the run's own mark is on it.

squeue's answers recorded on the Slurm-in-Docker cluster (tests/fixtures/slurm/trixie/guard: job 10 on
c[1-2], job 11 packed beside it on c1). The Kubernetes side is tests/unit/backends/k8s/test_faults.py.
"""
from __future__ import annotations

import json
from collections import Counter
from types import SimpleNamespace

import pytest
from support.paths import FIXTURES

from harness import config
from harness import slurm_parse as sp
from harness.backends.base import Handle, require_destructive_allowed
from harness.backends.k8s.backend import KubernetesBackend
from harness.backends.slurm import SlurmBackend, guard
from harness.backends.slurm.guard import expand_hostlist, held_node
from harness.errors import BackendError
from harness.transports import Result

GUARD = FIXTURES / "slurm" / "trixie" / "guard"


class Squeue:
    """A transport answering squeue from the recordings; every other command succeeds silently."""
    name = "cli"

    def __init__(self, job_json: str | None = None, per_node: dict | None = None):
        self.job_json = (GUARD / "squeue_job.json").read_text() if job_json is None else job_json
        self.per_node = per_node
        self.calls: list[list[str]] = []

    def run(self, argv, *, input=None, env=None, timeout=60, check=True):
        argv = [str(a) for a in argv]
        self.calls.append(argv)
        out = ""
        if argv[0] == "squeue" and "--json" in argv:
            out = self.job_json
        elif argv[0] == "squeue":
            node = next(a.split("=", 1)[1] for a in argv if a.startswith("--nodelist="))
            out = (self.per_node or {}).get(node) if self.per_node else (GUARD / f"squeue_{node}.txt").read_text()
        return Result(tuple(argv), 0, out or "", "")

    def describe(self):
        return {"transport": "recording"}

    def close(self):
        pass


def slurm(t=None, allow=True):
    cfg = config.from_mapping({"platforms": ["slurm"]})
    return SlurmBackend(cfg.slurm, t or Squeue(), allow_destructive_faults=allow)


def slurm_handle(job_id="10"):
    return Handle("slurm", "r1", [job_id], 0.0, data={"job_id": job_id, "run_dir": "/shared/poc/c/r1",
                                                      "events_dir": "/shared/poc/c/r1/events", "lost_nodes": []})


@pytest.mark.parametrize("expr, hosts", [
    ("c[1-2]", ["c1", "c2"]), ("c3", ["c3"]), ("", []),
    ("gpu[001-003,010],login", ["gpu001", "gpu002", "gpu003", "gpu010", "login"]),
    ("r[1-2]n[07-08]", ["r1n07", "r1n08", "r2n07", "r2n08"]),
])
def test_hostlists_expand_as_scontrol_show_hostnames(expr, hosts):
    assert expand_hostlist(expr) == hosts


def test_a_node_the_job_holds_alone_is_allowed_and_named_as_slurm_names_it():
    t = Squeue()
    assert held_node(slurm(t).sched, t, "10", "c2.cluster.local") == "c2"   # a rank's FQDN, Slurm's short name
    assert t.calls[1] == ["squeue", "-h", "--nodelist=c2", "--states=RUNNING,COMPLETING,SUSPENDED,CONFIGURING",
                          "-o", "%i|%u"]


def test_a_node_outside_the_allocation_is_refused_before_anything_is_touched():
    be = slurm()
    journal = []
    with pytest.raises(BackendError, match=r"node 'c3' is not allocated to job 10 \(its nodes: c\[1-2\]\)"):
        be.inject(slurm_handle(), "lose_node", {"rank": 1, "host": "c3", "pid": 1}, journal=journal.append)
    assert journal == [] and [c[0] for c in be.t.calls] == ["squeue"]


def test_a_node_shared_with_another_job_is_refused():
    """Recorded: select/cons_tres put job 11 on c1 beside job 10; DOWN would kill it too."""
    be = slurm()
    with pytest.raises(BackendError, match="node c1 also runs job 11 of poc") as exc:
        be.inject(slurm_handle(), "lose_node", {"rank": 0, "host": "c1", "pid": 1})
    assert "--exclusive" in exc.value.tip
    assert not any(c[:2] == ["scontrol", "update"] for c in be.t.calls)


def test_a_node_an_operator_is_draining_is_refused():
    """Its drain would be lost when the harness resumes it after the fault."""
    class Draining(Squeue):
        def run(self, argv, **kw):
            if argv[0] == "sinfo":
                self.calls.append(list(argv))
                return Result(tuple(argv), 0, "draining\n", "")
            return super().run(argv, **kw)
    be = slurm(Draining())
    with pytest.raises(BackendError, match="node c2 is draining"):
        be.inject(slurm_handle(), "lose_node", {"rank": 1, "host": "c2", "pid": 1})
    assert not any(c[:2] == ["scontrol", "update"] for c in be.t.calls)


def test_a_job_squeue_does_not_list_or_that_is_not_running_is_refused():
    with pytest.raises(BackendError, match="squeue does not list job 99"):
        slurm().inject(slurm_handle("99"), "lose_node", {"rank": 0, "host": "c2", "pid": 1})
    doc = json.loads((GUARD / "squeue_job.json").read_text())
    doc["jobs"][0]["job_state"] = ["COMPLETING"]
    with pytest.raises(BackendError, match="job 10 is COMPLETING, not running"):
        slurm(Squeue(json.dumps(doc))).inject(slurm_handle(), "lose_node", {"rank": 0, "host": "c2", "pid": 1})


def test_without_a_shell_the_other_jobs_cannot_be_checked_and_the_fault_is_refused():
    t = Squeue()
    sched = SimpleNamespace(name="rest", shell=None, squeue=lambda ids: (0, t.job_json, ""),
                            node_record=lambda n, w: {}, set_node_state=lambda *a, **k: None,
                            calls=Counter())
    cfg = config.from_mapping({"platforms": ["slurm"]})
    be = SlurmBackend(cfg.slurm, t, scheduler=sched, allow_destructive_faults=True)
    with pytest.raises(BackendError, match="files: mount"):
        be.inject(slurm_handle(), "lose_node", {"rank": 1, "host": "c2", "pid": 1})


def test_the_backend_refuses_lose_node_without_the_opt_in_even_when_called():
    be = slurm(allow=False)
    with pytest.raises(BackendError, match="allow_destructive_faults is false"):
        be.inject(slurm_handle(), "lose_node", {"rank": 1, "host": "c2", "pid": 1})
    assert be.t.calls == []
    require_destructive_allowed("kill_rank", False, "slurm")   # not destructive: no opt-in needed


def test_from_config_passes_the_opt_in(tmp_path):
    conn = tmp_path / "ssh.json"
    conn.write_text(json.dumps({"host": "h", "port": 22, "user": "u", "key_path": str(tmp_path / "k"),
                                "known_hosts_path": str(tmp_path / "kh")}))
    for allow in (False, True):
        faults_ = [{"kind": "lose_node", "at_step": 1, "rank": 1}] if allow else []
        cfg = config.from_mapping({"platforms": ["slurm", "k8s"], "allow_destructive_faults": allow,
                                   "faults": faults_, "slurm": {"transport": "local", "connection_file": str(conn)}})
        assert SlurmBackend.from_config(cfg).allow_destructive_faults is allow
        assert KubernetesBackend.from_config(cfg).allow_destructive_faults is allow


R = guard.NodeReason


@pytest.mark.parametrize(("reason", "ok"), [
    (R("none", "Unknown"), True), (R(""), True),                 # sinfo %u|%E / a REST record with no reason
    (R("poc-lose-node job 7", "root"), True),                    # the run's own mark, whoever set it
    (R("poc-lose-node job 77", "root"), False), (R("poc-lose-node job 7x", "root"), False),
    (R("maint window", "root"), False), (None, False),
    # where the harness set the reason itself, slurmctld's words are someone else's
    (R("Not responding", "slurm"), False), (R("Node unexpectedly rebooted", "slurm"), False),
])
def test_a_lost_node_is_the_runs_to_resume_only_while_its_own_mark_is_on_it(reason, ok):
    assert guard.restorable(reason, guard.lost_node_mark("7")) is ok


@pytest.mark.parametrize(("reason", "ok"), [
    (R("Not responding", "slurm"), True),                        # as recorded: slurmctld, after the node went
    (R("Kill task failed", "slurm"), True),
    (R("Node unexpectedly rebooted boot_time=1796288402 last response=1796288300", "slurm"), True),
    (R("Not responding", "root"), False),                        # an operator, in slurmctld's words
    (R("Not responding, PSU swapped", "root"), False),           # an operator's that begins like slurmctld's
    (R("Not responding, PSU swapped", "slurm"), False),          # not slurmctld's whole reason either
    (R("Not respondingX", "slurm"), False),
    (R("poc-lose-node job 7", "root"), True),
])
def test_where_the_fault_left_the_reason_to_slurmctld_only_its_whole_reasons_set_by_slurmuser_count(reason, ok):
    assert guard.restorable(reason, guard.lost_node_mark("7"), slurmctld="slurm") is ok


def test_slurmuser_is_read_from_show_config():
    conf = sp.show_config((FIXTURES / "slurm" / "trixie" / "scontrol_show_config.txt").read_text())
    assert guard.slurm_user(conf) == "slurm" and guard.slurm_user({}) is None


class DownNodes:
    """A scheduler whose nodes are down with a reason each (sinfo %E); resume clears it."""

    def __init__(self, reasons: dict[str, str]):
        self.reasons, self.resumed = dict(reasons), []

    def node_usable(self, host):
        return host not in self.reasons, "down" if host in self.reasons else "idle"

    def node_reason(self, host):
        return guard.NodeReason(self.reasons.get(host, "none"), "root")

    def set_node_state(self, host, state, check=True):
        self.resumed.append(host)
        self.reasons.pop(host, None)

    def node_record(self, host, when):
        return {"node": host, "when": when}


def test_slurm_restore_resumes_each_node_while_the_mark_of_the_job_that_took_it_is_on_it():
    """The training run's handle names a node its own fault took (job 4's mark) and one a serving
    replica's node loss took (job 10's mark): each is resumed while its own mark is the reason."""
    from harness.backends.slurm.nodes import restore_lost_nodes

    h = Handle("slurm", "slurm-serve", ["4", "10"], 0.0,
               data={"job_id": "4", "lost_nodes": ["c1", "c2", "c3"], "lost_marks": {"c2": "poc-lose-node job 10",
                                                                                   "c3": "poc-lose-node job 10"}})
    sched = DownNodes({"c1": "poc-lose-node job 4", "c2": "poc-lose-node job 10", "c3": "poc-lose-node job 4"})
    restore_lost_nodes(sched, h, None, lambda argv: None, None)
    assert sched.resumed == ["c1", "c2"]
    # c3 carries job 4's mark, but job 10's fault took it: not a mark this handle may take for its own
    assert list(h.data["nodes_left"]) == ["c3"] and h.data["lost_nodes"] == [] and "lost_marks" not in h.data


def test_a_job_that_lands_on_the_node_between_the_check_and_the_fault_stops_it_and_the_journal_forgets_the_node():
    """Slurm has no compare-and-set on a node: the node's exclusivity is asked again just before it
    goes, and a job that came in between (here job 12 on c2) is not killed."""

    class Landing(Squeue):
        asked = 0

        def run(self, argv, **kw):
            res = super().run(argv, **kw)
            if argv[0] == "squeue" and any(str(a) == "--nodelist=c2" for a in argv):
                self.asked += 1
                if self.asked == 2:
                    return Result(res.argv, 0, res.stdout + "12|alice\n", "")
            return res

    be = slurm(Landing())
    h = slurm_handle()
    journalled = []
    with pytest.raises(BackendError, match="node c2 also runs job 12 of alice"):
        be.inject(h, "lose_node", {"rank": 1, "host": "c2", "pid": 1},
                  journal=lambda hd: journalled.append(list(hd.data["lost_nodes"])))
    assert journalled == [["c2"], []]          # named before the action, forgotten when it was refused
    assert not any(c[:2] == ["scontrol", "update"] or c[0] == "docker" for c in be.t.calls), be.t.calls


def test_the_fault_records_when_the_nodes_exclusivity_was_last_asked():
    be = slurm()
    rec = be.inject(slurm_handle(), "lose_node", {"rank": 1, "host": "c2", "pid": 1})
    assert rec.injected_at >= rec.detail["alone_checked_at"] > 0
    assert sum(1 for c in be.t.calls if "--nodelist=c2" in c) == 2     # checked, then asked again
