"""The report's rules on what it may claim: no interval or verdict below MIN_N, none from a difference
within the clocks' resolution, none across torch builds; transports that differ are warned about; Holm
over the whole family; older records without uncertainty still render."""
import csv
import json
import re

import numpy as np
import pytest
from support.paths import RESULTS

from harness.report import compare, stats, table
from harness.report.document import build
from harness.report.sections import fmt_pm, headline_cell

STORED = RESULTS / "smoke-2026-12-02"
NO_UNCERTAINTY = "No measurement uncertainty was recorded in these runs"


def _record(run_id, platform, metrics, *, uncertainty=None, torch="2.6.0", git=None, transport=None):
    ms = {}
    for name, v in metrics.items():
        m = {"value": v, "unit": "s", "sources": {}, "detail": {}}
        if uncertainty is not None:
            m.update(lo=v - uncertainty, hi=v + uncertainty, uncertainty=uncertainty)
        if transport is not None and name == "allreduce_busbw_gbps":
            m["detail"]["transport"] = transport
        ms[name] = m
    env = {"torch": torch}
    if git is not None:
        env["build"] = {"torch": torch, "git_version": git, "cuda": None, "nccl": "2.21.5",
                        "image": {"ref": "w", "id": "i"}}
    return {"schema": 1, "run_id": run_id, "campaign": "c", "platform": platform, "scenario": "clean",
            "status": "ok", "metrics": ms, "environment": env}


def _runs(platform, values, metric="startup_s", **kw):
    return [_record(f"{platform}-{i:02d}", platform, {metric: v}, **kw) for i, v in enumerate(values)]


def _compare(recs):
    t = table.from_records(recs)
    gs = stats.groups(t)
    return {(c.metric, c.numerator, c.denominator): c for c in compare.comparisons(gs, t)}, stats.summary(gs)


