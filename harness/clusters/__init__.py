"""Local clusters for the smoke POC: `poc cluster up|down|status --slurm/--k8s` and `poc cluster images`.

Every cluster offers the LocalCluster interface of ``base.py``; ``get`` picks one, ``build_images``
builds the project's images. They return data and print nothing: `poc cluster` (harness/cli) prints.
Errors are ClusterError/ConfigError: the CLI's boundary prints them as ERROR/TIP.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..errors import ClusterError, ConfigError
from .base import LocalCluster, Say

K8S_PROVIDERS = ("auto", "native", "kind")


def k8s_provider(provider: str, action: str, *, kind_usable: Callable[[], bool] | None = None,
                 kind_exists: Callable[[], bool] | None = None) -> str:
    """The Kubernetes provider an action uses. `auto`: for `up`, kind when it can get its node image
    (kind_usable, which may pull it), else native; for anything else, kind only when a kind cluster
    was brought up here (kind_exists, which runs nothing). Only `up` ever pulls.
    kind_usable/kind_exists default to ``kind.usable``/``kind.exists``."""
    if provider not in K8S_PROVIDERS:
        raise ConfigError(f"unknown Kubernetes provider {provider!r}", tip=f"use one of: {', '.join(K8S_PROVIDERS)}")
    if provider != "auto":
        return provider
    if kind_usable is None or kind_exists is None:
        from . import kind

        kind_usable, kind_exists = kind_usable or kind.usable, kind_exists or kind.exists
    if action == "up":
        return "kind" if kind_usable() else "native"
    return "kind" if kind_exists() else "native"


def get(which: str, *, provider: str = "native", nodes: int = 3, release: str | None = None,
        say: Say | None = None) -> LocalCluster:
    """The local cluster `which` ("slurm" or "k8s"); for k8s, `provider` is "native" or "kind"."""
    try:
        if which == "slurm":
            from .slurm_docker import SlurmDocker

            return SlurmDocker(release=release, say=say)
        if which == "k8s" and provider == "native":
            from .native_k8s import NativeK8s

            return NativeK8s(nodes=nodes, say=say)
        if which == "k8s" and provider == "kind":
            from .kind import Kind

            return Kind(nodes=nodes, say=say)
    except ImportError as exc:
        raise ClusterError(f"the {which} cluster is not available: {exc}",
                           tip="reinstall the harness: ./scripts/setup.sh") from None
    raise ConfigError(f"no local cluster {which!r} (provider {provider!r})", tip="use --slurm or --k8s")


def build_images(what: str, release: str | None, say: Say | None) -> list:
    """Build the project's images that are missing (what: base, worker, slurm, mariadb, all), or
    with what="prune" remove stale tags. Returns what was done."""
    from . import images

    release = release or images.DEFAULT_RELEASE
    if what == "prune":
        return images.prune_stale_images()
    if what != "all" and what not in images.ENSURE:
        raise ConfigError(f"unknown image {what!r}", tip=f"use one of: {', '.join(images.ENSURE)}, all, prune")
    for k in images.ENSURE if what == "all" else [what]:
        images.ENSURE[k](release, say=say)
    return [dataclasses.asdict(rec) | {"size_mb": round(images.image_size(rec.ref) / 1e6)}
            for rec in images.build_log()]
