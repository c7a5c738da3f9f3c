#!/usr/bin/env python3
"""Emulated Slurm nodes at scale: time to idle, memory per node and job placement, per cluster size.

For each size N: start the emulated cluster (slurmctld and N slurmd in one container, image
``k8s-slurm-poc/slurm-emulated``, built when missing), time ``docker run`` until ``sinfo`` shows every
node idle, read the daemons' RSS and the container's memory (``docker stats``), then submit
min(--jobs, N) one-node jobs of G GPUs each (one ``docker exec`` running sbatch in a loop, so Docker's
per-call cost is paid once) and time until ``squeue`` shows them all running. The memory is read
again with the jobs' slurmstepd running, and the cluster is removed before the next size.
Prints numbers; asserts nothing.

    .venv/bin/python benchmarks/slurm_emulated_scale.py --nodes 64 256 1000
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from harness.clusters import images
from harness.clusters.slurm.emulated import CONTAINER, EmulatedShape, EmulatedSlurm

POLL_S = 0.5


def submit_and_place(cluster: EmulatedSlurm, jobs: int, gpus: int) -> dict[str, float]:
    """Seconds for sbatch of `jobs` whole-GPU-node jobs (one exec) and until all of them run."""
    gres = f" --gpus-per-node={gpus}" if gpus else ""
    loop = (f"for i in $(seq {jobs}); do sbatch --parsable -N1{gres} -o /dev/null -J place "
            f"--wrap 'sleep 3600' >/dev/null || exit 1; done")
    t0 = time.monotonic()
    res = cluster.exec(["bash", "-c", loop], timeout=600)
    submitted = time.monotonic() - t0
    if res.returncode != 0:
        raise SystemExit(f"sbatch failed after {submitted:.1f}s: {res.stderr.strip()[-2000:]}")
    running = 0
    while time.monotonic() - t0 < 600:
        out = cluster.exec(["squeue", "-h", "-t", "R", "-n", "place", "-o", "%i"], timeout=60).stdout
        running = len(out.split())
        if running == jobs:
            break
        time.sleep(POLL_S)
    placed = time.monotonic() - t0
    # Slurm's own view (whole seconds): first submit to last start
    times = cluster.exec(["env", "SLURM_TIME_FORMAT=%s", "squeue", "-h", "-n", "place", "-o", "%V %S"]).stdout
    pairs = [tuple(int(x) for x in line.split()) for line in times.splitlines() if line.strip()]
    span = max(s for _, s in pairs) - min(v for v, _ in pairs) if pairs else float("nan")
    return {"jobs": jobs, "running": running, "sbatch_s": round(submitted, 2), "all_running_s": round(placed, 2),
            "slurm_submit_to_last_start_s": span,
            "jobs_per_s": round(running / placed, 1) if placed else float("nan")}


def cpu_percent(cluster: EmulatedSlurm) -> float:
    out = cluster.runner(["docker", "stats", "--no-stream", "--format", "{{.CPUPerc}}", CONTAINER]).stdout
    return float(out.strip().rstrip("%") or "nan")


def one_size(nodes: int, args, image: str, conf_root: Path) -> dict:
    shape = EmulatedShape(nodes=nodes, gpus_per_node=args.gpus_per_node)
    cluster = EmulatedSlurm(shape, conf_root / f"n{nodes}", image)
    # placement time depends on these as much as on N: print them beside it
    row: dict = {"nodes": nodes, "gpus_per_node": args.gpus_per_node,
                 "scheduler_parameters": shape.scheduler_parameters}
    try:
        row |= cluster.up(idle_timeout=args.idle_timeout)
        time.sleep(args.settle)        # registration's burst is over; what an idle cluster costs
        row["idle"] = cluster.memory()
        row["idle_cpu_percent"] = cpu_percent(cluster)
        row["fds_slurmctld"] = int(cluster.exec(
            ["bash", "-c", "ls /proc/$(cat /run/slurmctld.pid)/fd | wc -l"]).stdout.strip() or 0)
        row["placement"] = submit_and_place(cluster, min(args.jobs, nodes), args.gpus_per_node)
        row["busy"] = cluster.memory()
        # what went wrong on the way, if anything (a missed registration, a timeout): slurmctld says so.
        # A first start has no saved state, which slurmctld logs as eight errors: those are left out.
        log = cluster.exec(["sh", "-c", "grep 'error:' /var/log/slurm/slurmctld.log "
                                        "| grep -v -e 'state file' -e 'NOTE: Trying backup' | wc -l"]).stdout
        row["slurmctld_errors"] = int(log.strip() or 0)
    finally:
        if not args.keep:
            cluster.down()
    return row


def show(row: dict) -> None:
    idle, busy, p = row["idle"], row.get("busy", {}), row.get("placement", {})
    print(f"N={row['nodes']:>5}  idle after {row['idle_s']:7.1f} s   "
          f"slurmd {idle['slurmd_count']} × RSS {idle.get('slurmd_rss_mib_each', 0):.1f} MiB "
          f"(PSS {idle.get('slurmd_pss_mib_each', 0):.2f}; sum {idle['slurmd_pss_mib']:.0f} MiB)  "
          f"slurmctld RSS {idle['slurmctld_rss_mib']:.0f} MiB  container {idle['container_mib']:.0f} MiB  "
          f"({idle['container_mib'] / row['nodes']:.1f} MiB/node)  idle CPU {row['idle_cpu_percent']:.0f}%")
    if p:
        print(f"         {p['jobs']} jobs: sbatch {p['sbatch_s']:.1f} s, all running after {p['all_running_s']:.1f} s "
              f"({p['jobs_per_s']} jobs/s; slurm submit→last start {p['slurm_submit_to_last_start_s']} s); "
              f"busy: {busy.get('slurmstepd_count', 0)} slurmstepd PSS {busy.get('slurmstepd_pss_mib', 0):.0f} MiB, "
              f"slurmctld {busy.get('slurmctld_rss_mib', 0):.0f} MiB, "
              f"container {busy.get('container_mib', 0):.0f} MiB; "
              f"{row['slurmctld_errors']} errors in slurmctld.log; SchedulerParameters={row['scheduler_parameters']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[64, 256, 1000])
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=100, help="one-node jobs to place (at most N)")
    ap.add_argument("--idle-timeout", type=float, default=900)
    ap.add_argument("--settle", type=float, default=10, help="seconds to wait after idle before reading memory")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    ap.add_argument("--keep", action="store_true", help="leave the last cluster running")
    args = ap.parse_args()
    image = images.ensure_slurm_emulated_image(say=print)
    rows = []
    with tempfile.TemporaryDirectory(prefix="slurm-emulated-") as tmp:
        for n in args.nodes:
            rows.append(one_size(n, args, image, Path(tmp)))
            show(rows[-1])
    if args.json:
        args.json.write_text(json.dumps({"version": 1, "image": image, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
