#!/usr/bin/env python3
"""The calibration phase of ddp_train.py: the allocation checked by the training job itself, before training.

Shipped beside ddp_train.py (which imports it only with --calibrate) and needing torch and the standard
library only, like it. In the job's own allocation and image, after the rendezvous and before the sweep, on
every rank: what each node is (limits, GPUs, driver, CUDA, NCCL, RDMA devices, OFED), whether it is healthy,
and how fast it computes and all-reduces beside its peers; a node far below the others is refused (every rank
stops, with why) rather than measured: the figures would be the node's, not the scheduler's. On GPUs
nccl-tests' all_reduce_perf (when the image has it) gives each node's reference bus bandwidth, beside the
workload's own at the same size on the same GPUs. The step before training that checks the whole allocation
(its health and a multi-node all-reduce) is poc_check.py.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import time

import ddp_train as w  # the workload beside this file: its events, figures and limits

Events = w.Events

SMI_FIELDS = ("index", "name", "uuid", "driver_version", "memory.total", "ecc.errors.uncorrected.volatile.total")
NCCL_TESTS_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+(.*)$")
CALIBRATION_REFUSED = 4      # every rank's exit status when the allocation is refused


# A child (nccl-tests, a site tool) starts from this rank's environment less what belongs to whatever started
# the rank: torchrun's rank variables, Slurm's step (SLURM_*), its PMI and an MPI's (PMI*, OMPI_*, PRTE_*):
# an MPI build of nccl-tests reading them tries to join the training step's wire-up and aborts in MPI_Init;
# and NCCL_DEBUG_FILE: NCCL opens it with fopen(path, "w"), so a child inheriting the rank's would overwrite
# the rank's own NCCL log (its transport, GDRDMA, NCCL version: what the report reads). An NCCL child gets a
# log of its own instead. keep_launcher: a child that is the launcher's own task (an srun step's MPI rank
# under a wrapper) keeps the launcher's variables, which its wire-up needs.
LAUNCHER_PREFIXES = ("SLURM_", "PMI", "OMPI_", "PRTE_", "TORCHELASTIC_")
TORCHRUN_VARS = frozenset({"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                           "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT"})


def child_env(env: dict, nccl_log: str | None = None, keep_launcher: bool = False) -> tuple[dict, list[str]]:
    """(the child's environment, the names left out of it)."""
    out, dropped = {}, []
    for k, v in env.items():
        launcher = k.startswith(LAUNCHER_PREFIXES) or k in TORCHRUN_VARS
        if k == "NCCL_DEBUG_FILE" or (launcher and not keep_launcher):
            dropped.append(k)
            continue
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
                           env=child_env(dict(os.environ))[0] if env is None else env)
    except (OSError, subprocess.SubprocessError) as exc:
        return {"argv": argv, "rc": -1, "out": str(exc)[:2000]}
    return {"argv": argv, "rc": p.returncode, "out": (p.stdout + p.stderr)[-20000:]}


def _log_state(path: str | None) -> dict | None:
    if not path:
        return None
    path = w.expand_log_path(path)
    try:
        st = os.stat(path)
    except OSError:
        return {"path": path, "bytes": None}
    return {"path": path, "bytes": st.st_size, "ino": st.st_ino}


def log_intact(before: dict | None, after: dict | None) -> bool | None:
    """Whether the rank's own NCCL log is as a child left it: none there before and none after, or the same
    file no shorter (NCCL appends; another process's fopen("w") truncates or makes it anew)."""
    if before is None or after is None:
        return None
    if before["bytes"] is None:
        return after["bytes"] is None
    return after["bytes"] is not None and after.get("ino") == before.get("ino") and after["bytes"] >= before["bytes"]


def run_nccl_tests(binary: str, args_text: str, gpus: int, host: str) -> dict:
    """all_reduce_perf on this node's GPUs (-g), as a child with a clean environment and a log of its own; the
    rank's own NCCL log checked after it. {argv, rc, version, bytes, busbw_gbps, rows, out_tail, env_dropped,
    log, nccl (its NCCL facts), parent_log (the rank's log before and after, intact)}."""
    log = os.path.join(tempfile.gettempdir(), f"poc-nccl-tests-{host}-{os.getpid()}.log")
    env, dropped = child_env(dict(os.environ), nccl_log=log)
    mine = os.environ.get("NCCL_DEBUG_FILE")
    before = _log_state(mine)
    res = site_tool([binary, *args_text.split(), "-g", str(gpus)], env=env)
    after = _log_state(mine)
    lines = w.nccl_debug_lines(log)
    with contextlib.suppress(OSError):
        os.unlink(log)
    parsed = parse_nccl_tests(res["out"]) if res["rc"] == 0 else {"rows": []}
    top = parsed["rows"][-1] if parsed["rows"] else None
    return {"argv": res["argv"], "rc": res["rc"], "version": parsed.get("version"),
            "bytes": top["bytes"] if top else None,
            "busbw_gbps": top["ip_busbw_gbps"] if top else None,   # in place, as the workload
            "rows": parsed["rows"], "out_tail": res["out"][-3000:] if res["rc"] else "",
            "env_dropped": dropped, "log": log, "nccl": w.nccl_facts(lines) if lines else None,
            "parent_log": None if mine is None else {"before": before, "after": after,
                                                     "intact": log_intact(before, after)}}


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
    facts = {"limits": w.rlimits(), "cap_ipc_lock": cap_ipc_lock(), "torch": torch.__version__,
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
    w.sync(torch, device)
    rates, t_start = [], time.perf_counter()
    for _ in range(windows):
        k, t0 = 0, time.perf_counter()
        while True:
            for _ in range(4):
                a @ b
            k += 4
            w.sync(torch, device)
            took = time.perf_counter() - t0
            if took >= seconds / windows:
                break
        rates.append(2 * n ** 3 * k / took / 1e9)
    return {"what": "matmul", "n": n, "dtype": str(dtype).replace("torch.", ""), "gflops": max(rates),
            "windows": [round(r, 4) for r in rates], "seconds": time.perf_counter() - t_start}


def timed_allreduce(dist, torch, device, nbytes: int, world: int, group=None, iters: int = 5) -> dict:
    """One size all-reduced `iters` times after a warm-up, then checked: {bytes, time_s, busbw_gbps, correct}.
    The timed loop all-reduces the buffer in place and nothing else, as nccl-tests' in-place test: refilling it
    each time (an 8 GiB fill is a pass over memory as long as a tenth of the all-reduce) would be timed too.
    The loop's sums grow (every rank holds the same sum after the first), so the check is made afresh after it."""
    n = max(1, nbytes // 4)
    rank = dist.get_rank(group)
    buf = torch.full((n,), float(rank + 1), dtype=torch.float32, device=device)
    dist.all_reduce(buf, group=group)
    w.sync(torch, device)
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf, group=group)
    w.sync(torch, device)
    took = (time.perf_counter() - t0) / iters
    buf.fill_(float(rank + 1))
    dist.all_reduce(buf, group=group)
    w.sync(torch, device)
    correct = bool((buf[:1024] == float(world * (world + 1) // 2)).all().item())
    _, busbw = w.bw_figures(n * 4, took, world)
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
        # a simulated GPU node runs what a GPU node would, where its image has the tool
        if args.nccl_tests and (device.type == "cuda" or args.simulated_gpus):
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
