"""Recovery projected to each platform's defaults, from records of the committed smoke campaign."""
from __future__ import annotations

import copy
import json

import pytest
from support.paths import RESULTS

from harness.report import defaults as d

CAMPAIGN = RESULTS / "smoke-2026-12-03-ux-audit"


@pytest.fixture(scope="module")
def records() -> dict[str, dict]:
    lines = (CAMPAIGN / "smoke-poc" / "runs.jsonl").read_text().splitlines()
    return {r["run_id"]: r for r in map(json.loads, lines)}


@pytest.mark.parametrize("text, seconds", [(30, 30.0), ("30 sec", 30.0), ("20s", 20.0), ("1m0s", 60.0),
                                           ("1m30s", 90.0), ("10", 10.0), ("soon", None), (None, None),
                                           (True, None)])
def test_recorded_settings_read_as_seconds(text, seconds):
    assert d.seconds(text) == seconds


def test_slurm_kill_rank_replaces_the_credential_hold_and_the_scheduling_wait(records):
    rec = records["slurm-kill-rank-01"]
    # sacct: the failed attempt ended at ..886, the requeued one was eligible at ..897 and started at ..900
    p = d.project(rec)
    assert p is not None and p.fault == "kill_rank"
    hold, wait = p.terms
    assert (hold.setting, hold.site, hold.measured) == ("cred_expire", 10.0, 11.0)
    # the requeue's own second carries over: 120 + 1, sacct's whole seconds either side
    assert (hold.lo, hold.hi) == (120.0, 122.0)
    assert (wait.measured, wait.lo, wait.hi) == (3.0, 0.0, 31.0)
    measured = rec["metrics"]["recovery_s"]["value"]
    assert p.measured == measured
    assert p.lo == pytest.approx(measured - 14.0 + 120.0)
    assert p.hi == pytest.approx(measured - 14.0 + 153.0)
    assert not p.at_defaults


def test_slurm_lose_node_adds_slurmd_timeout_to_detection(records):
    p = d.project(records["slurm-lose-node-04"])
    assert [t.setting for t in p.terms] == ["SlurmdTimeout", "cred_expire", "sched_interval/bf_interval"]
    timeout = p.terms[0]
    assert (timeout.site, timeout.default, timeout.lo, timeout.hi) == (30.0, 300.0, 200.0, 400.0)
    # NODE_FAIL ended the attempt at ..378, its requeue was eligible at ..390
    assert p.terms[1].measured == 12.0


def test_k8s_kill_rank_has_no_setting_in_its_path(records):
    p = d.project(records["k8s-kill-rank-01"])
    assert p.terms == () and p.lo == p.hi == p.measured and not p.at_defaults


def test_k8s_lose_node_replaces_grace_period_and_toleration(records):
    p = d.project(records["k8s-lose-node-04"])
    grace, tol = p.terms
    assert (grace.site, grace.default, grace.lo, grace.hi) == (20.0, 50.0, 40.0, 55.0)
    teardown = records["k8s-lose-node-04"]["metrics"]["recovery_teardown_s"]["value"]
    assert (tol.site, tol.default) == (30.0, 300.0)
    assert tol.lo == pytest.approx(300.0 + teardown - 30.0 - 5.0)


def test_a_run_at_the_defaults_reads_as_measured(records):
    rec = copy.deepcopy(records["slurm-kill-rank-01"])
    rec["environment"]["slurm_settings"]["AuthInfo"] = "(null)"          # cred_expire left at its default
    rec["environment"]["slurm_settings"]["SchedulerParameters"] = "(null)"
    p = d.project(rec)
    assert p.at_defaults
    [s] = d.summarize([p])
    blocks = d.section([s], str)[0][1]
    assert "(measured: these runs used the defaults)" in blocks[0][1][1][0][7]


