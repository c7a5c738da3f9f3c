"""Emulated nodes (KWOK) on the native cluster for integration tests: added for a test module and
removed afterwards, with the KWOK controller when the module started it."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from _native import native_cluster


@contextmanager
def kwok_nodes(nodes: int, gpus: int, rack_size: int = 8, racks_per_block: int = 4) -> Iterator[tuple]:
    """(Layout, CoreV1Api) with `nodes` fake nodes of `gpus` GPUs Ready; only what this added goes afterwards."""
    from harness.clusters.k8s import builds, kwok
    from harness.clusters.k8s.layout import Layout
    info = native_cluster()
    L = Layout(info.state_dir)
    core = kwok.core_api(L.admin_kubeconfig)
    had_kwok = kwok.running(L)
    builds.ensure_built(builds=(builds.KWOK,))
    kwok.start(L, builds.module_dir("sigs.k8s.io/kwok", builds.KWOK_VERSION) / "kustomize/stage")
    added = kwok.create_nodes(core, kwok.Shape(nodes=nodes, gpus=gpus, rack_size=rack_size,
                                                      racks_per_block=racks_per_block))
    try:
        kwok.wait_ready(core, nodes, timeout=60, L=L)
        yield L, core
    finally:
        kwok.delete_nodes(core, added)
        if not had_kwok:
            kwok.stop(L)
