"""A campaign's design: the floor its plan must clear for the exact test to decide at all, and the sequential
rule (anytime-valid e-values) whose verdicts stay valid however many rounds are added while looking."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest

from harness.config import from_mapping
from harness.report import compare, design, stats, table
from harness.scenarios import plan
from harness.smoke import KILL_RANK, smoke_config


def _smoke_questions(reps=6, **kw):
    cfg = smoke_config(from_mapping({}), ["local", "slurm", "k8s"], reps, **kw)
    return cfg, design.questions({p: plan(cfg, p) for p in cfg.platforms}, [f.kind for f in cfg.faults])


def test_a_plan_of_5_kill_rank_rounds_cannot_decide_its_recovery_and_says_it_needs_9_rounds():
    """2026-12-05's plan: 5 kill_rank rounds a side. The signed-rank test's smallest p at 5 rounds is 2/32 =
    0.0625; Holm's strictest step over the 7 questions it tests asks for 0.05/7 = 0.0071: no outcome passes."""
    _, qs = _smoke_questions(fault_rounds=5)
    by = {q.metric: q for q in qs}
    assert by["recovery_free_s:kill_rank"].rounds == 5 and by["recovery_free_s:lose_node"].rounds == 1
    assert by["cost_per_step_usd"].rounds == 6 and "cost_per_step_usd:kill_rank" not in by   # clean runs only
    assert by["startup_s"].rounds >= 12 and by["startup_s"].scenarios[:2] == ("clean", "kill_rank")
    fam = design.family(qs)
    assert len(fam) == 7
    lines = design.floor_check(qs)
    assert ("`recovery_free_s:kill_rank` gets 5 rounds: the exact signed-rank test's smallest p at 5 rounds is "
            "2/2^5 = 0.0625, above Holm's strictest step 0.05/7 = 0.0071, so no outcome can decide it; it needs 9 "
            "rounds") in lines
    assert "`cost_per_step_usd` gets 6 rounds" in " ".join(lines)
    assert lines[0].startswith("5 question(s) get fewer than 5 rounds, so the report draws no verdict on them (one-off "
                               "scenarios, descriptive by design): ") and "`recovery_free_s:lose_node` (1)" in lines[0]
    assert not any(line.startswith("`startup_s`") for line in lines)


def test_the_default_smoke_plans_the_rounds_that_can_decide_kill_rank_recovery_and_warns_about_cost():
    cfg, qs = _smoke_questions()
    by = {q.metric: q for q in qs}
    assert by["recovery_free_s:kill_rank"].rounds == 9 and len(design.family(qs)) == 7
    lines = design.floor_check(qs)
    assert not any(line.startswith("`recovery_free_s:kill_rank`") for line in lines)
    assert any(line.startswith("`cost_per_step_usd` gets 6 rounds") for line in lines)
    # the baseline beside the schedulers: one run of each scenario; alone, every round
    assert [p.run_id for p in plan(cfg, "local")] == ["local-clean-01", "local-kill-rank-01"]
    alone = smoke_config(from_mapping({}), ["local"], 2)
    assert alone.local.rounds is None and len(plan(alone, "local")) == 2 + 9


def test_a_plan_at_the_floor_is_not_warned_about():
    cfg, _ = _smoke_questions(reps=9)
    cfg.faults = [KILL_RANK] * 9
    qs = design.questions({p: plan(cfg, p) for p in cfg.platforms}, ["kill_rank"])
    assert not any("no outcome can decide it" in line for line in design.floor_check(qs))


def test_unanimous_rounds_grow_the_e_value_as_the_krichevsky_trofimov_bettor_does():
    # every round one way: prod (1 + (i-1)/i) = C(2n, n) / 2^n
    e = design.e_process([-0.7] * 10, 0.0, math.log(1.5))
    assert e[-1] == pytest.approx(math.comb(20, 10) / 2 ** 10)
    assert e[8] < 7 / 0.05 <= e[9]   # 10 such rounds decide a family of 7 at alpha 0.05 (threshold 140)
    assert design.e_process([0.0, 0.0], 0.0, 1.0) == [1.0, 1.0]   # a round at the centre bets nothing


def test_under_the_null_the_e_value_rarely_reaches_its_threshold_however_long_one_looks():
    """Ville's inequality: P(E ever reaches 1/a) <= a. 4,000 campaigns of 40 rounds of symmetric noise, watched after
    every round (the optional stopping a sequential design does): about 5 % may cross 20, never far more."""
    rng = np.random.default_rng(7)
    crossed = sum(max(design.e_process(rng.standard_t(3, 40) * 0.3, 0.0, math.log(1.25))) >= 20 for _ in range(4000))
    assert crossed / 4000 <= 0.06
    one_sided = sum(max(design.e_process(rng.normal(0.223, 0.2, 40), 0.223, 0.223, side=-1)) >= 20
                    for _ in range(2000))   # at the margin itself: the equivalence null's edge
    assert one_sided / 2000 <= 0.06


