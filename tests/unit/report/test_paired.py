"""Comparisons within rounds, one Holm family per question, equivalence against a stated margin, the
bandwidth verdict from the spread between runs, and submitted -> first step as an end-to-end metric."""
import itertools
import math

import numpy as np
import pytest
from support.paths import RESULTS

from harness.report import compare, stats, table
from harness.report.equivalence import MARGIN, equivalent, t_quantile, welch_interval
from harness.report.paired import signed_rank_p, walsh_interval
from harness.report.verdicts import effect_text

UX = RESULTS / "smoke-2026-12-03-ux-audit"


def _record(run_id, platform, metrics, *, rnd=None, uncertainty=0.001, scenario="clean"):
    ms = {name: {"value": v, "unit": "s", "lo": v - uncertainty, "hi": v + uncertainty, "uncertainty": uncertainty,
                 "sources": {}, "detail": {}} for name, v in metrics.items()}
    rec = {"schema": 1, "run_id": run_id, "campaign": "c", "platform": platform, "scenario": scenario,
           "status": "ok", "metrics": ms, "environment": {"torch": "2.6.0"}}
    if rnd is not None:
        rec["order"] = {"order": "interleaved", "seed": 1, "round": rnd, "position": 0}
    return rec


def _compare(recs):
    t = table.from_records(recs)
    return {(c.metric, c.numerator, c.denominator): c for c in compare.comparisons(stats.groups(t), t)}


# A machine that drifts: each round's level moves far more than the 5% Kubernetes adds within a round.
DRIFT = [5.0, 9.0, 6.5, 11.0, 7.2, 4.4, 10.1, 8.3]


def _drifting(metric="startup_s", factor=1.05, rounds=True):
    recs = []
    for k, level in enumerate(DRIFT):
        recs.append(_record(f"slurm-{k}", "slurm", {metric: level}, rnd=k if rounds else None))
        recs.append(_record(f"k8s-{k}", "k8s", {metric: level * factor * (1 + 0.001 * k)}, rnd=k if rounds else None))
    return recs


def test_signed_rank_p_is_the_exact_count_over_every_sign_assignment():
    rng = np.random.default_rng(3)
    for n in (1, 4, 7, 10):
        d = np.round(rng.normal(size=n), 1)   # rounded: ties among |d|, and some zeros
        d[0] = 0.0
        kept = d[d != 0]
        ranks = np.argsort(np.argsort(np.abs(kept))) + 1.0
        for v in np.unique(np.abs(kept)):   # midranks
            ranks[np.abs(kept) == v] = ranks[np.abs(kept) == v].mean()
        w = ranks[kept > 0].sum()
        centre = ranks.sum() / 2
        sums = [sum(r for r, s in zip(ranks, signs, strict=True) if s) for signs in
                itertools.product([0, 1], repeat=kept.size)]
        want = np.mean([abs(s - centre) >= abs(w - centre) - 1e-9 for s in sums]) if kept.size else 1.0
        assert signed_rank_p(d) == pytest.approx(want), n
    assert signed_rank_p(np.ones(12)) == pytest.approx(2 / 2 ** 12)
    assert signed_rank_p(np.zeros(6)) == 1.0   # every round tied: no direction at all


def test_walsh_interval_is_the_signed_rank_one():
    assert walsh_interval(np.arange(1.0, 6.0), 0.90) == (3.0, 1.0, 5.0)   # n 5: P(T+ = 0) = 1/32 <= 5%
    est, lo, hi = walsh_interval(np.arange(1.0, 5.0), 0.90)               # n 4: 1/16 > 5%, no interval
    assert est == 2.5 and math.isnan(lo) and math.isnan(hi)
    d = np.array([0.3, -0.1, 0.5, 0.2, 0.9, 0.4, 0.05, 0.6])
    walsh = sorted((d[i] + d[j]) / 2 for i in range(d.size) for j in range(i, d.size))
    # n 8: P(T+ <= 5) = 0.0391 <= 5% < P(T+ <= 6) = 0.0547, so k = 6: the 6th smallest and 6th largest
    assert walsh_interval(d, 0.90)[1:] == (pytest.approx(walsh[5]), pytest.approx(walsh[-6]))


def test_rounds_are_paired_and_find_what_pooling_the_drift_hides():
    c = _compare(_drifting())[("startup_s", "k8s", "slurm")]
    assert (c.test, c.n_pairs, c.n_higher) == ("paired", 8, 8)
    assert c.p == pytest.approx(2 / 2 ** 8) and c.verdict == "higher" and c.better == "slurm"
    assert c.effect == pytest.approx(1.05 * 1.0035, rel=0.01) and c.eq_low > 1 and c.eq_high < 1.06
    # the same runs without their rounds: the rank-sum test sees two overlapping clouds
    u = _compare(_drifting(rounds=False))[("startup_s", "k8s", "slurm")]
    assert u.test == "unpaired" and u.n_pairs == 0 and u.p > 0.5 and u.verdict != "higher"


