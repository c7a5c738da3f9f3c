"""Where the clusters keep their files (harness/paths.py): one state-directory lookup, under
POC_STATE_DIR and POC_CACHE_DIR, for every cluster."""
from __future__ import annotations

from harness import paths
from harness.clusters.k8s.layout import state_root
from harness.clusters.slurm_docker import state_dir as slurm_state_dir


def test_every_cluster_finds_its_state_under_poc_state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("POC_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("POC_CACHE_DIR", str(tmp_path / "cache"))
    assert paths.state_dir() == tmp_path / "state"
    assert slurm_state_dir() == tmp_path / "state" / "slurm"
    assert state_root() == tmp_path / "state" / "k8s-native"
    assert paths.cluster_state_dir(paths.KIND_CLUSTER) == tmp_path / "state" / "kind"
    assert paths.build_times_file() == tmp_path / "cache" / "build-times.jsonl"
    assert state_root(tmp_path / "elsewhere") == tmp_path / "elsewhere"     # an explicit directory wins
