"""A drill on a user's cluster runs the user's argv per component (harness/drills/commands.py)."""
from __future__ import annotations

import subprocess

import pytest
from support.fakes import SimClock

from harness.config import from_mapping
from harness.drills import commands
from harness.errors import BackendError

CMDS = {"slurm": {"restart": [
    {"component": "slurmctld", "group": "control plane", "argv": ["ssh", "ctl", "sudo", "systemctl", "restart",
                                                                    "slurmctld"],
     "health_argv": ["ssh", "ctl", "scontrol", "ping"]},
    {"component": "slurmd@n1", "group": "nodes", "argv": ["ssh", "n1", "sudo", "systemctl", "restart", "slurmd"]}]}}


class Runner:
    def __init__(self, fail_first_health=2, rc=0):
        self.argvs, self.health_left, self.rc = [], fail_first_health, rc

    def __call__(self, argv, **kw):
        self.argvs.append(argv)
        if argv[-1] == "ping":
            self.health_left -= 1
            return subprocess.CompletedProcess(argv, 1 if self.health_left >= 0 else 0, "", "DOWN")
        return subprocess.CompletedProcess(argv, self.rc, "", "Failed to restart" if self.rc else "")


def test_the_plan_is_the_users_order_and_missing_commands_are_an_error():
    assert commands.plan(CMDS, "slurm", "restart") == ["slurmctld", "slurmd@n1"]
    with pytest.raises(BackendError, match="no upgrade commands for slurm") as e:
        commands.plan(CMDS, "slurm", "upgrade")
    assert "drills.commands.slurm.upgrade" in e.value.tip


def test_a_component_is_back_when_its_health_command_passes():
    clock, r = SimClock(), Runner()
    s = commands.step(CMDS, "slurm", "restart", "slurmctld", status=lambda: "unused", timeout_s=60, poll_s=2,
                      runner=r, clock=clock, sleep=clock.sleep)
    assert s.ok and s.back - s.started == pytest.approx(4.0) and s.resolution_s == 2   # two refusals, 2 s apart
    assert r.argvs[0] == ["ssh", "ctl", "sudo", "systemctl", "restart", "slurmctld"]   # an argv, as given
    assert s.health == "ssh ctl scontrol ping exits 0"


def test_without_a_health_command_the_platform_must_answer_again():
    clock, answers = SimClock(), iter(["refused", None])
    s = commands.step(CMDS, "slurm", "restart", "slurmd@n1", status=lambda: next(answers), timeout_s=60, poll_s=1,
                      runner=Runner(), clock=clock, sleep=clock.sleep)
    assert s.ok and s.group == "nodes" and s.back - s.started == pytest.approx(1.0)


def test_a_failing_command_or_a_component_that_stays_down_is_a_failed_step_not_a_crash():
    clock = SimClock()
    bad = commands.step(CMDS, "slurm", "restart", "slurmctld", status=lambda: None, timeout_s=60, runner=Runner(rc=1),
                        clock=clock, sleep=clock.sleep)
    assert not bad.ok and bad.back is None and "exit 1: Failed to restart" in bad.error
    down = commands.step(CMDS, "slurm", "restart", "slurmd@n1", status=lambda: "refused", timeout_s=10, poll_s=1,
                         runner=Runner(), clock=clock, sleep=clock.sleep)
    assert not down.ok and "not healthy 10 s after" in down.error


def test_commands_must_be_argv_lists():
    with pytest.raises(Exception, match="argv"):
        from_mapping({"drills": {"commands": {"slurm": {"restart": [{"component": "x",
                                                                     "argv": "systemctl restart slurmctld"}]}}}})
