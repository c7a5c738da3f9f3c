"""The native cluster's state file (harness/clusters/k8s/layout.py)."""
from __future__ import annotations

from harness.clusters.k8s.layout import Layout, load_state, save_state


def test_native_state_round_trips(tmp_path):
    L = Layout(tmp_path)
    assert load_state(L) == {"components": {}}
    save_state(L, {"components": {"etcd": {"pid": 1}}, "path": tmp_path})
    assert load_state(L) == {"components": {"etcd": {"pid": 1}}, "path": str(tmp_path)}
