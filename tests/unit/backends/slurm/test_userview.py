"""What a Slurm user sees about a mistaken run (harness/backends/slurm/userview.py), and what the
harness's calls are counted as (scheduler.command_name, CountingTransport, rest.request_kind).

Fed with what the real Slurm-in-Docker cluster (24.11.5, user poc) printed for the five mistakes:
tests/fixtures/slurm/mistakes/<kind>.json, recorded by driving ``view`` once a second on real jobs
(each look's commands with their argv, rc and stdout, and what view made of them).
"""
from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from support.paths import FIXTURES

from harness import config, spec
from harness.backends.base import Handle
from harness.backends.slurm import userview as uv
from harness.backends.slurm.eventfiles import RunFiles
from harness.backends.slurm.eventfiles import argv as look_argv
from harness.backends.slurm.rest import RestClient, RestScheduler, request_kind
from harness.backends.slurm.scheduler import CliScheduler, CountingTransport, command_name, counting
from harness.errors import ConfigError, TransportError
from harness.render.sbatch import render_sbatch
from harness.transports import Result

FIX = FIXTURES / "slurm"
MISTAKES = FIX / "mistakes"
RUNTIME = ("missing_image", "entrypoint_typo", "missing_checkpoint_volume")


def recorded(kind: str) -> dict:
    return json.loads((MISTAKES / f"{kind}.json").read_text())


class Replay:
    """A transport answering each command with the next recorded answer for its program."""
    name = "replay"

    def __init__(self, commands: list[dict]):
        self.queue = {c["argv"][0]: c for c in commands}   # one per program per look
        self.asked: list[list[str]] = []

    def run(self, argv, *, input=None, env=None, timeout=60, check=True):
        self.asked.append(list(argv))
        c = self.queue.get(argv[0])
        if c is None:
            raise AssertionError(f"view ran {argv[0]}, which the real look did not")
        return Result(tuple(argv), c["rc"], c["stdout"], "")

    def describe(self):
        return {"transport": "replay"}

    def close(self):
        pass


class Backend:
    """What view reads of a SlurmBackend: its scheduler and its files channel."""

    def __init__(self, t):
        self.sched = CliScheduler(t)
        self.t = counting(t, self.sched.calls)


def handle(rec: dict) -> Handle:
    return Handle("slurm", "r", [rec["job_id"]], 0.0, data={"job_id": rec["job_id"], "run_dir": rec["run_dir"]})


@pytest.mark.parametrize("kind", RUNTIME)
def test_each_recorded_look_reads_as_it_did_on_the_cluster(kind):
    rec = recorded(kind)
    h = handle(rec)
    for look in rec["looks"]:
        t = Replay(look["commands"])
        assert uv.view(Backend(t), h) == look["view"], look["at_s"]
        assert [a[0] for a in t.asked] == [c["argv"][0] for c in look["commands"]]


@pytest.mark.parametrize(("kind", "source", "says"), [
    ("missing_image", "job output slurm-7.out",
     "/var/spool/slurmd/job00007/slurm_script: line 25: /opt/poc-venv-missing/bin/activate: No such file or directory"),
    ("entrypoint_typo", "job output slurm-9.out",
     "/usr/bin/python3: can't open file '/shared/poc/uxexplore/slurm-mistake-entrypoint-typo/ddp_trian.py': "
     "[Errno 2] No such file or directory"),
    ("missing_checkpoint_volume", "job output slurm-10.out",
     "PermissionError: [Errno 13] Permission denied: '/lustre'"),
])
def test_the_cause_is_the_first_output_message_and_the_job_ends_failed(kind, source, says):
    rec = recorded(kind)
    last = rec["looks"][-1]
    msgs = uv.view(Backend(Replay(last["commands"])), handle(rec))
    assert msgs[0]["source"] == "sacct State/ExitCode" and msgs[0]["text"].startswith("FAILED ExitCode ")
    out = [m for m in msgs if m["source"] == source]
    assert out and out[0]["text"] == says


def test_the_venv_failure_stops_the_job_with_bashs_message_not_the_wrong_python():
    """source of a missing activate fails; the setup line's `|| exit 1` ends the job there, so no
    torchrun (no python, no event) ever starts."""
    grep = recorded("missing_image")["looks"][-1]["commands"][-1]["stdout"]
    assert uv.error_lines(grep) == [
        "/var/spool/slurmd/job00007/slurm_script: line 25: /opt/poc-venv-missing/bin/activate: "
        "No such file or directory",
        "poc: activating slurm.venv /opt/poc-venv-missing failed on c1"]
    assert "torch" not in grep and "python" not in grep


