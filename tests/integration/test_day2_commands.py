"""The day-2 commands on a campaign running in another terminal, against the Slurm-in-Docker cluster.

A real `poc run --platform slurm` of a two-run campaign runs in a session of its own, its stderr a
file (not a terminal: the progress is a plain line every few seconds). While the second run's job
is RUNNING, separate processes run what a user in a second terminal would, given only the
campaign's directory: `poc status` (JSON and the table), `poc logs RUN_ID` (the job's output so far,
read from the cluster), and the running process's progress line is read (run N/M and an ETA). Then
`poc cancel`: the running `poc run` exits as an interrupt does (130), its job is scancelled and no
process of it is left on any compute node, the in-flight journal is empty, the store records the run
as interrupted, `poc status` shows the campaign stopped with what is left, and `poc run --resume`
runs only that and ends with both ok.

Every wait is a poll with a deadline: the machine is shared with other integration tests.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest
from _poc import (
    ACTIVE_SLURM_STATES,
    EXIT_DEADLINE_S,
    Poc,
    inflight,
    login,
    poc_argv,
    records,
    squeue_state,
    wait_for,
    wait_slurm_nodes_free,
    write_config,
)
from _slurm_checks import node_processes

from harness import events as evmod

pytestmark = [pytest.mark.integration, pytest.mark.slurm]

SLURM_RELEASE = os.environ.get("POC_SLURM_RELEASE", "trixie")
EXIT_INTERRUPTED = 130   # harness/cli/parser.py EXIT_CODES: interrupted (Ctrl-C or SIGTERM)
# 24 steps: 0.5 s (idle) to 2 s (a loaded machine) a step on the one-CPU compute containers, after
# ~15 s of start-up; long enough for the checks below to run while the job does, short enough that
# two runs and a resumed one stay within a few minutes.
WORKLOAD = {"steps": 24, "checkpoint_every": 8, "sweep": "1K:64K", "sweep_iters": 2, "sweep_warmup": 1}
FIRST, SECOND = "slurm-clean-01", "slurm-clean-02"
# Out.progress's plain line, when stderr is not a terminal: "[slurm] run 2/2 slurm-clean-02: running ( 8.8s)  ETA 2m34s"
PROGRESS = re.compile(r"^\[slurm\] run (\d+)/(\d+) (\S+): (.+?) \(\s*[\d.]+s\)(?:  ETA (\d+m\d\ds|\d+h\d\dm))?$")


@pytest.fixture(scope="module")
def slurm_cluster():
    from harness.clusters import slurm_docker

    info = slurm_docker.up(release=SLURM_RELEASE, timeout=300)   # reuses a running cluster, leaves it up
    wait_slurm_nodes_free(tuple(info.compute_nodes))   # the campaign's queue timeout measures this campaign only
    return info


def poc(*args: str, env: dict, cwd, timeout: float = 120) -> subprocess.CompletedProcess:
    """A command from a second terminal: its own process, stdin closed."""
    return subprocess.run(poc_argv(*args), capture_output=True, text=True, env=env, cwd=str(cwd), timeout=timeout,
                          stdin=subprocess.DEVNULL, check=False)


def ok_json(p: subprocess.CompletedProcess) -> dict:
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    return json.loads(p.stdout)


def progress_lines(stderr: str) -> list[tuple[int, int, str, str, str | None]]:
    return [(int(m[1]), int(m[2]), m[3], m[4], m[5]) for m in map(PROGRESS.match, stderr.splitlines()) if m]


def job_output(handle: dict) -> str:
    """The job's output file as the cluster has it now, read directly on the login node."""
    path = f"{handle['data']['run_dir']}/slurm-{handle['data']['job_id']}.out"
    return login(["sh", "-c", 'cat -- "$1" 2>/dev/null; true', "sh", path]).stdout


def stop(proc: Poc, cdir, env: dict, cwd) -> None:
    """After a failure: let poc cancel its own job (SIGTERM), else kill it and cancel what it left."""
    if proc.proc.poll() is None:
        os.killpg(proc.proc.pid, signal.SIGTERM)
        try:
            proc.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
    if inflight(cdir):
        print(poc("cleanup", "--results", str(cdir), env=env, cwd=cwd, timeout=180).stderr[-2000:])


