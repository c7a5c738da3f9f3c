#!/usr/bin/env python3
"""Synthetic PyTorch DDP training job, the same on every platform.

Standalone on purpose: it needs torch and the standard library only, so any
cluster image with torch can run it without the harness installed. Start it
with torchrun (one agent per node); it reads the usual torchrun environment.

It prints one JSON event per line on stdout, prefixed with ``POC_EVENT `` so
that schedulers' log streams can be filtered, and appends the same lines to
``<events-dir>/events-<host>-<pid>.jsonl`` when ``--events-dir`` is given
(one file per process, so concurrent writers never interleave). Every event names the node as its
scheduler does (`node`: SLURMD_NODENAME, or the pod's spec.nodeName as POC_NODE_NAME) beside its host name.

Phases: process start -> torch imported (its build, the NCCL_*/GLOO_* environment) -> rendezvous
-> all-reduce sweep as nccl-tests measures it (first attempt only) -> comm (the transport the
backend used) -> checkpoint load -> training steps with periodic checkpoints -> done.

Models: --model mlp, the tiny fp32 smoke model; --model transformer, a decoder-only language model
sized to --model-params (1M to ~2G), trained on synthetic tokens with AdamW, bf16 autocast on GPUs.
--gpus-per-node N: one CUDA device per rank, nccl; missing GPUs are an error, never gloo instead.
--simulated-gpus: the scheduler allocated GPUs that do not exist; train on CPUs and record that.

The harness ships and runs harness/data/workloads/ddp_train.py; workloads/ddp_train.py at the top
of the repository is an identical copy to take to a cluster by hand. Edit the first; a unit test
(tests/unit/test_package_data.py) fails until the copy matches, and with POC_UPDATE_GOLDEN=1 copies it.
"""
from __future__ import annotations

import argparse
import contextlib
import hmac
import inspect
import itertools
import json
import math
import os
import re
import signal
import socket
import stat
import sys
import tempfile
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
        # the node as its scheduler names it (Slurm's NodeName; the pod's spec.nodeName), which need not be its
        # host name: a fault aimed at this rank's node (srun --nodelist), and an exclusion, must name that
        self.node = os.environ.get("SLURMD_NODENAME") or os.environ.get("POC_NODE_NAME") or None
        self.file = None
        if events_dir:
            os.makedirs(events_dir, exist_ok=True)
            path = os.path.join(events_dir, f"events-{self.host}-{self.pid}.jsonl")
            # open for the life of the process (every line is flushed; the exit closes it): no `with`
            self.file = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None

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
            **({"node": self.node} if self.node else {}),
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


# What the scheduler exposed about GPUs, recorded beside what torch saw (simulated or not).
GPU_ENV = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "SLURM_GPUS_ON_NODE", "SLURM_JOB_GPUS",
           "SLURM_STEP_GPUS", "SLURM_GPUS_PER_NODE")
SIMULATE_TIP = "set workload.simulated_gpus: true only on clusters without GPUs"


class GpuError(Exception):
    """GPUs were asked for and cannot be used: the run must fail, never train on gloo instead."""


def gpu_env() -> dict[str, str]:
    return {k: os.environ[k] for k in GPU_ENV if k in os.environ}


def place(args, torch, local_rank: int, local_world: int):
    """(backend, device) of this rank. --gpus-per-node N: one CUDA device per rank on the node,
    nccl; --simulated-gpus: CPU and gloo (the GPUs exist only in the scheduler's books)."""
    if args.gpus_per_node > 0 and not args.simulated_gpus:
        seen = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if seen < local_world:
            cpu_only = f"; torch {torch.__version__} is a CPU-only build" if torch.version.cuda is None else ""
            ranks = f"{local_world} rank{'s' if local_world != 1 else ''} on this node"
            raise GpuError(f"{args.gpus_per_node} GPUs per node were requested ({ranks}) "
                           f"but torch sees {seen} CUDA devices (CUDA_VISIBLE_DEVICES="
                           f"{os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')}){cpu_only}; {SIMULATE_TIP}")
        if args.backend == "gloo":
            raise GpuError(f"{args.gpus_per_node} GPUs per node were requested but --backend is gloo; use auto or "
                           f"nccl, or {SIMULATE_TIP}")
        return "nccl", torch.device("cuda", local_rank)
    if args.simulated_gpus:
        if args.backend == "nccl":
            raise GpuError("--simulated-gpus trains on CPUs with gloo, but --backend is nccl")
        return "gloo", torch.device("cpu")
    backend = pick_backend(args.backend, torch)
    return backend, torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")


