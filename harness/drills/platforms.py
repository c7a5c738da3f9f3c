"""Each platform's part of an upgrade drill (``base.PlatformDrill``), by platform name.

The drill runner asks here, so a backend knows nothing of drills; a platform not listed has no
drill. A part is built from the run's backend (its transport or client, its cluster) and the
harness's Drills settings.
"""
from __future__ import annotations

from collections.abc import Callable

from ..backends.base import Backend
from ..context import platform_part
from .base import PlatformDrill


def _slurm(backend: Backend, drills) -> PlatformDrill:
    from .slurm import SlurmDrill  # here: a platform's part loads only when its platform drills

    return SlurmDrill(backend, drills)


def _k8s(backend: Backend, drills) -> PlatformDrill:
    from .k8s import K8sDrill

    return K8sDrill(backend, drills)


PARTS: dict[str, Callable[[Backend, object], PlatformDrill]] = {"slurm": _slurm, "k8s": _k8s}


def platform_drill(backend: Backend, drills) -> PlatformDrill:
    """The drill's part for the backend's platform; BackendError (ERROR/TIP) where it has none."""
    return platform_part(PARTS, backend, drills, none="upgrade drill", runs="drills run")
