"""Each platform's part of the serving scenario (``base.PlatformServe``), by platform name.

The serving session asks here, so a backend knows nothing of serving; a platform not listed cannot
serve. A part is built from the run's backend (its transport or client, image, checkpoint
storage and, on the local cluster, its node power) and the harness's Serve settings.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..backends.base import Backend
from ..context import platform_part
from .base import PlatformServe


def _slurm(backend: Backend, serve) -> PlatformServe:
    from .slurm import SlurmServe  # here: a platform's part loads only when its platform serves

    return SlurmServe(backend, serve)


def _k8s(backend: Backend, serve) -> PlatformServe:
    """A Deployment and a ClusterIP Service through the backend's client; node loss through its
    power and its ledger of nodes powered off (local cluster only)."""
    from ..backends.k8s.backend import LEDGER
    from .k8s import K8sServe

    b = backend
    return K8sServe(b.client, b.cfg, image=b.image, checkpoint_root=b.checkpoint_root,
                    checkpoint_pvc=b.checkpoint_pvc, local=b.local, power=b.power,
                    ledger=str(Path(b.checkpoint_root) / LEDGER) if b.power is not None else None,
                    port=serve.port)


PARTS: dict[str, Callable[[Backend, object], PlatformServe]] = {"slurm": _slurm, "k8s": _k8s}


def platform_serve(backend: Backend, serve) -> PlatformServe:
    """The serving scenario's part for the backend's platform; BackendError (ERROR/TIP) where it has none."""
    return platform_part(PARTS, backend, serve, none="serving scenario", runs="the serving scenario runs")
