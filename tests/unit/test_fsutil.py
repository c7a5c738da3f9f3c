"""How the harness writes its state files (harness/fsutil.py): one atomic write, secrets private from
creation on."""
from __future__ import annotations

import os
import stat

from harness.clusters.slurm.secrets import ensure_secrets
from harness.fsutil import atomic_write, atomic_write_json


def test_atomic_write_replaces_whole_files_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "sub" / "state.json"
    atomic_write_json(target, {"b": 1, "a": [1, 2]}, sort_keys=True)
    assert target.read_text() == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}\n'
    atomic_write(target, b"\x00\xffbinary")
    assert target.read_bytes() == b"\x00\xffbinary"
    assert [p.name for p in target.parent.iterdir()] == ["state.json"]


def test_secrets_are_never_readable_by_others(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "key", "secret", mode=0o600)
        sec = ensure_secrets(tmp_path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "key").st_mode) == 0o600
    assert {stat.S_IMODE(p.stat().st_mode) for p in sec.iterdir()} == {0o600}


def test_a_link_at_a_guessable_temporary_name_never_redirects_an_atomic_write(tmp_path):
    import os

    from harness.fsutil import atomic_write
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    shared = tmp_path / "results"
    shared.mkdir()
    (shared / f".campaign.json.tmp-{os.getpid()}").symlink_to(victim)   # the name it was written through before
    atomic_write(shared / "campaign.json", "{}\n")
    assert victim.read_text() == "mine\n" and (shared / "campaign.json").read_text() == "{}\n"