def _paired(k8s, slurm, metric="first_log_s"):
    recs = []
    for i, (a, b) in enumerate(zip(k8s, slurm, strict=True)):
        for plat, v in (("k8s", a), ("slurm", b)):
            recs.append({"schema": 1, "run_id": f"{plat}-clean-{i:02d}", "campaign": "c", "platform": plat,
                         "scenario": "clean", "status": "ok", "order": {"round": i}, "environment": {},
                         "metrics": {metric: {"value": v, "uncertainty": 0.01}}})
    t = table.from_records(recs)
    return t, stats.groups(t)


def test_the_rule_decides_a_difference_an_equivalence_or_leaves_a_question_open():
    t, gs = _paired([5.0] * 10, [10.0] * 10)
    [st] = design.evaluate(t, gs, ["first_log_s"]).values()
    assert st.verdict == "difference" and st.direction == "lower" and st.e_difference >= st.threshold == 20
    rng = random.Random(3)
    same = [3.0 * math.exp(rng.uniform(-0.05, 0.05)) for _ in range(12)]
    t, gs = _paired(same, [3.0] * 12)
    [st] = design.evaluate(t, gs, ["first_log_s"]).values()
    assert st.verdict == "equivalent" and st.e_equivalence >= 20
    t, gs = _paired([3.0, 3.3, 2.8], [3.0, 3.0, 3.0])
    [st] = design.evaluate(t, gs, ["first_log_s"]).values()
    assert st.open and st.rounds == 3


def test_a_sequential_campaigns_verdicts_come_from_its_e_values(tmp_path):
    t, gs = _paired([5.0] * 6, [10.0] * 6)
    comps = compare.comparisons(gs, t)
    [c] = [x for x in comps if x.family == "primary"]
    assert c.verdict == "lower"   # fixed n: 6 rounds one way, p = 2/64 < 0.05 in a family of one
    des = design.Design(family=["first_log_s"])
    [s] = [x for x in design.apply(comps, t, gs, des) if x.family == "primary"]
    # 6 unanimous rounds give C(12, 6) / 2^6 = 14.4 < 20: the sequential rule has not decided yet
    assert s.sequential and s.e_value == pytest.approx(math.comb(12, 6) / 64) and s.e_threshold == 20
    assert s.verdict == "direction"
    path = design.write(tmp_path, design.Design(family=["a"], stopped="the budget", final={"a": {"verdict": "open"}}))
    (tmp_path / "runs.jsonl").write_text("")
    back = design.read(str(tmp_path))
    assert path.name == "design.json" and back.family == ["a"] and back.stopped == "the budget"


def test_a_sequential_campaigns_report_opens_with_its_design_and_its_verdicts_e_values(tmp_path):
    import json

    from support.report_rows import criteria, section

    from harness.report.document import build

    d = tmp_path / "smoke-poc"
    d.mkdir()
    recs = []
    for i in range(10):   # every round one way: C(20, 10) / 2^10 = 180 against the 20 a family of one needs
        for plat, v in (("k8s", 1.5), ("slurm", 3.0)):
            recs.append({"schema": 1, "run_id": f"{plat}-clean-{i:02d}", "campaign": "smoke-poc", "platform": plat,
                         "scenario": "clean", "status": "ok", "order": {"round": i}, "environment": {},
                         "metrics": {"first_log_s": {"value": v, "uncertainty": 0.01}}})
    (d / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    des = design.Design(family=["first_log_s"], budget_s=2700, stopped="every question of the family decided",
                        stages=[{"campaign": "smoke-poc", "rounds": 5}, {"campaign": "smoke-poc-seq01", "rounds": 2},
                                {"campaign": "smoke-poc-seq02", "rounds": 2}],
                        final={"first_log_s": {"verdict": "difference", "e_difference": 180.4, "rounds": 10}})
    design.write(d, des)
    md = build(str(tmp_path), str(tmp_path / "rep"))["report.md"].read_text()
    opening = section(md, "Bottom line")
    assert ("Design: sequential (anytime-valid e-values, e-Bonferroni over 1 questions at α 0.05: an e-value of 20 "
            "decides); 3 stage(s), 4 round(s) added after the first; stopped: every question of the family "
            "decided.") in opening
    ahead = criteria(md)["user experience"][3]
    assert ahead.startswith("Kubernetes ahead (within-round ratio ×0.50")
    assert "sequential rule: e-value 180 against no difference" in ahead and "20 needed (1 questions / α 0.05)" in ahead


def test_a_design_file_past_the_reading_limits_or_through_a_link_is_no_design(tmp_path):
    from harness.report import design as dmod
    d = tmp_path / "c"
    d.mkdir()
    (d / "runs.jsonl").write_text("")
    (d / dmod.DESIGN_FILE).write_text('{"stages":' + '[' * 100_000 + ']' * 100_000 + "}")
    assert dmod.read(str(tmp_path)) is None   # was a RecursionError
    (d / dmod.DESIGN_FILE).unlink()
    (tmp_path / "planted.json").write_text('{"budget_s": 1}')
    (d / dmod.DESIGN_FILE).symlink_to(tmp_path / "planted.json")
    assert dmod.read(str(tmp_path)) is None
