#!/usr/bin/env python3
"""Synthetic PyTorch DDP training job, the same on every platform.

Standalone on purpose: it needs torch and the standard library only, so any
cluster image with torch can run it without the harness installed. Start it
with torchrun (one agent per node); it reads the usual torchrun environment.

It prints one JSON event per line on stdout, prefixed with ``POC_EVENT `` so
that schedulers' log streams can be filtered, and appends the same lines to
``<events-dir>/events-<host>-<pid>.jsonl`` when ``--events-dir`` is given
(one file per process, so concurrent writers never interleave).

Phases: process start -> rendezvous -> all-reduce sweep (first attempt only)
-> checkpoint load -> training steps with periodic checkpoints -> done.

The harness ships and runs harness/data/workloads/ddp_train.py; workloads/ddp_train.py at the top
of the repository is an identical copy to take to a cluster by hand. Edit the first; a unit test
(tests/unit/test_package_data.py) fails until the copy matches, and with POC_UPDATE_GOLDEN=1 copies it.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import socket
import sys
import time

EVENT_PREFIX = "POC_EVENT "
EVENT_SCHEMA = 1
DEFAULT_SWEEP = "1K:256M"

# The restart counters that launchers and schedulers expose. Kept apart because
# each layer resets the inner counters: a Slurm requeue starts torchrun afresh.
RESTART_VARS = {
    "jobset": ("JOBSET_RESTART_ATTEMPT",),
    "slurm": ("SLURM_RESTART_COUNT",),
    "torchelastic": ("TORCHELASTIC_RESTART_COUNT",),
}


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(i?B)?\s*", text, re.IGNORECASE)
    if not m:
        raise ValueError(f"not a size: {text!r} (use e.g. 1024, 1K, 256M)")
    return int(m.group(1)) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[m.group(2).upper()]


def sweep_sizes(spec: str) -> list[int]:
    """`1K:256M` is every power of two between; `1K,64K,1M` is an explicit list."""
    if ":" in spec:
        lo, hi = (parse_size(p) for p in spec.split(":", 1))
        sizes, s = [], lo
        while s <= hi:
            sizes.append(s)
            s *= 2
        return sizes
    return [parse_size(p) for p in spec.split(",") if p.strip()]


def restart_counts() -> dict[str, int]:
    out = {}
    for layer, names in RESTART_VARS.items():
        for name in names:
            val = os.environ.get(name, "")
            if val.strip().isdigit():
                out[layer] = int(val)
                break
        else:
            out[layer] = 0
    return out


class Events:
    def __init__(self, run_id: str, events_dir: str | None):
        self.run_id = run_id
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.restarts = restart_counts()
        # Ordered outermost first, so comparing two attempts as lists orders them in time.
        self.attempt = [self.restarts["jobset"], self.restarts["slurm"], self.restarts["torchelastic"]]
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.file = None
        if events_dir:
            os.makedirs(events_dir, exist_ok=True)
            path = os.path.join(events_dir, f"events-{self.host}-{self.pid}.jsonl")
            # open for the life of the process (every line is flushed; the exit closes it): no `with`
            self.file = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115

    def emit(self, kind: str, **data) -> None:
        ev = {
            "v": EVENT_SCHEMA,
            "kind": kind,
            "ts_ns": time.time_ns(),
            "run_id": self.run_id,
            "rank": self.rank,
            "local_rank": self.local_rank,
            "world_size": self.world_size,
            "host": self.host,
            "pid": self.pid,
            "attempt": self.attempt,
            "restarts": self.restarts,
        }
        ev.update(data)
        line = json.dumps(ev, separators=(",", ":"))
        # one write(2) per line: ranks sharing a pipe (torchrun's agent, a container's log) would
        # otherwise interleave print()'s separate writes of the text and the newline
        sys.stdout.flush()
        try:
            os.write(sys.stdout.fileno(), (EVENT_PREFIX + line + "\n").encode())
        except (AttributeError, OSError, ValueError):   # a stdout with no descriptor (a wrapper): print
            print(EVENT_PREFIX + line, flush=True)
        if self.file is not None:
            self.file.write(line + "\n")
            self.file.flush()


def pick_backend(requested: str, torch) -> str:
    if requested == "auto":
        return "nccl" if torch.cuda.is_available() else "gloo"
    if requested == "nccl" and not torch.cuda.is_available():
        raise SystemExit("ddp_train: --backend nccl needs CUDA GPUs, and none is visible")
    return requested


def sync(torch, device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def allreduce_sweep(ev: Events, dist, torch, device, sizes, warmup: int, iters: int, max_s: float) -> None:
    world = dist.get_world_size()
    factor = 2.0 * (world - 1) / world if world > 1 else 0.0
    expected = world * (world + 1) / 2.0
    for nbytes in sizes:
        n = max(1, nbytes // 4)
        buf = torch.full((n,), float(dist.get_rank() + 1), dtype=torch.float32, device=device)
        # Correctness once, on known values, before timing.
        dist.all_reduce(buf)
        sync(torch, device)
        ok = bool(torch.allclose(buf[:: max(1, n // 1024)], torch.tensor(expected, device=device)))
        buf.fill_(1.0)
        for _ in range(warmup):
            dist.all_reduce(buf)
        sync(torch, device)
        dist.barrier()
        # Fewer iterations for big messages on slow links keeps the sweep bounded.
        t0 = time.perf_counter()
        done = 0
        while done < iters:
            dist.all_reduce(buf)
            done += 1
            if done >= 1 and time.perf_counter() - t0 > max_s:
                break
        sync(torch, device)
        elapsed = torch.tensor([time.perf_counter() - t0], dtype=torch.float64, device=device)
        # The slowest rank defines the collective's time, as in nccl-tests.
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        per_iter = float(elapsed.item()) / done
        algbw = (n * 4) / per_iter / 1e9
        ev.emit(
            "allreduce",
            bytes=n * 4,
            iters=done,
            time_s=per_iter,
            algbw_gbps=algbw,
            busbw_gbps=algbw * factor,
            correct=ok,
        )
        del buf
    dist.barrier()


def build_model(torch, params: int, layers: int, width: int | None):
    """An MLP of `layers` square layers sized so the total is close to `params`."""
    layers = max(1, layers)
    h = width or max(8, int(math.sqrt(params / layers)))
    mods = []
    for i in range(layers):
        mods.append(torch.nn.Linear(h, h))
        if i < layers - 1:
            mods.append(torch.nn.ReLU())
    return torch.nn.Sequential(*mods), h


def newest_checkpoint(ckpt_dir: str) -> str | None:
    if not ckpt_dir or not os.path.isdir(ckpt_dir):
        return None
    found = []
    for name in os.listdir(ckpt_dir):
        m = re.fullmatch(r"ckpt-(\d+)\.pt", name)
        if m:
            found.append((int(m.group(1)), os.path.join(ckpt_dir, name)))
    return max(found)[1] if found else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-id", default=os.environ.get("POC_RUN_ID", "adhoc"))
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=64, help="per-rank batch size")
    ap.add_argument("--model-params", default="4M", help="approximate parameter count, e.g. 4M, 1G")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--ckpt-dir", default="")
    ap.add_argument("--ckpt-every", type=int, default=10)
    ap.add_argument("--sweep", default=DEFAULT_SWEEP, help="sizes: LO:HI (powers of two) or a,b,c; empty skips")
    ap.add_argument("--sweep-warmup", type=int, default=2)
    ap.add_argument("--sweep-iters", type=int, default=5)
    ap.add_argument("--sweep-max-s", type=float, default=2.0, help="time cap per message size")
    ap.add_argument("--sweep-on-restart", action="store_true", help="repeat the sweep after a restart")
    ap.add_argument("--backend", choices=["auto", "nccl", "gloo"], default="auto")
    ap.add_argument("--events-dir", default="")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args(argv)

    ev = Events(args.run_id, args.events_dir or None)
    ev.emit("process_start", argv=sys.argv[1:], python=sys.version.split()[0])

    import torch  # imported after the first event: the import itself is part of launch time
    import torch.distributed as dist

    backend = pick_backend(args.backend, torch)
    if backend == "nccl":
        device = torch.device("cuda", ev.local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    ev.emit("torch_imported", torch=torch.__version__, backend=backend, device=str(device),
            cuda=torch.version.cuda, gpus=torch.cuda.device_count())

    dist.init_process_group(backend=backend)
    # Agree on the attempt: after a restart, torchrun bumps the restart count only on
    # the agent whose worker failed, while its peers restart with their old count.
    agreed = torch.tensor(ev.attempt, dtype=torch.int64, device=device)
    dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
    ev.attempt = [int(x) for x in agreed.tolist()]
    ev.world_size = dist.get_world_size()
    ev.emit("rendezvous_done", master=os.environ.get("MASTER_ADDR", ""), backend=backend)

    first_attempt = not any(ev.attempt)
    if args.sweep and (first_attempt or args.sweep_on_restart):
        ev.emit("sweep_start")
        allreduce_sweep(ev, dist, torch, device, sweep_sizes(args.sweep), args.sweep_warmup,
                        args.sweep_iters, args.sweep_max_s)
        ev.emit("sweep_done")

    torch.manual_seed(args.seed)
    model, width = build_model(torch, parse_size(args.model_params), args.layers, None)
    model = model.to(device)
    nparams = sum(p.numel() for p in model.parameters())
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)

    start_step = 0
    path = newest_checkpoint(args.ckpt_dir)
    if path:
        t0 = time.perf_counter()
        state = torch.load(path, map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start_step = int(state["step"])
        ev.emit("checkpoint_loaded", step=start_step, path=path, load_s=time.perf_counter() - t0)
    else:
        ev.emit("checkpoint_loaded", step=0, path=None, load_s=0.0)

    def save_checkpoint(step: int, why: str) -> None:
        t1 = time.perf_counter()
        os.makedirs(args.ckpt_dir, exist_ok=True)
        final = os.path.join(args.ckpt_dir, f"ckpt-{step}.pt")
        tmp = final + f".tmp-{ev.pid}"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, tmp)
        os.replace(tmp, final)  # readers never see a half-written checkpoint
        ev.emit("checkpoint_saved", step=step, path=final, save_s=time.perf_counter() - t1, why=why)

    # A scheduler's warning before the time limit (Slurm --signal, SIGUSR1): rank 0 saves at the
    # end of the current step. No collective, so ranks that did not get the signal are not held up.
    warned = []
    signal.signal(signal.SIGUSR1, lambda signum, frame: warned.append(signum))

    gen = torch.Generator(device="cpu")
    ev.emit("train_start", start_step=start_step, steps=args.steps, params=nparams, width=width,
            layers=args.layers, batch=args.batch)
    for step in range(start_step + 1, args.steps + 1):
        t0 = time.perf_counter()
        # Data depends on (seed, step, rank) only, so a resumed run sees what it would have seen.
        gen.manual_seed(args.seed * 1_000_003 + step * 1009 + ev.rank)
        x = torch.randn(args.batch, width, generator=gen).to(device)
        y = torch.randn(args.batch, width, generator=gen).to(device)
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        sync(torch, device)
        ev.emit("step", step=step, dur_s=time.perf_counter() - t0, loss=float(loss.item()))
        if args.ckpt_dir and args.ckpt_every > 0 and step % args.ckpt_every == 0 and step < args.steps:
            if ev.rank == 0:
                save_checkpoint(step, "interval")
            dist.barrier()
        elif warned and args.ckpt_dir:
            if ev.rank == 0:
                save_checkpoint(step, "signal")
            warned.clear()

    dist.barrier()  # without it a fast rank can tear down while a peer is still in a collective
    ev.emit("done", steps=args.steps)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
