"""A run's stages: each is logged as it starts (debug) and ends (info, with its time and error), so `poc -v`
follows a run stage by stage."""
import pytest

from harness.context import StageFailed, Stages


def test_each_stage_is_logged_with_its_run_time_and_error(caplog):
    ticks = iter([10.0, 10.5, 20.0, 21.25])
    stages = Stages(clock=lambda: next(ticks), label="slurm slurm-clean-01")
    with caplog.at_level("DEBUG", logger="harness.context"):
        with stages.stage("submit"):
            pass
        with pytest.raises(StageFailed), stages.stage("queue"):
            raise RuntimeError("no nodes\nsecond line")
    assert [r.getMessage() for r in caplog.records] == [
        "slurm slurm-clean-01: stage submit started", "slurm slurm-clean-01: stage submit ok in 0.50 s",
        "slurm slurm-clean-01: stage queue started", "slurm slurm-clean-01: stage queue failed in 1.25 s: no nodes"]
    assert [r.levelname for r in caplog.records] == ["DEBUG", "INFO", "DEBUG", "INFO"]
