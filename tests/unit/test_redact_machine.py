"""harness/redact_machine.py: this machine's paths and host name become placeholders, whole and only whole,
the longest root first; what schedulers and images print for other reasons is left alone; and a stored config's
placeholders come back as this machine's paths."""
from __future__ import annotations

from collections import Counter

from harness import redact_machine
from harness.redact import scrub, scrub_text
from harness.redact_machine import HOST, NOWHERE, Machine

ALICE = Machine((("/home/alice", "$HOME"), ("/home/alice/.local/state/k8s-slurm-poc", "$STATE_DIR"),
                 ("/scratch/alice/poc-cache", "$CACHE_DIR"), ("/srv/ci/checkout", "$CHECKOUT"),
                 ("/srv/ci/checkout/harness", "$HARNESS")), ("login1.hpc.example.org", "login1"))


def test_paths_become_placeholders_whole_and_longest_first():
    counts = Counter()
    text = ('hostPath: /home/alice/.local/state/k8s-slurm-poc/k8s-native/checkpoints/c/r1\n'
            '{"venv": "/scratch/alice/poc-cache/venv-1", "key": "/home/alice/.ssh/id_ed25519", "home": "/home/alice"}\n'
            '--volume /srv/ci/checkout/harness/data/workloads/ddp_train.py:/opt/poc/ddp_train.py:ro '
            'file:///home/alice/notes.txt')
    assert ALICE.neutral(text, counts) == (
        'hostPath: $STATE_DIR/k8s-native/checkpoints/c/r1\n'
        '{"venv": "$CACHE_DIR/venv-1", "key": "$HOME/.ssh/id_ed25519", "home": "$HOME"}\n'
        '--volume $HARNESS/data/workloads/ddp_train.py:/opt/poc/ddp_train.py:ro file://$HOME/notes.txt')
    assert counts == {"machine_path": 6}


def test_a_path_that_only_starts_like_a_root_is_left_alone():
    for text in ("/home/alicex/file", "/data/home/alice/x", "/home/alice.bak/x", "~/home/alice", "/home/alice-2/x",
                 "$HOME/x", "/scratch/alice/poc-cache2"):
        assert ALICE.neutral(text) == text, text


def test_the_host_name_as_a_word_or_a_compound_s_end():
    counts = Counter()
    text = ('"harness_host": "login1", reportingInstance: default-scheduler-login1, ssh poc@login1:22, '
            'login1.hpc.example.org; holder login1_7f3a')
    assert ALICE.neutral(text, counts) == (
        f'"harness_host": "{HOST}", reportingInstance: default-scheduler-{HOST}, ssh poc@{HOST}:22, {HOST}; '
        f'holder {HOST}_7f3a')
    assert counts == {"host_name": 5}
    for text in ("login10", "login1-b", "xlogin1", "login1.max_map_count", "LOGIN1 is the node's name upper-case"):
        assert ALICE.neutral(text) == text, text


def test_a_short_host_name_is_replaced_only_where_it_is_the_host():
    vm = Machine((), ("vm",))
    assert vm.neutral('"host":"vm","pid":1 default-scheduler-vm') == '"host":"$HOST","pid":1 default-scheduler-$HOST'
    for text in ("vm.overcommit_memory=1", "kvm", "the VM has 2 cores", "vm-2", "llvm", "$vm"):
        assert vm.neutral(text) == text, text


def test_generic_host_names_and_system_directories_are_never_made_placeholders():
    m = Machine((("/tmp", "$HOME"), ("/", "$HOME"), ("/usr", "$HOME")), ("debian", "localhost", "node", "x"))
    assert m.roots == () and m.hosts == ()
    text = 'torch 2.6.0+debian on node c1 via localhost, HOME=/tmp, /usr/bin/python3'
    assert m.neutral(text) == text


def test_here_reads_the_environment_each_time(monkeypatch):
    monkeypatch.setenv("HOME", "/home/bob")
    monkeypatch.setenv("POC_STATE_DIR", "/var/poc-state")
    monkeypatch.delenv("POC_CACHE_DIR", raising=False)
    roots = dict(redact_machine.here("/home/bob/results").roots)
    assert roots["/home/bob"] == "$HOME" and roots["/var/poc-state"] == "$STATE_DIR"
    assert roots["/home/bob/.cache/k8s-slurm-poc"] == "$CACHE_DIR" and roots["/home/bob/results"] == "$RESULTS"
    assert roots["/var/lib/docker"] == "$DOCKER_ROOT"
    assert roots[str(redact_machine.Path(redact_machine.__file__).resolve().parent)] == "$HARNESS"
    assert "$RESULTS" not in dict(redact_machine.here().roots).values()


def test_restore_gives_this_machine_s_paths_back():
    stored = {"kubernetes": {"checkpoint_host_path": "$STATE_DIR/k8s-native/checkpoints", "audit_log": None},
              "slurm": {"workdir": "/shared/poc", "key_file": "<redacted>/id_ed25519"}, "note": "$HOMEWORK"}
    assert ALICE.restore_all(stored) == {
        "kubernetes": {"checkpoint_host_path": "/home/alice/.local/state/k8s-slurm-poc/k8s-native/checkpoints",
                       "audit_log": None},
        "slurm": {"workdir": "/shared/poc", "key_file": "<redacted>/id_ed25519"}, "note": "$HOMEWORK"}


def test_scrub_counts_placeholders_apart_from_secrets_and_is_idempotent():
    doc = {"env": {"HOME": "/home/alice", "HF_TOKEN": "hf_" + "a1" * 20},
           "events": [{"reportingInstance": "default-scheduler-login1"}],
           "sacct": '{"jobs": [{"work_dir": "/home/alice/runs", "time": 5}]}'}
    once = scrub(doc, ALICE)
    assert once.summary() == {"removed": 1, "by_rule": {"env": 1},
                              "placeholders": {"host_name": 1, "machine_path": 2}}
    assert once.data["env"]["HOME"] == "$HOME" and once.data["sacct"] == '{"jobs":[{"work_dir":"$HOME/runs","time":5}]}'
    again = scrub(once.data, ALICE)
    assert again.data == once.data and again.removed == 0 and not again.neutral
    assert scrub(doc, NOWHERE).data["env"]["HOME"] == "/home/alice"


def test_scrub_text_keeps_a_clean_line_byte_for_byte_and_rewrites_a_json_line_only_when_it_changes():
    text = ('{"kind": "step", "step": 1}\n'
            '{"kind":"process_start","host":"login1","argv":["--ckpt-dir","/home/alice/ckpt"]}\n'
            'plain line on login1\r\n')
    out = scrub_text(text, ALICE)
    assert out.data == ('{"kind": "step", "step": 1}\n'
                        '{"kind":"process_start","host":"$HOST","argv":["--ckpt-dir","$HOME/ckpt"]}\n'
                        'plain line on $HOST\r\n')
    assert scrub_text(text.encode(), ALICE).data == out.data.encode()
