"""Ctrl-C stops a campaign cleanly, cancels what it submitted, and `--resume` goes on (SIGTERM, as
`poc cancel` sends it to a Slurm campaign, is test_day2_commands.py's).

Each case runs the real `poc` CLI as a subprocess in its own session and process group, waits until
the first run is stored and the second one is really training, then signals the whole process group
the way a terminal's Ctrl-C does. It checks the outcome harness/cli/ promises (exit code 130,
an ERROR/TIP message, no traceback), what the store holds (the finished run kept, the interrupted
one recorded as interrupted, no in-flight handle left), that nothing of the interrupted run is still
running (the agents and the workers), and that
`--resume` runs only what is not yet ok and ends with every planned run ok.

Every wait is a poll with a deadline; the machine is shared with other integration tests, so the
deadlines are generous while the checks stay strict.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from _poc import (
    EXIT_DEADLINE_S,
    Poc,
    inflight,
    latest_status,
    poc_argv,
    records,
    wait_for,
    write_config,
)

from harness import events as evmod

pytestmark = [pytest.mark.integration]

EXIT_INTERRUPTED = 130          # harness/cli/entry.py main(): what an interrupted command returns (128 + SIGINT)
# Long enough that the second run is still training well after the harness saw its first step
# (about 0.05 s a step on this machine's CPUs: 15 s of steps), short enough to keep the test cheap.
WORKLOAD = {"steps": 300, "checkpoint_every": 20, "sweep": "1K:64K", "sweep_iters": 2, "sweep_warmup": 1}


# ---------------------------------------------------------------- helpers

def has_step(events: list[dict]) -> bool:
    return any(e.get("kind") == "step" for e in events)


def processes_mentioning(needle: str) -> dict[int, str]:
    """Live (not zombie) processes on this machine whose command line contains needle."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{entry}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if needle in cmd and state != b"Z":
            found[int(entry)] = cmd
    return found


def assert_interrupted_cleanly(poc: Poc, took_s: float, sig: int) -> None:
    err = poc.stderr
    assert poc.proc.returncode == EXIT_INTERRUPTED, (poc.proc.returncode, err[-3000:])
    assert took_s < EXIT_DEADLINE_S
    assert "Traceback" not in err, err[-3000:]
    assert "ERROR interrupted: submitted jobs were cancelled" in err, err[-3000:]
    assert "TIP " in err and "--resume" in err, err[-3000:]
    print(f"\n{signal.Signals(sig).name}: poc exited {poc.proc.returncode} after {took_s:.1f} s")


