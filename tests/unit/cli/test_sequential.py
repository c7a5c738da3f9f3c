"""The design from the command line: a plan that cannot decide a primary question is said so before anything
runs (or refused with --strict-design), and the sequential smoke adds stages only for the open questions until
they are decided or the budget is spent, recording what it did in design.json."""
from __future__ import annotations

import argparse
import json
import math

import pytest

from harness.cli import main
from harness.cli import sequential as seq
from harness.config import from_mapping
from harness.errors import ConfigError
from harness.report import design as designmod


def _ok(cfg, platforms, store, make_backend, *, resume, **_kw):
    return []


def test_a_plan_that_cannot_decide_is_warned_about_before_it_runs(capsys, tmp_path):
    argv = ["run", "--results", str(tmp_path), "--platform", "slurm", "--platform", "k8s", "--repetitions", "6"]
    assert main(argv, campaign_fn=_ok) == 0
    err = capsys.readouterr().err
    # the built-in config: 6 clean runs and one kill_rank a platform, 6 questions tested: the floor is 8 rounds
    assert ("WARNING design: `cost_per_step_usd` gets 6 rounds: the exact signed-rank test's smallest p at 6 rounds "
            "is 2/2^6 = 0.0312, above Holm's strictest step 0.05/6 = 0.0083, so no outcome can decide it; it needs "
            "8 rounds") in err
    assert "WARNING design: `startup_s` gets 7 rounds" in err
    assert "`recovery_free_s:kill_rank` (1)" in err   # a one-off: no verdict by design
    assert err.index("WARNING design:") < err.index("campaign ")   # before anything runs
    assert "TIP the sequential design adds rounds" in err


def test_strict_design_refuses_it(capsys, tmp_path):
    argv = ["run", "--results", str(tmp_path), "--platform", "slurm", "--platform", "k8s", "--repetitions", "6",
            "--strict-design"]
    assert main(argv, campaign_fn=_ok) == 2
    err = capsys.readouterr().err
    assert "ERROR the plan cannot decide" in err and "TIP plan more rounds" in err
    argv[argv.index("6")] = "8"
    assert main(argv, campaign_fn=_ok) == 0   # every tested question at its floor (the one-off fault: no verdict)


@pytest.mark.parametrize("text, seconds", [("45m", 2700), ("1h", 3600), ("90s", 90), ("600", 600), ("2.5min", 150)])
def test_budget_durations(text, seconds):
    assert seq.duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "-5m", "0", "45 minutes"])
def test_a_budget_that_is_no_duration_is_refused(text):
    with pytest.raises(ConfigError, match="is not a duration"):
        seq.duration(text)


def _st(metric, e_diff, e_equiv=math.nan, threshold=140.0):
    return designmod.Status(metric, 5, True, e_diff, e_equiv, threshold, "open")


def test_a_stage_runs_the_scenario_of_the_question_nearest_its_threshold():
    assert seq.scenarios_for({"recovery_free_s:kill_rank": _st("r", 6.4), "startup_s": _st("s", 60.0)},
                             ["kill_rank"]) == ["kill_rank"]   # its runs feed startup too
    assert seq.scenarios_for({"startup_s": _st("s", 2.0), "first_log_s": _st("f", 1.0)}, ["kill_rank"]) == ["clean"]
    # cost's equivalence e-value is the nearer: clean first; kill_rank is the next candidate where clean will not fit
    assert seq.scenarios_for({"recovery_free_s:kill_rank": _st("r", 6.4, 0.5), "cost_per_step_usd": _st("c", 0.8, 9.0)},
                             ["kill_rank"]) == ["clean", "kill_rank"]
    assert seq.scenarios_for({"recovery_free_s:kill_rank": _st("r", 6.4, 0.5), "cost_per_step_usd": _st("c", 0.8, 2.0)},
                             ["kill_rank", "lose_node"]) == ["kill_rank", "clean"]
    assert seq.scenarios_for({"handover_s": _st("h", 1.0)}, []) == ["contention"]
    assert seq.scenarios_for({}, ["kill_rank"]) == []


