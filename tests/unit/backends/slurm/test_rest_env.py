"""The environment a job submitted through slurmrestd gets: slurm.rest.job_environment, else a login
shell's PATH and locale, else a refusal (never a made-up PATH); and preflight saying which.

The login shell's answers are real: tests/fixtures/slurm/rest_env/ holds what the local cluster's login
node printed over ssh (record.py there re-records them), slurmrestd's the recorded ones of test_rest.py.
"""
from __future__ import annotations

import json

import pytest
from support.paths import FIXTURES

from harness import config
from harness.backends.slurm import SlurmBackend, rest_env
from harness.backends.slurm.files import MountTransport
from harness.backends.slurm.rest import RestClient, RestScheduler
from harness.errors import BackendError, CommandError, ConfigError
from harness.transports import Result

REST = FIXTURES / "slurm" / "rest"
RECORDED = FIXTURES / "slurm" / "rest_env"
RECORDED_NONCE = "poc-env-0123456789abcdef"
SCRIPT = "#!/bin/bash\n#SBATCH --job-name=env --nodes=1\nsrun hostname\n"
SITE = {"PATH": "/opt/slurm/bin:/usr/local/bin:/usr/bin:/bin", "LANG": "en_US.UTF-8"}


class Slurmrestd:
    """slurmrestd's recorded answers to ping, partitions, nodes and submit; keeps each submit's body."""

    def __init__(self):
        self.headers: dict = {}
        self.submitted: list[dict] = []

    def request(self, method, url, params=None, json=None, timeout=None, allow_redirects=True):
        path = url.split("/", 3)[-1]
        if method == "POST" and path.endswith("/job/submit"):
            self.submitted.append(json["job"])
            name = "submit"
        else:
            name = {"ping": "ping", "partitions": "partitions", "nodes": "nodes"}[path.rstrip("/").split("/")[-1]]
        return Answer((REST / f"{name}.json").read_text())

    def close(self):
        pass


class Answer:
    status_code = 200

    def __init__(self, text: str):
        self.text = text

    def json(self):
        return json.loads(self.text)


class LoginShell:
    """The ssh shell to the login node: `scontrol show config` and the login-shell read answered with
    recorded answers (the latter under the nonce it is asked with), or that read failing as a login
    node without bash does. ``commands``: the login-shell reads asked."""

    def __init__(self, recording: str | None = "login_shell_profile.out"):
        self.recording = recording
        self.commands: list[list[str]] = []

    def run(self, argv, *, input=None, env=None, timeout=60, check=True):
        argv = list(argv)
        if argv == ["scontrol", "show", "config"]:
            return Result(tuple(argv), 0, (FIXTURES / "slurm" / "trixie" / "scontrol_show_config.txt").read_text(), "")
        self.commands.append(argv)
        assert argv[:2] == ["bash", "-lc"] and argv[4:] == list(rest_env.LOGIN_NAMES), argv
        if self.recording is None:
            raise CommandError(argv, 127, "", "bash: command not found")
        text = (RECORDED / self.recording).read_text().replace(RECORDED_NONCE, argv[3])
        return Result(tuple(argv), 0, text, "")

    def describe(self):
        return {"transport": "ssh", "host": "login"}

    def close(self):
        pass


def scheduler(shell=None, job_environment=None) -> tuple[RestScheduler, Slurmrestd]:
    s = Slurmrestd()
    c = RestClient("https://rest.example:6820", "poc", "t.o.k", "$SLURM_JWT", "v0.0.42", session=s)
    return RestScheduler(c, MountTransport("/shared/poc", "/tmp/nowhere"), shell, job_environment), s


def rest_config(**rest) -> config.Config:
    return config.from_mapping({"platforms": ["slurm"], "slurm": {"transport": "rest", "rest": rest}})


# ---------------------------------------------------------------- slurm.rest.job_environment

def test_job_environment_is_a_mapping_or_a_list_of_name_value_pairs():
    assert rest_config().slurm.rest.job_environment is None
    as_map = rest_config(job_environment={**SITE, "OMP_NUM_THREADS": 4}).slurm.rest.job_environment
    assert as_map == {**SITE, "OMP_NUM_THREADS": "4"}   # YAML's number, as the text the job sees
    as_list = rest_config(job_environment=[f"{k}={v}" for k, v in SITE.items()] + ["EMPTY="]).slurm.rest
    assert as_list.job_environment == {**SITE, "EMPTY": ""}


@pytest.mark.parametrize(("value", "said"), [
    ({"PATH": "/usr/bin", "1ST": "x"}, "'1ST' is not a variable name"),
    ({"PATH": "/usr/bin", "A-B": "x"}, "'A-B' is not a variable name"),
    ({"PATH": "/usr/bin", "X": "a\nb"}, "X's value spans lines"),
    ({"PATH": "/usr/bin\r"}, "PATH's value spans lines"),
    ({"LANG": "C.UTF-8"}, "must set PATH"),
    ({"PATH": ""}, "must set PATH"),
    (["PATH=/usr/bin", "PATH=/bin"], "PATH is given twice"),
    (["PATH"], "'PATH' is not NAME=VALUE"),
    ({"PATH": ["/usr/bin"]}, "job_environment"),
])
def test_a_bad_job_environment_is_refused_naming_the_entry(value, said):
    with pytest.raises(ConfigError) as e:
        rest_config(job_environment=value)
    assert "slurm.rest.job_environment" in e.value.message and said in e.value.message, e.value.message


