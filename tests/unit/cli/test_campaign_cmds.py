"""poc status, list, logs and cancel against a store the real Store wrote, with records shaped as the pipeline's."""
import contextlib
import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import types

import pytest
import yaml
from support.fakes import ScriptedBackend
from support.paths import FIXTURES

from harness import config as cfgmod
from harness.cli import main
from harness.errors import TransportError
from harness.store import Store

CONFIG = "campaign: camp\nplatforms: [local]\nrepetitions: 4\n"   # plan: local-clean-01..04, local-kill-rank-01


def _rec(run_id, status="ok", error=None, start=100.0, took=10.0):
    return {"run_id": run_id, "campaign": "camp", "platform": "local",
            "scenario": "kill_rank" if "kill" in run_id else "clean", "config_hash": "h", "status": status,
            "stages": [], "started_at": start, "finished_at": start + took, **({"error": error} if error else {})}


@pytest.fixture
def campaign(tmp_path):
    """A campaign half done: two ok, one failed, one harness error, one in flight, none left to run but one."""
    cfg_path = tmp_path / "c.yaml"
    cfg_path.write_text(CONFIG)
    cfg = cfgmod.load(cfg_path)
    res = tmp_path / "res"
    store = Store(res, cfg.campaign)
    store.open(cfg.config_hash(), cfg.redacted(), resume=False)
    store.write_artifacts("local-clean-01", {"events.jsonl": "", "rendered/launch.sh": "#!/bin/sh\n",
                                             "logs/agent-0.log.gz": gzip.compress(b"step 1\nstep 2\n"),
                                             "logs/agent-1.log": "rank 1 here\n"})
    store.append(_rec("local-clean-01"))
    store.write_artifacts("local-clean-02", {"events.jsonl": ""})
    store.append(_rec("local-clean-02", "harness_error",
                      {"stage": "metrics", "origin": "harness", "type": "KeyError", "message": "'x'"}))
    store.append(_rec("local-kill-rank-01", "failed",
                      {"stage": "run", "origin": "platform", "message": "job FAILED\nmore"}))
    store.append(_rec("local-clean-03", start=200.0, took=30.0))
    store.mark_inflight({"platform": "local", "run_id": "local-clean-04", "ids": ["4242"],
                         "submitted_at": time.time() - 5, "data": {}})
    store.close()
    return {"cfg": cfg_path, "res": res, "root": res / "camp"}


def _json(capsys):
    return json.loads(capsys.readouterr().out)


def test_status_counts_each_planned_run_by_its_state(campaign, capsys):
    assert main(["status", "--results", str(campaign["res"]), "--campaign", "camp", "-o", "json"]) == 0
    d = _json(capsys)
    assert d["planned"] == 5 and d["plan_from"] == "campaign.json" and d["running"] is False
    assert d["counts"] == {"ok": 2, "failed": 1, "harness_error": 1, "interrupted": 0, "in_flight": 1, "to_run": 0}
    by_id = {r["run_id"]: r for r in d["runs"]}
    assert by_id["local-clean-04"]["state"] == "in_flight" and by_id["local-clean-04"]["ids"] == ["4242"]
    assert by_id["local-kill-rank-01"]["detail"] == "at run: job FAILED"
    assert by_id["local-clean-01"]["duration_s"] == 10.0


def test_status_reads_the_plan_the_campaign_stored_and_shows_runs_still_to_run(campaign, capsys):
    """The stored config is what the campaign runs: --results naming the campaign is enough."""
    assert main(["status", "--results", str(campaign["root"]), "--set", "repetitions=6", "-o", "yaml"]) == 0
    d = yaml.safe_load(capsys.readouterr().out)
    assert d["planned"] == 7 and d["counts"]["to_run"] == 2 and d["plan_from"] == "the command line"


def test_status_table_is_the_default_view(campaign, capsys):
    assert main(["status", "--results", str(campaign["res"])]) == 0   # the only campaign there
    out = capsys.readouterr().out
    assert "campaign camp at" in out and "not running" in out
    assert "5 planned (plan from campaign.json): 2 ok, 1 failed, 1 harness error(s), 0 interrupted, 1 in flight" in out
    assert any(line.split()[:4] == ["local-clean-04", "local", "clean", "in"] for line in out.splitlines())


