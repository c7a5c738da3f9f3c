"""`poc cluster ...`: the local clusters (harness/clusters) do the work and return what they did or
found; this prints it, as text or in the format -o asks for."""
from __future__ import annotations

import argparse
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
    emulated = getattr(args, "emulated", None)
    if emulated is not None and emulated is not False:   # `up --emulated 0` is asked for, and refused
        return _emulated(args, say)
    chosen = {}
    if args.slurm:
        chosen["slurm"] = get("slurm", release=args.release, say=say)
    if args.k8s:
        chosen["k8s"] = get("k8s", provider=k8s_provider(args.provider, args.cluster_command), nodes=args.nodes,
                            say=say)
    qps = getattr(args, "client_qps", None)
    if qps is not None and k8s_provider(args.provider, args.cluster_command) != "native":
        raise ConfigError("--client-qps sets the native Kubernetes cluster's controllers",
                          tip=f"poc cluster up --k8s --provider native --client-qps {qps}")
    fair = getattr(args, "kueue_fair_sharing", None)
    if fair is not None and k8s_provider(args.provider, args.cluster_command) != "native":
        raise ConfigError("--kueue-fair-sharing sets the native Kubernetes cluster's Kueue",
                          tip=f"poc cluster up --k8s --provider native --kueue-fair-sharing {fair}")
    from ..clusters.k8s import rate_limits
    limits = None if qps is None else rate_limits.parse(qps)    # refused before anything starts
    done = {name: getattr(cluster, args.cluster_command)() for name, cluster in chosen.items()}
    if fair is not None and "k8s" in chosen:
        from ..clusters.k8s import tuning
        from ..clusters.k8s.layout import Layout
        from ..clusters.native_k8s import state_root
        if tuning.apply_fair_sharing(Layout(state_root()), fair == "on"):
            done["k8s"] = chosen["k8s"].up()
            say(f"[k8s] restarted kueue with fair sharing {fair}")
    if limits is not None and "k8s" in chosen:
        done["k8s"] = _set_client_qps(limits, chosen["k8s"], say)
    return done


def _queue_policy_fields(args) -> dict:
    """The emulated Slurm cluster's side of `--queue-policy NAME` (render/replay_policy.py); none when not given."""
    name = getattr(args, "queue_policy", None)
    if name is None:
        return {}
    from ..render import replay_policy
    try:
        return replay_policy.emulated_fields(replay_policy.policy(name))
    except ValueError as e:
        raise ConfigError(str(e), tip="--queue-policy site, defaults, strict-fifo or no-size") from None


def _set_client_qps(limits: dict, cluster, say):
    """The controllers' client rate limits on the running native cluster; the changed ones restarted."""
    from ..clusters.k8s import rate_limits, tuning
    from ..clusters.k8s.layout import Layout
    from ..clusters.native_k8s import state_root
    L = Layout(state_root())
    restarted = tuning.apply_rate_limits(L, limits)
    info = cluster.up()     # restarts what was stopped, as any dead controller
    if restarted:
        say(f"[k8s] restarted {', '.join(restarted)} with the new client rate limits")
    settings = {**info.settings, "client_rate_limits_qps_burst": rate_limits.describe(L)}
    return dataclasses.replace(info, settings=settings)


def _emulated(args, say, runner=None, ensure_image=None) -> dict:
    """`up --emulated N` or `down --emulated`, for each cluster asked for.

    --k8s: N KWOK nodes added to the native Kubernetes cluster (brought up first), and `down` removes
    only those. --slurm: a cluster of its own, slurmctld and N slurmd in one container
    (clusters/slurm/emulated.py); the Slurm-in-Docker cluster is neither started nor stopped.
    Every shape is checked before anything starts. runner and ensure_image replace Docker in tests."""
    from ..clusters import images, k8s_provider
    from ..clusters.k8s import kwok
    from ..clusters.k8s.layout import Layout, state_root
    from ..clusters.slurm import emulated

    if args.k8s and k8s_provider(args.provider, args.cluster_command) != "native":
        raise ConfigError("emulated nodes are for the native Kubernetes cluster",
                          tip=f"poc cluster {args.cluster_command} --k8s --provider native --emulated"
                              + (f" {args.emulated}" if args.cluster_command == "up" else ""))
    runner = runner or images.run
    results: dict = {}
    if args.cluster_command == "down":
        if args.slurm:
            results["slurm-emulated"] = emulated.down(runner)
        if args.k8s:
            results["k8s-emulated"] = kwok.down(Layout(state_root()))
        return results
    shape = kwok.Shape(nodes=args.emulated, gpus=args.gpus_per_node, rack_size=args.rack_size,
                       racks_per_block=args.racks_per_block).check() if args.k8s else None
    slurm_shape = emulated.EmulatedShape(nodes=args.emulated, gpus_per_node=args.gpus_per_node,
                                         rack_size=args.rack_size,
                                         racks_per_block=args.racks_per_block,
                                         priority_decay_half_life_min=args.fairshare_half_life,
                                         priority_max_age_min=args.fairshare_half_life,
                                         **_queue_policy_fields(args)) if args.slurm else None
    if slurm_shape is not None:
        release = args.release or images.DEFAULT_RELEASE
        image = (ensure_image or images.ensure_slurm_emulated_image)(release, say)
        cluster = emulated.EmulatedSlurm(slurm_shape, emulated.default_conf_dir(), image, runner=runner)
        say(f"[slurm] starting {slurm_shape.nodes} emulated nodes × {slurm_shape.gpus_per_node} GPUs "
            f"(one slurmd each, in container {emulated.CONTAINER})")
        results["slurm-emulated"] = cluster.summary(cluster.up())
    if shape is not None:
        results |= run_action(argparse.Namespace(**{**vars(args), "emulated": None, "slurm": False}), say)
        say(f"[k8s] adding {shape.nodes} emulated nodes × {shape.gpus} GPUs (KWOK {kwok.builds.KWOK_VERSION})")
        results["k8s-emulated"] = kwok.up(Layout(state_root()), shape)
    return results


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
