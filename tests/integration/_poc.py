"""Driving the real `poc` CLI from integration tests: a `poc` process in its own session (signalled
like a terminal's Ctrl-C, or killed like a crash), polls with deadlines, and what the store and the
Slurm-in-Docker cluster hold. Shared by test_interrupt_resume.py and test_slurm_crash.py."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.store import read_runs

EXIT_DEADLINE_S = 30            # "promptly": from the signal to the process having exited
POLL_S = 0.2
ACTIVE_SLURM_STATES = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED",
                       "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED"}


def poc_argv(*args: str) -> list[str]:
    exe = Path(sys.executable).with_name("poc")  # the installed console script, as a user runs it
    return [str(exe), *args] if exe.exists() else [sys.executable, "-m", "harness.cli", *args]


def write_config(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data, indent=2))  # JSON is YAML
    return path


# exec the command with SIGINT at its default disposition (an ignored signal stays ignored across exec;
# a default one stays default, and poc's Python then installs its KeyboardInterrupt handler)
DEFAULT_SIGINT = [sys.executable, "-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                  "os.execvp(sys.argv[1], sys.argv[1:])"]


class Poc:
    """A `poc` process in a session of its own, so its process group can be signalled like a terminal's."""

    def __init__(self, args: list[str], tmp: Path, env: dict[str, str], tag: str):
        self.out_path, self.err_path = tmp / f"{tag}.stdout", tmp / f"{tag}.stderr"
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            # a terminal's foreground job takes Ctrl-C; a suite started in the background (`cmd &` in a
            # non-interactive shell) would pass SIGINT ignored down to poc, which then rightly keeps running
            self.proc = subprocess.Popen([*DEFAULT_SIGINT, *poc_argv(*args)], stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL, env=env, cwd=str(tmp), start_new_session=True)

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    @property
    def stdout(self) -> str:
        return self.out_path.read_text(errors="replace")

    def interrupt(self, sig: int) -> float:
        """Signal the process group (a terminal's Ctrl-C reaches every process in the foreground group);
        return how long the process took to exit."""
        t0 = time.monotonic()
        os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=EXIT_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"poc did not exit within {EXIT_DEADLINE_S} s of {signal.Signals(sig).name}\n"
                        f"stderr:\n{self.stderr[-3000:]}")
        return time.monotonic() - t0

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)


def wait_for(what: str, probe, timeout: float, poc: Poc | None = None, interval: float = POLL_S,
             context=None):
    """Poll probe() until it returns something truthy; fail with `what` (and poc's stderr, and what
    context() returns) at the deadline, or at once when the poc process being watched exits before it
    happened."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        if poc is not None and poc.proc.poll() is not None:
            last = probe()
            if last:
                return last
            pytest.fail(f"poc exited with {poc.proc.returncode} before {what}\nstderr:\n{poc.stderr[-3000:]}")
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}"
                + (f"\nstderr:\n{poc.stderr[-3000:]}" if poc is not None else "")
                + (f"\n{context()}" if context is not None else ""))


def records(campaign_dir: Path) -> list[dict]:
    return read_runs(campaign_dir / "runs.jsonl")


def latest_status(recs: list[dict]) -> dict[str, str]:
    out: dict[str, str] = {}
    for r in recs:
        out[r["run_id"]] = r["status"]
    return out


def inflight(campaign_dir: Path) -> list[str]:
    d = campaign_dir / "inflight"
    return sorted(p.name for p in d.glob("*.json")) if d.is_dir() else []



# ---------------------------------------------------------------- Slurm in Docker

def login(argv: list[str], check: bool = False) -> subprocess.CompletedProcess:
    from harness.clusters import slurm_docker

    return slurm_docker.run(slurm_docker.login_exec_argv(argv), check=check)


def squeue_state(job_id: str) -> str:
    return login(["squeue", "-h", "-j", job_id, "-o", "%T"]).stdout.strip()


def slurm_queue() -> str:
    """Every job in the queue (any user) and every node's state: what a test that waited in vain shows."""
    jobs = login(["squeue", "-a", "-h", "-o", "%i %j %u %T %r %N %M"]).stdout.strip()
    nodes = login(["sinfo", "-h", "-N", "-o", "%N %T %E"]).stdout.strip()
    return f"squeue (id name user state reason nodes time):\n{jobs or '(empty)'}\nsinfo:\n{nodes}"


def wait_slurm_nodes_free(nodes: tuple[str, ...], timeout: float = 180) -> None:
    """Wait until no job holds any of `nodes` (an earlier test's job may still be completing); fail
    naming the jobs that do, so a job another test left behind is found, not waited behind."""
    def free():
        out = login(["squeue", "-a", "-h", "-t", "RUNNING,COMPLETING,CONFIGURING", "-o", "%N"]).stdout
        held = set()
        for spec in out.split():
            held |= set(login(["scontrol", "show", "hostnames", spec]).stdout.split())
        return not (held & set(nodes))
    wait_for(f"nodes {','.join(nodes)} free of jobs", free, timeout, interval=1.0, context=slurm_queue)
