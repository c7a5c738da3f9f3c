"""The Slurm drill's pure logic: what it reads from Slurm's output (recorded from the local cluster in
tests/fixtures/slurm/drill/), the order of its plan, when it calls a component back, owned()'s
decisions, and which upgrade paths Slurm's guide allows. Commands go to a fake runner."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from support.paths import FIXTURES

from harness.clusters.slurm.upgrade import major_of, upgrade_supported
from harness.config.drills import Drills
from harness.drills import slurm as ds
from harness.errors import BackendError

FIX = FIXTURES / "slurm" / "drill"
NODES = {"c3": "poc-slurm-c3", "c1": "poc-slurm-c1", "c2": "poc-slurm-c2"}


def text(name: str) -> str:
    return (FIX / name).read_text()


class FakeRun:
    """Answers by the first rule whose words all appear in the argv, in order of the rules; each rule's
    answers are used one after another (the last one repeats). Records every argv."""

    def __init__(self, rules: list[tuple[tuple[str, ...], list[tuple[int, str, str]]]]):
        self.rules, self.calls = rules, []

    def __call__(self, argv, timeout=60):
        self.calls.append(list(argv))
        for words, answers in self.rules:
            if all(w in argv for w in words):
                return answers.pop(0) if len(answers) > 1 else answers[0]
        return 1, "", f"no rule for {argv}"


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


def drill(run, docker=True, confirm=None, factory=None, tmp=None, timeout=5):
    b = SimpleNamespace(docker={"login": "poc-slurm-login", "controller": "poc-slurm-slurmctld", "nodes": NODES}
                        if docker else None, cfg=SimpleNamespace(user="poc", connection_file=None, host="h"),
                        t=None)
    clock = Clock()
    return ds.SlurmDrill(b, Drills(confirm_cluster=confirm, component_timeout_s=timeout), run=run, clock=clock,
                         sleep=clock.sleep, transport_factory=factory, state_dir=tmp), clock


def test_recorded_outputs_parse():
    nodes = ds.parse_nodes(text("show_node.txt"))
    assert sorted(nodes) == ["c1", "c2", "c3"]
    assert nodes["c1"]["State"] == "IDLE" and nodes["c1"]["Version"] == "24.11.5"
    assert nodes["c1"]["OS"].startswith("Linux ")      # a value with spaces stays whole
    conf = ds.parse_show_config(text("show_config.txt"))
    assert conf["ClusterName"] == "poc" and conf["SLURM_VERSION"] == "24.11.5"
    rows = ds.parse_sacct(text("sacct_steps.txt"))
    assert {r["JobID"].split(".")[-1] for r in rows} >= {"batch", "0"}


def test_slurmd_back_needs_a_new_registered_responding_slurmd():
    f = ds.parse_nodes(text("show_node.txt"))["c1"]
    start = f["SlurmdStartTime"]
    assert ds.slurmd_back(f, "20", "103", "2026-01-01T00:00:00")[0]
    assert not ds.slurmd_back(f, "20", "20", "2026-01-01T00:00:00")[0]        # same process: not restarted
    assert not ds.slurmd_back(f, "20", "103", start)[0]                       # not registered again yet
    assert not ds.slurmd_back(f, "20", "", "2026-01-01T00:00:00")[0]          # not running
    assert not ds.slurmd_back({**f, "State": "IDLE+NOT_RESPONDING"}, "20", "103", "x")[0]
    assert not ds.slurmd_back(f, "20", "103", "x", want_version="26.05.5")[0]  # upgrade: still the old release
    assert ds.slurmd_back({**f, "Version": "26.05.5"}, "20", "103", "x", want_version="26.05.5")[0]


def test_plan_follows_the_upgrade_guide_order():
    d, _ = drill(FakeRun([]))
    assert d.plan("restart") == ["slurmdbd", "slurmctld", "slurmd@c1", "slurmd@c2", "slurmd@c3"]
    assert d.plan("upgrade") == d.plan("restart")
    remote, _ = drill(FakeRun([]), docker=False)
    with pytest.raises(BackendError, match="no restart commands for slurm"):   # a user's cluster: their commands
        remote.plan("restart")


def test_owned_local_cluster_by_its_label_and_state_marker(tmp_path):
    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / "cluster.json").write_text("{}")
    run = FakeRun([(("docker", "inspect"), [(0, "slurm\n", "")])])
    ok, why = drill(run, tmp=tmp_path)[0].owned()
    assert ok and "k8s-slurm-poc.cluster=slurm" in why
    # a container of that name without the harness's label is not the harness's cluster
    run = FakeRun([(("docker", "inspect"), [(0, "\n", "")]),
                   (("scontrol", "config"), [(0, text("show_config.txt"), "")])])
    ok, why = drill(run, tmp=tmp_path)[0].owned()
    assert not ok and "confirm_cluster" in why and "poc" in why


class FakeTransport:
    def __init__(self, out):
        self.out = out

    def run(self, argv, env=None, timeout=60, check=True):
        return SimpleNamespace(returncode=0, stdout=self.out, stderr="")


@pytest.mark.parametrize(("confirm", "owned", "says"), [
    (None, False, "confirm_cluster is not set"),
    ("prod", False, "ClusterName is 'poc'"),
    ("poc", True, "names this cluster"),
])
def test_owned_user_cluster_only_with_its_name_confirmed(confirm, owned, says):
    d, _ = drill(FakeRun([]), docker=False, confirm=confirm, factory=lambda: FakeTransport(text("show_config.txt")))
    ok, why = d.owned()
    assert ok is owned and says in why


def test_daemon_restart_is_back_at_the_first_passing_check():
    run = FakeRun([(("docker", "restart"), [(0, "", "")]),
                   (("sacctmgr",), [(1, "", "Connection refused"), (1, "", "Connection refused"), (0, "poc\n", "")]),
                   (("scontrol", "config"), [(0, text("show_config.txt"), "")]),
                   (("dpkg-query",), [(0, "24.11.5-4+deb13u1", "")])])
    d, _ = drill(run)
    st = d.step("restart", "slurmdbd")
    assert st.ok and st.group == "database" and st.resolution_s == ds.POLL_S
    assert st.back - st.started == pytest.approx(2 * ds.POLL_S)
    assert st.how == "docker restart -t 30 poc-slurm-slurmdbd"
    assert st.version_before == st.version_after == "24.11.5"


def test_a_component_that_does_not_come_back_is_a_failed_step_not_an_exception():
    run = FakeRun([(("docker", "restart"), [(0, "", "")]), (("scontrol", "ping"), [(1, "", "DOWN")])])
    d, _ = drill(run, timeout=3)
    st = d.step("restart", "slurmctld")
    assert not st.ok and st.back is None and "not healthy 3 s" in st.error
    run = FakeRun([(("docker", "restart"), [(1, "", "No such container")])])
    st = drill(run)[0].step("restart", "slurmctld")
    assert not st.ok and "No such container" in st.error


def test_probes_answer_none_or_the_refusal():
    run = FakeRun([(("--test-only",), [(0, "", text("test_only_ok.txt")), (1, "", text("test_only_refused.txt"))]),
                   (("squeue",), [(0, "", "")])])
    d, _ = drill(run)
    assert d.try_submit() is None
    assert d.try_submit() == "allocation failure: Requested node configuration is not available"
    assert d.try_status() is None
    assert all(c[:4] == ["docker", "exec", "-u", "poc"] for c in run.calls)   # as the user, on the login node


def test_leftovers_reading():
    assert ds.bad_nodes("c1|idle\nc2|mixed\nc3|down*\n", busy=False) == [
        {"what": "node not idle", "node": "c2", "state": "mixed"},
        {"what": "node not idle", "node": "c3", "state": "down*"}]
    assert ds.bad_nodes("c1|allocated\n", busy=True) == []
    assert ds.leftover_steps("7|CANCELLED\n7.batch|CANCELLED\n7.0|RUNNING\n8.0|RUNNING\n", active={"8"}) == [
        {"what": "step still running in accounting after its job ended", "step": "7.0", "state": "RUNNING"}]


@pytest.mark.parametrize(("frm", "to", "ok"), [
    ("24.11.5", "26.05.5", True),     # trixie -> sid: 26.05 accepts 25.11, 25.05, 24.11
    ("22.05.8", "24.11.5", False),    # bookworm -> trixie: 24.11 accepts 24.05, 23.11, 23.02 only
    ("22.05.8", "26.05.5", False),
    ("23.02.1", "23.11.4", True),     # before 24.11: two back
    ("22.05.8", "23.11.4", True),
    ("21.08.1", "23.11.4", False),
    ("26.05.5", "24.11.5", False),    # no downgrade
])
def test_upgrade_paths_follow_the_compatibility_window(frm, to, ok):
    assert upgrade_supported(frm, to)[0] is ok


def test_major_of():
    assert major_of("slurm 24.11.5") == "24.11" and major_of("26.05.5-1") == "26.05"
