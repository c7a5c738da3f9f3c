"""The decision summary that opens the report: ten criteria, verdicts only where compare.py drew them,
"not measured" where the campaign has no data, and a reading built from the rows."""
import math
import re
from pathlib import Path

import numpy as np
import pytest
from support.report_rows import criteria, ledger, lines, section
from support.report_ux_audit_fixture import STORED, campaign

from harness.report import bottom_line, decision
from harness.report.compare import Comparison
from harness.report.document import build
from harness.report.stats import Group, SummaryRow
from harness.report.table import from_records

CRITERIA = ["queue", "startup", "submit → first step", "all-reduce bus bandwidth", "recovery", "contention",
            "queue at scale", "user experience", "auditing", "upgrades", "cost", "inference"]


_section = section


def _rows(md: str) -> dict[str, list[str]]:
    return criteria(md)


def test_the_committed_campaign_opens_with_the_summary_and_marks_what_it_did_not_measure(tmp_path):
    md = build(str(STORED), str(tmp_path / "rep"))["report.md"].read_text()
    assert md.index("## Decision summary") < md.index("## Headline")
    assert re.findall(r"^## .*$", md, re.M)[0] == "## Bottom line"
    assert re.findall(r"^## .*$", md, re.M)[1].startswith("## Decision summary")
    rows = _rows(md)
    assert list(rows) == CRITERIA
    for name in ("queue at scale", "user experience", "auditing", "upgrades", "inference"):
        assert rows[name] == ["not measured", "–", "–", "not measured"], name
    # its numbers are the headline's: the same cells, the same comparison
    assert "Slurm 1.04 ± 0.05 [0.115–1.88] (12), Kubernetes 0.228 ± 0.013 [0.177–0.273] (12)" in rows["queue"][0]
    assert rows["queue"][1].startswith("0.22 (0.13–0.68)")
    # paired by round, Kubernetes' queue is below Slurm's in 9 of 12 rounds; some of Slurm's queues lie within
    # their ± of 0, so the test runs on differences in seconds (no ratio of such values): Holm p 0.034
    assert rows["queue"][3] == ("Kubernetes ahead (no ratio interval (a value is not above its own resolution: "
                                "tested on differences); exact signed-rank test over 12 rounds, Kubernetes higher in 3 "
                                "of 12; Holm p 0.034)")
    # equivalence within the margin, after the same Holm adjustment as the differences (one family)
    assert rows["startup"][3].startswith("equivalent within ×1.25: within-round ratio ×1.10 (90% CI 1.04–1.20) inside "
                                         "0.80–1.25; two one-sided tests p 1.2e-04, Holm p 6.1e-04")
    # per fault kind: the ratio at these runs' settings (attributed, no verdict), the setting-free figure (the
    # question), and the projection to each platform's defaults
    assert [c[4] for c in lines(md) if c[1].startswith("`recovery_")] == [
        "not a verdict on the platforms: the settings' share of each figure: Slurm 59–62 % (requeue hold: cred_expire "
        "10 s, wait for a scheduling pass: sched_interval/bf_interval 5 s); Kubernetes 0 % (no cluster setting in its "
        "path)", "no verdict: n 3/3, below 5 a side", "projected from these runs' phases, not measured",
        "not a verdict on the platforms: the settings' share of each figure: Slurm 85 % (lost node noticed: "
        "SlurmdTimeout 30 s, requeue hold: cred_expire 10 s, wait for a scheduling pass: sched_interval/bf_interval "
        "5 s); Kubernetes 75 % (lost node noticed: node-monitor-grace-period 20 s, pods evicted: pod toleration 30 s)",
        "no verdict: n 1/1, below 5 a side", "projected from these runs' phases, not measured"]
    opening = _section(md, "Bottom line")
    assert "Prefer" not in md and "…" not in opening
    assert opening.split("\n\n")[1] == ("**Host load**: not recorded (these runs predate its sampling): a busy host "
                                        "cannot be ruled out.")
    assert opening.split("\n\n")[2] == ("Kubernetes is ahead on queue: `queue_s` Kubernetes 0.228 vs Slurm 1.04 s, "
                                        "Kubernetes / Slurm ×0.22, Holm p 0.034.")
    assert "equivalent on startup (within ×1.25), submit → first step (within ×1.25)" in opening
    assert "`recovery_s:kill_rank`" not in opening   # the settings' figure is no question
    reading = _section(md, "Decision summary")
    assert ("Not measured in this campaign, so it says nothing about them: queue at scale, user experience, auditing, "
            "upgrades, inference.") in reading