# ---------------------------------------------------------------- each source, as slurmrestd is sent it

def test_a_configured_environment_is_what_the_job_is_sent_and_no_shell_is_asked():
    shell = LoginShell()
    sch, rest = scheduler(shell, {**SITE, "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz0123456789"})
    sch.describe()
    sch.submit(SCRIPT, "/shared/poc/r")
    assert rest.submitted[0]["environment"] == [f"PATH={SITE['PATH']}", "LANG=en_US.UTF-8",
                                                "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123456789"]
    assert shell.commands == []
    d = sch.describe()["job_environment"]
    assert d["source"] == "config" and d["names"] == ["PATH", "LANG", "HF_TOKEN"]
    # the record keeps PATH as it is and a token's value out, as stored evidence is redacted
    assert d["environment"] == [f"PATH={SITE['PATH']}", "LANG=en_US.UTF-8", "HF_TOKEN=<redacted>"]


def test_without_one_a_login_shell_is_read_once_at_preflight_and_every_job_gets_it():
    shell = LoginShell()
    sch, rest = scheduler(shell)
    sch.settings()
    assert shell.commands == []
    sch.describe()                                      # what preflight records
    sch.submit(SCRIPT, "/shared/poc/r1")
    sch.submit(SCRIPT, "/shared/poc/r2")
    assert len(shell.commands) == 1
    want = ["PATH=/opt/slurm/bin:/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games",
            "LD_LIBRARY_PATH=/opt/slurm/lib"]
    assert rest.submitted[0]["environment"] == rest.submitted[1]["environment"] == want
    d = sch.describe()["job_environment"]
    assert d == {"source": "login shell", "names": ["PATH", "LD_LIBRARY_PATH"], "environment": want}


def test_the_login_node_as_recorded_gives_its_path_and_no_locale():
    env = rest_env.parse_login_shell((RECORDED / "login_shell.out").read_text(), RECORDED_NONCE)
    assert env == rest_env.JobEnvironment(
        "login shell", ("PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games",))


def test_a_submit_without_preflight_reads_the_login_shell_then():
    shell = LoginShell()
    sch, rest = scheduler(shell)
    sch.submit(SCRIPT, "/shared/poc/r")
    assert len(shell.commands) == 1 and rest.submitted[0]["environment"][0].startswith("PATH=/opt/slurm/bin:")


@pytest.mark.parametrize(("shell", "why"), [
    (LoginShell(recording=None), "could not be read (exit code 127)"),
    (None, "slurm.rest.files is mount"),
])
def test_no_login_shell_and_no_configured_environment_is_refused(shell, why):
    """slurmrestd sends a job only the environment it is given; a PATH of the harness's own (Debian's) would start
    the job where the site's srun and scontrol may not be: refused, naming slurm.rest.job_environment."""
    sch, rest = scheduler(shell)
    with pytest.raises(BackendError) as got:
        sch.describe()
    assert why in got.value.message and "slurm.rest.job_environment" in got.value.tip
    with pytest.raises(BackendError):
        sch.submit(SCRIPT, "/shared/poc/r")
    assert rest.submitted == []                     # nothing was sent with a made-up environment


@pytest.mark.parametrize(("stdout", "why"), [
    ("PATH=/usr/bin\0", "did not hold its marker"),      # no marker: the command did not run as written
    ("NONCE\0LANG=C\0", "the login shell has no PATH"),
])
def test_a_login_shell_without_a_path_is_refused(stdout, why):
    with pytest.raises(BackendError, match=why):
        rest_env.parse_login_shell(stdout, "NONCE")


def test_what_a_login_shell_printed_is_read_strictly():
    # names outside the allow-list are never taken, a repeated one once, a value spanning lines left out,
    # a last field without its NUL (cut short) not at all
    stdout = "NONCE\0PATH=/a\0AWS_SECRET_ACCESS_KEY=x\0PATH=/b\0LD_LIBRARY_PATH=/l\nx\0LANG=C"
    env = rest_env.parse_login_shell(stdout, "NONCE")
    assert env.source == "login shell" and env.entries == ("PATH=/a",)
    assert env.note == "left out (a value spanning lines): LD_LIBRARY_PATH"


def test_preflight_records_where_the_job_environment_came_from():
    cfg = rest_config(job_environment=SITE)
    sch, _ = scheduler(LoginShell(), cfg.slurm.rest.job_environment)
    facts = SlurmBackend(cfg.slurm, sch.files, scheduler=sch).preflight()
    assert facts["transport"]["job_environment"]["source"] == "config"
    assert facts["transport"]["job_environment"]["environment"][0] == f"PATH={SITE['PATH']}"
    sch, _ = scheduler(LoginShell())
    facts = SlurmBackend(rest_config().slurm, sch.files, scheduler=sch).preflight()
    assert facts["transport"]["job_environment"]["source"] == "login shell"
