"""`poc run` on the command line: a bad campaign name, an interrupted campaign, the drills' options and a
platform refused at preflight, with the campaign itself stood in for."""
import pytest

from harness.cli import main


def test_bad_campaign_name(capsys, tmp_path):
    assert main(["run", "--campaign", "Bad Name!", "--results", str(tmp_path)]) == 2
    assert "ERROR --campaign" in capsys.readouterr().err


def _interrupting_campaign(leave: list[str]):
    """A stand-in for harness.pipeline.campaign: marks `leave` in flight (not cancelled), then Ctrl-C."""
    def fake(cfg, platforms, store, make_backend, *, resume, **_kw):
        store.open(cfg.config_hash(), cfg.redacted(), resume)
        for run_id in leave:
            store.mark_inflight({"platform": "slurm", "run_id": run_id, "ids": ["42"], "submitted_at": 0.0, "data": {}})
        store.close()
        raise KeyboardInterrupt
    return fake


def test_interrupt_with_everything_cancelled_says_so(capsys, tmp_path):
    assert main(["run", "--results", str(tmp_path)], campaign_fn=_interrupting_campaign([])) == 130
    err = capsys.readouterr().err
    assert "ERROR interrupted: submitted jobs were cancelled" in err and "--resume" in err


def test_interrupt_names_the_jobs_it_could_not_cancel(capsys, tmp_path):
    """A handle still in flight after the interrupt was not cancelled: the message must not claim it was."""
    assert main(["run", "--results", str(tmp_path)],
                campaign_fn=_interrupting_campaign(["slurm-contention-01-blocker"])) == 130
    err = capsys.readouterr().err
    assert "were cancelled" not in err
    assert "1 submitted job(s) may still be running: slurm slurm-contention-01-blocker (42)" in err
    assert "TIP the same command plus --resume cancels them first" in err


def test_run_drill_and_confirm_cluster_reach_the_campaigns_config(tmp_path):
    seen = {}

    def fake(cfg, platforms, store, make_backend, *, resume, **_kw):
        seen["drills"] = cfg.drills
        return []
    assert main(["run", "--results", str(tmp_path), "--drill", "restart", "--drill", "upgrade",
                 "--confirm-cluster", "gpu-prod"], campaign_fn=fake) == 0
    assert seen["drills"].kinds == ["restart", "upgrade"] and seen["drills"].confirm_cluster == "gpu-prod"


def test_an_unknown_drill_is_refused_by_the_cli(capsys, tmp_path):
    with pytest.raises(SystemExit):
        main(["run", "--results", str(tmp_path), "--drill", "reboot"])
    assert "invalid choice: 'reboot'" in capsys.readouterr().err


def test_a_platform_that_fails_preflight_is_an_error_with_its_tip(capsys, tmp_path):
    """Nothing of that platform ran: the user reads ERROR and TIP, as for any other refusal."""
    rec = {"run_id": "k8s-clean-01", "platform": "k8s", "scenario": "preflight", "status": "failed",
           "error": {"stage": "preflight", "origin": "platform",
                     "message": "no node can hold a pod of this job: the cluster's nodes carry taints its pods do "
                                "not tolerate: team=a:NoSchedule on 3 of 3 nodes (n1, n2, n3)",
                     "tip": "if the job may run on such nodes, add to kubernetes.pod.tolerations: [...]"}}

    def fake(cfg, platforms, store, make_backend, *, resume, on_record, **_kw):
        on_record(rec)
        return [rec]
    assert main(["run", "--results", str(tmp_path), "--platform", "k8s"], campaign_fn=fake) == 1
    err = capsys.readouterr().err
    assert "ERROR k8s preflight: no node can hold a pod of this job" in err
    assert "TIP if the job may run on such nodes, add to kubernetes.pod.tolerations" in err
