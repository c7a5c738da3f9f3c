"""The scale-curve scenario (harness/scale_curve.py, config scale:): its plan, the jobs it shapes (the
config's job at each size, on every renderer), where the registry puts it, its config section's checks,
and a campaign of it on the scripted backend: executed as clean runs of each size, re-derived alike.

What a cluster says to a size it cannot hold (preflight, `poc check`) is tested with the backends'
preflight in tests/unit/test_scale_fit.py; the real runs on both local clusters by
tests/integration/test_scale_curve.py."""
from __future__ import annotations

import re

import pytest
import yaml
from support.fakes import ScriptedBackend, SimClock

from harness import config as cfgmod
from harness import evidence, scenarios
from harness.config import from_mapping
from harness.errors import ConfigError
from harness.pipeline import campaign
from harness.rederive import check
from harness.render import jobset as rj
from harness.render.sbatch import render_sbatch
from harness.render.validate import check_config
from harness.scale_curve import ScaleScenario, nodes_of
from harness.store import Store

SIZES = [2, 4, 8, 16]
CFG = {"platforms": ["slurm", "k8s"], "repetitions": 1, "faults": [], "scale": {"nodes": SIZES}}
# the scripted backend keeps its raw evidence the way the local host runtime does
def LOCAL_STAMPS(platform, raw):
    return evidence.stamps("local", raw)


RUN_ID = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")   # what Slurm, Kubernetes and file names all take


def test_the_plan_for_2_4_8_16_is_one_run_per_size_on_each_scheduler_after_the_clean_runs():
    cfg = from_mapping(CFG)
    for plat in ("slurm", "k8s"):
        plan = scenarios.plan(cfg, plat)
        assert [(p.run_id, p.scenario, p.fault) for p in plan] == [
            (f"{plat}-clean-01", "clean", None),
            (f"{plat}-scale-2n-01", "scale:2", None), (f"{plat}-scale-4n-01", "scale:4", None),
            (f"{plat}-scale-8n-01", "scale:8", None), (f"{plat}-scale-16n-01", "scale:16", None)]
        assert all(RUN_ID.match(p.run_id) and len(p.run_id) <= 63 for p in plan)
    assert [p.scenario for p in scenarios.plan(cfg, "local")] == ["clean"]   # no scheduler: no scale runs


def test_repetitions_number_the_runs_per_size_and_the_longest_name_still_fits():
    cfg = from_mapping({**CFG, "scale": {"nodes": [1, 4096], "repetitions": 3}})
    ids = [p.run_id for p in scenarios.plan(cfg, "slurm") if p.scenario.startswith("scale:")]
    assert ids == ["slurm-scale-1n-01", "slurm-scale-1n-02", "slurm-scale-1n-03",
                   "slurm-scale-4096n-01", "slurm-scale-4096n-02", "slurm-scale-4096n-03"]
    # the longest pod host name of the largest JobSet: <run id>-w-0-<nodes - 1>, at most 63 characters
    assert check_config(cfg, scenarios.submitted_specs) > 0


def test_its_place_in_the_registry_after_contention_and_before_the_probes():
    kinds = list(scenarios.REGISTRY)
    assert kinds.index("contention") < kinds.index("scale") < kinds.index("mistake")
    assert scenarios.scenario_class("scale:16") is ScaleScenario and scenarios.runner("scale:16") is None
    cfg = from_mapping({**CFG, "repetitions": 2, "faults": [{"kind": "kill_rank", "at_step": 3}],
                        "contention": {"runs": 1}, "ux": {"mistakes": ["wrong_queue"]}, "serve": {"enabled": True},
                        "allow_destructive_faults": True,
                        "scale": {"nodes": [2, 3]}})
    assert [p.scenario for p in scenarios.plan(cfg, "k8s")] == [
        "clean", "clean", "kill_rank", "contention", "scale:2", "scale:3", "mistake:wrong_queue", "serve"]