def sync(torch, device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# The all-reduce sweep, measured the way nccl-tests' all_reduce_perf measures (src/common.cu:
# TimeTest, BenchTime): a warm-up pass over every size first, then per size an out-of-place and
# an in-place test, each = one untimed collective, a barrier, `iters` timed collectives and a
# stream sync (host clock), the per-iteration time averaged across ranks (its `-a 1` default;
# the max and min are kept too), then a check of the result on known data (its `-c 1` default).
# torch.distributed has only an in-place all_reduce, so out-of-place is copy + in-place, which is
# what torch's functional all_reduce does too: its time includes the copy (see bandwidth.py).
DEFAULT_ITERS, DEFAULT_WARMUP = 20, 1      # nccl-tests' -n and -w defaults
# Element i of rank r holds (1 + r % 3) * (1 + i % 61): a lost, doubled or misplaced contribution
# shows, and the sums stay integers below 2**24 up to ~90,000 ranks, so float32 sums are exact.
PATTERN = 61


def agreed_iters(requested: int, calib_max_s: float, max_s: float) -> int:
    """Timed iterations for one size and variant, the same on every rank: `requested`, fewer
    when one iteration on the slowest rank (an all-reduced MAX, identical everywhere) says they
    would take longer than `max_s`; at least 1. A rank deciding alone would hang its peers."""
    if max_s <= 0 or calib_max_s <= 0 or not math.isfinite(calib_max_s):
        return requested
    return max(1, min(requested, int(max_s / calib_max_s)))


def block_sizes(k: int, blocks: int = 4) -> list[int]:
    """The timed loop's k iterations cut into (at most) `blocks` near-equal blocks: each block's
    time per iteration shows the noise between iterations, which one total hides."""
    nb = max(1, min(blocks, k))
    return [k // nb + (j < k % nb) for j in range(nb)]


def mark(torch, device):
    """A point in the timed loop that does not stall it: a CUDA event on the stream (NCCL's
    completion is ordered before it: a blocking all_reduce makes the stream wait), else the clock."""
    if device.type == "cuda":
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e
    return time.perf_counter()


def spans(marks) -> list[float]:
    """Seconds between consecutive marks (after a sync)."""
    if marks and not isinstance(marks[0], float):
        return [a.elapsed_time(b) / 1e3 for a, b in itertools.pairwise(marks)]
    return [b - a for a, b in itertools.pairwise(marks)]


def bw_figures(nbytes: int, time_s: float, world: int) -> tuple[float, float]:
    """nccl-tests' AllReduceGetBw: algbw = bytes / 1e9 / time, busbw = algbw * 2(n-1)/n."""
    algbw = nbytes / 1e9 / time_s if time_s > 0 else 0.0
    return algbw, algbw * (2.0 * (world - 1) / world if world > 1 else 0.0)


def _tile(torch, buf, pat) -> None:
    """Fill buf with pat repeated (no temporary of buf's size: a 8 GiB sweep must fit)."""
    n, p = buf.numel(), pat.numel()
    rows = n // p
    if rows:
        buf[: rows * p].view(rows, p).copy_(pat.expand(rows, p))
    if n - rows * p:
        buf[rows * p:].copy_(pat[: n - rows * p])


def _matches(buf, pat) -> bool:
    n, p = buf.numel(), pat.numel()
    rows = n // p
    ok = bool((buf[: rows * p].view(rows, p) == pat).all()) if rows else True
    return ok and bool((buf[rows * p:] == pat[: n - rows * p]).all())


def allreduce_sweep(ev: Events, dist, torch, device, sizes, warmup: int, iters: int, max_s: float) -> None:
    world, rank = dist.get_world_size(), dist.get_rank()
    top = max(1, max(sizes) // 4)
    send = torch.empty(top, dtype=torch.float32, device=device)   # one pair of buffers, as nccl-tests
    recv = torch.empty(top, dtype=torch.float32, device=device)
    base = torch.arange(min(top, PATTERN * 64), dtype=torch.float32, device=device).remainder_(PATTERN).add_(1)
    mine, want = base * (1 + rank % 3), base * float(sum(1 + r % 3 for r in range(world)))
    _tile(torch, send, mine)                       # not garbage: denormals would slow a CPU warm-up
    for nbytes in sizes:                           # warm-up pass over every size, out-of-place
        n = max(1, nbytes // 4)
        for _ in range(warmup):
            recv[:n].copy_(send[:n])
            dist.all_reduce(recv[:n])
    sync(torch, device)
    for nbytes in sizes:
        n = max(1, nbytes // 4)
        s, r = send[:n], recv[:n]
        out = {"bytes": n * 4, "warmup": warmup}
        for name, in_place in (("oop", False), ("ip", True)):
            def coll(s=s, r=r, in_place=in_place):
                if not in_place:
                    r.copy_(s)
                dist.all_reduce(r)
            _tile(torch, s, mine)
            if in_place:
                _tile(torch, r, mine)
            sync(torch, device)
            t0 = time.perf_counter()
            coll()                                 # nccl-tests' untimed first collective; also the calibration
            sync(torch, device)
            calib = torch.tensor([time.perf_counter() - t0], dtype=torch.float64, device=device)
            dist.all_reduce(calib, op=dist.ReduceOp.MAX)
            k = agreed_iters(iters, float(calib.item()), max_s)
            counts = block_sizes(k)
            dist.barrier()
            marks = [mark(torch, device)]
            t0 = time.perf_counter()
            for c in counts:
                for _ in range(c):
                    coll()
                marks.append(mark(torch, device))
            sync(torch, device)
            mine_t = [(time.perf_counter() - t0) / k]
            mine_t += [d / c for d, c in zip(spans(marks), counts, strict=True)]
            if in_place:                           # the timed loop summed over and over: check afresh
                _tile(torch, r, mine)
                coll()
                sync(torch, device)
            # out-of-place: the result buffer of the timed loop itself (its input is untouched)
            row = torch.tensor([float(_matches(r, want)), *mine_t], dtype=torch.float64, device=device)
            rows = [torch.zeros_like(row) for _ in range(world)]
            dist.all_gather(rows, row)             # every rank's check, time per iteration and blocks
            rows = [t.tolist() for t in rows]
            ts = [t[1] for t in rows]
            blocks = [x for t in rows for x in t[2:]]
            avg, correct = sum(ts) / len(ts), all(t[0] == 1.0 for t in rows)
            algbw, busbw = bw_figures(n * 4, avg, world)
            # an incorrect result has no bandwidth: its time is kept, its figures are not
            out[name] = {"iters": k, "time_s": avg, "time_max_s": max(ts), "time_min_s": min(ts),
                         "block_max_s": max(blocks), "block_min_s": min(blocks),
                         "algbw_gbps": algbw if correct else None,
                         "busbw_gbps": busbw if correct else None, "correct": correct}
        out["iters"] = min(out["oop"]["iters"], out["ip"]["iters"])
        ev.emit("allreduce", **out)
    del send, recv
    if device.type == "cuda":
        torch.cuda.empty_cache()    # give the sweep's buffers back before the model is built
    dist.barrier()


# ---------------------------------------------------------------- calibration: the allocation, before training
# In the job's own allocation and image, before the sweep: what each node is (limits, GPUs, driver,
# CUDA, NCCL, RDMA devices, OFED), whether it is healthy, and how fast it computes and all-reduces
# beside its peers; a node far below the others is refused (every rank stops, with why) rather than
# measured: the figures would be the node's, not the scheduler's. On GPUs nccl-tests' all_reduce_perf
# (when the image has it) gives each node's reference bus bandwidth, beside the workload's own at the
# same size on the same GPUs.
SMI_FIELDS = ("index", "name", "uuid", "driver_version", "memory.total", "ecc.errors.uncorrected.volatile.total")
NCCL_TESTS_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+(.*)$")
CALIBRATION_REFUSED = 4      # every rank's exit status when the allocation is refused


# A child (nccl-tests, a site tool) starts from this rank's environment less what belongs to whatever started
# the rank: Slurm's step (SLURM_*), its PMI and an MPI's (PMI*, PMIX_*, OMPI_*, PRTE_*): an MPI build of
# nccl-tests reading them tries to join the training step's wire-up; and NCCL_DEBUG_FILE: NCCL opens it with
# fopen(path, "w"), so a child inheriting the rank's would truncate the rank's own NCCL log (its transport,
# GDRDMA, NCCL version: what the report reads). An NCCL child gets a log of its own instead.
CHILD_DROPPED_PREFIXES = ("SLURM_", "PMI", "OMPI_", "PRTE_")


def child_env(env, nccl_log: str | None = None) -> tuple[dict, list[str]]:
    """(the child's environment, the names left out of it)."""
    out, dropped = {}, []
    for k, v in env.items():
        if k == "NCCL_DEBUG_FILE" or k.startswith(CHILD_DROPPED_PREFIXES):
            dropped.append(k)
        else:
            out[k] = v
    if nccl_log:
        out["NCCL_DEBUG_FILE"] = nccl_log
        out.setdefault("NCCL_DEBUG", "INFO")
    return out, sorted(dropped)


def site_tool(argv: list[str], timeout: float = 600, env: dict | None = None) -> dict:
    """A site tool's output kept as a fact: {argv, rc, out}; rc None when it is not installed. It runs in a
    clean environment (child_env) unless given one."""
    import shutil
    import subprocess
    if shutil.which(argv[0]) is None:
        return {"argv": argv, "rc": None, "out": ""}
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                           env=child_env(os.environ)[0] if env is None else env)
    except (OSError, subprocess.SubprocessError) as exc:
        return {"argv": argv, "rc": -1, "out": str(exc)[:2000]}
    return {"argv": argv, "rc": p.returncode, "out": (p.stdout + p.stderr)[-20000:]}


def run_nccl_tests(binary: str, args_text: str, gpus: int, host: str) -> dict:
    """all_reduce_perf on this node's GPUs (-g), as a child with a clean environment and an NCCL log of its own
    (read into its NCCL facts, then removed): {argv, rc, version, bytes, busbw_gbps, rows, out_tail,
    env_dropped, nccl}."""
    log = os.path.join(tempfile.gettempdir(), f"poc-nccl-tests-{host}-{os.getpid()}.log")
    env, dropped = child_env(os.environ, nccl_log=log)
    res = site_tool([binary, *args_text.split(), "-g", str(gpus)], env=env)
    lines = nccl_debug_lines(log)
    with contextlib.suppress(OSError):
        os.unlink(log)
    parsed = parse_nccl_tests(res["out"]) if res["rc"] == 0 else {"rows": []}
    top = parsed["rows"][-1] if parsed["rows"] else None
    return {"argv": res["argv"], "rc": res["rc"], "version": parsed.get("version"),
            "bytes": top["bytes"] if top else None,
            "busbw_gbps": top["ip_busbw_gbps"] if top else None,   # in place, as the workload
            "rows": parsed["rows"], "out_tail": res["out"][-3000:] if res["rc"] else "",
            "env_dropped": dropped, "nccl": nccl_facts(lines) if lines else None}


def parse_smi(text: str) -> list[dict]:
    """nvidia-smi --query-gpu=SMI_FIELDS --format=csv,noheader,nounits -> one dict per GPU."""
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == len(SMI_FIELDS) and cells[0].isdigit():
            out.append(dict(zip(SMI_FIELDS, cells, strict=True)))
    return out


def parse_nccl_tests(text: str) -> dict:
    """all_reduce_perf's table -> {rows: [{bytes, oop_busbw_gbps, ip_busbw_gbps, wrong}], avg_busbw_gbps,
    version}: columns size count type redop root, then time algbw busbw #wrong twice (out-of-place,
    in-place), as nccl-tests 2.x prints them."""
    rows, avg, version = [], None, None
    for line in text.splitlines():
        if line.startswith("# nccl-tests version") or line.startswith("# NCCL version"):
            version = line.lstrip("# ").strip()
        elif "Avg bus bandwidth" in line:
            try:
                avg = float(line.split(":")[-1].split()[0])
            except (ValueError, IndexError):
                pass
        m = NCCL_TESTS_ROW.match(line)
        if not m:
            continue
        cols = m.group(6).split()
        try:
            row = {"bytes": int(m.group(1)), "oop_busbw_gbps": float(cols[2]), "ip_busbw_gbps": float(cols[6]),
                   "wrong": [cols[3], cols[7]]}
        except (ValueError, IndexError):
            continue
        rows.append(row)
    return {"rows": rows, "avg_busbw_gbps": avg, "version": version}


CAP_IPC_LOCK = 14     # linux/capability.h


def cap_ipc_lock() -> bool | None:
    """Whether this process holds CAP_IPC_LOCK (/proc/self/status CapEff); None where it cannot be read."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> CAP_IPC_LOCK & 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def node_facts(torch, device) -> dict:
    facts = {"limits": rlimits(), "cap_ipc_lock": cap_ipc_lock(), "torch": torch.__version__,
             "cuda": torch.version.cuda, "nccl": None}
    if device.type == "cuda":
        try:
            facts["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
        except (AttributeError, RuntimeError, TypeError):
            pass
        smi = site_tool(["nvidia-smi", "--query-gpu=" + ",".join(SMI_FIELDS), "--format=csv,noheader,nounits"])
        facts["nvidia_smi"] = smi
        facts["gpus"] = parse_smi(smi["out"]) if smi["rc"] == 0 else []
        facts["driver"] = facts["gpus"][0]["driver_version"] if facts["gpus"] else None
    ib = site_tool(["ibv_devinfo", "-l"])
    # "2 HCAs found:" then one device per line
    facts["ibv_devices"] = [ln.strip() for ln in ib["out"].splitlines()[1:] if ln.strip()] if ib["rc"] == 0 else None
    ofed = site_tool(["ofed_info", "-s"])
    facts["ofed"] = ofed["out"].strip().rstrip(":") if ofed["rc"] == 0 else None
    return facts


def node_problems(facts: dict, gpus_per_node: int, simulated: bool, min_memlock_kib: int) -> list[str]:
    """Why the node is unhealthy, in words a site engineer acts on; empty when it is not."""
    out = []
    if gpus_per_node and not simulated:
        smi = facts.get("nvidia_smi") or {}
        if smi.get("rc") is None:
            out.append("nvidia-smi is not on the PATH in the job's image")
        elif smi["rc"] != 0:
            out.append(f"nvidia-smi failed (exit {smi['rc']}): {smi['out'].strip()[:200]}")
        elif len(facts.get("gpus") or []) < gpus_per_node:
            out.append(f"{len(facts['gpus'])} of {gpus_per_node} GPUs visible")
        for g in facts.get("gpus") or []:
            ecc = g.get("ecc.errors.uncorrected.volatile.total", "")
            if ecc.isdigit() and int(ecc) > 0:
                out.append(f"GPU {g['index']} has {ecc} uncorrected ECC errors")
    soft = ((facts.get("limits") or {}).get("memlock") or [None])[0]
    # CAP_IPC_LOCK (a pod's securityContext capability) lets a process pin memory whatever its limit
    if (min_memlock_kib and not facts.get("cap_ipc_lock") and soft != "unlimited" and isinstance(soft, int)
            and soft < min_memlock_kib * 1024):
        out.append(f"memlock is {soft // 1024} KiB (ulimit -l), below the {min_memlock_kib} KiB asked for: "
                   "RDMA memory registration would fail or NCCL fall back to sockets")
    return out


def compute_rate(torch, device, seconds: float = 0.5, windows: int = 5) -> dict:
    """Matrix multiplies for about `seconds`, in `windows` windows: this rank's GFLOP/s (bf16 on GPUs, fp32
    on CPUs) as its best window, which a busy neighbour or a preempted moment does not pull down but a
    throttled, slow or failing device cannot raise; every window's rate is kept."""
    n, dtype = (4096, torch.bfloat16) if device.type == "cuda" else (256, torch.float32)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(2):
        a @ b
    sync(torch, device)
    rates, t_start = [], time.perf_counter()
    for _ in range(windows):
        k, t0 = 0, time.perf_counter()
        while True:
            for _ in range(4):
                a @ b
            k += 4
            sync(torch, device)
            took = time.perf_counter() - t0
            if took >= seconds / windows:
                break
        rates.append(2 * n ** 3 * k / took / 1e9)
    return {"what": "matmul", "n": n, "dtype": str(dtype).replace("torch.", ""), "gflops": max(rates),
            "windows": [round(r, 4) for r in rates], "seconds": time.perf_counter() - t_start}


def timed_allreduce(dist, torch, device, nbytes: int, world: int, group=None, iters: int = 5) -> dict:
    """One size all-reduced `iters` times after a warm-up, then checked: {bytes, time_s, busbw_gbps, correct}.
    The timed loop all-reduces the buffer in place and nothing else, as nccl-tests' in-place test does:
    refilling it each time would be timed too (at 8 GiB a fill is a pass over memory about a tenth as long as
    the all-reduce). The loop's sums grow (after the warm-up every rank holds the same sum), so the check is
    one more all-reduce of freshly filled values, after the timed loop."""
    n = max(1, nbytes // 4)
    rank = dist.get_rank(group)
    buf = torch.full((n,), float(rank + 1), dtype=torch.float32, device=device)
    dist.all_reduce(buf, group=group)
    sync(torch, device)
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf, group=group)
    sync(torch, device)
    took = (time.perf_counter() - t0) / iters
    buf.fill_(float(rank + 1))
    dist.all_reduce(buf, group=group)
    sync(torch, device)
    correct = bool((buf[:1024] == float(world * (world + 1) // 2)).all().item())
    _, busbw = bw_figures(n * 4, took, world)
    del buf
    return {"bytes": n * 4, "time_s": took, "busbw_gbps": busbw if correct else None, "correct": correct}


def verdict(ranks: list[dict], min_ratio: float) -> tuple[list[dict], list[dict]]:
    """Every rank's calibration -> (nodes, refused): per node its ranks, facts, problems, slowest rank's
    GFLOP/s and its share of the nodes' median, nccl-tests' and the workload's intra-node busbw.
    Computed alike on every rank from the same all-gathered list, so all agree without a broadcast."""
    by_host: dict[str, dict] = {}
    for r in sorted(ranks, key=lambda r: r["rank"]):
        node = by_host.setdefault(r["host"], {"host": r["host"], "node": r.get("node") or r["host"], "ranks": [],
                                              "gflops": None, "facts": None, "problems": [], "nccl_tests": None,
                                              "intra_node": None})
        node["ranks"].append(r["rank"])
        g = r["compute"]["gflops"]
        node["gflops"] = g if node["gflops"] is None else min(node["gflops"], g)
        for key in ("facts", "problems", "nccl_tests", "intra_node"):
            if r.get(key):
                node[key] = r[key]
    nodes = list(by_host.values())
    med = statistics_median([n["gflops"] for n in nodes])
    busbws = [n["nccl_tests"]["busbw_gbps"] for n in nodes if (n["nccl_tests"] or {}).get("busbw_gbps")]
    med_bw = statistics_median(busbws) if busbws else None
    refused = []
    for n in nodes:
        n["compute_ratio"] = n["gflops"] / med if med else None
        why = list(n["problems"])
        if len(nodes) > 1 and n["compute_ratio"] is not None and n["compute_ratio"] < min_ratio:
            why.append(f"matmul {n['gflops']:.3g} GFLOP/s is {n['compute_ratio']:.2f} of the nodes' median "
                       f"{med:.3g} (at least {min_ratio:g} asked for)")
        bw = (n["nccl_tests"] or {}).get("busbw_gbps")
        if med_bw and bw is not None and len(busbws) > 1 and bw / med_bw < min_ratio:
            why.append(f"nccl-tests busbw {bw:.3g} GB/s is {bw / med_bw:.2f} of the nodes' median {med_bw:.3g}")
        if why:
            refused.append({"host": n["host"], "node": n["node"], "why": why})
    return nodes, refused


def statistics_median(xs: list[float]) -> float | None:
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2


def calibrate(args, ev: Events, dist, torch, device, backend: str) -> bool:
    """The calibration phase on every rank; False when the allocation is refused (rank 0 said why)."""
    t0 = time.perf_counter()
    world, rank = dist.get_world_size(), dist.get_rank()
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    # the objects go over a gloo group: ranks waiting for local rank 0's nccl-tests wait on the CPU, not
    # in an NCCL kernel spinning on the GPUs nccl-tests is measuring
    cpu = dist.new_group(backend="gloo")
    # the node as its scheduler names it (what an exclusion takes), which need not be its host name
    node = ev.node or ev.host
    mine: dict = {"rank": rank, "host": ev.host, "node": node, "local_rank": ev.local_rank,
                  "compute": compute_rate(torch, device, args.calibrate_seconds)}
    if ev.local_rank == 0:
        mine["facts"] = node_facts(torch, device)
        mine["problems"] = node_problems(mine["facts"], args.gpus_per_node, args.simulated_gpus,
                                         args.calibrate_min_memlock_kib)
        if device.type == "cuda" and args.nccl_tests:
            mine["nccl_tests"] = run_nccl_tests(args.nccl_tests, args.nccl_tests_args, local_world, ev.host)
    # the node's ranks as a group of their own: the workload's intra-node all-reduce beside nccl-tests'
    hosts = [None] * world
    dist.all_gather_object(hosts, ev.host, group=cpu)
    groups = {}
    for h in sorted(set(hosts)):
        members = [r for r, x in enumerate(hosts) if x == h]
        groups[h] = dist.new_group(members)
    if local_world > 1:
        top = (mine.get("nccl_tests") or {}).get("bytes") or args.calibrate_bytes
        got = timed_allreduce(dist, torch, device, top, local_world, group=groups[ev.host])
        if ev.local_rank == 0:
            mine["intra_node"] = got
    job = timed_allreduce(dist, torch, device, args.calibrate_bytes, world)
    ranks = [None] * world
    dist.all_gather_object(ranks, mine, group=cpu)
    nodes, refused = verdict(ranks, args.calibrate_min_ratio)
    took = time.perf_counter() - t0
    if rank == 0:
        ev.emit("calibration", ok=not refused and job["correct"], nodes=nodes, refused=refused,
                job_allreduce={**job, "backend": backend, "world_size": world}, min_ratio=args.calibrate_min_ratio,
                min_memlock_kib=args.calibrate_min_memlock_kib, seconds=took)
    ev.emit("calibration_done", seconds=took)
    if refused and rank == 0:
        first = refused[0]
        names = ",".join(r.get("node") or r["host"] for r in refused)
        msg = (f"calibration refused node {first.get('node') or first['host']}: " + "; ".join(first["why"])
               + (f" (and {len(refused) - 1} more node(s))" if len(refused) > 1 else ""))
        tip = (f"exclude it and tell the site: on Slurm slurm.extra_sbatch: ['--exclude={names}'], on Kubernetes "
               "kubernetes.pod.affinity with a nodeAffinity term matchFields metadata.name NotIn "
               f"[{names}]; calibration.min_peer_ratio and calibration.min_memlock_kib set the bar")
    elif not job["correct"] and rank == 0:    # no node to blame: the job's all-reduce itself is wrong
        msg = f"calibration: the {backend} all-reduce over the whole job gave a wrong sum"
        tip = ("no node fell below its peers: check the fabric settings (fabric.env, NCCL_*/GLOO_* in the run's "
               "comm facts) and the image's torch/NCCL build; a wrong sum is a broken collective, not a slow node")
    if (refused or not job["correct"]) and rank == 0:
        ev.emit("workload_error", error="calibration", message=msg, tip=tip, refused=refused)
        print(f"poc-workload: ERROR {msg}\npoc-workload: TIP {tip}", file=sys.stderr, flush=True)
    return not refused and job["correct"]



# What the job ran on, so a report can refuse to compare different builds or transports.
COMM_ENV = ("NCCL_", "GLOO_", "TORCH_NCCL_", "TORCH_GLOO_")
NCCL_VIA = re.compile(r"\bvia (\S+)")
NCCL_NET = re.compile(r"NCCL INFO Using network (\S+)")


def torch_build(torch) -> dict:
    nccl = None
    if torch.cuda.is_available():
        try:
            v = torch.cuda.nccl.version()
            nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except (AttributeError, RuntimeError):
            nccl = None
    return {"version": torch.__version__, "git_version": getattr(torch.version, "git_version", None),
            "cuda": torch.version.cuda, "nccl": nccl, "debug": bool(getattr(torch.version, "debug", False))}


def comm_env() -> dict[str, str]:
    # plus every name the harness's fabric.env set (POC_FABRIC_ENV lists them: UCX_*, FI_*, ...)
    fabric = set(os.environ.get("POC_FABRIC_ENV", "").split(","))
    return {k: os.environ[k] for k in sorted(os.environ) if k.startswith(COMM_ENV) or k in fabric}


def gloo_transport() -> str:
    # gloo has one transport here (TCP); which interface carries it is a setting, kept apart as
    # comm["interface"], so that naming the interface on one platform is not read as another transport
    return "tcp"


def gloo_interface() -> str:
    return os.environ.get("GLOO_SOCKET_IFNAME") or "default (the address the hostname resolves to)"


def nccl_transport(lines) -> str:
    """The paths NCCL reported in its INFO lines ("Channel 00/0 : 0[0] -> 1[1] via NET/IB/0",
    "via P2P/CUMEM/read", "via SHM/direct/direct", "Using network Socket"), e.g. "NET/IB+P2P"."""
    kinds, net = set(), None
    for line in lines:
        m = NCCL_NET.search(line)
        net = m.group(1) if m else net
        for via in NCCL_VIA.findall(line):
            parts = via.split("/")
            kinds.add("/".join(parts[:2]) if parts[0] == "NET" else parts[0])
    if kinds:
        return "+".join(sorted(kinds))
    return f"network {net} (no channel lines)" if net else "unknown (no NCCL INFO lines seen)"


NCCL_VERSION = re.compile(r"NCCL INFO NCCL version (\S+)")
NCCL_USING = re.compile(r"NCCL INFO NET/(\w+) ?: Using (.+)$")


def nccl_facts(lines) -> dict:
    """What NCCL's INFO lines say about the path beyond its name: its version, the network and its
    plugin, the interfaces or HCAs it took, every distinct channel path ("NET/IB/0/GDRDMA", "P2P/CUMEM/read"),
    whether GPUDirect RDMA and NVLink SHARP (NVLS) were used. The algorithm and protocol per size are
    not in INFO lines (NCCL_ALGO/NCCL_PROTO, when set, are in the recorded environment)."""
    facts: dict = {"version": None, "network": None, "net_plugin": [], "using": None, "paths": [],
                   "gdrdma": False, "nvls": False}
    paths = set()
    for line in lines:
        if (m := NCCL_VERSION.search(line)) and not facts["version"]:
            facts["version"] = m.group(1)
        if m := NCCL_NET.search(line):
            facts["network"] = m.group(1)
        if "NET/Plugin" in line:
            said = line.split("NCCL INFO", 1)[-1].strip()
            if said not in facts["net_plugin"] and len(facts["net_plugin"]) < 5:
                facts["net_plugin"].append(said)
        if m := NCCL_USING.search(line):
            facts["using"] = f"{m.group(1)}: {m.group(2).strip()}"
        for via in NCCL_VIA.findall(line):
            paths.add(via)
            facts["gdrdma"] = facts["gdrdma"] or via.endswith("/GDRDMA")
        if "NVLS" in line and ("multicast support is available" in line or "NVLS comm" in line):
            facts["nvls"] = True
    facts["paths"] = sorted(paths)[:50]
    return facts


def nccl_debug_lines(pattern: str) -> list[str]:
    path = pattern.replace("%h", socket.gethostname()).replace("%p", str(os.getpid()))
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return [ln for ln in f if "NCCL INFO" in ln]
    except OSError:
        return []


class StderrTap:
    """NCCL writes its INFO lines from C to file descriptor 2, which Python cannot read back: put
    a pipe there, and let a thread keep those lines and pass everything on unchanged."""

    def __init__(self):
        import threading
        self.lines: list[str] = []
        sys.stderr.flush()
        self.saved = os.dup(2)
        self.read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        rest = b""
        while chunk := os.read(self.read_end, 65536):
            os.write(self.saved, chunk)
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            self.lines += [ln.decode(errors="replace") for ln in lines if b"NCCL INFO" in ln]

    def close(self) -> list[str]:
        sys.stderr.flush()
        os.dup2(self.saved, 2)      # drops the pipe's last write end: the thread reads to its end
        self.thread.join(timeout=5)
        os.close(self.saved)
        os.close(self.read_end)
        return self.lines


def watch_nccl():
    """How to learn NCCL's transport: () -> its INFO lines, and where they came from. With
    NCCL_DEBUG unset the workload sets NCCL_DEBUG=INFO and sends the lines to a file of its own
    (NCCL_DEBUG_FILE), so nobody's stderr changes; the user's own INFO goes to stderr: tap it."""
    level = os.environ.get("NCCL_DEBUG")
    if level is None:
        path = os.path.join(tempfile.gettempdir(), f"poc-nccl-{socket.gethostname()}-{os.getpid()}.log")
        os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_FILE=path)

        def read() -> list[str]:
            lines = nccl_debug_lines(path)
            with contextlib.suppress(OSError):
                os.unlink(path)
            return lines
        return read, "NCCL_DEBUG=INFO set by the workload, to a file"
    if level.upper() not in ("INFO", "TRACE"):
        return (lambda: None), f"NCCL_DEBUG={level}: no INFO lines"
    if "NCCL_DEBUG_FILE" in os.environ:
        return (lambda: nccl_debug_lines(os.environ["NCCL_DEBUG_FILE"])), f"NCCL_DEBUG={level}, NCCL_DEBUG_FILE"
    tap = StderrTap()
    return tap.close, f"NCCL_DEBUG={level}, stderr"


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


# The transformer: decoder-only, pre-norm, causal attention, MLP 4x, tied embedding, so that step
# time, activation memory and the gradient all-reduce volume resemble a language model's.
def transformer_params(d: int, layers: int, vocab: int, seq_len: int) -> int:
    """Exactly what build_transformer allocates: per block qkv + out 4d^2, MLP 8d^2, two LayerNorms
    4d; token embedding (also the output layer) V*d, learned positions S*d, final LayerNorm 2d."""
    return layers * (12 * d * d + 4 * d) + (vocab + seq_len) * d + 2 * d


def transformer_dims(params: int, layers: int, vocab: int, seq_len: int) -> dict:
    """The width that brings the count closest to `params` (pure: a 1G model is planned, not built).
    d_model is a multiple of 64 when large (of 32, 16, ... below, where a step of 64 would miss the
    count by more than ~6%); heads = d_model/64, or the largest divisor of d_model below it."""
    layers = max(1, layers)
    lin = 4 * layers + vocab + seq_len + 2
    root = (-lin + math.sqrt(lin * lin + 48 * layers * max(params, 1))) / (24 * layers)
    step = max(s for s in (1, 2, 4, 8, 16, 32, 64) if s <= max(1.0, 0.06 * root))
    low = max(step, int(root // step) * step)
    d = min((low, low + step), key=lambda c: abs(transformer_params(c, layers, vocab, seq_len) - params))
    heads = max(h for h in range(1, max(1, d // 64) + 1) if d % h == 0)
    return {"d_model": d, "heads": heads, "layers": layers, "vocab_size": vocab, "seq_len": seq_len,
            "params": transformer_params(d, layers, vocab, seq_len)}


def build_transformer(torch, dims: dict):
    nn, F = torch.nn, torch.nn.functional
    d, heads, vocab, seq_len = dims["d_model"], dims["heads"], dims["vocab_size"], dims["seq_len"]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.out = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
            self.up, self.down = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.out(att.transpose(1, 2).reshape(b, s, d))
            return x + self.down(F.gelu(self.up(self.norm2(x))))

    class DecoderLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens, self.positions = nn.Embedding(vocab, d), nn.Embedding(seq_len, d)
            nn.init.normal_(self.tokens.weight, std=0.02)     # tied output: N(0, 1) would give huge logits
            nn.init.normal_(self.positions.weight, std=0.02)
            self.blocks = nn.ModuleList(Block() for _ in range(dims["layers"]))
            self.norm = nn.LayerNorm(d)

        def forward(self, idx):
            x = self.tokens(idx) + self.positions(torch.arange(idx.shape[1], device=idx.device))
            for block in self.blocks:
                x = block(x)
            return F.linear(self.norm(x), self.tokens.weight)

    return DecoderLM()


def token_batch(torch, gen, batch: int, seq_len: int, vocab: int):
    """batch x (seq_len + 1) tokens, each row an arithmetic sequence mod vocab (random start and
    stride 1..8): learnable from the context, so the loss falls as in real training."""
    start = torch.randint(0, vocab, (batch, 1), generator=gen)
    stride = torch.randint(1, 9, (batch, 1), generator=gen)
    return (start + stride * torch.arange(seq_len + 1)) % vocab


def pick_precision(requested: str, device, torch) -> str:
    if requested == "auto":
        return "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    return requested


def autocast(torch, device, precision: str):
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def setup_model(args, torch, device) -> dict:
    """The model on `device` and what training it needs: batch(gen) -> (x, y), loss(out, y), the
    optimizer, DDP options, torch.load options, and the facts train_start records."""
    if args.model == "mlp":     # the smoke model: SGD, random regression, exactly as before issue 11
        model, width = build_model(torch, parse_size(args.model_params), args.layers, None)

        def mlp_batch(gen):
            x = torch.randn(args.batch, width, generator=gen).to(device)
            return x, torch.randn(args.batch, width, generator=gen).to(device)
        return {"model": model.to(device), "width": width, "batch": mlp_batch,
                "loss": torch.nn.functional.mse_loss, "optimizer": lambda ps: torch.optim.SGD(ps, lr=1e-3),
                "ddp": {}, "load": {"map_location": device}, "ckpt_extra": {}, "facts": {}}
    dims = transformer_dims(parse_size(args.model_params), args.layers, args.vocab_size, args.seq_len)
    # built on its device directly: a 1G model would otherwise pass through host memory first
    with device if hasattr(device, "__enter__") else contextlib.nullcontext():
        model = build_transformer(torch, dims)

    def token_pairs(gen):
        t = token_batch(torch, gen, args.batch, dims["seq_len"], dims["vocab_size"])
        return t[:, :-1].to(device), t[:, 1:].to(device)

    def next_token_loss(logits, y):
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    # AdamW (16 bytes a parameter with fp32 weights and gradients) as real training; gradients as
    # views of DDP's buckets, no second copy; checkpoints read through mmap, not a whole copy in memory
    return {"model": model, "width": dims["d_model"], "batch": token_pairs, "loss": next_token_loss,
            "optimizer": lambda ps: torch.optim.AdamW(ps, lr=3e-4, weight_decay=0.0),
            "ddp": {"gradient_as_bucket_view": True}, "load": {"map_location": "cpu", "mmap": True},
            "ckpt_extra": {"model_kind": "transformer", "dims": dims},
            "facts": {"d_model": dims["d_model"], "heads": dims["heads"], "seq_len": dims["seq_len"],
                      "vocab_size": dims["vocab_size"], "tokens_per_step": args.batch * dims["seq_len"]}}


def peak_memory(torch, device) -> dict:
    import resource
    out = {"max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}   # Linux: KiB
    if device.type == "cuda":
        out["max_gpu_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
    return out


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), what a CPU run's step time and matmul rate belong to."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or "cpu"


def checkpoints(ckpt_dir: str) -> list[tuple[int, str]]:
    """(step, path) of every complete checkpoint in ckpt_dir, oldest first."""
    if not ckpt_dir or not os.path.isdir(ckpt_dir):
        return []
    found = []
    for name in os.listdir(ckpt_dir):
        m = re.fullmatch(r"ckpt-(\d+)\.pt", name)
        if m:
            found.append((int(m.group(1)), os.path.join(ckpt_dir, name)))
    return sorted(found)


def newest_checkpoint(ckpt_dir: str) -> str | None:
    found = checkpoints(ckpt_dir)
    return found[-1][1] if found else None


def rotate_checkpoints(ckpt_dir: str, keep: int) -> list[str]:
    """Remove all but the newest `keep` checkpoints (keep 0: none removed); the paths removed. A resumed
    run needs only the newest, and a shared file system's quota is not this benchmark's to fill."""
    if keep <= 0:
        return []
    gone = []
    for _step, path in checkpoints(ckpt_dir)[:-keep]:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
            gone.append(path)
    return gone


def fs_type(path: str) -> str | None:
    """The file system type under path (the longest mount point of /proc/mounts that holds it): where a
    checkpoint's save and load time comes from (lustre, nfs4, overlay, ext4, ...)."""
    try:
        with open("/proc/mounts") as f:
            mounts = [ln.split() for ln in f if len(ln.split()) >= 3]
    except OSError:
        return None
    real = os.path.realpath(path)
    best = None
    for m in mounts:
        point = m[1].replace("\\040", " ")
        if (real == point or real.startswith(point.rstrip("/") + "/")) and (best is None or len(point) > len(best[1])):
            best = (m[2], point)
    return best[0] if best else None


def cpu_ranges(cpus) -> str:
    """{0, 1, 2, 5} -> "0-2,5" (the kernel's cpulist form)."""
    out, run = [], []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def parse_cpulist(text: str) -> set[int]:
    """The kernel's cpulist ("0-3,8-11") -> {0, 1, 2, 3, 8, 9, 10, 11}."""
    out: set[int] = set()
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-", 1)
            out.update(range(int(a), int(b) + 1))
        elif part.strip():
            out.add(int(part))
    return out


def binding() -> dict:
    """Where this rank may run: its CPU affinity (what srun --cpu-bind, a cgroup's cpuset or the kubelet's
    CPU manager left it) and the NUMA nodes those CPUs belong to; a rank spread over sockets, or not
    beside its GPU, steps slower for reasons no scheduler figure shows."""
    try:
        mine = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return {}
    numa = []
    base = "/sys/devices/system/node"
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(base)):
            if re.fullmatch(r"node\d+", name):
                with open(os.path.join(base, name, "cpulist")) as f:
                    if parse_cpulist(f.read()) & mine:
                        numa.append(int(name[4:]))
    return {"cpus": cpu_ranges(mine), "ncpus": len(mine), "numa_nodes": numa}


def rlimits() -> dict:
    """This rank's resource limits as it runs ({name: [soft, hard]}, "unlimited" for RLIM_INFINITY): the
    scheduler decides them (Slurm propagates the submitting shell's unless told not to; a container
    runtime sets its own), and a low memlock makes RDMA memory registration fail or NCCL fall back
    to sockets."""
    try:
        import resource
    except ImportError:      # not a POSIX system
        return {}
    out = {}
    for name in ("MEMLOCK", "NOFILE", "STACK", "NPROC"):
        try:
            pair = resource.getrlimit(getattr(resource, "RLIMIT_" + name))
        except (AttributeError, ValueError, OSError):
            continue
        out[name.lower()] = ["unlimited" if v == resource.RLIM_INFINITY else v for v in pair]
    return out


def write_owner_mark(path: str, owner: str) -> None:
    """The run directory's owner mark (mode 0600), once: every rank tries, the first creates it (O_EXCL),
    and a mark already there (the harness's, a restart's, another campaign's) is left as it is. Never
    through a symbolic link, and never in a directory another user owns: a mark written there would hand
    them the value that makes their directory pass for this run's."""
    if not path or not owner:
        return
    where = os.path.dirname(path) or "."
    try:
        os.makedirs(where, mode=0o700, exist_ok=True)
        dfd = os.open(where, DIR_FLAGS)
    except OSError as exc:
        print(f"poc-workload: could not write the owner mark {path}: {exc}", file=sys.stderr, flush=True)
        return
    try:
        if os.fstat(dfd).st_uid != os.geteuid():
            print(f"poc-workload: not writing the owner mark in {where}: another user owns it", file=sys.stderr,
                  flush=True)
            return
        fd = os.open(os.path.basename(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600,
                     dir_fd=dfd)
    except FileExistsError:
        return
    except OSError as exc:
        print(f"poc-workload: could not write the owner mark {path}: {exc}", file=sys.stderr, flush=True)
        return
    finally:
        os.close(dfd)
    with os.fdopen(fd, "w") as f:
        f.write(owner)


# ------------------------------------------------------------------ loading a checkpoint safely
# On a shared file system a co-user who can reach the checkpoint directory could plant a checkpoint in it,
# and torch.load without weights_only unpickles it: any code they like, run as this user (torch 2.4's
# default; 2.6 made weights_only the default). So a checkpoint is loaded only from a directory shown to be
# the run's own, and only as tensors and plain values.
CHECKPOINT_REFUSED = 5   # every rank's exit status when it will not load from (or start over in) the directory
CKPT_NAME = re.compile(r"ckpt-(\d+)\.pt")
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
CKPT_TIP = ("nothing was loaded; if the directory is yours (made by an older harness, or changed by hand), remove "
            "it and run again; else someone else can write where this run keeps its checkpoints: use a directory "
            "only you can write (slurm.workdir, slurm.checkpoint_dir)")


class CheckpointRefused(Exception):
    """The run's checkpoints cannot be trusted: a directory that is not its own, or a checkpoint that does
    not load as tensors and plain values. The run stops (loudly) rather than load it or start over in it:
    starting over would go on writing checkpoints where someone else can read and replace them, and would
    hide that they could."""


def _own(st: os.stat_result, what: str) -> None:
    if st.st_uid != os.geteuid():
        raise CheckpointRefused(f"{what} is owned by uid {st.st_uid}, not this job's uid {os.geteuid()}")
    if st.st_mode & 0o022:
        raise CheckpointRefused(f"{what} is writable by other users (mode {stat.S_IMODE(st.st_mode):o})")


def _open_own_dir(name: str, what: str, dir_fd: int | None = None) -> int | None:
    """A descriptor of the directory `name` (relative to dir_fd if given) once it is shown to be this
    user's and writable by no one else; None when it does not exist. Never through a symbolic link."""
    try:
        fd = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:   # ELOOP: a symbolic link; ENOTDIR: something else
        raise CheckpointRefused(f"{what} is not a directory of its own ({exc.strerror})") from None
    try:
        _own(os.fstat(fd), what)
    except CheckpointRefused:
        os.close(fd)
        raise
    return fd


def _check_mark(dir_fd: int, name: str, where: str, owner: str) -> None:
    try:   # O_NONBLOCK: a FIFO planted as the mark is refused below instead of hanging the read
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except FileNotFoundError:
        raise CheckpointRefused(f"{where} holds no owner mark") from None
    except OSError as exc:
        raise CheckpointRefused(f"the owner mark in {where} cannot be read safely ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise CheckpointRefused(f"the owner mark in {where} is not a file")
        _own(st, f"the owner mark in {where}")
        text = f.read(4096).decode("utf-8", errors="replace")
    if not hmac.compare_digest(text.encode(), owner.encode()):
        raise CheckpointRefused(f"the owner mark in {where} is not this run's")


def checkpoint_dir_fd(ckpt_dir: str, mark_path: str = "", owner: str = "") -> int | None:
    """A descriptor of the run's checkpoint directory once it is shown to be the run's own; None when there
    is none (a fresh start); CheckpointRefused when it is there and not the run's own.

    Its own: owned by this job's uid and writable by no one else, and where the harness gave the run's owner
    mark (mark_path, owner), every directory from the one holding the mark down to it likewise, and the mark
    exactly the one given. Everything is opened without following a symbolic link and read through these
    descriptors, so a directory swapped in after the check is never the one read."""
    if not ckpt_dir:
        return None
    if not (mark_path and owner):
        return _open_own_dir(ckpt_dir, f"the checkpoint directory {ckpt_dir}")
    top = os.path.dirname(os.path.normpath(mark_path)) or "."
    rel = os.path.relpath(os.path.normpath(ckpt_dir), top)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        raise CheckpointRefused(f"the checkpoint directory {ckpt_dir} is not in {top}, which holds the owner mark")
    top_fd = _open_own_dir(top, f"the run's directory {top}")
    if top_fd is None:
        return None
    fd: int | None = os.dup(top_fd)
    try:
        for part in [] if rel == os.curdir else rel.split(os.sep):
            below = _open_own_dir(part, f"{part}/ in {top}", dir_fd=fd)
            os.close(fd)
            fd = below
            if fd is None:
                return None
        # there is a directory to load from: it is this run's only under this run's mark
        _check_mark(top_fd, os.path.basename(mark_path), top, owner)
        found, fd = fd, None
        return found
    finally:
        os.close(top_fd)
        if fd is not None:
            os.close(fd)


def safe_load(torch, fd: int, load_kwargs: dict):
    """torch.load of the open checkpoint file fd with weights_only=True: tensors and plain values, never an
    object a pickle names. A torch without weights_only (before 1.13) is refused: it can only unpickle."""
    if "weights_only" not in inspect.signature(torch.load).parameters:
        raise CheckpointRefused(f"torch {getattr(torch, '__version__', '?')} has no torch.load(weights_only=...): "
                                "a checkpoint cannot be read without unpickling whatever it holds")
    proc = f"/proc/self/fd/{fd}"   # the file already opened and checked, by a name mmap can use
    try:
        if os.path.exists(proc):
            return torch.load(proc, weights_only=True, **load_kwargs)
        with os.fdopen(os.dup(fd), "rb") as f:
            return torch.load(f, weights_only=True, **{k: v for k, v in load_kwargs.items() if k != "mmap"})
    except Exception as exc:   # noqa: BLE001 - whatever torch raised, the refusal says it in one line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise CheckpointRefused(f"the checkpoint does not load as tensors and plain values: {first}") from None


def load_newest_checkpoint(torch, dir_fd: int, ckpt_dir: str, load_kwargs: dict):
    """(state, path, bytes) of the newest checkpoint in the checked directory dir_fd, or None."""
    found = sorted((int(m.group(1)), n) for n in os.listdir(dir_fd) if (m := CKPT_NAME.fullmatch(n)))
    if not found:
        return None
    name = found[-1][1]
    path = os.path.join(ckpt_dir, name)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError as exc:
        raise CheckpointRefused(f"{path} cannot be opened safely ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise CheckpointRefused(f"{path} is not a file of this job's uid {os.geteuid()}")
        return safe_load(torch, fd, load_kwargs), path, st.st_size
    finally:
        os.close(fd)


def refuse_checkpoint(ev: Events, exc: CheckpointRefused) -> int:
    ev.emit("workload_error", error="checkpoint", message=str(exc), tip=CKPT_TIP)
    print(f"poc-workload: ERROR {exc}", file=sys.stderr, flush=True)
    return CHECKPOINT_REFUSED


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-id", default=os.environ.get("POC_RUN_ID", "adhoc"))
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=64, help="per-rank batch size")
    ap.add_argument("--model-params", default="4M", help="approximate parameter count, e.g. 4M, 1G")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--ckpt-dir", default="")
    ap.add_argument("--ckpt-every", type=int, default=10)
    ap.add_argument("--ckpt-keep", type=int, default=0, help="keep the newest N checkpoints (0: all)")
    ap.add_argument("--sweep", default=DEFAULT_SWEEP, help="sizes: LO:HI (powers of two) or a,b,c; empty skips")
    ap.add_argument("--sweep-warmup", type=int, default=DEFAULT_WARMUP)
    ap.add_argument("--sweep-iters", type=int, default=DEFAULT_ITERS)
    ap.add_argument("--sweep-max-s", type=float, default=2.0,
                    help="cap on one size's timed loop; fewer iterations (agreed by all ranks) above it; 0: none")
    ap.add_argument("--sweep-on-restart", action="store_true", help="repeat the sweep after a restart")
    ap.add_argument("--backend", choices=["auto", "nccl", "gloo"], default="auto")
    ap.add_argument("--events-dir", default="")
    # the model's shape and precision
    ap.add_argument("--model", choices=["mlp", "transformer"], default="mlp")
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--vocab-size", type=int, default=32000)
    ap.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto")
    ap.add_argument("--gpus-per-node", type=int, default=0)
    ap.add_argument("--simulated-gpus", action="store_true")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--owner-mark", default="",
                    help="the owner mark's file, in the directory that holds (or is) --ckpt-dir")
    ap.add_argument("--owner", default="", help="the run's owner mark: a checkpoint is loaded only under it")
    ap.add_argument("--calibrate", action="store_true", help="check the allocation before training (calibration)")
    ap.add_argument("--calibrate-min-ratio", type=float, default=0.5)
    ap.add_argument("--calibrate-min-memlock-kib", type=int, default=0)
    ap.add_argument("--calibrate-seconds", type=float, default=0.5)
    ap.add_argument("--calibrate-bytes", type=int, default=16 << 20)
    ap.add_argument("--nccl-tests", default="", help="all_reduce_perf to run on each node (GPUs), if installed")
    ap.add_argument("--nccl-tests-args", default="-b 8 -e 8G -f 2")
    args = ap.parse_args(argv)
    write_owner_mark(args.owner_mark, args.owner)

    ev = Events(args.run_id, args.events_dir or None)
    try:
        ev.emit("process_start", argv=sys.argv[1:] if argv is None else list(argv), python=sys.version.split()[0],
                limits=rlimits(), binding=binding())
        return run(args, ev)
    finally:
        ev.close()


def run(args, ev: Events) -> int:
    import torch  # imported after the first event: the import itself is part of launch time
    import torch.distributed as dist

    gpus = {"gpus_per_node": args.gpus_per_node, "simulated_gpus": args.simulated_gpus, "gpu_env": gpu_env()}
    try:
        backend, device = place(args, torch, ev.local_rank, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except GpuError as exc:
        # before the rendezvous, so every rank stops at once instead of waiting for its peers
        ev.emit("workload_error", error="gpus", message=str(exc), torch_build=torch_build(torch),
                gpus=torch.cuda.device_count(), **gpus)
        print(f"poc-workload: ERROR {exc}", file=sys.stderr, flush=True)
        return 2
    # Before the rendezvous too, so every rank stops at once: the checkpoint directory, if there is one,
    # must be the run's own before anything is read from it (its descriptor is what is read later).
    try:
        ckpt_fd = checkpoint_dir_fd(args.ckpt_dir, args.owner_mark, args.owner)
    except CheckpointRefused as exc:
        return refuse_checkpoint(ev, exc)
    try:
        return train(args, ev, torch, dist, backend, device, gpus, ckpt_fd)
    finally:
        if ckpt_fd is not None:
            os.close(ckpt_fd)


def train(args, ev: Events, torch, dist, backend: str, device, gpus: dict, ckpt_fd: int | None) -> int:
    if device.type == "cuda":
        torch.cuda.set_device(device)
    comm = {"backend": backend, "env": comm_env(),
            "transport": gloo_transport() if backend == "gloo" else None}
    ev.emit("torch_imported", torch=torch.__version__, backend=backend, device=str(device),
            device_name=torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name(),
            cuda=torch.version.cuda, gpus=torch.cuda.device_count(), torch_build=torch_build(torch), comm=comm,
            **gpus)
    # the transport NCCL chooses is in its INFO lines only (after the environment was recorded)
    nccl_lines, how = watch_nccl() if backend == "nccl" else ((lambda: None), None)
    try:
        dist.init_process_group(backend=backend)
        # Agree on the attempt: after a restart, torchrun bumps the restart count only on
        # the agent whose worker failed, while its peers restart with their old count.
        agreed = torch.tensor(ev.attempt, dtype=torch.int64, device=device)
        dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
        ev.attempt = [int(x) for x in agreed.tolist()]
        ev.world_size = dist.get_world_size()
        ev.emit("rendezvous_done", master=os.environ.get("MASTER_ADDR", ""), backend=backend)

        if args.calibrate and not calibrate(args, ev, dist, torch, device, backend):
            return CALIBRATION_REFUSED
        first_attempt = not any(ev.attempt)
        if args.sweep and (first_attempt or args.sweep_on_restart):
            ev.emit("sweep_start")
            allreduce_sweep(ev, dist, torch, device, sweep_sizes(args.sweep), args.sweep_warmup,
                            args.sweep_iters, args.sweep_max_s)
            ev.emit("sweep_done")
    finally:
        lines = nccl_lines()        # before any error is printed: a tapped stderr is restored here
    if backend == "nccl":
        comm["transport"] = nccl_transport(lines) if lines is not None else f"unknown ({how})"
        comm["transport_source"] = how
        comm["nccl"] = nccl_facts(lines or [])
    else:
        comm["interface"] = gloo_interface()
        comm["transport_source"] = "GLOO_SOCKET_IFNAME" if "GLOO_SOCKET_IFNAME" in os.environ else "gloo default"
    ev.emit("comm", **comm)

    torch.manual_seed(args.seed)
    precision = pick_precision(args.precision, device, torch)
    w = setup_model(args, torch, device)
    model = w["model"]
    nparams = sum(p.numel() for p in model.parameters())
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None,
                                                    **w["ddp"])
    opt = w["optimizer"](ddp.parameters())

    start_step = 0
    t0 = time.perf_counter()
    try:   # every rank reads the same files: all stop alike
        found = None if ckpt_fd is None else load_newest_checkpoint(torch, ckpt_fd, args.ckpt_dir, w["load"])
    except CheckpointRefused as exc:
        return refuse_checkpoint(ev, exc)
    if found:
        state, path, size = found
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start_step = int(state["step"])
        del state, found
        ev.emit("checkpoint_loaded", step=start_step, path=path, load_s=time.perf_counter() - t0,
                bytes=size, fs=fs_type(path))
    else:
        ev.emit("checkpoint_loaded", step=0, path=None, load_s=0.0)

    def save_checkpoint(step: int, why: str) -> None:
        t1 = time.perf_counter()
        os.makedirs(args.ckpt_dir, mode=0o700, exist_ok=True)   # only this user's: see checkpoint_dir_fd
        final = os.path.join(args.ckpt_dir, f"ckpt-{step}.pt")
        tmp = final + f".tmp-{ev.pid}"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, **w["ckpt_extra"]}, tmp)
        os.replace(tmp, final)  # readers never see a half-written checkpoint
        took = time.perf_counter() - t1
        removed = rotate_checkpoints(args.ckpt_dir, args.ckpt_keep)
        ev.emit("checkpoint_saved", step=step, path=final, save_s=took, why=why, bytes=os.path.getsize(final),
                fs=fs_type(args.ckpt_dir), removed=removed)

    # A scheduler's warning before the time limit (Slurm --signal, SIGUSR1): rank 0 saves at the
    # end of the current step. No collective, so ranks that did not get the signal are not held up.
    warned = []
    signal.signal(signal.SIGUSR1, lambda signum, frame: warned.append(signum))

    gen = torch.Generator(device="cpu")
    ev.emit("train_start", start_step=start_step, steps=args.steps, params=nparams, width=w["width"],
            layers=args.layers, batch=args.batch, model=args.model, params_requested=parse_size(args.model_params),
            precision=precision, precision_requested=args.precision, grad_bytes=grad_bytes,
            optimizer=type(opt).__name__, device=str(device), simulated_gpus=args.simulated_gpus, **w["facts"])
    for step in range(start_step + 1, args.steps + 1):
        t0 = time.perf_counter()
        # Data depends on (seed, step, rank) only, so a resumed run sees what it would have seen.
        gen.manual_seed(args.seed * 1_000_003 + step * 1009 + ev.rank)
        x, y = w["batch"](gen)
        opt.zero_grad(set_to_none=True)
        before = mark(torch, device)
        with autocast(torch, device, precision):
            loss = w["loss"](ddp(x), y)
        after = mark(torch, device)
        loss.backward()
        opt.step()
        sync(torch, device)
        # fwd_s: this rank's forward pass alone; dur_s includes the gradient all-reduce, in which every
        # rank waits for the slowest, so only the forward shows which rank is slow
        ev.emit("step", step=step, dur_s=time.perf_counter() - t0, fwd_s=spans([before, after])[0],
                loss=float(loss.item()))
        if args.ckpt_dir and args.ckpt_every > 0 and step % args.ckpt_every == 0 and step < args.steps:
            if ev.rank == 0:
                save_checkpoint(step, "interval")
            dist.barrier()
        elif warned and args.ckpt_dir:
            if ev.rank == 0:
                save_checkpoint(step, "signal")
            warned.clear()

    dist.barrier()  # without it a fast rank can tear down while a peer is still in a collective
    ev.emit("done", steps=args.steps, **peak_memory(torch, device))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