def test_nearness_is_the_log_share_of_the_threshold_by_the_nearer_test():
    assert seq.nearness(_st("r", 140.0)) == pytest.approx(1.0)
    assert seq.nearness(_st("r", 2.0, 140.0 ** 0.5)) == pytest.approx(0.5)
    assert seq.nearness(_st("q", 0.2)) < 0   # an e-value below 1: evidence against, farthest of all


def test_the_baseline_takes_at_most_local_rounds_runs_of_each_scenario():
    from harness.scenarios import plan

    cfg = from_mapping({"platforms": ["local", "slurm", "k8s"], "repetitions": 5, "allow_destructive_faults": True,
                        "faults": [{"kind": "kill_rank", "at_step": 15, "rank": 1}] * 5
                        + [{"kind": "lose_node", "at_step": 15, "rank": 1}]})
    before = cfg.config_hash()
    assert len(plan(cfg, "local")) == 10
    cfg.local.rounds = 1
    assert [p.run_id for p in plan(cfg, "local")] == ["local-clean-01", "local-kill-rank-01"]
    assert len(plan(cfg, "slurm")) == len(plan(cfg, "k8s")) == 11   # the schedulers keep every round
    assert cfg.config_hash() != before
    cfg.local.rounds = None
    assert cfg.config_hash() == before   # unset, a campaign keeps the hash it had


def test_the_smoke_gives_the_baseline_one_run_of_each_scenario_unless_the_config_says():
    from harness.config import Config
    from harness.smoke import smoke_config

    cfg = smoke_config(Config(), None, seq.FIRST_STAGE_REPETITIONS, fault_rounds=seq.FIRST_STAGE_REPETITIONS)
    assert cfg.local.rounds == 1 and cfg.clean_runs("local") == 1 and cfg.clean_runs("k8s") == 5
    assert [f.kind for f in cfg.faults_for("slurm")] == ["kill_rank"] * 5 + ["lose_node"]
    mine = from_mapping({"local": {"rounds": 3}})
    assert smoke_config(mine, None, 5).local.rounds == 3   # the config's own wins


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _stage_writer(clock, k8s_value, per_run_s=60.0):
    """A stand-in for run_campaign: writes each planned clean run of the stage's config as a record (Kubernetes
    at k8s_value(i), Slurm at 3.0), paired by round, and lets per_run_s pass on the clock."""
    from harness.scenarios import plan

    def run_stage(args, cfg, out):
        d = __import__("pathlib").Path(args.results) / cfg.campaign
        d.mkdir(parents=True, exist_ok=True)
        with open(d / "runs.jsonl", "a") as fh:
            for plat in cfg.platforms:
                for i, p in enumerate(plan(cfg, plat)):
                    v = k8s_value(i) if plat == "k8s" else 3.0
                    t0 = clock.t
                    clock.t += per_run_s
                    fh.write(json.dumps({"schema": 1, "run_id": p.run_id, "campaign": cfg.campaign, "platform": plat,
                                         "scenario": p.scenario, "status": "ok", "order": {"round": i},
                                         "started_at": t0, "finished_at": clock.t, "environment": {},
                                         "metrics": {"first_log_s": {"value": v, "uncertainty": 0.01}}}) + "\n")
        return 0
    return run_stage


class _Out:
    def __init__(self):
        self.lines = []

    def info(self, msg):
        self.lines.append(msg)


def _base(tmp_path):
    cfg = from_mapping({"platforms": ["slurm", "k8s"], "repetitions": 5, "faults": [], "campaign": "smoke-poc"})
    return cfg, argparse.Namespace(results=str(tmp_path), resume=False)


