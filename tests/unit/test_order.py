"""Campaign order: interleaved rounds with a recorded seed, reproducible; blocked on request."""
from __future__ import annotations

import json

from support.fakes import ScriptedBackend, SimClock

from harness.config import from_mapping
from harness.order import arrange
from harness.pipeline import campaign
from harness.scenarios import plan
from harness.spec import Planned
from harness.store import Store


def _plans(cfg):
    return {p: plan(cfg, p) for p in ("local", "slurm", "k8s")}


def test_interleaved_rounds_hold_one_run_of_each_platform():
    cfg = from_mapping({"repetitions": 4, "faults": []})
    slots = arrange(_plans(cfg), "interleaved", seed=7)
    assert len(slots) == 12
    for k in range(4):
        rnd = [s for s in slots if s.round == k]
        assert sorted(s.platform for s in rnd) == ["k8s", "local", "slurm"]
        assert {s.planned.run_id.rsplit("-", 1)[1] for s in rnd} == {f"{k + 1:02d}"}
    assert [s.position for s in slots] == list(range(12))


def test_the_seed_decides_the_order_and_reproduces_it():
    cfg = from_mapping({"repetitions": 6, "faults": []})
    orders = {seed: [s.platform for s in arrange(_plans(cfg), "interleaved", seed)] for seed in range(6)}
    assert orders[3] == [s.platform for s in arrange(_plans(cfg), "interleaved", 3)]
    assert len({tuple(o) for o in orders.values()}) > 1        # the shuffle depends on the seed
    firsts = {o[0] for o in orders.values()}
    assert len(firsts) > 1                                     # no platform always goes first


def test_blocked_keeps_platform_blocks_and_uneven_plans_interleave():
    plans = {"local": [Planned("l1"), Planned("l2")], "k8s": [Planned("k1"), Planned("k2"), Planned("k3")]}
    assert [s.planned.run_id for s in arrange(plans, "blocked", 1)] == ["l1", "l2", "k1", "k2", "k3"]
    inter = [s.planned.run_id for s in arrange(plans, "interleaved", 1)]
    assert sorted(inter[:2]) == ["k1", "l1"] and sorted(inter[2:4]) == ["k2", "l2"] and inter[4] == "k3"


def test_campaign_runs_in_the_interleaved_order_and_records_it(tmp_path):
    cfg = from_mapping({"platforms": ["local", "slurm"], "repetitions": 3, "faults": [],
                        "workload": {"steps": 2}, "seed": 11})
    clock, ran = SimClock(), []

    class Recording(ScriptedBackend):
        def __init__(self, plat):
            super().__init__(clock=clock)
            self.platform = plat

        def submit(self, spec, rendered):
            ran.append(spec.run_id)
            return super().submit(spec, rendered)

    campaign(cfg, cfg.platforms, Store(tmp_path, cfg.campaign), Recording, resume=False, poll_s=0.01,
             clock=clock, sleep=clock.sleep)
    expected = [s.planned.run_id for s in arrange({p: plan(cfg, p) for p in cfg.platforms}, "interleaved", 11)]
    assert ran == expected
    recs = [json.loads(x) for x in (tmp_path / cfg.campaign / "runs.jsonl").read_text().splitlines()]
    assert [r["order"]["position"] for r in recs] == list(range(6))
    assert {r["order"]["seed"] for r in recs} == {11} and {r["order"]["order"] for r in recs} == {"interleaved"}
