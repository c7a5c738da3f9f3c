#!/usr/bin/env python3
"""Scale replays on both schedulers: a synthetic trace (harness/scale/synthetic.py) at N emulated
nodes, compressed to arrive within --window seconds, replayed on the native cluster's KWOK nodes
(Kueue + JobSet) and on the emulated Slurm cluster (harness/replay/), one after the other; prints per
size the queue figures per size class, makespan, GPU utilisation and tenant shares side by side, and
what it cost: the harness's CPU per 1,000 jobs, each Kubernetes control-plane process's CPU and the
Slurm container's, over each replay (from /proc and the container's cgroup), so where this machine
rather than a scheduler is the limit shows beside the figures.

Needs root and the native cluster up (`poc cluster up --k8s --provider native`); brings the emulated
nodes up at each size and removes them (and the emulated Slurm cluster) afterwards. Prints numbers;
asserts nothing.

    .venv/bin/python benchmarks/replay_scale.py --nodes 64 256 1000 --window 120
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from harness.cli.scale_cmds import figure_lines
from harness.clusters import images
from harness.clusters import native_k8s as nk
from harness.clusters.k8s import kwok
from harness.clusters.k8s.layout import Layout, load_state
from harness.clusters.slurm import emulated
from harness.replay import local
from harness.replay import store as rs
from harness.scale import synthetic
from harness.scale.trace import compress, summary

WATCHED = ("kube-apiserver", "kube-scheduler", "kueue", "jobset", "kube-controller-manager", "kwok", "etcd")
TICK = os.sysconf("SC_CLK_TCK")


def k8s_cpu(L: Layout) -> dict[str, float]:
    """utime + stime (s) of each watched control-plane process, from /proc/<pid>/stat."""
    out = {}
    for name, entry in load_state(L).get("components", {}).items():
        if name in WATCHED:
            try:
                with open(f"/proc/{entry['pid']}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                out[name] = (int(fields[11]) + int(fields[12])) / TICK
            except (OSError, IndexError, ValueError):
                continue
    return out


def slurm_cpu() -> float | None:
    """CPU seconds the emulated Slurm container has used (its cgroup's cpuacct.usage, or cpu.stat on v2)."""
    pid = images.run(["docker", "inspect", "-f", "{{.State.Pid}}", emulated.CONTAINER], check=False).stdout.strip()
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, ctrl, path = line.split(":", 2)
        if "cpuacct" in ctrl.split(","):
            for root in ("/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpuacct"):
                f = Path(root + path) / "cpuacct.usage"
                if f.is_file():
                    return int(f.read_text()) / 1e9
        if ctrl == "":
            f = Path("/sys/fs/cgroup" + path) / "cpu.stat"
            if f.is_file():
                usage = dict(ln.split() for ln in f.read_text().splitlines())
                return int(usage["usage_usec"]) / 1e6
    return None


def measured_replay(L: Layout, platform: str, trace, name: str, timeout_s: float | None, topology: str,
                    up_s: float, preemption: str = "off") -> tuple[dict, int, float]:
    """One replay with what it cost, kept in its result so the replay report shows it beside the figures:
    each control-plane process's CPU (or the Slurm container's) in cores over the replay, its wall time and
    how long the nodes took to come up. (result, the cluster's GPUs, wall seconds)."""
    cpu0, slurm0, wall0 = k8s_cpu(L), slurm_cpu(), time.monotonic()
    say = lambda m: print("  " + m, flush=True)   # noqa: E731
    if platform == "k8s":
        result, total = local.replay_k8s(trace, name, timeout_s, say=say, topology=topology, preemption=preemption)
    else:
        result, total = local.replay_slurm(trace, name, timeout_s, say=say, preemption=preemption)
    wall = time.monotonic() - wall0
    cpu1, slurm1 = k8s_cpu(L), slurm_cpu()
    if platform == "k8s":
        result["control_plane_cpu_cores"] = {k: round((cpu1[k] - cpu0.get(k, 0)) / wall, 3) for k in sorted(cpu1)}
    elif slurm0 is not None and slurm1 is not None:
        result["control_plane_cpu_cores"] = {"slurm container": round((slurm1 - slurm0) / wall, 3)}
    result["replay_wall_s"], result["nodes_up_s"] = round(wall, 1), round(up_s, 1)
    return result, total, wall


def one(L: Layout, nodes: int, gpus: int, window_s: float, hours: float, load: float, seed: int,
        platforms: list[str], out: Path, repeat: int = 1, topology: str = "preferred",
        timeout_s: float | None = None, preemption: str = "off", qos: tuple = (("normal", 1.0),)) -> None:
    # limits up to 4 h (not 48 h) and a 20-minute median run: at 60x a replay's tail stays within minutes
    params = synthetic.SyntheticParams(nodes=nodes, gpus_per_node=gpus, hours=hours, target_load=load,
                                       runtime_median_s=1200, limit_menu_s=(900, 1800, 3600, 7200, 14400), qos=qos)
    trace = compress(synthetic.generate(params, seed), hours * 3600 / window_s)
    s = summary(trace)
    print(f"\n== {nodes} nodes × {gpus} GPUs: {s.jobs} jobs ({', '.join(f'{k}: {v}' for k, v in s.sizes.items())}), "
          f"{hours:g} h compressed {trace.compression:g}x into {trace.duration_s} s, offered GPU load "
          f"{s.gpu_load:.2f}", flush=True)
    where = out
    # alternating, so a drift of this machine's load touches both platforms alike
    for p in [p for _ in range(repeat) for p in platforms]:
        i = rs.next_index(where, p)
        t_up = time.monotonic()
        if p == "k8s":
            kwok.up(L, kwok.Shape(nodes=nodes, gpus=gpus))
        else:
            emulated.down()
            # fair share's memory compressed like the trace: Slurm's default half-life (and PriorityMaxAge), 7 days
            half_life = max(1, round(7 * 24 * 60 / trace.compression))
            emulated.EmulatedSlurm(emulated.EmulatedShape(nodes=nodes, gpus_per_node=gpus,
                                                          priority_decay_half_life_min=half_life,
                                                          priority_max_age_min=half_life),
                                   emulated.default_conf_dir(), images.ensure_slurm_emulated_image()).up()
        up_s = time.monotonic() - t_up
        result, total, wall = measured_replay(L, p, trace, f"bench-{nodes}n", timeout_s, topology, up_s, preemption)
        figs = rs.save(where, trace, p, result, total, index=i)
        late = sorted(x["sent_at"] - x["due_s"] for x in result["submitted"])
        print("\n".join(figure_lines(rs.run_name(p, i), figs)))
        print(f"  nodes up in {up_s:.1f} s; replay wall {wall:.1f} s; submission lag median "
              f"{late[len(late) // 2]:.3f} s, max {late[-1]:.3f} s; harness CPU {result['harness_cpu_s']:.2f} s = "
              f"{1000 * result['harness_cpu_s'] / max(1, figs['jobs']):.1f} s per 1,000 jobs; {result['looks']} looks")
        if result.get("control_plane_cpu_cores"):
            print("  control plane CPU (cores): " + ", ".join(
                f"{k} {v:.2f}" for k, v in result["control_plane_cpu_cores"].items()))
        if p == "slurm":
            emulated.down()
    print(f"  stored {where}; figures re-derive: {rs.rederive(where) == []}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--window", type=float, default=120, help="seconds the compressed arrival window lasts")
    ap.add_argument("--hours", type=float, default=2, help="hours of synthetic trace (compressed to --window)")
    ap.add_argument("--load", type=float, default=0.9, help="offered GPU load over the window")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--platform", action="append", choices=["k8s", "slurm"])
    ap.add_argument("--out", type=Path, default=Path("/tmp/replay-scale"), help="where the replays are stored")
    ap.add_argument("--name", help="store each size's replays in OUT/NAME-<nodes>n (e.g. OUT a campaign's scale/ "
                                   "folder, so its report shows them) instead of OUT/<UTC time>/<nodes>n")
    ap.add_argument("--repeat", type=int, default=1, help="replays per platform and size, alternating")
    ap.add_argument("--k8s-topology", choices=["preferred", "required", "off"], default="preferred",
                    help="Kueue TAS for each gang (default preferred, as Slurm's topology/tree)")
    ap.add_argument("--timeout", type=float, metavar="SECONDS",
                    help="stop watching a replay after this long (default: its last submit plus the longest "
                         "limit, plus two minutes); a replay that had not ended is stored with the jobs left")
    ap.add_argument("--preemption", choices=["off", "priority"], default="off",
                    help="priority: QOS classes preempt lower ones on both (harness/render/replay_priority.py)")
    ap.add_argument("--qos", default="normal=1", metavar="NAME=W,...",
                    help="the trace's QOS classes by weight (default all normal), e.g. high=0.1,normal=0.6,low=0.3")
    a = ap.parse_args()
    qos = tuple((n, float(w)) for n, _, w in (part.partition("=") for part in a.qos.split(",")))
    if not nk.is_up():
        raise SystemExit("ERROR the native Kubernetes cluster is not up\nTIP poc cluster up --k8s --provider native")
    L = Layout(nk.info().state_dir)
    out = a.out / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    try:
        for n in a.nodes:
            where = a.out / f"{a.name}-{n}n" if a.name else out / f"{n}n"
            one(L, n, a.gpus_per_node, a.window, a.hours, a.load, a.seed, a.platform or ["k8s", "slurm"], where,
                a.repeat, a.k8s_topology, a.timeout, a.preemption, qos)
    finally:
        print(f"\nremoved: {json.dumps({'k8s': kwok.down(L), 'slurm': emulated.down()})}")


if __name__ == "__main__":
    main()