@contextlib.contextmanager
def _hold_lock(campaign):
    """A second process that opens the campaign as a running `poc run` does (the real Store, its real
    flock) and holds it until SIGTERM."""
    code = textwrap.dedent(f"""
        import signal, sys, time
        from harness import config
        from harness.store import Store
        cfg = config.load({str(campaign["cfg"])!r})
        store = Store({str(campaign["res"])!r}, cfg.campaign)
        store.open(cfg.config_hash(), cfg.redacted(), resume=True)
        def stop(*_):
            store.close()
            sys.exit(130)
        signal.signal(signal.SIGTERM, stop)
        print("locked", flush=True)
        time.sleep(60)
    """)
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                          cwd=os.getcwd(), env={**os.environ, "PYTHONPATH": os.getcwd()}) as proc:
        try:
            assert proc.stdout.readline().strip() == "locked"
            yield proc
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)


def test_status_works_while_another_process_holds_the_campaigns_lock(campaign, capsys):
    with _hold_lock(campaign) as proc:
        assert main(["status", "--results", str(campaign["res"]), "--campaign", "camp", "-o", "json"]) == 0
        d = _json(capsys)
        assert d["running"] is True and d["pid"] == proc.pid
        assert d["counts"]["ok"] == 2   # read while locked, nothing refused
        assert main(["list", "--results", str(campaign["res"]), "-o", "json"]) == 0
        assert _json(capsys)["campaigns"][0]["running"] is True
    assert main(["status", "--results", str(campaign["root"]), "-o", "json"]) == 0
    assert _json(capsys)["running"] is False


def test_list_counts_the_campaigns_under_a_results_dir(campaign, capsys, tmp_path):
    other = Store(campaign["res"], "other")
    other.open("h", {}, resume=False)
    other.append(_rec("local-clean-01"))
    other.close()
    assert main(["list", "--results", str(campaign["res"]), "-o", "json"]) == 0
    got = {c["campaign"]: c for c in _json(capsys)["campaigns"]}
    assert set(got) == {"camp", "other"}
    assert (got["camp"]["runs"], got["camp"]["ok"], got["camp"]["failed"], got["camp"]["harness_error"],
            got["camp"]["in_flight"]) == (5, 2, 1, 1, 1)
    assert got["other"]["runs"] == 1
    assert main(["list", "--results", str(campaign["res"])]) == 0
    assert capsys.readouterr().out.splitlines()[0].split()[:3] == ["CAMPAIGN", "RUNS", "OK"]
    assert main(["list", "--results", str(tmp_path / "nowhere")]) == 1


def test_logs_prints_the_kept_job_output_decompressed(campaign, capsys):
    assert main(["logs", "local-clean-01", "--results", str(campaign["res"])]) == 0
    out = capsys.readouterr().out
    assert "==> logs/agent-0.log <==\nstep 1\nstep 2\n" in out and "rank 1 here" in out
    assert main(["logs", "local-clean-01", "--results", str(campaign["res"]), "--json"]) == 0
    d = _json(capsys)
    assert d["logs"]["logs/agent-0.log"] == "step 1\nstep 2\n" and "rendered/launch.sh" in d["files"]


def test_logs_says_where_nothing_is_kept_yet(campaign, capsys):
    assert main(["logs", "local-clean-04", "--results", str(campaign["res"])]) == 1
    err = capsys.readouterr().err
    assert "ERROR nothing is kept for local-clean-04 yet: it is in flight on local (4242)" in err and "TIP" in err
    assert main(["logs", "local-clean-02", "--results", str(campaign["res"])]) == 1
    err = capsys.readouterr().err
    assert "no job output kept for local-clean-02 (it holds: events.jsonl)" in err
    assert main(["logs", "local-nope-01", "--results", str(campaign["res"])]) == 1
    assert "ERROR no run local-nope-01" in capsys.readouterr().err


def test_cancel_stops_the_running_campaign_then_undoes_what_it_left(campaign, capsys):
    backends = []

    def make(platform, cfg):
        backends.append(ScriptedBackend())
        return backends[-1]
    with _hold_lock(campaign) as proc:
        rc = main(["cancel", "--results", str(campaign["res"]), "--config", str(campaign["cfg"]), "--wait", "20",
                   "-o", "json"], backend_fn=make)
        assert proc.wait(timeout=10) == 130
    assert rc == 0
    d = _json(capsys)
    assert d["stopped_pid"] == proc.pid and d["undone"] == ["local-clean-04"]
    assert backends[0].cancelled == ["local-clean-04"]
    assert not (campaign["root"] / "inflight" / "local-clean-04.json").exists()