def resume(args: list[str], env: dict[str, str], cwd: Path, timeout: float) -> tuple[subprocess.CompletedProcess, dict]:
    t0 = time.monotonic()
    done = subprocess.run(poc_argv(*args, "--resume", "--json"), capture_output=True, text=True, env=env,
                          cwd=str(cwd), timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    print(f"--resume: exit {done.returncode} after {time.monotonic() - t0:.1f} s")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done, json.loads(done.stdout)


def assert_resumed_from_where_it_stopped(campaign_dir: Path, before: list[dict], resumed: dict, planned: list[str],
                                         first: str, interrupted: str) -> None:
    after = records(campaign_dir)
    # Only the runs not yet ok ran again, in plan order, and all of them are ok now.
    rerun = [r["run_id"] for r in resumed["runs"]]
    assert rerun == planned[planned.index(interrupted):], rerun
    assert all(r["status"] == "ok" for r in resumed["runs"]), resumed["runs"]
    # The finished run was not re-run: still one record, the same one.
    firsts = [r for r in after if r["run_id"] == first]
    assert len(firsts) == 1
    (kept,) = [r for r in before if r["run_id"] == first]
    assert firsts[0]["started_at"] == kept["started_at"] and firsts[0]["finished_at"] == kept["finished_at"]
    # Nothing recorded before the resume was rewritten; the store only grew.
    assert after[:len(before)] == before
    assert latest_status(after) == {rid: "ok" for rid in planned}
    assert inflight(campaign_dir) == []


# ---------------------------------------------------------------- local baseline

# `poc run` and `poc smoke` share the campaign code (harness/cli/run.py), so one local case keeps CI
# inside its budget; SIGTERM on Slurm is `poc cancel`'s (test_day2_commands.py).
LOCAL_CASES = {
    # `poc smoke` (local only, no clusters) with Ctrl-C: two clean runs, then the config's one kill_rank
    # (a config that names its faults keeps them in the smoke campaign)
    "smoke-ctrl-c": (signal.SIGINT, ["smoke", "--platform", "local", "--no-clusters", "--repetitions", "2"]),
}


def planned_runs(cfg_path: Path, command: list[str], platform: str) -> list[str]:
    """The run ids the command plans, in order, as the harness computes them (the plan is not under test)."""
    from harness import config as cfgmod
    from harness.scenarios import plan
    from harness.smoke import smoke_config

    cfg = cfgmod.load(str(cfg_path))
    reps = int(command[command.index("--repetitions") + 1])
    cfg = smoke_config(cfg, [platform], reps) if command[0] == "smoke" else cfg.model_copy(update={"repetitions": reps})
    return [p.run_id for p in plan(cfg, platform)]


@pytest.mark.local
@pytest.mark.parametrize("case", list(LOCAL_CASES))
def test_local_interrupt_cancels_and_resume_continues(tmp_path, case):
    sig, command = LOCAL_CASES[case]
    campaign = f"irt-{case}"
    state = tmp_path / "state"  # the local backend's work dirs live under $POC_STATE_DIR/local/<campaign>/
    env = dict(os.environ, POC_STATE_DIR=str(state))
    # the host runtime: this test follows the agents as host processes (the container runtime's cancel
    # and cleanup are checked by test_container_baseline.py)
    cfg = write_config(tmp_path / "poc.yaml", {"campaign": campaign, "platforms": ["local"], "repetitions": 3,
                                               "local": {"runtime": "host"}, "workload": WORKLOAD,
                                               "faults": [{"kind": "kill_rank", "at_step": 5, "rank": 1}],
                                               "timeouts": {"queue_s": 120, "run_s": 600}})
    planned = planned_runs(cfg, command, "local")
    assert planned == ["local-clean-01", "local-clean-02", "local-kill-rank-01"], planned
    results = tmp_path / "results"
    args = [*command, "--config", str(cfg), "--results", str(results), "--campaign", campaign]
    cdir = results / campaign
    first, second = planned[0], planned[1]
    work = state / "local" / campaign / second

    def second_run_training():
        recs = records(cdir)
        if [(r["run_id"], r["status"]) for r in recs] != [(first, "ok")]:
            return None
        tail = list((work / "events").glob("*.jsonl")) if (work / "events").is_dir() else []
        events = evmod.parse_lines(ln for p in tail for ln in p.read_text(errors="replace").splitlines())
        return has_step(events) and processes_mentioning(str(work))

    t0 = time.monotonic()
    poc = Poc(args, tmp_path, env, case)
    try:
        procs = wait_for(f"{first} stored and {second} training", second_run_training, 600, poc)
        print(f"\n{first} stored and {second} training after {time.monotonic() - t0:.1f} s; "
              f"{len(procs)} processes of {second}")
        # the agents (torchrun) and the workers (ddp_train.py) of the second run are what must go away
        assert any("torch.distributed.run" in c for c in procs.values()), procs
        assert any("ddp_train.py" in c for c in procs.values()), procs
        took = poc.interrupt(sig)
    finally:
        poc.kill()
    assert_interrupted_cleanly(poc, took, sig)

    # No torchrun agent and no worker of the interrupted run is left (all were gone before poc exited).
    left = processes_mentioning(str(work))
    assert left == {}, left

    before = records(cdir)
    assert [(r["run_id"], r["status"]) for r in before] == [(first, "ok"), (second, "interrupted")]
    assert before[1]["error"]["type"] == "KeyboardInterrupt"
    # its job ids are the torchrun agents that were running when the signal came
    assert before[1]["job_ids"] and {int(i) for i in before[1]["job_ids"]} <= set(procs), (before[1]["job_ids"], procs)
    assert inflight(cdir) == []
    assert (cdir / "runs" / second / "events.jsonl").exists()  # what the interrupted run did is kept

    _, resumed = resume(args, env, tmp_path, 900)
    assert_resumed_from_where_it_stopped(cdir, before, resumed, planned, first, second)
    assert processes_mentioning(str(state / "local" / campaign)) == {}
    if command[0] == "smoke":
        assert (cdir / "report" / "report.md").exists()
    print(f"total {time.monotonic() - t0:.1f} s")
