#!/usr/bin/env python3
"""The workload's all-reduce figure against an independent timing, in the same worker image.

(a) the workload's own sweep (harness/data/workloads/ddp_train.py) at one size, 2 ranks in one
    container under torchrun; (b) a two-process all-reduce written here directly against
    torch.distributed (no workload code, no torchrun: multiprocessing and a TCP init), in the same
    image, with the same warm-up and iteration counts (the config defaults, nccl-tests' -w/-n).
Both take each rank's time per iteration and average it across ranks (nccl-tests' -a 1), and
busbw = bytes / 1e9 / time x 2(n-1)/n. (a) reports out-of-place (a copy + in-place all_reduce
in torch) and in-place; (b) is in-place, so (a)'s in-place figure is the like-for-like one.
Runs alternate (a), (b), (a), (b)... so drift on a busy machine hits both alike; prints every
repeat, the medians and the difference in %. Needs docker and the worker image (built locally
when missing, no registry). Prints numbers; asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import config, data
from harness.clusters import images
from harness.events import parse_lines

INDEPENDENT = r'''
import os, sys, time
import torch, torch.distributed as dist
import torch.multiprocessing as mp

def worker(rank, world, nbytes, warmup, iters, port, q):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    t = torch.ones(nbytes // 4, dtype=torch.float32) * (rank + 1)
    for _ in range(warmup):
        dist.all_reduce(t)
    t.fill_(rank + 1)
    dist.all_reduce(t)                       # one untimed, then the timed loop (nccl-tests' order)
    ok = bool((t == world * (world + 1) / 2).all())
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    per_iter = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
    every = [torch.zeros_like(per_iter) for _ in range(world)]
    dist.all_gather(every, per_iter)
    if rank == 0:
        q.put({"times": [float(x.item()) for x in every], "correct": ok})
    dist.destroy_process_group()

if __name__ == "__main__":
    nbytes, warmup, iters, world = (int(a) for a in sys.argv[1:5])
    q = mp.get_context("spawn").SimpleQueue()
    mp.spawn(worker, args=(world, nbytes, warmup, iters, 29511, q), nprocs=world, join=True)
    print("RESULT " + __import__("json").dumps(q.get()), flush=True)
'''


def docker(image: str, mounts: list[tuple[str, str]], argv: list[str], timeout: float) -> str:
    cmd = ["docker", "run", "--rm", "-e", "OMP_NUM_THREADS=1"]
    for host, inside in mounts:
        cmd += ["-v", f"{host}:{inside}:ro"]
    out = subprocess.run(cmd + [image, *argv], capture_output=True, text=True, timeout=timeout, check=False)
    if out.returncode != 0:
        sys.exit(f"ERROR {' '.join(argv[:3])}... exited {out.returncode}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return out.stdout


def busbw(nbytes: int, time_s: float, world: int) -> float:
    return nbytes / 1e9 / time_s * (2.0 * (world - 1) / world)


def workload(image: str, nbytes: int, warmup: int, iters: int, world: int) -> dict:
    wl = str(data.path("workloads"))
    out = docker(image, [(wl, "/opt/poc")],
                 ["torchrun", "--standalone", f"--nproc_per_node={world}", "/opt/poc/ddp_train.py",
                  "--sweep", str(nbytes), "--sweep-warmup", str(warmup), "--sweep-iters", str(iters),
                  "--sweep-max-s", "0", "--steps", "1", "--model-params", "64K", "--ckpt-every", "0"], 900)
    rows = [e for e in parse_lines(out.splitlines()) if e["kind"] == "allreduce" and e["rank"] == 0]
    if not rows:
        sys.exit(f"ERROR the workload printed no allreduce event:\n{out[-2000:]}")
    e = rows[0]
    return {name: {"busbw": e[name]["busbw_gbps"], "time_s": e[name]["time_s"], "correct": e[name]["correct"],
                   "iters": e[name]["iters"]} for name in ("oop", "ip")}


def independent(image: str, script: Path, nbytes: int, warmup: int, iters: int, world: int) -> dict:
    out = docker(image, [(str(script.parent), "/opt/check")],
                 ["python3", f"/opt/check/{script.name}", str(nbytes), str(warmup), str(iters), str(world)], 900)
    line = next((ln for ln in out.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        sys.exit(f"ERROR the independent timing printed no result:\n{out[-2000:]}")
    r = json.loads(line[len("RESULT "):])
    avg = sum(r["times"]) / len(r["times"])
    return {"busbw": busbw(nbytes, avg, world), "time_s": avg, "correct": r["correct"]}


def pct(a: float, b: float) -> float:
    return (a - b) / b * 100.0


def main() -> None:
    w = config.Workload()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bytes", default="64M", help="message size (default 64M)")
    ap.add_argument("--warmup", type=int, default=w.sweep_warmup)
    ap.add_argument("--iters", type=int, default=w.sweep_iters)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--image", default=None, help="default: the worker image the clusters run")
    args = ap.parse_args()
    nbytes, world = config.parse_size(args.bytes), 2
    image = args.image or images.ensure_worker_image()
    print(f"image {image} ({images.image_digest(image)[:19]})  {nbytes} B  world {world}  "
          f"warm-up {args.warmup}  iterations {args.iters}  repeats {args.repeats}")
    wl_oop, wl_ip, ind = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "independent_allreduce.py"
        script.write_text(INDEPENDENT)
        for i in range(args.repeats):
            a = workload(image, nbytes, args.warmup, args.iters, world)
            b = independent(image, script, nbytes, args.warmup, args.iters, world)
            wl_oop.append(a["oop"]["busbw"])
            wl_ip.append(a["ip"]["busbw"])
            ind.append(b["busbw"])
            print(f"  repeat {i + 1}: workload oop {a['oop']['busbw']:.3f} GB/s (correct {a['oop']['correct']}), "
                  f"ip {a['ip']['busbw']:.3f} GB/s (correct {a['ip']['correct']}, {a['ip']['iters']} iters)   "
                  f"independent {b['busbw']:.3f} GB/s (correct {b['correct']})")
    m_oop, m_ip, m_ind = (statistics.median(x) for x in (wl_oop, wl_ip, ind))
    print(f"median busbw: workload out-of-place {m_oop:.3f} GB/s, in-place {m_ip:.3f} GB/s; "
          f"independent (in-place) {m_ind:.3f} GB/s")
    print(f"difference vs independent: workload in-place {pct(m_ip, m_ind):+.1f} %, "
          f"out-of-place {pct(m_oop, m_ind):+.1f} %")


if __name__ == "__main__":
    main()
