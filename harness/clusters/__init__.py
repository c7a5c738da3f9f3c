"""Local clusters for the smoke POC: `poc cluster up|down|status --slurm/--k8s` and `poc cluster images`.

Every cluster offers the LocalCluster interface of ``base.py``; ``get`` picks one, ``dispatch`` runs
a `poc cluster` action on the chosen ones. Errors are ClusterError/ConfigError: the CLI's boundary
prints them as ERROR/TIP.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

from ..errors import ClusterError, ConfigError
from .base import ComponentStatus, LocalCluster, Say

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


def dispatch(args, say: Say) -> int:
    """`poc cluster ACTION`: args from the CLI's parser; say: where progress lines go."""
    if args.cluster_command == "images":
        return _print(args, {"images": build_images(args.what, args.release, say)})
    if not args.slurm and not args.k8s:
        raise ConfigError("say which cluster: --slurm, --k8s or both", tip="e.g. poc cluster up --slurm --k8s")
    chosen: dict[str, LocalCluster] = {}
    if args.slurm:
        chosen["slurm"] = get("slurm", release=args.release, say=say)
    if args.k8s:
        chosen["k8s"] = get("k8s", provider=k8s_provider(args.provider, args.cluster_command), nodes=args.nodes,
                            say=say)
    results = {}
    for name, cluster in chosen.items():
        action = getattr(cluster, args.cluster_command)
        results[name] = action()
    return _print(args, results)


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


def run_as_poc(argv: list[str], *flags: str) -> int:
    """`python -m harness.clusters.<module> ACTION [options]` is `poc cluster ACTION <flags> [options]`:
    the module entry points go through the CLI's one ERROR/TIP boundary."""
    from ..cli import main

    if not argv or argv[0].startswith("-"):
        return main(["cluster", *argv])
    return main(["cluster", argv[0], *flags, *argv[1:]])


def _print(args, results: dict) -> int:
    if args.json:
        print(json.dumps({k: _plain(v) for k, v in results.items()}, indent=2, default=str))
    elif not args.quiet:
        for name, res in results.items():
            print(f"{name}:")
            for line in _lines(res):
                print(f"  {line}")
    return 0


def _plain(obj):
    """Dataclasses, lists and dicts of them -> JSON-able data."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _plain(dataclasses.asdict(obj))
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def _lines(res) -> list[str]:
    if isinstance(res, list) and res and all(isinstance(s, ComponentStatus) for s in res):
        return [f"{s.name:28} {s.state or ('alive' if s.alive else 'dead'):8} {s.pid or '-':>8}  {s.log or ''}".rstrip()
                for s in res]
    data = _plain(res)
    if data in ({}, [], None):
        return ["(nothing running)"]
    if isinstance(data, dict):
        return [f"{k}: {json.dumps(v, default=str) if isinstance(v, (dict, list)) else v}" for k, v in data.items()]
    if isinstance(data, list):
        return [("  ".join(f"{k}={v}" for k, v in item.items()) if isinstance(item, dict) else str(item))
                for item in data]
    return [str(data)]
