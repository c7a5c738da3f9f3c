"""`poc check`'s Slurm checks against answers recorded from the local Slurm cluster's login node
(tests/fixtures/check/slurm.json, re-recorded by tests/fixtures/check/record.py)."""
from __future__ import annotations

import paramiko
import pytest
from support.check_replay import REC, TEST_ONLY, Replay, recorded

from harness.backends.slurm.scheduler import CliScheduler
from harness.check import slurm as chk
from harness.check.report import Failed, Note, Runner

SACCT = ("sacct", "-X", "-n", "-P", "-o", "JobID", "-S", "now-1hours")


def target(t: Replay, partition: str | None = None) -> chk.SlurmTarget:
    return chk.SlurmTarget(sched=CliScheduler(t), shell=t, ssh=None, script=REC["script"], partition=partition)


def test_all_ok_from_the_recorded_cluster():
    t = Replay()
    r = Runner("slurm", clock=iter(range(100)).__next__)
    chk.run_all(target(t), r)
    assert [(c.name, c.status) for c in r.checks] == [
        ("sinfo", "ok"), ("partition", "ok"), ("sbatch --test-only", "ok"), ("accounting", "ok")]
    assert r.checks[0].message == "Slurm slurm-wlm 24.11.5; partitions: debug"
    assert "would start the job at 2026-12-04T18:52:34 on c[1-2] in partition debug (2 processors)" \
        in r.checks[2].message
    assert all(c.seconds == 1 for c in r.checks)   # each check timed by the clock it was given
    # the rendered job went to sbatch --test-only on stdin: nothing was written on the cluster
    assert (["sbatch", "--test-only"], REC["script"]) in t.calls


def test_missing_partition_lists_those_that_exist():
    with pytest.raises(Failed) as e:
        chk.partition("gpu-nope", ["debug"])
    assert e.value.message == "partition 'gpu-nope' does not exist; the partitions are: debug"
    assert "slurm.partition" in e.value.tip


def test_missing_partition_also_refused_by_sbatch_test_only():
    t = Replay({TEST_ONLY: recorded(["sbatch", "--test-only", "--partition=gpu-nope"])})
    r = Runner("slurm")
    chk.run_all(target(t, "gpu-nope"), r)
    status = {c.name: c for c in r.checks}
    assert status["partition"].status == "error" and "debug" in status["partition"].message
    assert "invalid partition specified: gpu-nope" in status["sbatch --test-only"].message


def test_job_no_node_can_hold_is_refused_with_slurms_words():
    t = Replay({TEST_ONLY: recorded(["sbatch", "--test-only", "--nodes=9"])})
    with pytest.raises(Failed) as e:
        chk.test_only(t, REC["script"])
    assert "Requested node configuration is not available" in e.value.message
    assert "sinfo" in e.value.tip


@pytest.mark.parametrize("case, words", [("accounting none", "Slurm accounting storage is disabled"),
                                         ("accounting refused", "Problem talking to the database: Connection refused")])
def test_no_accounting(case, words):
    t = Replay({SACCT: recorded([], case)})
    with pytest.raises(Failed) as e:
        chk.accounting(CliScheduler(t), t)
    assert e.value.message.startswith("no accounting: sacct failed (exit code 1)") and words in e.value.message
    assert "sacct" in e.value.tip and "recovery evidence" in e.value.tip


def test_test_only_without_a_shell_is_a_note():
    with pytest.raises(Note, match="no shell"):
        chk.test_only(None, REC["script"])


def test_unreachable_names_host_port_and_the_error():
    def refuse(addr, timeout):
        raise ConnectionRefusedError(111, "Connection refused")
    with pytest.raises(Failed) as e:
        chk.reachable("10.1.2.3", 2222, refuse)
    assert e.value.message == "cannot reach 10.1.2.3:2222: Connection refused"
    assert "nc -vz 10.1.2.3 2222" in e.value.tip


@pytest.fixture(scope="module")
def keys():
    return paramiko.RSAKey.generate(1024), paramiko.RSAKey.generate(1024)


def _known(tmp_path, key, name="[login]:2222") -> str:
    p = tmp_path / "known_hosts"
    p.write_text(f"{name} {key.get_name()} {key.get_base64()}\n" if key else "")
    return str(p)


def test_host_key_known(tmp_path, keys):
    msg = chk.host_key("login", 2222, _known(tmp_path, keys[0]), False, lambda h, p, types: keys[0])
    assert msg.startswith("[login]:2222 is in ") and keys[0].fingerprint in msg


def test_host_key_unknown_tips_ssh_keyscan(tmp_path, keys):
    kh = _known(tmp_path, None)
    with pytest.raises(Failed) as e:
        chk.host_key("login", 2222, kh, False, lambda h, p, types: keys[0])
    assert f"[login]:2222 is not in {kh}" in e.value.message and keys[0].fingerprint in e.value.message
    assert f"ssh-keyscan -p 2222 login >> {kh}" in e.value.tip and "slurm.known_hosts" in e.value.tip
    with pytest.raises(Note, match="accept_unknown_host"):
        chk.host_key("login", 2222, kh, True, lambda h, p, types: keys[0])


def test_host_key_changed(tmp_path, keys):
    kh = _known(tmp_path, keys[0])
    asked = []

    def offer(h, p, types):
        asked.append(types)
        return keys[1]
    with pytest.raises(Failed) as e:
        chk.host_key("login", 2222, kh, True, offer)   # accepting unknown keys never accepts a changed one
    assert "does not match" in e.value.message and "ssh-keygen -R" in e.value.tip
    assert asked == [["ssh-rsa"]]   # the server is asked first for the key type known_hosts holds


def test_port_22_is_looked_up_by_bare_host():
    assert chk.lookup_name("login", 22) == "login" and chk.lookup_name("login", 2222) == "[login]:2222"