def test_ux_and_audit_records_fill_their_rows(tmp_path):
    md = build(str(campaign(tmp_path)), str(tmp_path / "rep"))["report.md"].read_text()
    rows = _rows(md)
    ux, audit = rows["user experience"], rows["auditing"]
    assert "`first_log_s` Slurm" in ux[0] and "`wrong_queue` Slurm not clear, Kubernetes 1.08" in ux[0]
    assert "a user writes (files / lines (not blank or comment) / objects): Slurm 1 / 52 (41) / 1" in ux[0]
    assert "calls to submit / watch / read logs / cancel (median): Slurm 1 / 30 / 3 / 1, Kubernetes 2 / 45 / 3 / 2" \
        in ux[0]
    assert "no verdict from one probe per mistake" in ux[3] and "Slurm 4/5, Kubernetes 5/5" in ux[3]
    assert "Slurm 7/7 (7)" in audit[0] and "Kubernetes 6/7 (6)" in audit[0]
    assert audit[3] == "descriptive: Slurm's records answer more questions (7 vs 6 of 7)"
    assert rows["upgrades"][0] == "not measured"
    reading = _section(md, "Decision summary")
    assert "Without a verdict (descriptive):" in reading and "Kubernetes for 5/5, median 2.20 s to it" in reading


def _comp(metric, better, ratio=0.5, lo=0.4, hi=0.6, verdict="lower"):
    return Comparison(metric, "k8s", "slurm", "s", 8, 8, 1.0, 2.0, ratio, lo, hi, 0.01, family="primary",
                      test="paired", n_pairs=8, n_higher=0, p=0.001, p_holm=0.002, effect=ratio, eq_low=lo, eq_high=hi,
                      refused=None, warning=None, verdict=verdict if better else "none")


def _summ(metric, plat, median):
    return SummaryRow(plat, metric, "s", 8, median, 0.01, median * 0.9, median * 1.1, median * 0.8, median * 1.2)


def _empty_table():
    return from_records([{"schema": 1, "run_id": "x", "platform": "local", "status": "failed"}])


def test_a_verdict_opens_the_report_citing_its_numbers():
    gs = {(p, "queue_s"): Group("s", np.ones(8), np.arange(8), np.zeros(8)) for p in ("k8s", "slurm")}
    summ = [_summ("queue_s", "k8s", 1.0), _summ("queue_s", "slurm", 2.0)]
    rows = decision.rows(_empty_table(), gs, summ, [_comp("queue_s", better=True)])
    assert rows[0].cells()[0][4] == ("Kubernetes ahead (within-round ratio ×0.50 (90% CI 0.40–0.60); exact signed-rank "
                                  "test over 8 rounds, Kubernetes higher in 0 of 8; Holm p 0.002)")
    says, nxt, _ = bottom_line.paragraphs(rows, _empty_table(), gs, [_comp("queue_s", better=True)])
    assert says[0] == ("Kubernetes is ahead on queue: `queue_s` Kubernetes 1.00 vs Slurm 2.00 s, Kubernetes / Slurm "
                       "×0.50 (90% CI 0.40–0.60), Holm p 0.002.")
    assert not any("Nothing separates" in t or "Slurm is ahead" in t for t in says) and nxt == []


def test_upgrade_and_serve_metrics_fill_their_rows_when_a_campaign_has_them():
    keys = ["upgrade_drain_s", "serve_p99_latency_s"]
    gs = {(p, k): Group("s", np.ones(8), np.arange(8), np.zeros(8)) for p in ("k8s", "slurm") for k in keys}
    summ = [_summ(k, p, 1.0) for p in ("k8s", "slurm") for k in keys]
    rows = {r.criterion: r for r in decision.rows(_empty_table(), gs, summ, [_comp(k, better=False) for k in keys])}
    for name, key in (("upgrades", "upgrade_drain_s"), ("inference", "serve_p99_latency_s")):
        [cells] = rows[name].cells()
        assert rows[name].measured and f"`{key}` Slurm 1.00" in cells[2], cells
        assert cells[4].startswith("no clear difference"), cells


@pytest.mark.parametrize("verdict, expected", [
    ("few", "no verdict: n 8/8, below 5 a side"), ("resolution", "no clear difference (below the measurement "
                                                                   "resolution)"),
    ("descriptive", "no verdict (shown, not tested)")])
def test_ahead_never_claims_more_than_the_comparison(verdict, expected):
    c = _comp("queue_s", better=True, verdict=verdict)
    assert c.better is None and decision.ahead_text(c) == expected


