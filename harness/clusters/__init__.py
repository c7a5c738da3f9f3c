"""Local clusters for the smoke POC: `poc cluster up|down|status --slurm/--k8s`."""
from __future__ import annotations

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
    for name, res in results.items():
        if args.json:
            continue
        if not args.quiet:
            print(f"{name}: {res}")
    if args.json:
        print(json.dumps({k: str(v) for k, v in results.items()}, indent=2))
    return 0
