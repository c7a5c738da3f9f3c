"""slurm.transport rest without a cluster: slurmrestd's answers are real recorded ones.

tests/fixtures/slurm/rest/ holds what slurmrestd 24.11.5 (auth/jwt, the local Docker cluster) sent
(record.py there re-records them; index.json has each request and status). ``Replay`` is a
requests.Session stand-in that answers from those files and records the requests.
"""
from __future__ import annotations

import json
import re

import pytest
import requests
from support.paths import FIXTURES

from harness import config, redact, spec
from harness import slurm_parse as sp
from harness.backends.base import Handle
from harness.backends.slurm import SlurmBackend, guard
from harness.backends.slurm.files import MountTransport
from harness.backends.slurm.jobdesc import job_description, minutes, sbatch_lines
from harness.backends.slurm.rest import RestClient, RestError, RestScheduler, node_state_text, read_token
from harness.errors import ConfigError, SubmitError
from harness.render.sbatch import render_sbatch
from harness.states import JobState

FIX = FIXTURES / "slurm" / "rest"
INDEX = json.loads((FIX / "index.json").read_text())
TOKEN = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjQ4MDAwMDAwMDAsInN1biI6InBvYyJ9.dGVzdC1zaWduYXR1cmU"


def fixture(name: str) -> tuple[int, str]:
    f = FIX / f"{name}.json"
    return INDEX[name]["status"], (f if f.exists() else FIX / f"{name}.txt").read_text()


class Resp:
    def __init__(self, status: int, text: str):
        self.status_code, self.text = status, text

    def json(self):
        return json.loads(self.text)


class Replay:
    """Answers (METHOD, path regex) from recorded fixtures; a 404 text for anything unknown."""

    def __init__(self, routes: dict[tuple[str, str], str | Exception]):
        self.routes = routes
        self.headers: dict = {}
        self.calls: list[tuple[str, str, dict | None]] = []

    def request(self, method, url, params=None, json=None, timeout=None, allow_redirects=True):
        path = re.sub(r"^https?://[^/]+", "", url)
        assert allow_redirects is False, "a redirect would carry the token to another host"
        self.calls.append((method, path, json))
        for (m, pat), ans in self.routes.items():
            if m == method and re.fullmatch(pat, path):
                if isinstance(ans, Exception):
                    raise ans
                return Resp(*fixture(ans))
        return Resp(*fixture("ping_v0.0.43_unsupported"))

    def close(self):
        pass


OK = {("GET", r"/slurm/v0\.0\.4[0-2]/ping/"): "ping", ("GET", r"/slurm/v0\.0\.42/partitions/"): "partitions",
      ("GET", r"/slurm/v0\.0\.42/nodes/"): "nodes", ("GET", r"/slurm/v0\.0\.42/node/c1"): "node_c1",
      ("GET", "/openapi/v3"): "openapi_paths", ("POST", r"/slurm/v0\.0\.42/job/submit"): "submit",
      ("GET", r"/slurm/v0\.0\.42/job/8"): "job_running", ("GET", r"/slurm/v0\.0\.42/job/999999"): "job_unknown",
      ("GET", r"/slurmdb/v0\.0\.42/job/8"): "slurmdb_job_requeued", ("DELETE", r"/slurm/v0\.0\.42/job/\d+"): "cancel",
      ("POST", r"/slurm/v0\.0\.42/node/c3"): "node_update_down_as_user"}


def client(routes=None, version=None, **kw) -> tuple[RestClient, Replay]:
    s = Replay({**OK, **(routes or {})})
    return RestClient("http://rest.example:6820", "poc", TOKEN, "$SLURM_JWT", version, session=s,
                      sleep=lambda _s: None, **kw), s


