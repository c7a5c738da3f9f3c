"""The native Kubernetes cluster for integration tests: up (or already up) with a few tries, since
another suite sharing it may be restarting it, and its restricted user."""
from __future__ import annotations

import time

import pytest

from harness.errors import ClusterError


def native_cluster(nodes: int = 3, tries: int = 3, wait_s: float = 10):
    """ClusterInfo of the running native cluster, bringing it up if it is not; fails the test otherwise."""
    from harness.clusters import native_k8s as nk
    last = None
    for _attempt in range(tries):   # the cluster's owner may be restarting it: be patient
        try:
            return nk.up(nodes=nodes) if not nk.is_up() else nk.info()
        except ClusterError as exc:
            last = exc
            time.sleep(wait_s)
    pytest.fail(f"the native cluster did not come up: {last}")


def restricted_tenant(info=None) -> dict:
    """The native cluster's restricted user (harness/clusters/k8s/tenant.py), with the cluster's state dir."""
    info = info or native_cluster()
    if not info.restricted:
        pytest.fail("the native cluster has no restricted user (harness/clusters/k8s/tenant.py)")
    return {**info.restricted, "state_dir": info.state_dir}
