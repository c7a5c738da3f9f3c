#!/usr/bin/env python3
"""Scale replays on both schedulers under a named queue policy pair, below both placement ceilings.

Per --seeds, a synthetic trace (harness/scale/synthetic.py) at --nodes emulated nodes; compressed either by
--compress, or into --window seconds, or (with --ceilings) as far as its busiest 10 s stay under --share of
the lower of the two platforms' placement ceilings at that size and those rate limits
(harness/scale/load.py compression_for; the factor chosen and the ceilings are printed). Each trace is
replayed --repeat times a side, alternating Kubernetes and Slurm, on the native cluster's KWOK nodes and on a
fresh emulated Slurm cluster per replay (its fair-share usage starts at zero every time), Slurm running the
pair's Slurm side (SchedulerType, PriorityWeight*). The traces of one run form a replay set (--replay-set): a
campaign's report tests the platforms across them (harness/report/replay_sets.py). Every replay keeps the
host's CPU (whole host and each component, mean and peak) beside its figures.

Needs root and the native cluster up; sets the controllers' rate limits (--limits) and Kueue's fair sharing
(--kueue-fair-sharing) for the run and puts both back after it; brings the emulated nodes up and removes
them (and the emulated Slurm cluster) afterwards. Prints numbers; asserts nothing. Run it alone on the host.

    .venv/bin/python benchmarks/replay_scale.py --nodes 256 --seeds 1 2 3 --repeat 2 --queue-policy strict-fifo \\
        --ceilings results/CAMPAIGN/scale/ceilings.json --replay-set fifo-256n --out results/CAMPAIGN/scale
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from harness.cli.scale_cmds import figure_lines
from harness.clusters import images
from harness.clusters import native_k8s as nk
from harness.clusters.k8s import kwok, rate_limits, tuning
from harness.clusters.k8s.layout import Layout
from harness.clusters.slurm import emulated
from harness.errors import ConfigError
from harness.render import replay_policy as rpol
from harness.replay import local
from harness.replay import store as rs
from harness.scale import ceiling as cl
from harness.scale import load, synthetic
from harness.scale.trace import compress, summary

PLANE = ("kube-apiserver", "etcd", "kube-scheduler", "kube-controller-manager", "kueue", "jobset", "kwok")


def measured_replay(platform: str, trace, name: str, timeout_s: float | None, topology: str, up_s: float,
                    preemption: str = "off", policy: str = "site",
                    replay_set: str | None = None) -> tuple[dict, int, float]:
    """One replay with what it cost: the host's CPU record (replay/hostcpu.py, kept by the replay itself), the
    control plane's mean cores from it, its wall time and how long the nodes took to come up."""
    wall0 = time.monotonic()
    say = lambda m: print("  " + m, flush=True)   # noqa: E731
    if platform == "k8s":
        result, total = local.replay_k8s(trace, name, timeout_s, say=say, topology=topology, preemption=preemption,
                                         policy=policy)
    else:
        result, total = local.replay_slurm(trace, name, timeout_s, say=say, preemption=preemption, policy=policy)
    wall = time.monotonic() - wall0
    comps = (result.get("host_cpu") or {}).get("components") or {}
    mine = PLANE if platform == "k8s" else tuple(n for n in comps if n.startswith("slurm"))
    result["control_plane_cpu_cores"] = {n: comps[n]["mean_cores"] for n in mine if n in comps}
    result["replay_wall_s"], result["nodes_up_s"] = round(wall, 1), round(up_s, 1)
    if replay_set:
        result["settings"]["replay_set"] = replay_set
    return result, total, wall


def lower_ceiling(path: Path, nodes: int, L: Layout) -> tuple[float, list[str]]:
    """The lower of the two platforms' ceilings at this size and the cluster's current rate limits."""
    found = cl.from_dicts(json.loads(path.read_text()).get("ceilings") or [])
    k8s = cl.find(found, "k8s", nodes, cl.limits_label("k8s", rate_limits.describe(L)))
    slurm = cl.find(found, "slurm", nodes, cl.SLURM_LIMITS)
    if k8s is None or slurm is None or k8s.jobs_per_s is None or slurm.jobs_per_s is None:
        raise SystemExit(f"ERROR no ceilings for both platforms at {nodes} nodes and "
                         f"{cl.limits_label('k8s', rate_limits.describe(L))} in {path}\n"
                         "TIP run benchmarks/replay_throughput.py at that size and those limits first")
    return min(k8s.jobs_per_s, slurm.jobs_per_s), [f"Kubernetes {k8s.text()}", f"Slurm {slurm.text()}"]