def test_a_round_a_platform_ran_twice_in_is_left_out_and_too_few_rounds_fall_back():
    recs = _drifting()
    recs.append(_record("k8s-extra", "k8s", {"startup_s": 99.0}, rnd=0))
    c = _compare(recs)[("startup_s", "k8s", "slurm")]
    assert (c.test, c.n_pairs, c.n_num) == ("paired", 7, 9)
    few = [r for r in _drifting() if r["order"]["round"] < stats.MIN_N - 1] + [
        _record(f"{p}-late-{k}", p, {"startup_s": 5.0 + k}) for p in ("k8s", "slurm") for k in range(3)]
    c = _compare(few)[("startup_s", "k8s", "slurm")]
    assert c.test == "unpaired" and c.n_pairs == 0 and c.tested
    # other scenarios of the same round are not a pair
    mixed = [dict(r, scenario="kill_rank") if r["platform"] == "k8s" else r for r in _drifting()]
    assert _compare(mixed)[("startup_s", "k8s", "slurm")].test == "unpaired"


def test_the_committed_campaign_pairs_kubernetes_startup_above_slurms_in_every_round():
    t = table.read(str(UX))
    gs = stats.groups(t)
    c = {(x.metric, x.numerator, x.denominator): x for x in compare.comparisons(gs, t)}[("startup_s", "k8s", "slurm")]
    assert (c.test, c.family, c.n_pairs, c.n_higher) == ("paired", "primary", 13, 13)
    assert c.p == pytest.approx(2 / 2 ** 13) and c.verdict == "higher" and c.better == "slurm"
    # rounds 0-11 (clean, rank kills, node loss; the contention round left out): 12 of 12, p 2/4096, median ×1.14
    x, y = compare.matched(t, gs[("k8s", "startup_s")], gs[("slurm", "startup_s")])
    d = np.log(x[:12] / y[:12])
    assert (d > 0).all() and signed_rank_p(d) == pytest.approx(0.000488, abs=1e-6)
    assert math.exp(np.median(d)) == pytest.approx(1.14, abs=0.005)


def test_equivalence_needs_the_whole_interval_inside_the_margin():
    assert equivalent(1 / MARGIN, MARGIN) and equivalent(0.9, 1.1)
    assert not equivalent(0.79, 1.1) and not equivalent(0.9, 1.26) and not equivalent(math.nan, 1.0)
    tight = _compare(_drifting(factor=1.01))[("startup_s", "k8s", "slurm")]
    assert tight.tested and tight.eq_low > 1 / MARGIN and tight.eq_high < MARGIN
    # 8 of 8 rounds one way: a difference (p 0.0078), and inside the margin: the difference wins
    assert tight.verdict == "higher"
    noisy = []
    for k, level in enumerate(DRIFT):
        noisy.append(_record(f"slurm-{k}", "slurm", {"startup_s": level}, rnd=k))
        noisy.append(_record(f"k8s-{k}", "k8s", {"startup_s": level * (1.5 if k % 2 else 0.75)}, rnd=k))
    c = _compare(noisy)[("startup_s", "k8s", "slurm")]
    assert c.verdict == "none" and c.eq_low < 1 < c.eq_high
    text = effect_text(c)   # both bounds, whichever side of 1 the ratio is on
    assert f"90% CI {c.eq_low:.2f}–{c.eq_high:.2f}" in text and "≥" not in text and "≤" not in text
    same = [dict(r, metrics={"startup_s": dict(r["metrics"]["startup_s"])}) for r in _drifting(factor=1.0)]
    for i, r in enumerate(same):
        r["metrics"]["startup_s"]["value"] *= 1 + (0.01 if i % 4 == 1 else -0.01 if i % 4 == 3 else 0)
    c = _compare(same)[("startup_s", "k8s", "slurm")]
    assert c.verdict == "equivalent" and c.eq_low >= 1 / MARGIN and c.eq_high <= MARGIN


def test_welch_keeps_each_sides_spread():
    assert t_quantile(0.95, 1) == pytest.approx(6.313752, abs=1e-5)
    assert t_quantile(0.95, 10) == pytest.approx(1.812461, abs=1e-5)
    assert t_quantile(0.975, 30) == pytest.approx(2.042272, abs=1e-5)
    x = np.array([1.00, 1.01, 0.99, 1.02, 0.98])           # tight
    y = np.array([1.5, 0.6, 2.2, 0.9, 1.8, 0.4, 1.1])      # 40x the variance
    vx, vy = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    df = (vx + vy) ** 2 / (vx ** 2 / (x.size - 1) + vy ** 2 / (y.size - 1))
    assert 6 < df < 6.2   # about the wide side's n - 1, not the pooled n - 2 = 10
    diff, lo, hi = welch_interval(x, y, 0.90)
    half = t_quantile(0.95, df) * math.sqrt(vx + vy)
    assert (lo, hi) == pytest.approx((diff - half, diff + half))