@pytest.mark.parametrize("nodes", SIZES)
def test_each_run_submits_the_config_job_at_its_size(nodes):
    cfg = from_mapping({**CFG, "resources": {"nodes": 2, "procs_per_node": 8, "gpus_per_node": 8,
                                             "cpus_per_node": 64, "memory_mb": 480000},
                        "workload": {"sweep": "1K:4G"}})
    for plat in ("slurm", "k8s"):
        p = next(p for p in scenarios.plan(cfg, plat) if p.scenario == f"scale:{nodes}")
        s = scenarios.job_spec(cfg, plat, p)
        clean = scenarios.job_spec(cfg, plat, scenarios.plan(cfg, plat)[0])
        assert (s.nodes, s.world_size, s.fault, s.run_id) == (nodes, nodes * 8, None, p.run_id)
        assert ("poc/run-id", p.run_id) in s.labels
        # everything per node and per rank is the config's job's
        for field in ("procs_per_node", "gpus_per_node", "cpus_per_node", "memory_mb", "batch", "steps", "sweep",
                      "exclusive", "model", "time_limit_s"):
            assert getattr(s, field) == getattr(clean, field), field
    sb = render_sbatch(scenarios.job_spec(cfg, "slurm", next(
        p for p in scenarios.plan(cfg, "slurm") if p.scenario == f"scale:{nodes}")), cfg.slurm).script
    assert f"#SBATCH --nodes={nodes}\n" in sb and f"--nnodes={nodes}" in sb
    k = scenarios.job_spec(cfg, "k8s", next(p for p in scenarios.plan(cfg, "k8s") if p.scenario == f"scale:{nodes}"))
    js = rj.render_jobset(k, cfg.kubernetes, "img:1", "/ckpt").jobset
    w = js["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert w["parallelism"] == w["completions"] == nodes
    # what the job asks of Kueue's quota grows with it
    assert rj.quota(k) == {"cpu": str(64 * nodes), "memory": f"{480000 * nodes}Mi", "nvidia.com/gpu": str(8 * nodes)}


def test_every_job_of_the_campaign_is_checked_by_validate():
    cfg = from_mapping(CFG)
    specs = scenarios.submitted_specs(cfg, "k8s")
    assert [s.nodes for s in specs] == [2, 2, 4, 8, 16]
    assert check_config(cfg, scenarios.submitted_specs) == 1 + 5 + 5   # local: its clean run only
    assert cfg.scale.most_nodes("k8s", cfg.resources.nodes) == 16
    assert cfg.scale.most_nodes("local", cfg.resources.nodes) == 2


@pytest.mark.parametrize("nodes, words", [
    ([0, 2], "each size is a node count of at least 1, not 0"),
    ([2, 4, 2], "each size once: 2 is listed more than once"),
    ([8, 2, 4], "list the sizes in increasing order, the order their runs are planned in: [2, 4, 8]"),
    (["two"], "valid integer"),
])
def test_scale_nodes_are_checked_with_a_clear_error(nodes, words):
    with pytest.raises(ConfigError) as ei:
        cfgmod.from_mapping({"scale": {"nodes": nodes}}, "x.yaml")
    assert "x.yaml: scale.nodes" in ei.value.message and words in ei.value.message, ei.value.message
    assert ei.value.tip


def test_scale_repetitions_are_at_least_one():
    with pytest.raises(ConfigError) as ei:
        cfgmod.from_mapping({"scale": {"nodes": [2], "repetitions": 0}}, "x.yaml")
    assert "x.yaml: scale.repetitions" in ei.value.message and "greater than or equal to 1" in ei.value.message


def test_off_by_default_and_documented_off_in_the_default_config():
    assert cfgmod.Config().scale.nodes == [] and cfgmod.Config().scale.repetitions == 1
    doc = yaml.safe_load(cfgmod.default_yaml())
    assert doc["scale"] == {"nodes": [], "repetitions": 1}
    assert "scale:" in cfgmod.default_yaml() and "weak scaling" in cfgmod.default_yaml()
    assert [p.scenario for p in scenarios.plan(cfgmod.Config(), "slurm")] == ["clean", "kill_rank"]


def test_nodes_of_reads_only_a_scale_scenario():
    assert nodes_of("scale:16") == 16
    for bad in ("clean", "scale", "scale:", "scale:x", "scale:0", "drill:restart"):
        with pytest.raises(ValueError):
            nodes_of(bad)


def test_a_campaign_of_it_runs_each_size_as_a_clean_run_and_rederives(tmp_path):
    """On the scripted backend: the sizes run in order, each with its own world, and stored as a clean run is."""
    cfg = from_mapping({"platforms": ["slurm"], "repetitions": 0, "faults": [], "workload": {"steps": 2},
                        "scale": {"nodes": [1, 2, 3]}})
    clock = SimClock()
    seen = []

    class Recording(ScriptedBackend):
        platform = "slurm"

        def submit(self, spec, rendered):
            seen.append((spec.run_id, spec.scenario, spec.nodes, spec.world_size))
            return super().submit(spec, rendered)

    store = Store(tmp_path, cfg.campaign)
    recs = campaign(cfg, ["slurm"], store, lambda plat: Recording(clock=clock), resume=False, clock=clock,
                    sleep=clock.sleep, poll_s=0.01, stamps_fn=LOCAL_STAMPS)
    assert seen == [("slurm-scale-1n-01", "scale:1", 1, 1), ("slurm-scale-2n-01", "scale:2", 2, 2),
                    ("slurm-scale-3n-01", "scale:3", 3, 3)]
    assert [(r["run_id"], r["scenario"], r["status"]) for r in recs] == [
        ("slurm-scale-1n-01", "scale:1", "ok"), ("slurm-scale-2n-01", "scale:2", "ok"),
        ("slurm-scale-3n-01", "scale:3", "ok")]
    assert [r["derive_inputs"]["nodes"] for r in recs] == [1, 2, 3]
    assert [s["name"] for s in recs[0]["stages"]] == ["render", "submit", "queue", "run", "collect", "metrics"]
    (res,) = check(tmp_path / cfg.campaign, stamps_fn=LOCAL_STAMPS)
    assert res.findings == [] and res.checked == ["slurm-scale-1n-01", "slurm-scale-2n-01", "slurm-scale-3n-01"]