def one_trace(L: Layout, a, seed: int) -> None:
    params = synthetic.SyntheticParams(nodes=a.nodes, gpus_per_node=a.gpus_per_node, hours=a.hours,
                                       target_load=a.load, runtime_median_s=a.runtime_median,
                                       limit_menu_s=tuple(a.limit_menu), tenants=a.tenants, qos=a.qos)
    raw = synthetic.generate(params, seed)
    if a.compress:
        factor = a.compress
    elif a.ceilings:
        low, said = lower_ceiling(a.ceilings, a.nodes, L)
        try:
            factor = load.compression_for(raw, low, a.share)
        except ConfigError as e:
            raise SystemExit(f"ERROR {e.message}\nTIP {e.tip}") from None
        print(f"  ceilings at {a.nodes} nodes: {'; '.join(said)}; compression {factor:g}x keeps the busiest 10 s at "
              f"or under {a.share:.0%} of {low:g} jobs/s", flush=True)
    else:
        factor = a.hours * 3600 / a.window
    trace = compress(raw, factor)
    s = summary(trace)
    print(f"\n== seed {seed}: {s.jobs} jobs ({', '.join(f'{k}: {v}' for k, v in s.sizes.items())}), {a.hours:g} h "
          f"compressed {trace.compression:g}x into {trace.duration_s} s, offered GPU load {s.gpu_load:.2f}, busiest "
          f"10 s {load.busiest_rate(trace):g} jobs/s", flush=True)
    where = a.out / f"{a.replay_set or 'replay'}-{a.nodes}n-seed{seed}"
    pair = rpol.policy(a.queue_policy)
    for p in [p for _ in range(a.repeat) for p in a.platform]:
        i = rs.next_index(where, p)
        t_up = time.monotonic()
        if p == "k8s":
            kwok.up(L, kwok.Shape(nodes=a.nodes, gpus=a.gpus_per_node))
        else:
            emulated.down()
            # fair share's memory compressed like the trace: Slurm's default half-life (and PriorityMaxAge), 7 days
            half_life = max(1, round(7 * 24 * 60 / trace.compression))
            emulated.EmulatedSlurm(emulated.EmulatedShape(nodes=a.nodes, gpus_per_node=a.gpus_per_node,
                                                          priority_decay_half_life_min=half_life,
                                                          priority_max_age_min=half_life,
                                                          **rpol.emulated_fields(pair)),
                                   emulated.default_conf_dir(), images.ensure_slurm_emulated_image()).up()
        up_s = time.monotonic() - t_up
        result, total, wall = measured_replay(p, trace, f"{a.replay_set or 'bench'}-{a.nodes}n", a.timeout,
                                              a.k8s_topology, up_s, a.preemption, a.queue_policy, a.replay_set)
        figs = rs.save(where, trace, p, result, total, index=i)
        h = (result.get("host_cpu") or {}).get("host") or {}
        print("\n".join(figure_lines(rs.run_name(p, i), figs)))
        print(f"  nodes up in {up_s:.1f} s; replay wall {wall:.1f} s; harness CPU {result['harness_cpu_s']:.2f} s; "
              f"host {h.get('mean_cores', 0):.2f} cores mean, {h.get('peak_cores', 0):.2f} peak", flush=True)
        if p == "slurm":
            emulated.down()
    print(f"  stored {where}; figures re-derive: {rs.rederive(where) == []}", flush=True)


def _pairs(text: str) -> tuple[tuple[str, float], ...]:
    return tuple((n, float(w)) for n, _, w in (part.partition("=") for part in text.split(",")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="one trace per seed: a set's strata")
    ap.add_argument("--hours", type=float, default=1.0, help="hours of synthetic trace")
    ap.add_argument("--load", type=float, default=0.9, help="offered GPU load over the window")
    ap.add_argument("--runtime-median", type=float, default=900, help="median run time (s) before compression")
    ap.add_argument("--limit-menu", type=int, nargs="+", default=[900, 1800, 3600, 7200],
                    help="the limits users choose from (s): the longest also caps run times")
    ap.add_argument("--tenants", type=_pairs, default=(("team-a", 0.5), ("team-b", 0.3), ("team-c", 0.2)),
                    help="NAME=W,... (default team-a=0.5,team-b=0.3,team-c=0.2)")
    ap.add_argument("--qos", type=_pairs, default=(("normal", 1.0),), help="NAME=W,... (default all normal)")
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--compress", type=float, help="compress by this factor")
    how.add_argument("--window", type=float, default=120, help="compress into this many seconds (default)")
    ap.add_argument("--ceilings", type=Path, help="ceilings.json: compress as far as --share of the lower ceiling")
    ap.add_argument("--share", type=float, default=load.SHARE)
    ap.add_argument("--repeat", type=int, default=2, help="replays a side per trace, alternating")
    ap.add_argument("--platform", action="append", choices=["k8s", "slurm"])
    ap.add_argument("--queue-policy", default="site", choices=list(rpol.POLICIES))
    ap.add_argument("--limits", help="the controllers' client rate limits for the run (`poc cluster up --client-qps`)")
    ap.add_argument("--kueue-fair-sharing", choices=["on", "off"], help="Kueue's fair sharing for the run")
    ap.add_argument("--replay-set",
                    help="the replay set the traces form (report/replay_sets.py); names the directories")
    ap.add_argument("--out", type=Path, default=Path("/tmp/replay-scale"), help="where the replay dirs go")
    ap.add_argument("--k8s-topology", choices=["preferred", "required", "off"], default="preferred")
    ap.add_argument("--timeout", type=float, metavar="SECONDS")
    ap.add_argument("--preemption", choices=["off", "priority"], default="off")
    a = ap.parse_args()
    a.platform = a.platform or ["k8s", "slurm"]
    if a.ceilings and a.compress:
        raise SystemExit("ERROR --ceilings chooses the compression; --compress sets it\nTIP give one of them")
    if not nk.is_up():
        raise SystemExit("ERROR the native Kubernetes cluster is not up\nTIP poc cluster up --k8s --provider native")
    L = Layout(nk.info().state_dir)
    before, fair_before = rate_limits.load(L), rate_limits.fair_sharing(L)
    try:
        if a.limits:
            tuning.apply_rate_limits(L, rate_limits.parse(a.limits))
        if a.kueue_fair_sharing:
            tuning.apply_fair_sharing(L, a.kueue_fair_sharing == "on")
        nk.up()
        print(f"rate limits and Kueue settings for the run: {rate_limits.describe(L)}", flush=True)
        for seed in a.seeds:
            one_trace(L, a, seed)
    finally:
        tuning.apply_rate_limits(L, before)
        tuning.apply_fair_sharing(L, fair_before)
        nk.up()
        print(f"\nremoved: {json.dumps({'k8s': kwok.down(L), 'slurm': emulated.down()})}; settings back to "
              f"{rate_limits.describe(L)}")


if __name__ == "__main__":
    main()