def _write(tmp_path, recs):
    d = tmp_path / "campaign"
    d.mkdir()
    (d / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return build(str(d), str(tmp_path / "rep"))


SLOW = [10.0, 10.2, 10.4, 10.6, 10.8, 11.0]
FAST = [5.0, 5.2, 5.4, 5.6, 5.8, 6.0]


def test_a_clear_difference_is_a_verdict_with_its_p_values(tmp_path):
    comps, _ = _compare(_runs("k8s", SLOW, uncertainty=0.01) + _runs("slurm", FAST, uncertainty=0.01))
    c = comps[("startup_s", "k8s", "slurm")]
    assert c.verdict == "higher" and c.better == "slurm"
    assert c.p == pytest.approx(2 / 924) and c.p_holm == c.p   # a family of one
    assert c.resolution == pytest.approx(0.02)


def test_no_interval_and_no_verdict_below_min_n(tmp_path):
    n = stats.MIN_N - 1
    recs = _runs("k8s", SLOW[:n], uncertainty=0.01) + _runs("slurm", FAST[:n], uncertainty=0.01)
    comps, summ = _compare(recs)
    c = comps[("startup_s", "k8s", "slurm")]
    assert c.verdict == "few" and not c.tested
    assert all(v != v for v in (c.ci_low, c.ci_high))   # NaN: no interval
    row = next(s for s in summ if s.platform == "k8s")
    assert headline_cell(row) == "10.30 ± 0.01 (4)"    # the median and its ± only, no [p05–p95]
    paths = _write(tmp_path, recs)
    md = paths["report.md"].read_text()
    assert "too few runs for a verdict between Kubernetes and Slurm (n = 4 and 4" in md
    assert "1.94 (n 4/4: no interval)" in md and "is higher than" not in md
    (k8s,) = [r for r in csv.DictReader(paths["summary.csv"].read_text().splitlines()) if r["platform"] == "k8s"]
    assert k8s["p05"] == k8s["p95"] == "" and k8s["uncertainty"] == "0.01"


def test_one_run_prints_its_value_and_its_uncertainty_only():
    (row,) = stats.summary(stats.groups(table.from_records([_record("a", "k8s", {"queue_s": 0.6237},
                                                                           uncertainty=0.01)])))
    assert headline_cell(row) == "0.62 ± 0.01 (1)"
    assert fmt_pm(0.6237, 0.012) == "0.624 ± 0.012" and fmt_pm(2.0, 1.0) == "2 ± 1"
    assert fmt_pm(12.268459, 0.000002) == "12.27 ± <0.01" and fmt_pm(0.0057863, 0.0000014) == "0.005786 ± <0.000001"


def test_no_verdict_from_a_difference_within_the_resolution(tmp_path):
    # every Kubernetes run 1.5 s above every Slurm run (p = 0.002), but each side is known to ±1 s only
    recs = _runs("k8s", [v + 1.5 for v in FAST], uncertainty=1.0) + _runs("slurm", FAST, uncertainty=1.0)
    c = _compare(recs)[0][("startup_s", "k8s", "slurm")]
    assert c.p < 0.01 and c.verdict == "resolution"
    md = _write(tmp_path, recs)["report.md"].read_text()
    assert "`startup_s`: no clear difference between Kubernetes and Slurm (below resolution ±2.00 s" in md
    # the same runs measured to ±0.01 s: now the difference stands
    recs = _runs("k8s", [v + 1.5 for v in FAST], uncertainty=0.01) + _runs("slurm", FAST, uncertainty=0.01)
    assert _compare(recs)[0][("startup_s", "k8s", "slurm")].verdict == "higher"


def test_holm_adjusts_within_each_question_not_across_them():
    # three platforms, two metrics: 6 comparisons, each a complete separation at n = 6 (p = 2/924);
    # Kubernetes vs Slurm is one family (2 comparisons), the baseline comparisons another (4)
    recs = []
    for i, plat in enumerate(("local", "slurm", "k8s")):
        recs += [_record(f"{plat}-{j}", plat, {"startup_s": v + 10 * i, "first_log_s": v + 10 * i}, uncertainty=0.01)
                 for j, v in enumerate(FAST)]
    comps, _ = _compare(recs)
    tested = [c for c in comps.values() if c.tested]
    assert len(tested) == 6 and all(c.test == "unpaired" for c in tested)   # no rounds recorded
    primary = [c for c in tested if c.family == "primary"]
    assert {(c.numerator, c.denominator) for c in primary} == {("k8s", "slurm")}
    assert max(c.p_holm for c in primary) == pytest.approx(2 * 2 / 924)      # ties: Holm's running max
    secondary = [c for c in tested if c.family == "secondary"]
    assert max(c.p_holm for c in secondary) == pytest.approx(4 * 2 / 924)
    assert all(c.verdict == "higher" for c in tested)
    # step_time_s is shown, not judged: it is not in a family
    recs = [dict(r, metrics={**r["metrics"], "step_time_s": {"value": 1.0}}) for r in recs]
    assert sum(c.tested for c in _compare(recs)[0].values()) == 6


def test_no_ratio_across_torch_builds(tmp_path):
    recs = (_runs("local", FAST, uncertainty=0.01, torch="2.15.0", git="aaaaaaaaaaaaaaaa")
            + _runs("slurm", SLOW, uncertainty=0.01, torch="2.6.0", git="bbbbbbbbbbbbbbbb")
            + _runs("k8s", SLOW, uncertainty=0.01, torch="2.6.0", git="bbbbbbbbbbbbbbbb"))
    comps, _ = _compare(recs)
    c = comps[("startup_s", "slurm", "local")]
    assert c.verdict == "refused" and c.ratio != c.ratio and not c.tested
    assert c.refused == ("not comparable: torch 2.6.0 (git bbbbbbbbbbbb, nccl 2.21.5) vs "
                         "2.15.0 (git aaaaaaaaaaaa, nccl 2.21.5)")
    assert comps[("startup_s", "k8s", "slurm")].tested   # same build: compared
    md = _write(tmp_path, recs)["report.md"].read_text()
    assert f"| {c.refused} |" in md and f"Slurm vs local (baseline): {c.refused};" in md
    assert "Slurm is higher than local" not in md


def test_same_torch_version_other_git_revision_is_another_build():
    recs = _runs("slurm", SLOW, git="bbbb") + _runs("k8s", SLOW, git="cccc")
    assert _compare(recs)[0][("startup_s", "k8s", "slurm")].verdict == "refused"


def test_different_transports_are_warned_about(tmp_path):
    recs = (_runs("slurm", FAST, metric="allreduce_busbw_gbps", uncertainty=0.01, transport="NET/Socket")
            + _runs("k8s", SLOW, metric="allreduce_busbw_gbps", uncertainty=0.01, transport="NET/IB"))
    c = _compare(recs)[0][("allreduce_busbw_gbps", "k8s", "slurm")]
    assert c.warning == ("the all-reduce ran differently on the two platforms (the figure may show that, not the "
                         "scheduler): transport: NCCL over NET/IB on Kubernetes vs NCCL over NET/Socket on Slurm")
    md = _write(tmp_path, recs)["report.md"].read_text()
    assert f"Warning: {c.warning}." in md
    assert "Warning: the platforms' all-reduce ran over different transports" in md
    same = _runs("slurm", FAST, metric="allreduce_busbw_gbps", transport="NET/IB") + _runs(
        "k8s", SLOW, metric="allreduce_busbw_gbps", transport="NET/IB")
    assert _compare(same)[0][("allreduce_busbw_gbps", "k8s", "slurm")].warning is None


def test_older_records_without_uncertainty_render_and_say_so_once(tmp_path):
    paths = build(str(STORED), str(tmp_path / "rep"))
    md = paths["report.md"].read_text()
    assert md.count(NO_UNCERTAINTY) == 1 and not re.search(r"\d ± \d", md)
    # its local baseline ran another torch build: nothing is compared with it
    assert "Slurm vs local (baseline): not comparable: torch 2.6.0+debian vs 2.15.0+cu132" in md
    assert "advantage" not in md.split("## What the numbers say")[1].split("\n## ")[0]
    rows = list(csv.DictReader(paths["comparisons.csv"].read_text().splitlines()))
    assert {r["verdict"] for r in rows} >= {"refused", "few", "none"}


def test_new_metrics_render_with_a_recovery_chart(tmp_path):
    phases = {f"recovery_{p}_s": 1.0 + i for i, p in enumerate(
        ("detection", "teardown", "rescheduling", "restart", "checkpoint_load", "recompute"))}
    recs = []
    for plat in ("slurm", "k8s"):
        for j in range(2):
            r = _record(f"{plat}-kill-{j}", plat, {"recovery_s": 22.0, "goodput": 0.8, "recovery_cost_usd": 0.01,
                                                    "allreduce_avg_busbw_gbps": 1.0, **phases}, uncertainty=0.05)
            recs.append({**r, "scenario": "kill_rank"})
    paths = _write(tmp_path, recs)
    md = paths["report.md"].read_text()
    assert "## Recovery broken down" in md and "`recovery_detection_s:kill_rank`" in md
    assert "`recovery_cost_usd:kill_rank`" in md.split("## Cost and goodput")[1]
    assert "`goodput:kill_rank`" in md and "charts/recovery.png" in paths
    assert paths["charts/recovery.png"].read_bytes()[:4] == b"\x89PNG"
    assert "data:image/png;base64," in paths["report.html"].read_text().split("<h2>Recovery broken down</h2>")[1]


def test_tied_medians_take_the_direction_of_the_ranks():
    # equal medians, but Kubernetes' runs sit above Slurm's everywhere else: the test's direction
    k8s = [5.0, 5.0, 5.0, 9.0, 9.0, 9.0, 9.0]
    slurm = [1.0, 1.0, 1.0, 5.0, 5.0, 5.0, 5.0]
    assert compare._direction(np.array(slurm[:6] + [5.0]), np.array(slurm), 0.0) == 0.0
    assert compare._direction(np.array(k8s), np.array(slurm), 0.0) > 0