def test_ratio_points_leave_out_a_ratio_that_cannot_be_drawn():
    r = decision.Row("queue", comps=[_comp("queue_s", True), _comp("startup_s", False, ratio=math.nan)])
    assert [label for label, _ in decision.ratio_points([r])] == ["queue: queue_s"]


def test_each_row_opens_with_its_conditions_ledger_unequal_first(tmp_path):
    """What each platform ran under, side by side: the CPU and memory caps Kubernetes' pods had enforced and Slurm
    only asked for (TaskPlugin task/none) come first in every row whose figure includes the job's own work, then
    the settings that govern the row, then the host's load (not recorded by these runs)."""
    md = build(str(STORED), str(tmp_path / "rep"))["report.md"].read_text()
    rows = _rows(md)
    unequal = ("**unequal CPU cap**: Slurm 1 CPU, not enforced (task/none), Kubernetes 1 CPU, enforced (CFS quota); "
               "**unequal memory cap**: Slurm 3072 MiB, not enforced (task/none), Kubernetes 3072 MiB, enforced; ")
    assert rows["startup"][2].startswith(unequal)
    assert rows["recovery"][2] == unequal + (
        "settings: Slurm: cred_expire 10, SlurmdTimeout 30 sec, sched_interval 5, bf_interval 5, JobRequeue 1; "
        "Kubernetes: JobSet maxRestarts 3, JobSet restartStrategy Recreate, node-monitor-grace-period 20s, "
        "pod tolerationSeconds 30, default not-ready toleration 30, default unreachable toleration 30, "
        "Kueue requeue backoff not recorded; host load: not recorded (these runs predate its sampling): a busy host "
        "cannot be ruled out")
    # the queue's figure ends at the allocation: no cap shapes it
    assert rows["queue"][2].startswith("settings: Slurm: sched_interval 5, bf_interval 5; host load: not recorded")
    by = {}
    crit = None
    for c in ledger(md):
        crit = c[0] or crit
        by[(crit, c[1])] = c[2:]
    assert by[("startup", "CPU cap")] == [
        "1 CPU a node asked (--cpus-per-task), not enforced (TaskPlugin task/none: no cgroup confines the tasks, "
        "which may use every CPU of their node)", "1 CPU a pod, enforced (container limit: the kubelet's CFS quota)",
        "**no**"]
    assert by[("startup", "image")][2] == "yes" and by[("queue", "exclusivity")][2] == "yes"
    assert "cluster with other values" in _section(md, "Decision summary")


def test_a_setting_the_runs_did_not_record_is_said_so_never_filled_in():
    from harness.report import bounds
    assert bounds.recorded({"slurm_settings": {"AuthInfo": "cred_expire=10,use_client_ids"}},
                           ("slurm_settings", "AuthInfo", "cred_expire")) == "10"
    label = {"slurm": "Slurm", "k8s": "Kubernetes"}.get
    text = bounds.settings_text("recovery", {"slurm": {"slurm_settings": {"SlurmdTimeout": "300 sec"}}},
                                ("slurm", "k8s"), label)
    assert text.startswith("Slurm: cred_expire not recorded, SlurmdTimeout 300 sec, sched_interval not recorded")
    assert "Kubernetes: JobSet maxRestarts not recorded" in text and "node-monitor-grace-period not recorded" in text
    assert bounds.settings_text("startup", {}, ("slurm", "k8s"), label) == "–"


def test_repeats_of_one_trace_no_longer_decide_queue_at_scale_and_the_opening_says_why():
    """The committed 64-node replays are one trace replayed 6 times a side: they say how the platforms vary on
    that trace, not across traces, so they are no verdict on queues at scale (replay_sets.py); the opening says
    which sets gave none and why, instead of "Slurm is ahead on queue at scale"."""
    from harness.report import replay_sets
    where = Path(__file__).parents[3] / "results" / "smoke-2026-12-05" / "smoke-poc" / "scale" / "verdict-64n"
    parts, _, wins, notes = replay_sets.decision([where])
    assert not wins and any("`verdict-64n`" in n for n in notes), notes
    assert parts[0][0].startswith("`verdict-64n`: 1 trace (synthetic-64n-2h-seed1)")
    rows = decision.rows(_empty_table(), {}, [], [], replays=[where])
    says, _, _ = bottom_line.paragraphs(rows, _empty_table(), {}, [])
    assert not any(t.startswith("Slurm is ahead on queue at scale") for t in says)
    assert any(t.startswith("Queue at scale has no verdict from the campaign's replays: `verdict-64n`")
               for t in says), says