def test_a_requeued_jobs_state_reads_as_squeue_prints_it():
    looks = recorded("entrypoint_typo")["looks"]
    states = [lk["view"][0]["text"] for lk in looks]
    assert states[0] == "PENDING (None)" and "RUNNING c[1-2]" in states and "PENDING (BeginTime)" in states


def test_a_finished_jobs_record_is_read_once_then_kept():
    rec = recorded("missing_image")
    h = handle(rec)
    t = Replay(rec["looks"][-1]["commands"])
    first = uv.view(Backend(t), h)
    t.asked.clear()
    again = uv.view(Backend(t), h)
    assert again == first and [a[0] for a in t.asked] == ["grep"]   # no squeue, no sacct any more


def test_the_output_is_read_with_one_grep_of_the_jobs_own_file():
    argv = uv.output_argv("/shared/poc/c/r/", "12")
    assert argv[0] == "grep" and argv[-1] == "/shared/poc/c/r/slurm-12.out"
    # the pattern grep is given lets through every line error_lines keeps in the recorded outputs
    ere = re.compile(uv.OUTPUT_ERE)
    for kind in RUNTIME:
        for look in recorded(kind)["looks"]:
            grep = look["commands"][-1]["stdout"]
            assert all(ere.search(line) for line in grep.splitlines() if line)


def test_error_lines_drop_traceback_furniture_events_and_rank_prefixes():
    text = "\n".join([
        'POC_EVENT {"kind":"comm","error":"x"}',
        "[rank0]: PermissionError: [Errno 13] Permission denied: '/lustre'",
        "[rank1]: PermissionError: [Errno 13] Permission denied: '/lustre'",
        '  File "/usr/lib/python3/dist-packages/torch/distributed/run.py", line 922, in <module>',
        "    raise ChildFailedError(",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "  error_file: <N/A>",
        "E1203 15:09:51.421000 87 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 2)",
        "srun: error: c1: task 0: Exited with exit code 1",
    ])
    assert uv.error_lines(text) == ["PermissionError: [Errno 13] Permission denied: '/lustre'",
                                    "srun: error: c1: task 0: Exited with exit code 1"]
    assert uv.error_lines("\n".join(f"srun: error: c{i}: x" for i in range(20)), limit=3) == [
        "srun: error: c0: x", "srun: error: c1: x", "srun: error: c2: x"]


def test_a_request_that_fails_leaves_its_part_out():
    class Down:
        name = "down"

        def run(self, argv, **_kw):
            raise TransportError("ssh: connection refused")

    h = Handle("slurm", "r", ["5"], 0.0, data={"job_id": "5", "run_dir": "/w/c/r"})
    assert uv.view(Backend(Down()), h) == []
    assert uv.ENDED_KEY not in h.data


def test_submit_refusals_are_sbatchs_own_words():
    q = recorded("wrong_queue")["submit"]
    assert q["rc"] == 1 and "invalid partition specified: poc-typo" in q["stderr"]
    r = recorded("impossible_resources")["submit"]
    assert r["rc"] == 1 and "Requested node configuration is not available" in r["stderr"]


# ------------------------------------------------------------------ over slurmrestd
class Resp:
    def __init__(self, status: int, text: str):
        self.status_code, self.text = status, text

    def json(self):
        return json.loads(self.text)


class RestReplay:
    """requests.Session stand-in: slurmrestd's recorded answers (tests/fixtures/slurm/rest)."""

    def __init__(self, routes: dict[tuple[str, str], tuple[int, str]]):
        self.routes, self.headers, self.asked = routes, {}, []

    def request(self, method, url, params=None, json=None, timeout=None, allow_redirects=True):
        path = re.sub(r"^https?://[^/]+", "", url)
        self.asked.append(f"{method} {path}")
        for (m, pat), ans in self.routes.items():
            if m == method and re.fullmatch(pat, path):
                return Resp(*ans)
        return Resp(404, "not found")

    def close(self):
        pass


def rest_fixture(name: str) -> tuple[int, str]:
    return 200, (FIX / "rest" / f"{name}.json").read_text()