def test_unrecorded_settings_or_failed_runs_are_not_projected(records):
    rec = copy.deepcopy(records["slurm-kill-rank-01"])
    rec["environment"].pop("slurm_settings")
    assert d.project(rec) is None
    k8s = copy.deepcopy(records["k8s-lose-node-04"])
    k8s["environment"]["node_monitor_grace_period"] = None
    assert d.project(k8s) is None
    failed = dict(records["slurm-kill-rank-01"], status="failed")
    assert d.project(failed) is None
    assert d.project(records["slurm-clean-04"]) is None


def test_summary_spans_the_runs_projections(records):
    ps = [d.project(records[f"slurm-kill-rank-0{i}"]) for i in (1, 2, 3)]
    [s] = d.summarize(ps)
    assert s.n == 3 and s.lo == min(p.lo for p in ps) and s.hi == max(p.hi for p in ps)
    assert s.lo <= s.projected <= s.hi


def test_the_section_names_settings_here_and_at_the_defaults():
    section = d.section(d.summarize(d.load(CAMPAIGN)), {"slurm": "Slurm", "k8s": "Kubernetes"}.get)
    [(title, blocks)] = section
    assert title == "Recovery at each platform's defaults"
    header, rows = blocks[0][1]
    assert header[5:8] == ["share the settings set", "setting-free (median)", "at the platform's defaults"]
    by = {(r[0], r[1]): r for r in rows}
    assert by[("Slurm", "kill_rank")][4] == "cred_expire 10 s, sched_interval/bf_interval 5 s"
    # how much of each figure the settings set, by name, and what is left when those stretches are taken out
    assert by[("Slurm", "kill_rank")][5] == ("56–59 % (requeue hold: cred_expire 10 s, wait for a scheduling pass: "
                                             "sched_interval/bf_interval 5 s)")
    assert by[("Slurm", "kill_rank")][6] == "9.7 s" and by[("Kubernetes", "kill_rank")][6] == "14 s"
    assert by[("Slurm", "kill_rank")][7].endswith("(projected)")
    # JobSet's own default (no failurePolicy) does not restart at all: the runs' restarts are the harness's policy
    assert by[("Kubernetes", "kill_rank")][7] == (
        "14 s (no cluster setting in its path); does not restart at JobSet's default (no failurePolicy: the first "
        "failed Job fails the JobSet; these runs' JobSets carried maxRestarts 3, set by the harness)")
    assert d.section([], str) == []


def test_the_recovery_row_names_each_platforms_recovery_at_its_defaults(tmp_path):
    from harness.report.document import build

    build(str(CAMPAIGN), str(tmp_path))
    row = next(line for line in (tmp_path / "report.md").read_text().splitlines()
               if "`recovery_s:kill_rank` at each platform's defaults: " in line)
    assert "Slurm 146 s [129–164] projected, Kubernetes 14 s (no cluster setting in its path); does not restart at " \
           "JobSet's default" in row
    assert row.endswith("| ×0.09 | projected from these runs' phases, not measured |")


def test_projection_to_named_settings_keeps_the_others_at_their_defaults(records):
    """benchmarks/recovery_at_defaults.py projects site runs to the settings a measured run recorded: a lost node's
    pods at the default 300 s toleration while the node-monitor grace period stays the cluster's 20 s."""
    p = d.project(records["k8s-lose-node-04"], {"node-monitor-grace-period": 20.0, "pod toleration": 300.0})
    grace, tol = p.terms
    assert (grace.default, tol.default) == (20.0, 300.0)
    assert grace.lo == 10.0 and grace.hi == 25.0   # the grace's own polling window around the target
    full = d.project(records["k8s-lose-node-04"])
    assert full.lo - p.lo == pytest.approx(30.0)   # 50 s instead of 20 s of grace


def test_setting_free_takes_out_what_the_settings_set(records):
    p = d.project(records["slurm-kill-rank-01"])
    hold, wait = p.terms
    assert p.governed == hold.measured + wait.measured and p.free == pytest.approx(p.measured - p.governed)
    assert 0 < p.share < 1 and p.governed_resolution == 2.0   # two whole-second sacct differences
