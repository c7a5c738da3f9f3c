"""`poc cluster ...`: the local clusters (harness/clusters) do the work and return what they did or
found; this prints it, as text or in the format -o asks for."""
from __future__ import annotations

import dataclasses
import json

from ..errors import ConfigError
from .output import Out, emit


def cmd_cluster(args) -> int:
    out = Out(args.quiet, args.output in ("json", "yaml"))
    results = {k: plain(v) for k, v in run_action(args, say=out.info).items()}
    emit(args, results, lambda: "".join(f"{name}:\n" + "".join(f"  {ln}\n" for ln in lines(res))
                                        for name, res in results.items()))
    return 0


def run_action(args, say) -> dict:
    """`poc cluster ACTION` on the chosen clusters: {cluster or "images": what the action returned}."""
    from ..clusters import build_images, get, k8s_provider  # here: the cluster modules are only needed now

    if args.cluster_command == "images":
        return {"images": build_images(args.what, args.release, say)}
    if not args.slurm and not args.k8s:
        raise ConfigError("say which cluster: --slurm, --k8s or both", tip="e.g. poc cluster up --slurm --k8s")
    chosen = {}
    if args.slurm:
        chosen["slurm"] = get("slurm", release=args.release, say=say)
    if args.k8s:
        chosen["k8s"] = get("k8s", provider=k8s_provider(args.provider, args.cluster_command), nodes=args.nodes,
                            say=say)
    return {name: getattr(cluster, args.cluster_command)() for name, cluster in chosen.items()}


def plain(obj):
    """Dataclasses, lists and dicts of them -> JSON-able data."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return plain(dataclasses.asdict(obj))
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj


def lines(data) -> list[str]:
    """One cluster's result (plain data) as text lines: a component table, key: value lines or items."""
    if isinstance(data, list) and data and all(isinstance(s, dict) and {"name", "alive"} <= set(s) for s in data):
        return [f"{s['name']:28} {s.get('state') or ('alive' if s['alive'] else 'dead'):8} {s.get('pid') or '-':>8}  "
                f"{s.get('log') or ''}".rstrip() for s in data]
    if data in ({}, [], None):
        return ["(nothing running)"]
    if isinstance(data, dict):
        return [f"{k}: {json.dumps(v, default=str) if isinstance(v, (dict, list)) else v}" for k, v in data.items()]
    if isinstance(data, list):
        return [("  ".join(f"{k}={v}" for k, v in item.items()) if isinstance(item, dict) else str(item))
                for item in data]
    return [str(data)]