def test_cleanup_as_a_table_lists_what_it_undid(campaign, capsys):
    assert main(["cleanup", "--results", str(campaign["root"]), "-o", "table"],
                backend_fn=lambda p, c: ScriptedBackend()) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["RUN             PLATFORM  RESULT  DETAIL", "local-clean-04  local     undone  4242"]
    assert "undone: local local-clean-04 (4242)" in err   # the human lines stay on stderr


def test_cleanup_leaves_a_running_campaign_alone(campaign, capsys):
    with _hold_lock(campaign) as proc:
        assert main(["cleanup", "--results", str(campaign["res"]), "--config", str(campaign["cfg"])],
                    backend_fn=lambda p, c: ScriptedBackend()) == 1
        assert "in use by another poc process" in capsys.readouterr().err
        assert proc.poll() is None


def test_status_counts_runs_outside_the_plan_and_says_so(campaign, capsys):
    """A plan that no longer names a recorded run (another config here) still shows and counts it."""
    assert main(["status", "--results", str(campaign["res"]), "--config", str(campaign["cfg"]),
                 "--set", "repetitions=2"]) == 0
    out = capsys.readouterr().out
    assert "3 planned (plan from --config), 2 more recorded outside it: 2 ok, 1 failed" in out
    assert "local-clean-04" in out


def test_cancel_finds_the_campaign_by_its_dir_and_reaches_it_with_the_stored_config(campaign, capsys):
    """`poc cancel <campaign dir>` from another terminal: no --config, no --campaign; the platforms are
    reached with the config the campaign stored, not the built-in default's."""
    made = []

    def make(platform, cfg):
        made.append((platform, cfg.campaign, cfg.repetitions))
        return ScriptedBackend()
    with _hold_lock(campaign) as proc:
        rc = main(["cancel", "--results", str(campaign["root"]), "--wait", "20", "-o", "json"], backend_fn=make)
        assert proc.wait(timeout=10) == 130
    assert rc == 0
    d = _json(capsys)
    assert d["stopped_pid"] == proc.pid and d["undone"] == ["local-clean-04"] and d["campaign"] == "camp"
    assert made == [("local", "camp", 4)]


def test_cancel_without_a_campaign_there_says_so(tmp_path, capsys):
    assert main(["cancel", "--results", str(tmp_path / "nowhere"), "--wait", "1"]) == 1
    err = capsys.readouterr().err
    # the default config's campaign under --results: nothing there, and nothing was stopped or created
    assert f"ERROR no campaign at {tmp_path / 'nowhere' / 'smoke'}\n" in err
    assert "TIP pass the campaign's dir as --results" in err and not (tmp_path / "nowhere").exists()


class _FilesChannel:
    """The Slurm backend's files channel as `poc logs` uses it: one command, answered from a recording."""

    def __init__(self, answer):
        self.answer, self.calls = answer, []

    def run(self, argv, **kw):
        self.calls.append(list(argv))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class _SlurmFiles:
    def __init__(self, channel):
        self.t, self.closed = channel, False

    def close(self):
        self.closed = True


def _reopen(campaign) -> Store:
    """The campaign's store opened again as `poc run --resume` opens it (same config)."""
    cfg = cfgmod.load(campaign["cfg"])
    store = Store(campaign["res"], cfg.campaign)
    store.open(cfg.config_hash(), cfg.redacted(), resume=True)
    return store


def _slurm_in_flight(campaign):
    store = _reopen(campaign)
    store.mark_inflight({"platform": "slurm", "run_id": "slurm-clean-01", "ids": ["50"], "submitted_at": time.time(),
                         "data": {"job_id": "50", "run_dir": "/shared/poc/camp/slurm-clean-01"}})
    store.close()


RUNNING_OUTPUT = (FIXTURES / "day2" / "slurm-50-running.out").read_text()


