"""Where the clusters keep their files, and how they write them: one state-directory lookup, one
atomic write (secrets private from creation on), one free-port helper."""
from __future__ import annotations

import os
import socket
import stat

from harness import paths
from harness.clusters.k8s.layout import Layout, load_state, save_state, state_root
from harness.clusters.slurm.secrets import ensure_secrets
from harness.clusters.slurm_docker import state_dir as slurm_state_dir
from harness.fsutil import atomic_write, atomic_write_json
from harness.netutil import free_port


def test_every_cluster_finds_its_state_under_poc_state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("POC_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("POC_CACHE_DIR", str(tmp_path / "cache"))
    assert paths.state_dir() == tmp_path / "state"
    assert slurm_state_dir() == tmp_path / "state" / "slurm"
    assert state_root() == tmp_path / "state" / "k8s-native"
    assert paths.cluster_state_dir(paths.KIND_CLUSTER) == tmp_path / "state" / "kind"
    assert paths.build_times_file() == tmp_path / "cache" / "build-times.jsonl"
    assert state_root(tmp_path / "elsewhere") == tmp_path / "elsewhere"     # an explicit directory wins


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


def test_native_state_round_trips(tmp_path):
    L = Layout(tmp_path)
    assert load_state(L) == {"components": {}}
    save_state(L, {"components": {"etcd": {"pid": 1}}, "path": tmp_path})
    assert load_state(L) == {"components": {"etcd": {"pid": 1}}, "path": str(tmp_path)}


def test_free_port_is_bindable():
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", port))