def test_unpaired_interval_is_welchs_on_the_logs():
    recs = [_record(f"slurm-{k}", "slurm", {"startup_s": v}) for k, v in enumerate([5.0, 5.1, 4.9, 5.05, 4.95])]
    recs += [_record(f"k8s-{k}", "k8s", {"startup_s": v}) for k, v in enumerate([6.0, 4.0, 7.5, 3.5, 5.5, 6.5])]
    c = _compare(recs)[("startup_s", "k8s", "slurm")]
    k8s, slurm = np.log([6.0, 4.0, 7.5, 3.5, 5.5, 6.5]), np.log([5.0, 5.1, 4.9, 5.05, 4.95])
    diff, lo, hi = welch_interval(k8s, slurm, 0.90)
    assert c.test == "unpaired" and (c.effect, c.eq_low, c.eq_high) == pytest.approx(
        (math.exp(diff), math.exp(lo), math.exp(hi)))


def test_bandwidth_verdict_comes_from_the_spread_between_runs():
    # each run's ± (the loop's spread within the run) is 0.1 GB/s; runs differ by 0.02 GB/s, every round the same way
    recs = []
    for k in range(8):
        base = 0.25 + 0.01 * (k % 3)
        recs.append(_record(f"slurm-{k}", "slurm", {"allreduce_avg_busbw_gbps": base}, rnd=k, uncertainty=0.1))
        recs.append(_record(f"k8s-{k}", "k8s", {"allreduce_avg_busbw_gbps": base - 0.02}, rnd=k, uncertainty=0.1))
    c = _compare(recs)[("allreduce_avg_busbw_gbps", "k8s", "slurm")]
    assert c.resolution == pytest.approx(0.2) and c.verdict == "lower" and c.better == "slurm"
    # a clock's ± of the same size does forbid the verdict
    for r in recs:
        r["metrics"] = {"startup_s": r["metrics"]["allreduce_avg_busbw_gbps"]}
    assert _compare(recs)[("startup_s", "k8s", "slurm")].verdict == "resolution"


def _e2e_runs():
    recs = []
    for k in range(6):
        for plat, q, s in (("local", 0.75, 5.3), ("slurm", 0.6 + 0.1 * k, 5.6), ("k8s", 0.2, 6.5)):
            recs.append(_record(f"{plat}-{k}", plat, {"queue_s": q, "startup_s": s + 0.01 * k}, rnd=k))
    recs[0]["metrics"]["queue_s"].update(lo=0.70, hi=0.80, uncertainty=0.05)
    recs[0]["metrics"]["startup_s"].update(lo=5.2, hi=5.4, uncertainty=0.1)
    return recs


def test_submit_to_first_step_is_queue_plus_startup_with_their_bounds_added():
    t = table.from_records(_e2e_runs())
    e2e = t.values["submit_to_first_step_s"]
    assert e2e == pytest.approx(t.values["queue_s"] + t.values["startup_s"])
    assert t.uncertainty["submit_to_first_step_s"][0] == pytest.approx((0.80 + 5.4 - (0.70 + 5.2)) / 2)
    assert stats.groups(t)[("k8s", "submit_to_first_step_s")].unit == "s"
    assert stats.metric_key("submit_to_first_step_s", "contention") == "submit_to_first_step_s:contention"


def test_the_baseline_queue_is_not_compared_with_kubernetes_but_end_to_end_is():
    comps = _compare(_e2e_runs())
    q = comps[("queue_s", "k8s", "local")]
    assert q.verdict == "refused" and not q.tested and math.isnan(q.ratio)
    assert "container started" in q.refused and "scheduler bound the pod" in q.refused
    assert comps[("queue_s", "k8s", "slurm")].tested and comps[("queue_s", "slurm", "local")].tested
    e2e = comps[("submit_to_first_step_s", "k8s", "local")]
    assert e2e.tested and e2e.test == "paired" and e2e.family == "secondary"
    assert comps[("submit_to_first_step_s", "k8s", "slurm")].family == "primary"


def test_many_rounds_use_the_approximation_and_the_search_and_agree_with_the_exact_ways(monkeypatch):
    from harness.report import paired
    d = np.random.default_rng(7).normal(0.05, 1.0, 90)   # exact below EXACT_MAX (100) by default
    exact_p, exact_ci = signed_rank_p(d), walsh_interval(d, 0.90)
    monkeypatch.setattr(paired, "EXACT_MAX", 10)
    monkeypatch.setattr(paired, "WALSH_MAX", 10)
    assert signed_rank_p(d) == pytest.approx(exact_p, abs=0.01)
    assert walsh_interval(d, 0.90) == pytest.approx(exact_ci, abs=0.01)