def test_logs_of_a_slurm_run_in_flight_reads_the_jobs_output_where_it_is(campaign, capsys):
    """The output file of a running job (recorded from the local cluster 20 s into job 50), read through
    the backend's files channel, named as the store names it once the run is collected."""
    _slurm_in_flight(campaign)
    channel = _FilesChannel(subprocess.CompletedProcess([], 0, RUNNING_OUTPUT, ""))
    backends = []

    def make(platform, cfg):
        backends.append((platform, _SlurmFiles(channel)))
        return backends[-1][1]
    assert main(["logs", "slurm-clean-01", "--results", str(campaign["root"])], backend_fn=make) == 0
    out, err = capsys.readouterr()
    assert out == f"==> slurm.out <==\n{RUNNING_OUTPUT}"
    assert out.splitlines()[1] == "poc: job 50 attempt 0 on c[1-2], rendezvous on c1:29500"
    assert "note: slurm-clean-01 is in flight on slurm (50): its job's output so far" in err
    assert channel.calls == [["tail", "-c", "200000", "--", "/shared/poc/camp/slurm-clean-01/slurm-50.out"]]
    assert backends[0][0] == "slurm" and backends[0][1].closed
    assert main(["logs", "slurm-clean-01", "--results", str(campaign["res"]), "--json"], backend_fn=make) == 0
    d = _json(capsys)
    assert d["live"] is True and d["ids"] == ["50"] and d["logs"] == {"slurm.out": RUNNING_OUTPUT}


def test_logs_of_a_slurm_run_not_started_or_unreachable_says_why(campaign, capsys):
    _slurm_in_flight(campaign)
    # tail of a file not there yet: the job is still queued
    missing = _FilesChannel(subprocess.CompletedProcess([], 1, "", "tail: cannot open 'x' for reading"))
    assert main(["logs", "slurm-clean-01", "--results", str(campaign["root"])],
                backend_fn=lambda p, c: _SlurmFiles(missing)) == 1
    err = capsys.readouterr().err
    assert "ERROR slurm-clean-01 is in flight on slurm (50) and its job has written no output yet" in err
    assert "TIP it may still be queued" in err
    down = _FilesChannel(TransportError("ssh to the login node failed: Connection refused", tip="is it up?"))
    assert main(["logs", "slurm-clean-01", "--results", str(campaign["root"])],
                backend_fn=lambda p, c: _SlurmFiles(down)) == 1
    err = capsys.readouterr().err
    assert ("ERROR the output of job 50 (/shared/poc/camp/slurm-clean-01/slurm-50.out) could not be read: "
            "ssh to the login node failed: Connection refused") in err and "TIP is it up?" in err
    assert "Traceback" not in err


def test_logs_of_a_local_run_in_flight_reads_its_agent_logs(campaign, capsys, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "agent-0.log").write_text("rank 0 step 3\n")
    (work / "agent-1.log").write_text("rank 1 step 3\n")
    store = _reopen(campaign)
    store.mark_inflight({"platform": "local", "run_id": "local-clean-04", "ids": ["4242"],
                         "submitted_at": time.time(), "data": {"work_dir": str(work)}})
    store.close()
    assert main(["logs", "local-clean-04", "--results", str(campaign["res"])]) == 0
    assert capsys.readouterr().out == "==> agent-0.log <==\nrank 0 step 3\n==> agent-1.log <==\nrank 1 step 3\n"


class _Core:
    """CoreV1Api as `poc logs` uses it for a JobSet in flight: its pods by label, each worker's log."""

    def __init__(self, pods, logs):
        self.pods, self.logs, self.calls = pods, logs, []

    def list_namespaced_pod(self, ns, label_selector):
        self.calls.append(("list", ns, label_selector))
        return types.SimpleNamespace(items=self.pods)

    def read_namespaced_pod_log(self, name, ns, container, limit_bytes, _request_timeout):
        from kubernetes.client.rest import ApiException
        self.calls.append(("log", name, container, limit_bytes))
        answer = self.logs[name]
        if isinstance(answer, int):
            raise ApiException(status=answer, reason="Bad Request")
        return answer


class _K8sClient:
    def __init__(self, core):
        self._core = core

    def core(self):
        return self._core

    def call(self, what, fn, *args, **kw):
        return fn(*args, **kw)

    def to_dict(self, obj):
        return obj


class _K8s:
    def __init__(self, core):
        self.client, self.closed = _K8sClient(core), False

    def close(self):
        self.closed = True


