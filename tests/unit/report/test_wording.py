"""The words a verdict may use: each rule with the case that broke it.

- a direction every round shows but the test cannot pass at this n reads "consistent direction, undecided at
  n = 5: ... needs 9 rounds", never "no clear difference" and never "nothing separates";
- equivalence is multiplicity-controlled like a difference, against each metric's own margin;
- a campaign whose runs saw a busy host says so in its first screen, and every verdict carries the flag;
- no committed campaign's comparison reads "no clear difference" where an interval of it excludes 1.
"""
from __future__ import annotations

import json
import math

import pytest
from support.paths import RESULTS
from support.report_rows import criteria, section

from harness.report import compare, stats, table
from harness.report.decision import ahead_text
from harness.report.document import build
from harness.report.equivalence import MARGINS, margin_of
from harness.report.verdicts import findings


def _rec(platform, i, metrics, scenario="clean", unc=0.01, host=None):
    ms = {k: {"value": v, "unit": "s", "lo": v - unc, "hi": v + unc, "uncertainty": unc} for k, v in metrics.items()}
    r = {"schema": 1, "run_id": f"{platform}-{scenario}-{i:02d}", "campaign": "c", "platform": platform,
         "scenario": scenario, "status": "ok", "metrics": ms, "environment": {"torch": "2.6.0"},
         "order": {"round": i}}
    if host is not None:
        r["host_load"] = host
    return r


def _comps(recs):
    t = table.from_records(recs)
    gs = stats.groups(t)
    return {(c.metric, c.numerator, c.denominator): c for c in compare.comparisons(gs, t)}


# Kubernetes ×0.49 in every one of 5 rounds, as kill_rank recovery at the site's settings was on 2026-12-05, beside
# six other primary questions the campaign tested (the family of 7 Holm adjusts over)
K8S = [11.42, 13.68, 12.51, 10.25, 10.71]
SLURM = [23.12, 26.60, 20.31, 25.67, 23.00]


def _campaign_with_a_direction(host=None):
    recs = []
    for i in range(5):
        recs.append(_rec("k8s", i, {"first_log_s": K8S[i]}, host=host))
        recs.append(_rec("slurm", i, {"first_log_s": SLURM[i]}, host=host))
    for i in range(5, 17):   # five more questions, each mixed both ways over 12 rounds
        vals = {"startup_s": 5 + (i % 3) * 0.4, "queue_s": 1 + (i % 4) * 0.2, "allreduce_avg_busbw_gbps": 2.0 + i % 2,
                "cost_per_step_usd": 3 + (i % 5) * 0.1, "handover_s": 4 + (i % 2)}
        recs.append(_rec("k8s", i, {k: v * (1.3 if i % 2 else 0.8) for k, v in vals.items()}, host=host))
        recs.append(_rec("slurm", i, vals, host=host))
    return recs


def test_a_direction_the_test_cannot_pass_at_this_n_is_undecided_never_no_difference():
    comps = _comps(_campaign_with_a_direction())
    c = comps[("first_log_s", "k8s", "slurm")]
    primary = [x for x in comps.values() if x.family == "primary" and x.tested]
    assert len(primary) == c.family_size == 7   # submit_to_first_step_s comes with queue_s and startup_s
    assert c.n_pairs == 5 and c.n_higher == 0 and c.p == pytest.approx(2 / 32) and c.p_holm >= 0.05
    assert c.verdict == "direction"
    text = ahead_text(c)
    assert text.startswith("consistent direction (Kubernetes lower in 5 of 5 rounds; within-round ratio ×0.49")
    # 2/2^5 = 0.0625 can never pass 0.05 / 7 = 0.0071: 9 rounds are the floor
    assert ("undecided at n = 5: the exact signed-rank test cannot reach Holm's threshold 0.0071 (= 0.05 / 7) below "
            "9 rounds (its smallest p at 5 is 2/2^5 = 0.0625); needs 9 rounds") in text
    assert "no clear difference" not in text
    said = " ".join(findings(list(comps.values()), {}))
    assert "`first_log_s`: consistent direction (Kubernetes lower in 5 of 5 rounds" in said