def test_status_logs_and_cancel_from_another_terminal_then_resume(slurm_cluster, tmp_path):
    campaign = f"day2-{os.getpid() % 100000}-{int(time.time()) % 100000}"
    cfg = write_config(tmp_path / "poc.yaml", {"campaign": campaign, "platforms": ["slurm"], "repetitions": 2,
                                               "faults": [], "workload": WORKLOAD,
                                               "timeouts": {"queue_s": 180, "run_s": 600}})
    results = tmp_path / "results"
    cdir = results / campaign
    run_args = ["run", "--platform", "slurm", "--config", str(cfg), "--results", str(results)]
    env = dict(os.environ)

    def second_job_running():
        if [(r["run_id"], r["status"]) for r in records(cdir)] != [(FIRST, "ok")]:
            return None
        try:
            handle = json.loads((cdir / "inflight" / f"{SECOND}.json").read_text())
        except (FileNotFoundError, ValueError):
            return None
        if not handle["data"].get("job_id"):   # the submit is under way: the journal holds its intent
            return None
        if squeue_state(handle["data"]["job_id"]) != "RUNNING":
            return None
        # the workload has started writing: `poc logs` has events to show
        return "POC_EVENT " in job_output(handle) and handle

    t0 = time.monotonic()
    run = Poc(run_args, tmp_path, env, "run")
    try:
        wait_for(f"the progress line of {FIRST}", lambda: any(
            p[:3] == (1, 2, FIRST) for p in progress_lines(run.stderr)), 300, run)
        handle = wait_for(f"{FIRST} stored ok and {SECOND}'s job RUNNING", second_job_running, 600, run, interval=0.5)
        job_id = str(handle["data"]["job_id"])
        print(f"\n{FIRST} stored and job {job_id} ({SECOND}) running after {time.monotonic() - t0:.1f} s")

        # The progress line of the run in flight: run 2 of 2 and, one run having finished, an ETA.
        line = wait_for(f"a progress line of {SECOND} with an ETA", lambda: [
            p for p in progress_lines(run.stderr) if p[:3] == (2, 2, SECOND) and p[4]], 30, run)
        print(f"progress: {line[-1]}")

        # poc status, given only the campaign's directory, while the campaign runs.
        st = ok_json(poc("status", "--results", str(cdir), "-o", "json", env=env, cwd=tmp_path))
        assert squeue_state(job_id) == "RUNNING"
        assert (st["campaign"], st["running"], st["pid"]) == (campaign, True, run.proc.pid)
        assert (st["planned"], st["plan_from"], st["outside_plan"]) == (2, "campaign.json", 0)
        assert st["counts"] == {"ok": 1, "failed": 0, "harness_error": 0, "interrupted": 0, "in_flight": 1,
                                "to_run": 0}
        assert [(r["run_id"], r["platform"], r["scenario"], r["state"]) for r in st["runs"]] == [
            (FIRST, "slurm", "clean", "ok"), (SECOND, "slurm", "clean", "in_flight")]
        assert st["runs"][1]["ids"] == [job_id] and st["runs"][1]["detail"].endswith(f" s ago as {job_id}")
        assert st["left"] == [SECOND]

        table = poc("status", "--results", str(cdir), env=env, cwd=tmp_path)
        assert table.returncode == 0, table.stderr
        lines = table.stdout.splitlines()
        assert lines[0] == f"campaign {campaign} at {cdir}: running (pid {run.proc.pid})"
        assert lines[1] == ("2 planned (plan from campaign.json): 1 ok, 0 failed, 0 harness error(s), "
                            "0 interrupted, 1 in flight, 0 to run")
        assert lines[2].split() == ["RUN", "PLATFORM", "SCENARIO", "STATE", "DETAIL"]
        assert lines[3].split()[:4] == [FIRST, "slurm", "clean", "ok"]
        row = lines[4].split()
        assert row[:5] == [SECOND, "slurm", "clean", "in", "flight"] and row[-2:] == ["as", job_id], lines[4]
        assert len(lines) == 5   # no "stopped with ... left" line while it runs

        # poc logs of the run in flight: the job's output as the cluster has it so far.
        logs = poc("logs", SECOND, "--results", str(cdir), env=env, cwd=tmp_path)
        now = job_output(handle)
        assert logs.returncode == 0, logs.stderr[-3000:]
        assert f"note: {SECOND} is in flight on slurm ({job_id}): its job's output so far" in logs.stderr
        assert logs.stdout.startswith("==> slurm.out <==\n"), logs.stdout[:500]
        printed = logs.stdout.removeprefix("==> slurm.out <==\n")
        assert now.startswith(printed.rstrip("\n")), (printed[-500:], now[-500:])   # the file only grows
        assert printed.splitlines()[0].startswith(f"poc: job {job_id} attempt 0 on "), printed[:300]
        events = evmod.parse_lines(printed.splitlines())
        assert events and {e["run_id"] for e in events} == {SECOND}, printed[:1000]
        print(f"poc logs {SECOND}: {len(printed)} bytes, {len(events)} events "
              f"({', '.join(sorted({e['kind'] for e in events}))})")
        # the finished run's output is the store's
        kept = ok_json(poc("logs", FIRST, "--results", str(cdir), "--json", env=env, cwd=tmp_path))
        assert kept["live"] is False and "POC_EVENT " in kept["logs"]["logs/slurm.out"]

        # poc cancel from the second terminal: SIGTERM to the running process, which scancels its job.
        assert squeue_state(job_id) == "RUNNING"   # still running: the cancel is what stops it
        run_dir = handle["data"]["run_dir"]
        procs = node_processes(slurm_cluster.compute_nodes, run_dir)
        assert procs and any("ddp_train.py" in ln for ln in procs), procs   # what must go away
        t_cancel = time.monotonic()
        cancel = ok_json(poc("cancel", "--results", str(cdir), "-o", "json", env=env, cwd=tmp_path, timeout=180))
        assert (cancel["campaign"], cancel["stopped_pid"], cancel["undone"], cancel["failed"]) == (
            campaign, run.proc.pid, [], [])   # the process cancelled its own job: nothing was left to undo
        rc = run.proc.wait(timeout=EXIT_DEADLINE_S)
        print(f"poc cancel: poc run exited {rc} {time.monotonic() - t_cancel:.1f} s after the cancel started")
    finally:
        stop(run, cdir, env, tmp_path)

    err = run.stderr
    assert rc == EXIT_INTERRUPTED, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert "ERROR interrupted: submitted jobs were cancelled and finished runs are kept" in err, err[-3000:]
    assert "TIP continue with the same command plus --resume" in err, err[-3000:]
    # the first run's lines had no ETA (no run had finished to time it by); the second's had one
    prog = progress_lines(err)
    assert {p[4] for p in prog if p[2] == FIRST} == {None} and all(p[:2] == (1, 2) for p in prog if p[2] == FIRST)

    wait_for(f"job {job_id} gone from squeue", lambda: squeue_state(job_id) not in ACTIVE_SLURM_STATES, 120)
    acct = [ln.strip() for ln in login(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"]).stdout.splitlines()
            if ln.strip()]
    assert acct and acct[-1].startswith("CANCELLED"), acct
    wait_for(f"no process of {SECOND} on {', '.join(slurm_cluster.compute_nodes)}",
             lambda: node_processes(slurm_cluster.compute_nodes, run_dir) == [], 90, interval=1.0)

    assert inflight(cdir) == []
    before = records(cdir)
    assert [(r["run_id"], r["status"]) for r in before] == [(FIRST, "ok"), (SECOND, "interrupted")]
    assert before[1]["job_ids"] == [job_id]
    assert (before[1]["error"]["type"], before[1]["error"]["origin"]) == ("KeyboardInterrupt", "user")

    # poc status of the stopped campaign: what is done, what is left, how to go on.
    st = ok_json(poc("status", "--results", str(cdir), "-o", "json", env=env, cwd=tmp_path))
    assert (st["running"], st["pid"]) == (False, None)
    assert st["counts"] == {"ok": 1, "failed": 0, "harness_error": 0, "interrupted": 1, "in_flight": 0, "to_run": 0}
    assert st["left"] == [SECOND] and st["runs"][1]["state"] == "interrupted"
    table = poc("status", "--results", str(cdir), env=env, cwd=tmp_path).stdout.splitlines()
    assert table[0] == f"campaign {campaign} at {cdir}: not running"
    assert table[1] == ("2 planned (plan from campaign.json): 1 ok, 0 failed, 0 harness error(s), "
                        "1 interrupted, 0 in flight, 0 to run")
    assert table[4].split()[:4] == [SECOND, "slurm", "clean", "interrupted"]
    assert table[-1] == f"stopped with 1 left to run: {SECOND}; the same `poc run` plus --resume runs them"

    # The same `poc run` plus --resume runs only what is left, and ends with both runs ok.
    t_resume = time.monotonic()
    again = Poc([*run_args, "--resume", "--json"], tmp_path, env, "resume")
    try:
        rc = again.proc.wait(timeout=480)
    finally:
        stop(again, cdir, env, tmp_path)
    print(f"--resume: exit {rc} after {time.monotonic() - t_resume:.1f} s")
    assert rc == 0, again.stderr[-3000:]
    resumed = json.loads(again.stdout)
    assert [(r["run_id"], r["status"]) for r in resumed["runs"]] == [(SECOND, "ok")]
    after = records(cdir)
    assert after[:2] == before and [(r["run_id"], r["status"]) for r in after[2:]] == [(SECOND, "ok")]
    assert after[2]["job_ids"] != [job_id]   # a new job, not the cancelled one
    assert inflight(cdir) == []
    assert [p[:3] for p in progress_lines(again.stderr)][:1] == [(1, 1, SECOND)]   # the resume's count: 1 run
    print(f"total {time.monotonic() - t0:.1f} s")
