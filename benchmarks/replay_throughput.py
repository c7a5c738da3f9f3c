#!/usr/bin/env python3
"""Scheduler throughput against offered load: steady traces (harness/scale/steady.py) at each --rates
jobs/s for --seconds, replayed one after the other on the native cluster's KWOK nodes (Kueue +
JobSet) and on the emulated Slurm cluster (harness/replay/); prints per replay the offered and the
achieved placement rate (jobs and nodes per second, from the schedulers' own whole-second records),
the placement lag at the end of the burst and the jobs never placed, beside what it cost: the
harness's CPU and the control plane's (each Kubernetes process, the Slurm container), measured as
benchmarks/replay_scale.py does. Then each platform's saturation point (harness/scale/saturation.py).

Writes DIR/<rate>/ (each replay, harness/replay/store.py), DIR/throughput.json and DIR/throughput.png.
Every rate's trace is built before any cluster is touched, so a rate the nodes cannot hold fails first.
Needs root and the native cluster up (`poc cluster up --k8s --provider native`); brings the emulated
nodes up and removes them (and the emulated Slurm cluster) afterwards. Prints numbers; asserts nothing.

    .venv/bin/python benchmarks/replay_throughput.py --nodes 256 --rates 1 2 4 8 16 --seconds 30
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from replay_scale import measured_replay

from harness.clusters import images
from harness.clusters import native_k8s as nk
from harness.clusters.k8s import kwok
from harness.clusters.k8s.layout import Layout
from harness.clusters.slurm import emulated
from harness.errors import ConfigError
from harness.fsutil import atomic_write
from harness.replay import store as rs
from harness.report import throughput as rt
from harness.scale import outcome, saturation, steady
from harness.scale.trace import Trace


def traces(rates: list[float], seconds: float, nodes: int, gpus: int, runtime_s: int, seed: int) -> dict[float, Trace]:
    try:
        return {r: steady.steady_trace(r, seconds, nodes, gpus, runtime_s, seed=seed) for r in rates}
    except ConfigError as e:
        raise SystemExit(f"ERROR {e.message}\nTIP {e.tip}") from None


def sweep(platform: str, L: Layout, made: dict[float, Trace], gpus: int, out: Path, topology: str) -> list[dict]:
    """Every rate's replay on one platform, its nodes brought up once: one row per replay."""
    nodes = next(iter(made.values())).shape.nodes
    t_up = time.monotonic()
    if platform == "k8s":
        kwok.up(L, kwok.Shape(nodes=nodes, gpus=gpus))
    else:
        emulated.down()
        emulated.EmulatedSlurm(emulated.EmulatedShape(nodes=nodes, gpus_per_node=gpus),
                               emulated.default_conf_dir(), images.ensure_slurm_emulated_image()).up()
    up_s = time.monotonic() - t_up
    print(f"\n== {platform}: {nodes} nodes × {gpus} GPUs up in {up_s:.1f} s", flush=True)
    rows = []
    for rate, trace in made.items():
        result, total, wall = measured_replay(L, platform, trace, f"tput-{rate:g}", None, topology, up_s)
        figs = rs.save(out / f"{rate:g}", trace, platform, result, total)
        # the harness's own lateness: a harness that cannot submit at the rate offers less than the trace
        late = sorted(x["sent_at"] - x["due_s"] for x in result["submitted"])
        t = outcome.throughput(rs.outcomes_of(platform, trace, result), trace_rate=rate)
        rows.append({"platform": platform, "rate": rate, "jobs": len(trace.jobs), "wall_s": round(wall, 1),
                     "jobs_without_record": figs["jobs_without_record"], "harness_cpu_s": result["harness_cpu_s"],
                     "submit_late_median_s": late[len(late) // 2], "submit_late_max_s": late[-1],
                     "control_plane_cpu_cores": result.get("control_plane_cpu_cores"), "throughput": t})
        print(f"  {rate:g} jobs/s offered by the trace: the scheduler recorded {rt.num(t['offered_jobs_per_s'])}, "
              f"placed {rt.num(t['jobs_per_s'])} jobs/s ({rt.num(t['nodes_per_s'])} nodes/s), lag {t['lag_s']} s, "
              f"{t['never_placed']} never placed, {figs['jobs_without_record']} without a record; submitted up to "
              f"{late[-1]:.3f} s late; wall {wall:.1f} s", flush=True)
    if platform == "slurm":
        emulated.down()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--rates", type=float, nargs="+", default=[1, 2, 4, 8, 16], help="offered jobs/s, one replay each")
    ap.add_argument("--seconds", type=float, default=30, help="how long each rate is offered")
    ap.add_argument("--runtime", type=int, default=5,
                    help="each job's run time (s); short, so the nodes never fill (steady.HEADROOM)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--platform", nargs="+", choices=["k8s", "slurm"], default=["k8s", "slurm"])
    ap.add_argument("--k8s-topology", choices=["preferred", "required", "off"], default="preferred",
                    help="Kueue TAS for each gang (default preferred, as Slurm's topology/tree)")
    ap.add_argument("--results", type=Path, default=None,
                    help="where the replays go (default /tmp/replay-throughput/<UTC time>)")
    ap.add_argument("--report-only", type=Path, metavar="DIR",
                    help="write DIR's throughput.md and .png again from its throughput.json (no cluster)")
    a = ap.parse_args()
    if a.report_only:
        kept = json.loads((a.report_only / "throughput.json").read_text())
        report(kept["rows"], kept["settings"], a.report_only)
        return
    made = traces(sorted(set(a.rates)), a.seconds, a.nodes, a.gpus_per_node, a.runtime, a.seed)
    if not nk.is_up():
        raise SystemExit("ERROR the native Kubernetes cluster is not up\nTIP poc cluster up --k8s --provider native")
    L = Layout(nk.info().state_dir)
    out = a.results or Path("/tmp/replay-throughput") / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    rows: list[dict] = []
    try:
        for p in a.platform:
            rows += sweep(p, L, made, a.gpus_per_node, out, a.k8s_topology)
    finally:
        print(f"\nremoved: {json.dumps({'k8s': kwok.down(L), 'slurm': emulated.down()})}")
        if rows:
            report(rows, {"nodes": a.nodes, "gpus_per_node": a.gpus_per_node, "rates": a.rates,
                          "seconds": a.seconds, "runtime_s": a.runtime, "seed": a.seed,
                          "k8s_topology": a.k8s_topology, "keeps_up": saturation.KEEPS_UP,
                          "headroom": steady.HEADROOM}, out)


def report(rows: list[dict], settings: dict, out: Path) -> None:
    sat = saturation.by_platform(rt.points(rows))
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "throughput.json", json.dumps(
        {"version": 1, "settings": settings, "rows": rows,
         "saturation": {p: dataclasses.asdict(s) for p, s in sat.items()}}, indent=1, sort_keys=True))
    rt.chart(rt.points(rows), out / "throughput.png", sat)
    print("\n" + "\n".join(rt.table(rows)) + "\n\n" + "\n".join(rt.saturation_lines(sat)))
    atomic_write(out / "throughput.md", "\n".join([
        f"# Scheduler throughput against offered load: {settings['nodes']} emulated nodes × "
        f"{settings['gpus_per_node']} GPUs", "",
        f"Steady traces (harness/scale/steady.py): each rate offered for {settings['seconds']:g} s, jobs of "
        f"{settings['runtime_s']} s, seed {settings['seed']}; Kueue TAS {settings['k8s_topology']}; one replay per "
        "rate and platform; times are the schedulers' own whole-second records.", "",
        *rt.table(rows), "", *rt.saturation_lines(sat), "",
        "![achieved against offered](throughput.png)", "",
        f"Settings: `{json.dumps(settings, sort_keys=True)}`. Each rate's replay (raw records, figures) is in its "
        "own directory here; `poc scale rederive DIR/<rate>` re-derives it.", ""]))
    print(f"\nstored {out} (throughput.md, throughput.json, throughput.png, one directory per rate)")


if __name__ == "__main__":
    main()