def test_the_opening_names_an_undecided_direction_instead_of_saying_nothing_separates(tmp_path):
    d = tmp_path / "campaign"
    d.mkdir()
    (d / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _campaign_with_a_direction()))
    md = build(str(d), str(tmp_path / "rep"))["report.md"].read_text()
    opening = section(md, "Bottom line")
    assert "Nothing separates" not in opening and "shows a difference beyond its intervals" not in opening
    assert ("No criterion reached a verdict on the campaign's runs; user experience shows a consistent direction "
            "that 5 rounds could not decide (`first_log_s` consistent direction ×0.49, undecided at n = 5: needs 9 "
            "rounds)") in opening
    assert criteria(md)["user experience"][3].startswith("consistent direction (Kubernetes lower in 5 of 5 rounds")


def test_equivalence_is_adjusted_in_the_differences_family_against_each_metrics_margin():
    """2026-12-05's startup: unadjusted, its two one-sided tests give p 0.047 (the 90% interval 0.81–1.16 just
    inside ×1.25), which the report called "equivalent within ×1.25" while it Holm-adjusted the differences over
    8 tests; adjusted in the same family it is not shown."""
    t = table.read(str(RESULTS / "smoke-2026-12-05"))
    gs = stats.groups(t)
    c = next(x for x in compare.comparisons(gs, t) if (x.metric, x.numerator, x.denominator) == ("startup_s", "k8s",
                                                                                                  "slurm"))
    assert c.margin == margin_of("startup_s") == 1.25 and c.family_size == 7
    assert c.p_equiv == pytest.approx(0.047, abs=0.001) and c.p_equiv_holm > 0.05
    assert c.verdict == "none" and "not shown equivalent within ×1.25" in ahead_text(c)
    alone = compare.comparisons({k: v for k, v in gs.items() if k[1] == "startup_s"}, t)
    assert next(x for x in alone if x.family == "primary").verdict == "equivalent"   # a family of one: the old claim
    assert all(reason for _, reason in MARGINS.values()) and margin_of("allreduce_avg_busbw_gbps") == 1.10


HOT = {"version": 1, "cpus": 2, "during": {"load1_median": 9.0, "load1_max": 12.0},
       "cpu": {"wall_s": 60.0, "busy_share": 1.0, "steal_share": 0.0, "iowait_share": 0.0},
       "groups_cpu_s": {"harness": 2.0, "clusters": 40.0, "other": 70.0, "unattributed": 0.0},
       "busiest": [{"name": "pytest", "group": "other", "cpu_s": 60.0, "processes": 2}]}
QUIET = {**HOT, "during": {"load1_median": 1.5, "load1_max": 2.2},
         "groups_cpu_s": {"harness": 2.0, "clusters": 60.0, "other": 1.0, "unattributed": 0.0}, "busiest": []}


@pytest.mark.parametrize("host, flagged", [(HOT, True), (QUIET, False)])
def test_a_busy_host_is_said_first_and_flags_every_verdict(tmp_path, host, flagged):
    d = tmp_path / "campaign"
    d.mkdir()
    recs = []
    for i in range(8):
        recs.append(_rec("k8s", i, {"startup_s": 10.0 + i * 0.1}, host=host))
        recs.append(_rec("slurm", i, {"startup_s": 5.0 + i * 0.1}, host=host))
    (d / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    md = build(str(d), str(tmp_path / "rep"))["report.md"].read_text()
    opening = section(md, "Bottom line").split("\n\n")
    ahead = criteria(md)["startup"][3]
    if flagged:
        assert opening[1].startswith("**Busy host**: busy in 16 of 16 runs: 1-min load up to 12.0 on 2 CPUs (6.0 a "
                                     "CPU), other processes 58 % of its CPU (busiest: `pytest` 960 s); every verdict "
                                     "below carries the flag")
        assert ahead.startswith("⚠ busy host: Slurm ahead")
    else:
        assert "Busy host" not in md and ahead.startswith("Slurm ahead")
        assert "host load: quiet: 1-min load up to 2.2 on 2 CPUs" in criteria(md)["startup"][2]


@pytest.mark.parametrize("campaign", ["smoke-2026-12-02", "smoke-2026-12-03", "smoke-2026-12-03-ux-audit",
                                      "smoke-2026-12-05", "drills-2026-12-03", "serve-2026-12-06"])
def test_no_committed_comparison_says_no_difference_where_an_interval_excludes_1(campaign):
    t = table.read(str(RESULTS / campaign))
    for c in compare.comparisons(stats.groups(t), t):
        if c.verdict != "none":
            continue
        for lo, hi in ((c.ci_low, c.ci_high), (c.eq_low, c.eq_high)):
            assert not (math.isfinite(lo) and math.isfinite(hi) and (hi < 1 or lo > 1)), (c.metric, c.numerator,
                                                                                         c.denominator, lo, hi)
