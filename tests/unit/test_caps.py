"""CPU and memory caps on equal terms: enforced on every platform of a campaign, or on none."""
from __future__ import annotations

import json

import pytest
from support.fakes import ScriptedBackend, SimClock
from support.paths import RESULTS

from harness import config
from harness.backends.container import render_containers
from harness.config import from_mapping
from harness.pipeline import campaign
from harness.render import jobset as rj
from harness.spec import build, resolve_caps
from harness.store import Store

NONE = {"slurm": {"slurm_settings": {"TaskPlugin": "task/none"}}}
CGROUP = {"slurm": {"slurm_settings": {"TaskPlugin": "task/affinity,task/cgroup"}}}


@pytest.mark.parametrize(("setting", "info", "caps"), [
    (None, NONE, "requests"),            # the lab: Slurm confines nothing, so no platform caps
    (None, {"slurm": {"slurm_settings": {"TaskPlugin": "task/affinity"}}}, "requests"),
    (None, CGROUP, "enforced"),          # a site with cgroups: every platform confines
    (None, {"k8s": {}}, "enforced"),     # no Slurm in the campaign
    (None, {"slurm": {}}, "enforced"),   # the setting not read: nothing to say it cannot
    ("enforced", NONE, "enforced"),      # the user's choice wins, and the ledger shows it unequal
    ("requests", CGROUP, "requests"),
])
def test_the_campaign_caps_follow_what_every_platform_can_enforce(setting, info, caps):
    got, why = resolve_caps(setting, info)
    assert got == caps and why


def test_requests_leave_no_cpu_or_memory_limit_but_keep_the_gpus():
    cfg = config.from_mapping({"resources": {"gpus_per_node": 2, "procs_per_node": 2}})
    spec = build(cfg, "k8s", "k8s-clean-01", None)
    enforced = rj.resources(spec)
    assert enforced["limits"] == enforced["requests"]
    from dataclasses import replace
    reserved = rj.resources(replace(spec, caps="requests"))
    assert reserved["requests"] == enforced["requests"]
    assert "cpu" not in reserved["limits"] and "memory" not in reserved["limits"]
    assert reserved["limits"][rj.GPU_RESOURCE] == "2"


def test_the_baseline_containers_are_capped_only_where_the_clusters_are():
    from dataclasses import replace
    spec = build(config.load(None), "local", "local-clean-01", None)
    capped = render_containers(spec, "img:1", "/w", "/s", "1000:1000").run_argvs[0]
    free = render_containers(replace(spec, caps="requests"), "img:1", "/w", "/s", "1000:1000").run_argvs[0]
    assert "--cpus=1" in capped and not any(a.startswith(("--cpus", "--memory")) for a in free)


def test_unset_caps_keep_an_older_campaigns_config_hash():
    meta = json.loads((RESULTS / "smoke-2026-12-05" / "smoke-poc" / "campaign.json").read_text())
    assert "caps" not in meta["config"]["resources"]
    cfg = config.from_mapping({**meta["config"], "resources": {**meta["config"]["resources"], "caps": None}})
    assert "caps" not in json.dumps(cfg.model_dump()["resources"]) or cfg.resources.caps is None
    plain = config.from_mapping({"campaign": "c"})
    assert plain.config_hash() == config.from_mapping({"campaign": "c", "resources": {"caps": None}}).config_hash()
    assert plain.config_hash() != config.from_mapping({"campaign": "c",
                                                       "resources": {"caps": "requests"}}).config_hash()


def test_a_campaign_gives_every_run_the_resolved_caps_and_records_why(tmp_path):
    specs = []

    class Platform(ScriptedBackend):
        def __init__(self, name, info, clock):
            super().__init__(clock=clock)
            self.platform, self.info = name, info

        def preflight(self):
            return dict(self.info)

        def submit(self, spec, rendered):
            specs.append(spec)
            return super().submit(spec, rendered)

    cfg = from_mapping({"platforms": ["local", "slurm"], "repetitions": 1, "faults": [], "workload": {"steps": 2}})
    clock = SimClock()
    infos = {"local": {"scheduler": "none"}, "slurm": NONE["slurm"]}
    recs = campaign(cfg, ["local", "slurm"], Store(tmp_path, cfg.campaign),
                    lambda p: Platform(p, infos[p], clock), resume=False, poll_s=0.01, clock=clock, sleep=clock.sleep)
    assert specs and {s.caps for s in specs} == {"requests"}
    assert all(r["environment"]["resources_caps"]["caps"] == "requests" for r in recs)
    assert "TaskPlugin task/none" in recs[0]["environment"]["resources_caps"]["why"]