def test_over_rest_the_state_is_get_job_and_the_output_the_files_channel():
    session = RestReplay({("GET", r"/slurm/v0\.0\.42/ping/"): rest_fixture("ping"),
                          ("GET", r"/slurm/v0\.0\.42/job/9"): rest_fixture("job_pending")})
    client = RestClient("http://rest.example:6820", "poc", "tok", "$SLURM_JWT", "v0.0.42", session=session)
    grep = recorded("entrypoint_typo")["looks"][-1]["commands"][-1]
    files = Replay([grep])

    class RestBackend:
        sched = RestScheduler(client, files)
        t = counting(files, sched.calls)

    b = RestBackend()
    h = Handle("slurm", "r", ["9"], 0.0, data={"job_id": "9", "run_dir": "/shared/poc/c/r"})
    msgs = uv.view(b, h)
    assert msgs[0] == {"source": "squeue", "text": "PENDING (BeginTime)"}
    assert any("ddp_trian.py" in m["text"] for m in msgs[1:])
    assert b.sched.calls == Counter({"GET ping": 1, "GET job": 1, "grep": 1})


@pytest.mark.parametrize(("method", "path", "kind"), [
    ("GET", "/slurm/v0.0.42/job/123", "GET job"),
    ("POST", "/slurm/v0.0.42/job/submit", "POST job/submit"),
    ("DELETE", "/slurm/v0.0.41/job/7", "DELETE job"),
    ("GET", "/slurmdb/v0.0.42/job/123", "GET slurmdb job"),
    ("GET", "/slurm/v0.0.42/ping/", "GET ping"),
    ("POST", "/slurm/v0.0.42/node/c3", "POST node"),
    ("GET", "/openapi/v3", "GET openapi"),
])
def test_rest_requests_are_counted_by_endpoint_without_ids(method, path, kind):
    assert request_kind(method, path) == kind


# ------------------------------------------------------------------ counting the CLI
def test_commands_are_counted_by_program_and_the_polls_script_by_what_it_asks():
    look = look_argv("n0nce", ["12"], [RunFiles("/w/c/r/events")])
    assert command_name(look) == "squeue+event files"
    assert command_name(look_argv("n0nce", [], [RunFiles("/w/c/r/events")])) == "event files"
    assert command_name(["/usr/bin/sacct", "-X"]) == "sacct"
    assert command_name(["sh", "-c", 'cat "$1"', "sh", "/x"]) == "sh -c cat"
    assert command_name([]) == "?"


def test_a_counting_transport_counts_failed_commands_and_is_not_wrapped_twice():
    calls: Counter = Counter()

    class Fails:
        name = "fails"

        def run(self, argv, **_kw):
            raise TransportError("down")

    t = counting(Fails(), calls)
    assert counting(t, calls) is t and isinstance(counting(t, Counter()), CountingTransport)
    with pytest.raises(TransportError):
        t.run(["sbatch", "x"])
    assert calls == {"sbatch": 1} and t.name == "fails"


def test_the_cli_scheduler_counts_what_it_runs():
    rec = recorded("missing_image")
    sched = CliScheduler(Replay(rec["looks"][-1]["commands"]))
    sched.squeue(["7"])
    sched.accounting(["7"])
    assert dict(sched.calls) == {"squeue": 1, "sacct": 1}


# ------------------------------------------------------------------ the rendered job
def render(slurm: dict | None = None, **spec_changes):
    import dataclasses

    cfg = config.from_mapping({"platforms": ["slurm"], "slurm": slurm or {}})
    s = dataclasses.replace(spec.build(cfg, "slurm", "slurm-mistake-x", None), **spec_changes)
    return render_sbatch(s, cfg.slurm)


def test_the_launch_line_runs_the_entrypoint_while_the_shipped_file_keeps_its_name():
    job = render(entrypoint="ddp_trian.py")
    assert f"{job.run_dir}/ddp_trian.py" in job.script and f"{job.run_dir}/ddp_train.py" not in job.script
    assert job.workload_path.endswith("/ddp_train.py")
    assert "/opt/w/x.py \\" in render(entrypoint="/opt/w/x.py").script.replace("'", "")


def test_checkpoint_dir_puts_the_runs_checkpoints_under_it():
    job = render({"checkpoint_dir": "/lustre/poc-missing/ckpt/"}, campaign="c", owner="t0k")
    assert "--ckpt-dir /lustre/poc-missing/ckpt/c-t0k/slurm-mistake-x " in job.script
    assert job.ckpt_dir == "/lustre/poc-missing/ckpt/c-t0k/slurm-mistake-x"
    assert render().ckpt_dir == f"{render().run_dir}/ckpt"
    with pytest.raises(ConfigError, match="not an absolute path"):
        render({"checkpoint_dir": "~/ckpt"})


def test_a_missing_venv_ends_the_batch_script_before_torchrun():
    script = render({"venv": "/opt/poc-venv-missing"}).script
    line = next(ln for ln in script.splitlines() if ln.startswith("source "))
    assert line.startswith("source /opt/poc-venv-missing/bin/activate || {") and "exit 1" in line
    assert script.index(line) < script.index("torch.distributed.run")
