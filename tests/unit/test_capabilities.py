"""One table of what each platform can do (harness/capabilities.py): the config, the run plan, the
backends and the scenarios' platform parts all read it, so none plans or accepts what another lacks."""
from __future__ import annotations

import json

from support.fakes import ScriptedBackend, SimClock

from harness import capabilities as cap
from harness.backends.container import ContainerBackend
from harness.backends.k8s.backend import KubernetesBackend
from harness.backends.local import LocalBackend
from harness.cli import main
from harness.config import from_mapping
from harness.drills import platforms as drill_parts
from harness.pipeline import campaign
from harness.scenarios import plan
from harness.serve import platforms as serve_parts
from harness.store import Store

ALL_FAULTS = [{"kind": k, "at_step": 5, "rank": 1} for k in ("kill_rank", "delete_pod", "lose_node", "requeue")]
REST_MOUNT = {"transport": "rest", "workdir": "/shared/poc", "rest": {"files": "mount", "mount": "/mnt/poc"}}


def _cfg(**kw):
    base = {"platforms": ["local", "slurm", "k8s"], "repetitions": 0, "faults": ALL_FAULTS,
            "allow_destructive_faults": True, "workload": {"steps": 10}}
    return from_mapping({**base, **kw})


def _planned_faults(cfg, plat):
    return sorted(p.scenario for p in plan(cfg, plat) if p.fault is not None)


def test_the_plan_has_a_fault_run_for_each_fault_the_platform_injects_and_no_other():
    cfg = _cfg()
    for plat in cap.PLATFORMS:
        assert _planned_faults(cfg, plat) == sorted(cap.FAULTS[plat]), plat
        assert cfg.faults_left_out(plat) == []


def test_slurm_through_slurmrestd_with_a_mounted_run_directory_plans_no_fault_that_needs_a_shell():
    cfg = _cfg(slurm=REST_MOUNT)
    assert _planned_faults(cfg, "slurm") == ["lose_node"]
    assert [w.split(":")[0] for w in cfg.faults_left_out("slurm")] == ["kill_rank", "requeue"]
    assert all("rest.files mount" in w for w in cfg.faults_left_out("slurm"))
    over_ssh = _cfg(slurm={**REST_MOUNT, "rest": {"files": "ssh"}})
    assert _planned_faults(over_ssh, "slurm") == ["kill_rank", "lose_node", "requeue"]


def test_the_backends_inject_what_the_table_says():
    assert LocalBackend.platform == ContainerBackend.platform == "local"
    for cls in (LocalBackend, ContainerBackend, KubernetesBackend):
        be = cls.__new__(cls)          # supported_faults reads the class's platform only
        assert be.supported_faults() == set(cap.FAULTS[cls.platform]), cls


def test_each_scenarios_platform_parts_are_the_platforms_the_table_gives_it():
    assert set(drill_parts.PARTS) == cap.SCENARIOS["drills"]
    assert set(serve_parts.PARTS) == cap.SCENARIOS["serve"]
    cfg = _cfg(contention={"runs": 1}, ux={"mistakes": ["wrong_queue"]}, drills={"kinds": ["restart"]},
               serve={"enabled": True, "faults": []})
    for plat in cap.PLATFORMS:
        scen = {p.scenario.split(":")[0] for p in plan(cfg, plat)}
        assert ("contention" in scen) == cap.runs("contention", plat)
        assert ("mistake" in scen) == cap.runs("ux", plat)
        assert ("drill" in scen) == cap.runs("drills", plat)
        assert ("serve" in scen) == cap.runs("serve", plat)


def test_a_planned_fault_the_backend_cannot_inject_is_a_failed_run_that_says_so_not_a_silent_skip(tmp_path):
    class NoFaults(ScriptedBackend):
        def supported_faults(self):
            return set()

        def submit(self, spec, rendered):
            raise AssertionError("submitted")
    cfg = from_mapping({"platforms": ["local"], "repetitions": 0, "workload": {"steps": 10},
                        "faults": [{"kind": "kill_rank", "at_step": 5, "rank": 1}]})
    clock = SimClock()
    (rec,) = campaign(cfg, ["local"], Store(tmp_path, cfg.campaign), lambda p: NoFaults(clock=clock),
                      resume=False, poll_s=0.01, clock=clock, sleep=clock.sleep)
    assert rec["run_id"] == "local-kill-rank-01" and rec["status"] == "failed", rec
    assert rec["error"]["stage"] == "plan"
    assert rec["error"]["message"] == "the local backend cannot inject kill_rank (it injects: nothing)"
    assert "capabilities.py" in rec["error"]["tip"]


def test_poc_run_says_which_faults_were_left_out_and_why(tmp_path, capsys):
    cfg_path = tmp_path / "poc.json"
    cfg_path.write_text(json.dumps({"platforms": ["slurm"], "repetitions": 0, "slurm": REST_MOUNT,
                                    "faults": [{"kind": "kill_rank", "at_step": 5, "rank": 1}]}))
    seen = {}

    def fake(cfg, platforms, store, make_backend, *, resume, **_kw):
        seen["plan"] = [p.run_id for p in plan(cfg, "slurm")]
        return []
    assert main(["run", "--config", str(cfg_path), "--results", str(tmp_path / "res")], campaign_fn=fake) == 0
    assert seen["plan"] == []
    err = capsys.readouterr().err
    assert ("slurm: not planned: fault kill_rank: slurm.transport rest with rest.files mount gives no "
            "login-node shell for srun/scontrol") in err, err