def test_stages_are_added_until_every_question_is_decided(tmp_path):
    """Kubernetes half of Slurm in every round: 5 rounds leave the e-value at C(10, 5) / 2^5 = 7.9 (20 decides a
    family of one); one stage of 2 rounds brings 7: C(14, 7) / 2^7 = 26.8."""
    cfg, args = _base(tmp_path)
    clock, out = _Clock(), _Out()
    run_stage = _stage_writer(clock, lambda i: 1.5)
    run_stage(args, cfg, out)
    rc = seq.extend(args, cfg, out, ["first_log_s"], 3600.0, 0.0, run_stage, clock=clock)
    des = designmod.read(str(tmp_path))
    assert rc == 0 and des.stopped == "every question of the family decided"
    assert [s["campaign"] for s in des.stages] == ["smoke-poc", "smoke-poc-seq01"]
    assert [s["scenarios"] for s in des.stages[1:]] == [["clean"]]
    final = des.final["first_log_s"]
    assert final["verdict"] == "difference" and final["rounds"] == 7 and final["e_difference"] >= 20
    assert final["e_difference"] == pytest.approx(math.comb(14, 7) / 2 ** 7)
    assert any(line.startswith("design: 1 question(s) open (first_log_s): stage 1, 2 round(s) of clean")
               for line in out.lines)


def test_a_question_still_open_when_the_budget_ends_is_named_with_why(tmp_path):
    cfg, args = _base(tmp_path)
    clock, out = _Clock(), _Out()
    run_stage = _stage_writer(clock, lambda i: 3.0 * (1.3 if i % 2 else 0.8))   # no direction to find
    run_stage(args, cfg, out)   # 10 runs of 60 s: 600 s of a 900 s budget
    seq.extend(args, cfg, out, ["first_log_s"], 900.0, 0.0, run_stage, clock=clock)
    des = designmod.read(str(tmp_path))
    # a round of clean on both is 120 s: one stage of 2 rounds fits (600 + 40 + 240 <= 900), then none (20 s left)
    assert [s["rounds"] for s in des.stages[1:]] == [2]
    assert des.stopped.startswith("the budget (15 min): ") and "a round of clean takes about 2.0 min" in des.stopped
    assert des.final["first_log_s"]["verdict"] == "open"
    assert out.lines[-1] == f"design: stopped ({des.stopped}); open: first_log_s"


def test_the_sequential_smoke_refuses_a_results_dir_with_other_campaigns(tmp_path):
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "runs.jsonl").write_text("")
    with pytest.raises(ConfigError, match="holds other campaigns"):
        seq.refuse_other_campaigns(tmp_path, "smoke-poc", False)
    (tmp_path / "other" / "runs.jsonl").unlink()
    for name in ("smoke-poc", "smoke-poc-seq01"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "runs.jsonl").write_text("")
    seq.refuse_other_campaigns(tmp_path, "smoke-poc", True)


def test_poc_run_with_a_budget_runs_the_plan_then_stops_when_no_stage_fits(capsys, tmp_path):
    """The wiring: the plan runs as one campaign, then the design finds its questions open (nothing was measured)
    and a stage that does not fit a 1 s budget, says so, and leaves design.json beside the first campaign."""
    def opened(cfg, platforms, store, make_backend, *, resume, **_kw):
        store.open(cfg.config_hash(), cfg.redacted(), resume)
        store.close()
        (store.root / "runs.jsonl").write_text("")   # what a first stage of runs that measured nothing leaves
        return []
    argv = ["run", "--results", str(tmp_path), "--platform", "slurm", "--platform", "k8s", "--repetitions", "5",
            "--budget", "1s"]
    assert main(argv, campaign_fn=opened) == 0
    err = capsys.readouterr().err
    des = designmod.read(str(tmp_path))
    assert des is not None and des.budget_s == 1.0 and des.stopped.startswith("the budget (0.0166667 min)")
    assert set(des.family) >= {"startup_s", "queue_s"} and all(v["verdict"] == "open" for v in des.final.values())
    assert "design: stopped (the budget" in err and f"next: poc report {tmp_path}" in err


