"""How a failed Slurm run restarts, recorded by preflight beside slurm_settings: never inside its allocation,
requeued by its own batch script (slurm.max_restarts) or by Slurm after a node failure, with slurm.conf's
requeue settings as scontrol show config printed them (real output of the local cluster's Slurm)."""
from __future__ import annotations

import pytest
from support.paths import FIXTURES

from harness import config
from harness import slurm_parse as sp
from harness.backends.slurm.backend import recovery_settings
from harness.errors import ConfigError
from harness.render.sbatch import render_sbatch


def test_the_requeue_path_and_slurm_confs_requeue_settings_are_recorded():
    cfg = config.from_mapping({"platforms": ["slurm"], "slurm": {"max_restarts": 2}})
    conf = sp.show_config((FIXTURES / "slurm" / "trixie" / "scontrol_show_config.txt").read_text())
    r = recovery_settings(cfg.slurm, conf)
    assert r["restart"] == "requeue" and r["max_restarts"] == 2 and r["torchrun_max_restarts"] == 0
    assert (r["JobRequeue"], r["RequeueExit"], r["RequeueExitHold"], r["MaxBatchRequeue"]) == ("1", "(null)",
                                                                                              "(null)", "5")
    assert recovery_settings(cfg.slurm, {})["RequeueExit"] is None      # a setting scontrol did not print



def test_what_is_recorded_is_what_the_batch_script_does():
    from harness import spec
    cfg = config.from_mapping({"platforms": ["slurm"], "slurm": {"max_restarts": 2}})
    script = render_sbatch(spec.build(cfg, "slurm", "slurm-clean-01", None), cfg.slurm).script
    assert "#SBATCH --requeue" in script and "MAX_RESTARTS=2" in script and 'scontrol requeue "$SLURM_JOB_ID"' in script
    assert "--max_restarts=0" in script
    with pytest.raises(ConfigError, match="--no-requeue is not on the allow-list"):   # nothing undoes --requeue
        config.from_mapping({"platforms": ["slurm"], "slurm": {"extra_sbatch": ["--no-requeue"]}})