def _pod(name, uid):
    return {"metadata": {"name": name, "labels": {"jobset.sigs.k8s.io/jobset-name": "k8s-clean-01",
                                                  "jobset.sigs.k8s.io/jobset-uid": uid}}}


def test_logs_of_a_kubernetes_run_in_flight_reads_its_pods_logs(campaign, capsys):
    """Each pod of the run's JobSet (its uid: not a same-named JobSet made since), the worker container's
    log as the API server gives it, named as the store names it; a container not started yet is skipped."""
    store = _reopen(campaign)
    store.mark_inflight({"platform": "k8s", "run_id": "k8s-clean-01", "ids": ["poc/k8s-clean-01"],
                         "submitted_at": time.time(), "data": {"namespace": "poc", "name": "k8s-clean-01",
                                                               "uid": "u1"}})
    store.close()
    core = _Core([_pod("k8s-clean-01-w-0-1-b", "u1"), _pod("k8s-clean-01-w-0-0-a", "u1"),
                  _pod("k8s-clean-01-w-0-0-old", "u0"), _pod("k8s-clean-01-w-0-2-c", "u1")],
                 {"k8s-clean-01-w-0-0-a": "rank 0 step 7\n", "k8s-clean-01-w-0-1-b": "rank 1 step 7\n",
                  "k8s-clean-01-w-0-2-c": 400})
    k8s = _K8s(core)
    assert main(["logs", "k8s-clean-01", "--results", str(campaign["root"])], backend_fn=lambda p, c: k8s) == 0
    out, err = capsys.readouterr()
    assert out == ("==> k8s-clean-01-w-0-0-a.log <==\nrank 0 step 7\n"
                   "==> k8s-clean-01-w-0-1-b.log <==\nrank 1 step 7\n")
    assert "note: k8s-clean-01 is in flight on k8s (poc/k8s-clean-01): its job's output so far" in err
    assert core.calls[0] == ("list", "poc", "jobset.sigs.k8s.io/jobset-name=k8s-clean-01")
    assert ("log", "k8s-clean-01-w-0-0-a", "torchrun", 200_000) in core.calls and k8s.closed
    assert not any(c[1] == "k8s-clean-01-w-0-0-old" for c in core.calls if c[0] == "log")


def test_logs_of_a_container_run_in_flight_reads_docker_logs(tmp_path):
    from harness.cli import live_output
    calls = []

    def run(argv, **kw):
        calls.append(argv)
        if argv[-1] == "poc-local-clean-01-1":
            return subprocess.CompletedProcess(argv, 1, "", "Error: No such container")
        return subprocess.CompletedProcess(argv, 0, "rank 0 step 2\n", "warn\n")
    handle = {"platform": "local", "run_id": "local-clean-01", "data": {
        "runtime": "container", "containers": ["poc-local-clean-01-0", "poc-local-clean-01-1"]}}
    assert live_output.readable(handle)
    assert live_output.read(handle, lambda p: None, run=run) == {"container-0.log": "rank 0 step 2\nwarn\n"}
    assert calls == [["docker", "logs", "poc-local-clean-01-0"], ["docker", "logs", "poc-local-clean-01-1"]]


def test_status_of_a_stopped_campaign_says_what_a_resume_runs(campaign, capsys):
    store = _reopen(campaign)
    store.clear_inflight("local-clean-04")
    store.append(_rec("local-clean-04", "interrupted",
                      {"stage": "run", "origin": "user", "type": "KeyboardInterrupt", "message": ""}))
    store.close()
    assert main(["status", "--results", str(campaign["root"]), "-o", "json"]) == 0
    d = _json(capsys)
    # every planned run not ok, in plan order: the harness error, the failed run, the interrupted one
    assert d["left"] == [r["run_id"] for r in d["runs"] if r["state"] != "ok"]
    assert sorted(d["left"]) == ["local-clean-02", "local-clean-04", "local-kill-rank-01"]
    assert main(["status", "--results", str(campaign["root"])]) == 0
    out = capsys.readouterr().out
    assert any(ln.split() == ["local-clean-04", "local", "clean", "interrupted", "at", "run:", "KeyboardInterrupt"]
               for ln in out.splitlines()), out
    assert out.splitlines()[-1].startswith("stopped with 3 left to run: ")
    assert out.splitlines()[-1].endswith("; the same `poc run` plus --resume runs them")
