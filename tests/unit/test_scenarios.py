"""The scenario interface (context.Scenario, harness/scenarios.py): the pipeline runs the same stages
for every run and calls the scenario's hooks; a new scenario is its class plus one registry line,
and `poc rederive` re-derives its figures with the same static metrics function."""
from __future__ import annotations

import re

import pytest
from support.fakes import ScriptedBackend, SimClock
from support.paths import ROOT

from harness import capabilities as cap
from harness import scenarios
from harness.context import Evidence, RunContext, Scenario
from harness.pipeline import execute
from harness.rederive import check
from harness.spec import build
from harness.store import Store

PIPELINE = ROOT / "harness" / "pipeline.py"


class Sleep(Scenario):
    """A small example scenario: after the job succeeded the run sleeps a while on the harness's clock,
    keeps what it did as its raw evidence and reports it as a figure."""
    kind = "sleep"
    raw_key = "sleep"
    SECONDS = 2.5

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


@pytest.fixture
def sleep_registered(monkeypatch):
    monkeypatch.setitem(scenarios.SCENARIOS, "sleep", Sleep)     # the one registry line


def _execute(tmp_path, scenario: str):
    from harness.config import from_mapping
    cfg = from_mapping({"platforms": ["local"], "repetitions": 1, "faults": [], "workload": {"steps": 2}})
    store = Store(tmp_path, cfg.campaign)
    store.open(cfg.config_hash(), cfg.redacted(), resume=False)
    clock = SimClock()
    made: list[Scenario] = []
    real = scenarios.SCENARIOS[scenario]

    def keep(ctx, spec):
        made.append(real(ctx, spec))
        return made[-1]
    scenarios.SCENARIOS[scenario] = keep
    try:
        ctx = RunContext(ScriptedBackend(clock=clock), store, cfg, {}, clock=clock, sleep=clock.sleep,
                         poll_s=0.01)
        rec = execute(ctx, build(cfg, "local", f"local-{scenario}", None, scenario))
    finally:
        scenarios.SCENARIOS[scenario] = real
        store.close()
    return rec, made[0], cfg


def test_a_new_scenario_runs_its_hooks_at_the_runs_stages_and_rederives(tmp_path, sleep_registered):
    rec, scen, cfg = _execute(tmp_path, "sleep")
    assert rec["status"] == "ok", rec.get("error")
    assert scen.calls == ["prepare", "succeeded", "stop"]
    names = [s["name"] for s in rec["stages"]]
    assert names == ["render", "sleep:prepare", "submit", "queue", "run", "collect", "sleep", "metrics"]
    assert rec["metrics"]["slept_s"]["value"] == Sleep.SECONDS and "step_time_s" in rec["metrics"]
    assert rec["sleep"] == {"seconds": Sleep.SECONDS}
    assert (tmp_path / cfg.campaign / "runs" / "local-sleep" / "sleep.txt").exists()
    (res,) = check(tmp_path / cfg.campaign)
    assert res.findings == [] and res.checked == ["local-sleep"]   # the same static metrics, from raw.json.gz


def test_an_unregistered_kind_is_a_plain_training_run(tmp_path):
    assert scenarios.scenario_class("sleep") is Scenario
    rec, scen, _ = _execute(tmp_path, "clean")
    assert type(scen) is Scenario and rec["status"] == "ok"
    assert [s["name"] for s in rec["stages"]] == ["render", "submit", "queue", "run", "collect", "metrics"]


def test_every_planned_scenario_kind_has_its_class_or_runner():
    kinds = {scenarios.kind_of(s)[0] for s in ("clean", "contention", "serve", "drill:restart", "mistake:wrong_queue")}
    kinds |= set().union(*cap.FAULTS.values())
    assert kinds <= set(scenarios.SCENARIOS) | set(scenarios.RUNNERS)
    assert scenarios.runner("mistake:wrong_queue") is not None and scenarios.runner("clean") is None


def test_the_pipeline_names_no_scenario():
    words = set(re.findall(r"[a-z_]+", PIPELINE.read_text().lower()))
    kinds = (set(scenarios.SCENARIOS) | set(scenarios.RUNNERS) | {"blocker", "probe", "drills"}) - {"clean"}
    assert words.isdisjoint(kinds), sorted(words & kinds)