def test_where_every_scenario_does_not_fit_the_most_useful_one_still_runs(tmp_path):
    """Open: kill_rank's recovery and cost, neither with an e-value yet (both at 1, equally near): a stage runs
    one scenario, the first question's, and one round of it fits what is left."""
    from harness.config import Fault
    from harness.scenarios import plan

    cfg, args = _base(tmp_path)
    cfg.faults = [Fault(kind="kill_rank", at_step=15, rank=1)]
    clock, out = _Clock(), _Out()

    def run_stage(a, c, o):
        d = tmp_path / c.campaign
        d.mkdir(parents=True, exist_ok=True)
        with open(d / "runs.jsonl", "a") as fh:
            for plat in c.platforms:
                for i, p in enumerate(plan(c, plat)):
                    t0 = clock.t
                    clock.t += 60.0
                    fh.write(json.dumps({"schema": 1, "run_id": p.run_id, "campaign": c.campaign, "platform": plat,
                                         "scenario": p.scenario, "status": "ok", "order": {"round": i},
                                         "started_at": t0, "finished_at": clock.t, "environment": {},
                                         "metrics": {}}) + "\n")
        return 0
    run_stage(args, cfg, out)   # 12 runs of 60 s
    seq.extend(args, cfg, out, ["recovery_free_s:kill_rank", "cost_per_step_usd"], 720 + 40 + 150, 0.0, run_stage,
               clock=clock)
    des = designmod.read(str(tmp_path))
    assert des.stages[1]["scenarios"] == ["kill_rank"] and des.stages[1]["rounds"] == 1


def test_a_resumed_design_goes_on_from_its_last_stage_with_the_added_budget(tmp_path):
    """Kubernetes half of Slurm every round, a family of two (threshold 40; `startup_s` is never measured, so it
    stays open). 15 min: one stage, 7 rounds, e-value C(14, 7) / 2^7 = 26.8, open. Resumed with 10 more
    minutes: the stages go on as seq02 and seq03 (seq01's name is taken), and 9 rounds reach
    C(18, 9) / 2^9 = 95: decided. The e-process is valid at any stopping time, so going on is no peeking."""
    cfg, args = _base(tmp_path)
    clock, out = _Clock(), _Out()
    run_stage = _stage_writer(clock, lambda i: 1.5)
    run_stage(args, cfg, out)
    family = ["first_log_s", "startup_s"]
    seq.extend(args, cfg, out, family, 900.0, 0.0, run_stage, clock=clock)
    first = designmod.read(str(tmp_path))
    assert [s["campaign"] for s in first.stages] == ["smoke-poc", "smoke-poc-seq01"]
    assert first.final["first_log_s"]["verdict"] == "open"
    assert first.final["first_log_s"]["e_difference"] == pytest.approx(math.comb(14, 7) / 2 ** 7)

    args.resume = True
    seq.extend(args, cfg, out, family, 600.0, clock.t, run_stage, clock=clock)
    des = designmod.read(str(tmp_path))
    assert [s["campaign"] for s in des.stages] == ["smoke-poc", "smoke-poc-seq01", "smoke-poc-seq02",
                                                   "smoke-poc-seq03"]
    assert des.budget_s == 1500.0 and des.stopped.startswith("the budget (10 min; 25 min with the earlier command's): ")
    assert des.final["first_log_s"]["verdict"] == "difference"
    assert des.final["first_log_s"]["e_difference"] >= math.comb(18, 9) / 2 ** 9
    assert des.final["startup_s"]["verdict"] == "open"


def test_a_resume_with_another_family_is_refused(tmp_path):
    cfg, args = _base(tmp_path)
    clock, out = _Clock(), _Out()
    run_stage = _stage_writer(clock, lambda i: 1.5)
    run_stage(args, cfg, out)
    seq.extend(args, cfg, out, ["first_log_s", "startup_s"], 650.0, 0.0, run_stage, clock=clock)
    args.resume = True
    with pytest.raises(ConfigError, match=r"this config's family is first_log_s$"):
        seq.extend(args, cfg, out, ["first_log_s"], 600.0, clock.t, run_stage, clock=clock)
