"""Local clusters for the smoke POC: `poc cluster up|down|status --slurm/--k8s`."""
from __future__ import annotations

import dataclasses
import json

from ..errors import ClusterError, ConfigError


def dispatch(args) -> int:
    if not args.slurm and not args.k8s:
        raise ConfigError("say which cluster: --slurm, --k8s or both", tip="e.g. poc cluster up --slurm --k8s")
    results = {}
    if args.slurm:
        try:
            from . import slurm_docker
        except ImportError as exc:
            raise ClusterError(f"the Slurm-in-Docker cluster is not available: {exc}") from None
        fn = getattr(slurm_docker, args.cluster_command)
        kw = {"release": args.release} if args.cluster_command == "up" and args.release else {}
        results["slurm"] = fn(**kw)
    if args.k8s:
        provider = args.provider
        if provider == "auto":
            from . import kind as kindmod

            provider = "kind" if kindmod.usable() else "native"
        if provider == "native":
            from . import native_k8s as mod
        else:
            from . import kind as mod
        fn = getattr(mod, args.cluster_command)
        kw = {"nodes": args.nodes} if args.cluster_command == "up" else {}
        results["k8s"] = fn(**kw)
    if args.json:
        print(json.dumps({k: _plain(v) for k, v in results.items()}, indent=2, default=str))
    elif not args.quiet:
        for name, res in results.items():
            print(f"{name}:")
            for line in _lines(_plain(res)):
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


def _lines(data) -> list[str]:
    if data in ({}, [], None):
        return ["(nothing running)"]
    if isinstance(data, dict):
        return [f"{k}: {json.dumps(v, default=str) if isinstance(v, (dict, list)) else v}" for k, v in data.items()]
    if isinstance(data, list):
        return [("  ".join(f"{k}={v}" for k, v in item.items()) if isinstance(item, dict) else str(item)) for item in data]
    return [str(data)]