SITE_ENV = {"PATH": "/opt/slurm/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}   # slurm.rest.job_environment, as a site sets it


def sched(routes=None, version=None, files=None) -> tuple[RestScheduler, Replay]:
    c, s = client(routes, version)
    return RestScheduler(c, files or MountTransport("/shared/poc", "/tmp/nowhere"), None, SITE_ENV), s


# ---------------------------------------------------------------- versions and authentication

def test_newest_version_both_speak_is_chosen_and_headers_carry_user_and_token():
    c, s = client()
    assert c.negotiate() == "v0.0.42" and s.calls == [("GET", "/slurm/v0.0.42/ping/", None)]
    assert s.headers["X-SLURM-USER-NAME"] == "poc" and s.headers["X-SLURM-USER-TOKEN"] == TOKEN
    c.negotiate()
    assert len(s.calls) == 1                      # probed once


def test_an_unsupported_version_lists_what_the_server_offers():
    c, _ = client(version="v0.0.39")
    with pytest.raises(ConfigError) as e:
        c.negotiate()
    assert "does not speak v0.0.39 (it offers v0.0.42, v0.0.41, v0.0.40)" in e.value.message
    assert "api_version" in e.value.tip


def test_a_bad_token_is_an_error_with_the_scontrol_token_tip():
    sch, _ = sched({("GET", r"/slurm/v0\.0\.42/partitions/"): "partitions_bad_token"})
    with pytest.raises(RestError) as e:
        sch.version()          # ping answers even with a bad token (24.11): preflight asks more
    assert e.value.status == 511 and "refused the token for user 'poc'" in e.value.message
    assert "scontrol token username=USER" in e.value.tip and "$SLURM_JWT" in e.value.tip
    assert TOKEN not in e.value.message + e.value.tip


def test_no_token_on_the_request_is_401():
    sch, _ = sched({("GET", r"/slurm/v0\.0\.42/partitions/"): "partitions_no_token"})
    with pytest.raises(RestError) as e:
        sch.partitions()
    assert e.value.status == 401 and "Authentication failure" in e.value.message


def test_token_comes_from_the_env_or_a_file_and_a_missing_one_says_how_to_mint_it(tmp_path):
    assert read_token("T", None, {"T": f"SLURM_JWT={TOKEN}\n"}) == (TOKEN, "$T")
    f = tmp_path / "jwt"
    f.write_text(TOKEN + "\n")
    assert read_token("T", str(f), {}) == (TOKEN, f"file {f}")
    with pytest.raises(ConfigError) as e:
        read_token("T", None, {"T": " "})
    assert "$T is empty" in e.value.message and "scontrol token" in e.value.tip


def test_connection_errors_are_retried_then_reported_without_the_token():
    refused = requests.ConnectionError("NewConnectionError: Connection refused")
    c, s = client({("GET", r"/slurm/v0\.0\.4[0-2]/ping/"): refused}, version="v0.0.42", retries=2)
    with pytest.raises(RestError) as e:
        c.negotiate()
    assert len(s.calls) == 3 and "did not answer GET http://rest.example:6820/slurm/v0.0.42/ping/" in e.value.message
    assert TOKEN not in e.value.message and TOKEN not in repr(c)


def test_a_submit_whose_connection_dropped_is_not_sent_twice():
    c, s = client({("POST", r"/slurm/v0\.0\.42/job/submit"): requests.ReadTimeout("read timed out")})
    with pytest.raises(RestError):
        c.request("POST", "/slurm/v0.0.42/job/submit", body={})
    assert [m for m, _, _ in s.calls] == ["POST"]


# ---------------------------------------------------------------- preflight, jobs, nodes

def test_preflight_facts_from_real_answers():
    sch, _ = sched()
    assert sch.version() == "24.11.5"
    assert sch.settings() == {"SLURM_VERSION": "24.11.5", "ClusterName": "poc"}
    assert sch.partitions() == ["debug"]
    nodes = sch.nodes()
    assert [n["node"] for n in nodes] == ["c1", "c2", "c3"] and all(n["state"] for n in nodes)
    assert sch.node_usable("c1")[0] is True
    assert "url" in sch.describe() and TOKEN not in json.dumps(sch.describe())


def test_submit_sends_the_script_with_its_sbatch_options_as_a_job_description():
    cfg = config.from_mapping({"platforms": ["slurm"], "slurm": {"transport": "rest"}})
    job = render_sbatch(spec.build(cfg, "slurm", "r1", None), cfg.slurm)
    sch, s = sched()
    assert sch.submit(job.script, job.run_dir) == str(json.loads(fixture("submit")[1])["job_id"])
    body = s.calls[-1][2]["job"]
    assert body["script"] == job.script and body["current_working_directory"] == job.run_dir
    assert body["name"] == "poc-r1" and body["nodes"] == "2" and body["requeue"] is True
    assert any(e.startswith("PATH=") for e in body["environment"])


def test_a_refused_submit_is_a_submit_error_in_slurms_words():
    sch, _ = sched({("POST", r"/slurm/v0\.0\.42/job/submit"): "submit_refused_partition"})
    with pytest.raises(SubmitError) as e:
        sch.submit("#!/bin/bash\n", "/shared/poc/x")
    assert "Invalid partition name specified" in e.value.message


def test_job_states_come_back_in_squeues_shape_and_a_forgotten_job_is_left_out():
    sch, _ = sched()
    rc, text, err = sch.squeue(["8", "999999"])
    jobs = sp.squeue_json(text)
    assert rc == 0 and [j.job_id for j in jobs] == ["8"] and jobs[0].state == JobState.RUNNING
    assert "job 999999: HTTP 404 Unable to query JobId=999999" in err


@pytest.mark.parametrize(("name", "state"), [("job_pending", JobState.PENDING), ("job_running", JobState.RUNNING),
                                             # just requeued: ['PENDING', 'COMPLETING'], restart_cnt 1
                                             ("job_requeued", JobState.PENDING),
                                             ("job_completed", JobState.SUCCEEDED),
                                             ("job_cancelled", JobState.CANCELLED)])
def test_recorded_job_answers_map_into_the_shared_states(name, state):
    (j,) = sp.squeue_json(fixture(name)[1])
    assert j.state == state and j.submit


def test_accounting_has_every_attempt_oldest_first_and_keeps_the_answer_as_raw():
    sch, _ = sched()
    rows, raw = sch.attempts("8")
    # as sacct -D -X -P prints them (tests/fixtures/slurm/trixie/sacct_D_requeue.txt): REQUEUED, not PENDING
    assert [r.native_state for r in rows] == ["REQUEUED", "COMPLETED"] and rows[0].state == JobState.RESTARTING
    assert rows[0].end <= rows[1].start and rows[1].restarts == 1
    rec = raw["sacct_json"]
    assert rec["source"] == "slurmrestd" and rec["rc"] == 200 and rec["request"] == "GET /slurmdb/v0.0.42/job/8"
    assert rec["text"] == fixture("slurmdb_job_requeued")[1]


def test_node_update_without_operator_rights_raises_in_slurms_words_unless_unchecked():
    sch, _ = sched()
    with pytest.raises(RestError) as e:
        sch.set_node_state("c3", "down", "poc-lose-node-fault")
    assert "Invalid user id" in e.value.message
    sch.set_node_state("c3", "resume", check=False)


def test_the_reason_on_a_node_is_read_from_its_record_and_unreadable_is_none():
    sch, _ = sched()
    assert sch.node_reason("c1") == guard.NodeReason("", "")   # recorded: an idle node with no reason on it
    assert sch.node_reason("c9") is None       # an answer that is not a node record: unknown, not "no reason"


def test_node_states_read_like_sinfo():
    assert node_state_text({"state": ["IDLE"]}) == "idle"
    assert node_state_text({"state": ["DOWN", "NOT_RESPONDING"]}) == "down*"
    assert node_state_text({"state": ["IDLE", "DRAIN"]}) == "drained"
    assert not sp.node_usable(node_state_text({"state": ["DOWN", "NOT_RESPONDING"]}))


# ---------------------------------------------------------------- job description (pure)

def test_sbatch_lines_stop_at_the_first_command_and_options_map_to_fields():
    script = ("#!/bin/bash\n#SBATCH --job-name=a --nodes 3\n#SBATCH -t 1-00:00:30\n#SBATCH --exclusive\n"
              "#SBATCH --gpus-per-node=a100:8\n#SBATCH --gres=nvme:1\n#SBATCH --switches=1@00:10:00\n"
              "#SBATCH --reservation=r --constraint=ib&a100\n#SBATCH --mem=2G\necho hi\n#SBATCH --qos=late\n")
    assert "--qos=late" not in sbatch_lines(script)
    d = job_description(script, "/w")
    assert d["name"] == "a" and d["nodes"] == "3" and d["time_limit"]["number"] == 24 * 60 + 1
    assert d["shared"] == ["none"] and d["tres_per_node"] == "gres/gpu:a100:8,gres/nvme:1"
    assert d["required_switches"]["number"] == 1 and d["wait_for_switch"] == 600
    assert d["reservation"] == "r" and d["constraints"] == "ib&a100" and d["memory_per_node"]["number"] == 2048


def test_an_option_without_a_rest_equivalent_is_refused_before_submitting():
    with pytest.raises(ConfigError) as e:
        job_description("#!/bin/bash\n#SBATCH --export=NONE\n", "/w")
    assert "--export" in e.value.message and "slurm.transport ssh" in e.value.tip
    assert minutes("90") == 90 and minutes("00:00:01") == 1


# ---------------------------------------------------------------- files, evidence, redaction

def test_mount_transport_runs_here_on_the_mounted_path(tmp_path):
    t = MountTransport("/shared/poc", str(tmp_path))
    t.run(["sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1"', "sh", "/shared/poc/c/r/job.sbatch"], input="x")
    assert (tmp_path / "c" / "r" / "job.sbatch").read_text() == "x"
    assert t.local_path("/shared/poc2/x") == "/shared/poc2/x"


def test_evidence_reads_the_rest_raw_record():
    from harness import evidence

    sch, _ = sched()
    rows, acct = sch.attempts("8")
    raw = {"format": "slurm-raw/1", "job_id": "8", **acct, "squeue": None,
           "submit": {"before": rows[0].submit + 0.2, "after": rows[0].submit + 0.3, "scheduler_record": None},
           "alloc_evidence": {"text": ""}, "nodes": []}
    st = evidence.stamps("slurm", raw)
    a = st["allocated"]
    assert len(st["attempts"]) == 2 and rows[0].start <= a.lo <= a.hi <= rows[0].start + 1
    assert st["ended"].lo == rows[1].end and st["submitted"] is not None
    (src,) = [c for c in st["checks"] if "slurmrestd" in c["what"]]
    assert src["ok"] and src["detail"] == "GET /slurmdb/v0.0.42/job/8: HTTP 200, 2 attempts"


def test_a_jwt_in_raw_evidence_would_be_redacted():
    raw = {"sacct_json": {"request": "GET /slurmdb/v0.0.42/job/8", "text": json.dumps({"note": f"token {TOKEN}"})},
           "headers": {"X-SLURM-USER-TOKEN": TOKEN}, "log": f"SLURM_JWT={TOKEN}", "env": {"SLURM_JWT": TOKEN}}
    out = redact.scrub(raw)
    assert TOKEN not in json.dumps(out.data) and TOKEN.rsplit(".", 1)[-1] not in json.dumps(out.data)
    assert out.removed >= 4


def test_backend_with_rest_polls_states_by_request_and_files_through_the_files_channel(tmp_path):
    cfg = config.from_mapping({"platforms": ["slurm"], "slurm": {"transport": "rest", "workdir": "/shared/poc"}})
    files = MountTransport("/shared/poc", str(tmp_path))
    sch, s = sched(files=files)
    be = SlurmBackend(cfg.slurm, files, scheduler=sch)
    (tmp_path / "x" / "r1" / "events").mkdir(parents=True)
    (tmp_path / "x" / "r1" / "events" / "events-c1-5.jsonl").write_text(
        '{"kind": "step", "ts_ns": 1, "rank": 0, "step": 1, "host": "c1", "pid": 5}\n')
    h = Handle("slurm", "r1", ["8"], 0.0, data={"job_id": "8", "run_dir": "/shared/poc/x/r1",
                                                  "events_dir": "/shared/poc/x/r1/events", "lost_nodes": []})
    ob = be.observe([h])["r1"]
    assert ob.state == JobState.RUNNING and [e["step"] for e in ob.events] == [1]
    assert ("GET", "/slurm/v0.0.42/job/8", None) in s.calls
    assert be.supported_faults() == {"lose_node"}          # no srun or scontrol without a shell
    be.cancel(h)
    assert s.calls[-1][:2] == ("DELETE", "/slurm/v0.0.42/job/8")
    assert "job.rest.json" in be.render(spec.build(cfg, "slurm", "r1", None)).files


def test_the_rest_transports_ssh_files_channel_takes_proxy_jump_and_ssh_config(tmp_path):
    """slurm.rest.files: ssh reaches the login node the way slurm.transport: ssh does (ProxyJump, ssh_config)."""
    from harness.backends.slurm.files import ssh_transport
    from harness.config import from_mapping

    cfg_file = tmp_path / "ssh_config"
    cfg_file.write_text("Host login1\n  HostName login1.example.org\n  User alice\n")
    s = from_mapping({"slurm": {"transport": "rest", "host": "login1", "proxy_jump": "bastion.example:2222",
                                "ssh_config": str(cfg_file)}}).slurm
    d = ssh_transport(s, None).describe()
    assert d["host"] == "login1.example.org" and d["user"] == "alice", d
    assert d["proxy_jump"] == ["alice@bastion.example:2222"], d


def test_settings_come_from_scontrol_over_the_ssh_shell_when_there_is_one():
    """The timing settings a report prints beside recovery times are not in 24.11's API: with an ssh
    shell beside slurmrestd they are read there (recorded `scontrol show config`); a failing shell
    leaves them unknown, not the preflight failed."""
    from harness.errors import CommandError
    from harness.transports import Result

    conf = (FIXTURES / "slurm" / "trixie" / "scontrol_show_config.txt").read_text()

    class Shell:
        def __init__(self, ok):
            self.ok = ok

        def run(self, argv, **kw):
            if not self.ok:
                raise CommandError(list(argv), 1, "", "scontrol: not found")
            assert list(argv) == ["scontrol", "show", "config"]
            return Result(tuple(argv), 0, conf, "")

    c, _ = client()
    with_shell = RestScheduler(c, MountTransport("/shared/poc", "/tmp/nowhere"), Shell(True)).settings()
    assert with_shell["SLURM_VERSION"] == "24.11.5" and "SchedulerParameters" in with_shell
    assert sp.timing_settings(with_shell)      # what preflight stores
    c, _ = client()
    broken = RestScheduler(c, MountTransport("/shared/poc", "/tmp/nowhere"), Shell(False)).settings()
    assert broken == {"SLURM_VERSION": "24.11.5", "ClusterName": "poc"}
