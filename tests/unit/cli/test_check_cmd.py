"""`poc check` on the command line: its output formats, exit codes and bad input, with the Slurm
backend over a transport that replays the local cluster's recorded answers (support.check_replay.Replay)."""
from __future__ import annotations

import json

import pytest
from support.check_replay import TEST_ONLY, Replay, recorded

from harness.backends.slurm import SlurmBackend
from harness.cli.entry import main


def replaying(answers=None):
    return lambda platform, cfg: SlurmBackend(cfg.slurm, Replay(answers))


def test_all_ok_json(capsys):
    rc = main(["check", "--platform", "slurm", "-o", "json"], backend_fn=replaying(), env={})
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert rc == 0 and doc["ok"] is True and err == ""
    assert [c["name"] for c in doc["checks"]] == ["sinfo", "partition", "sbatch --test-only", "accounting"]
    assert set(doc["checks"][0]) == {"platform", "name", "ok", "status", "message", "tip", "seconds"}


def test_failed_check_human_view_and_exit_1(capsys):
    answers = {TEST_ONLY: recorded(["sbatch", "--test-only", "--partition=gpu-nope"])}
    rc = main(["check", "-p", "slurm", "--set", "slurm.partition=gpu-nope"], backend_fn=replaying(answers), env={})
    out, err = capsys.readouterr()
    assert rc == 1
    assert "[slurm] ok    sinfo (" in out and "2 of 4 checks failed" in out
    err_lines = err.splitlines()
    assert err_lines[0].startswith("ERROR [slurm] partition (") and err_lines[0].endswith(
        "partition 'gpu-nope' does not exist; the partitions are: debug")
    assert err_lines[1].startswith("TIP set slurm.partition")


def test_quiet_prints_only_errors_and_table_prints_a_table(capsys):
    assert main(["check", "-p", "slurm", "-q"], backend_fn=replaying(), env={}) == 0
    assert capsys.readouterr() == ("", "")
    assert main(["check", "-p", "slurm", "-o", "table"], backend_fn=replaying(), env={}) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["PLATFORM", "CHECK", "RESULT", "SECONDS", "MESSAGE"] and len(out) == 5


@pytest.mark.parametrize("argv, words", [
    (["check"], "name no cluster to check"),                        # the built-in config: platforms [local]
    (["check", "-p", "local"], "not local"),
    (["check", "-p", "k8s", "--require-api", "kueue.x-k8s.io"], "--require-api"),
])
def test_bad_input_exits_2(capsys, argv, words):
    assert main(argv, backend_fn=replaying(), env={}) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR ") and words in err and "\nTIP " in err
