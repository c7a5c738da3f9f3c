"""The scenario interface (context.Scenario, harness/scenarios.py): each scenario plans its runs, the
pipeline runs the same stages for every run and calls the scenario's hooks; a new scenario is its class
plus one registry line, and `poc rederive` re-derives its figures with the same static metrics function."""
from __future__ import annotations

import re
from dataclasses import replace

import pytest
from support.fakes import ScriptedBackend, SimClock
from support.paths import ROOT

from harness import capabilities as cap
from harness import scenarios
from harness.context import Evidence, Scenario
from harness.pipeline import campaign
from harness.rederive import check
from harness.spec import Planned
from harness.store import Store

PIPELINE = ROOT / "harness" / "pipeline.py"


class Sleep(Scenario):
    """A small example scenario: after the job succeeded the run sleeps a while on the harness's clock,
    keeps what it did as its raw evidence and reports it as a figure."""
    kind = "sleep"
    raw_key = "sleep"
    SECONDS = 2.5
    STEPS = 3

    @staticmethod
    def planned(cfg, platform):
        return [Planned(f"{platform}-sleep")._replace(scenario="sleep")]

    @staticmethod
    def shaped(cfg, spec):
        return replace(spec, steps=Sleep.STEPS)

    def __init__(self, ctx, spec):
        super().__init__(ctx, spec)
        self.did: dict = {}
        self.calls: list[str] = []

    def prepare(self, stages, files):
        with stages.stage("sleep:prepare"):
            self.calls.append("prepare")
            files["sleep.txt"] = f"sleep {self.SECONDS} s after training\n"

    def succeeded(self, handle, stages):
        with stages.stage("sleep"):
            t0 = self.ctx.clock()
            self.ctx.sleep(self.SECONDS)
            self.did = {"from": t0, "to": self.ctx.clock()}
            self.calls.append("succeeded")

    def evidence(self):
        return self.did

    @staticmethod
    def metrics(ev: Evidence):
        m, timeline = Scenario.metrics(ev)
        if ev.raw:
            took = ev.raw["to"] - ev.raw["from"]
            m["slept_s"] = {"value": took, "unit": "s", "lo": took, "hi": took, "uncertainty": 0.0}
        return m, timeline

    def stop(self):
        self.calls.append("stop")

    def finish(self, raw, record):
        raw["sleep"] = self.did
        record.extra["sleep"] = {"seconds": self.SECONDS}   # a block RunRecord does not name yet


CFG = {"platforms": ["local"], "repetitions": 1, "faults": [], "workload": {"steps": 2}}


@pytest.fixture
def sleep_registered(monkeypatch):
    monkeypatch.setitem(scenarios.REGISTRY, "sleep", Sleep)     # the one registry line


def _campaign(tmp_path, monkeypatch) -> tuple[list[dict], dict[str, Scenario], object]:
    """A whole campaign of CFG on the scripted backend; the scenario instance each run was executed with."""
    from harness.config import from_mapping
    cfg = from_mapping(CFG)
    store = Store(tmp_path, cfg.campaign)
    clock = SimClock()
    made: dict[str, Scenario] = {}
    for kind, cls in list(scenarios.REGISTRY.items()):
        if isinstance(cls, type) and issubclass(cls, Scenario):
            keep = type(cls.__name__, (cls,), {"__init__": lambda self, ctx, spec, _c=cls: (
                _c.__init__(self, ctx, spec), made.__setitem__(spec.run_id, self))[0]})
            monkeypatch.setitem(scenarios.REGISTRY, kind, keep)
    recs = campaign(cfg, ["local"], store, lambda plat: ScriptedBackend(clock=clock), resume=False,
                    clock=clock, sleep=clock.sleep, poll_s=0.01)
    return recs, made, cfg


def test_a_new_scenario_plans_its_run_runs_its_hooks_at_the_runs_stages_and_rederives(tmp_path, sleep_registered,
                                                                                      monkeypatch):
    from harness.config import from_mapping
    assert [p.run_id for p in scenarios.plan(from_mapping(CFG), "local")] == ["local-clean-01", "local-sleep"]
    recs, made, cfg = _campaign(tmp_path, monkeypatch)
    rec = {r["run_id"]: r for r in recs}["local-sleep"]
    scen = made["local-sleep"]
    assert rec["status"] == "ok", rec.get("error")
    assert scen.calls == ["prepare", "succeeded", "stop"]
    assert scen.spec.steps == Sleep.STEPS and made["local-clean-01"].spec.steps == 2   # the job it shaped
    names = [s["name"] for s in rec["stages"]]
    assert names == ["render", "sleep:prepare", "submit", "queue", "run", "collect", "sleep", "metrics"]
    assert rec["metrics"]["slept_s"]["value"] == Sleep.SECONDS and "step_time_s" in rec["metrics"]
    assert rec["sleep"] == {"seconds": Sleep.SECONDS}
    assert (tmp_path / cfg.campaign / "runs" / "local-sleep" / "sleep.txt").exists()
    (res,) = check(tmp_path / cfg.campaign)
    assert res.findings == [] and res.checked == ["local-clean-01", "local-sleep"]   # the same static metrics


def test_an_unregistered_kind_is_a_plain_training_run(tmp_path, monkeypatch):
    assert scenarios.scenario_class("sleep") is Scenario and scenarios.runner("sleep") is None
    recs, _, _ = _campaign(tmp_path, monkeypatch)
    assert [r["run_id"] for r in recs] == ["local-clean-01"] and recs[0]["status"] == "ok"
    assert [s["name"] for s in recs[0]["stages"]] == ["render", "submit", "queue", "run", "collect", "metrics"]


def test_the_plan_is_each_scenarios_runs_in_registry_order():
    from harness.config import from_mapping
    cfg = from_mapping({"platforms": ["slurm"], "repetitions": 2, "faults": [{"kind": "kill_rank", "at_step": 3}],
                        "contention": {"runs": 1}, "ux": {"mistakes": ["wrong_queue"]},
                        "serve": {"enabled": True}, "drills": {"kinds": ["restart"]},
                        "allow_destructive_faults": True})
    assert [p.scenario for p in scenarios.plan(cfg, "slurm")] == [
        "clean", "clean", "kill_rank", "contention", "mistake:wrong_queue", "serve", "drill:restart"]
    specs = scenarios.submitted_specs(cfg, "slurm")
    assert [s.scenario for s in specs].count("blocker") == 1      # what the contention run submits beside it
    drill = next(s for s in specs if s.scenario == "drill:restart")
    assert drill.exclusive and drill.steps == cfg.drills.steps_for("restart")
    assert next(s for s in specs if s.scenario == "serve").steps == cfg.serve.train_steps


def test_every_planned_scenario_kind_has_its_class_or_runner():
    kinds = {scenarios.kind_of(s)[0] for s in ("clean", "contention", "serve", "drill:restart", "mistake:wrong_queue")}
    kinds |= set().union(*cap.FAULTS.values())
    assert kinds <= set(scenarios.REGISTRY)
    assert scenarios.runner("mistake:wrong_queue") is not None and scenarios.runner("clean") is None


def test_the_pipeline_names_no_scenario():
    words = set(re.findall(r"[a-z_]+", PIPELINE.read_text().lower()))
    kinds = (set(scenarios.REGISTRY) | {"blocker", "probe", "drills", "mistake"}) - {"clean"}
    assert words.isdisjoint(kinds), sorted(words & kinds)
