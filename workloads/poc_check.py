#!/usr/bin/env python3
"""The allocation checked before training, as a step of its own in the job's allocation and image.

Shipped beside ddp_train.py (the harness renders it into the batch script and the pods' command when
calibration.enabled; needs torch and the standard library only). Two parts, each one process per node
(one per GPU for an MPI build of nccl-tests under srun):

  gate       the health gate: every node's facts (poc_health: GPUs, NVLink, HCAs, GPUDirect, XIDs, DCGM where
             asked; memlock, the interface gloo binds, the clock against the first node's) gathered over a gloo
             group; a node with a problem is refused, by name and why, and no one trains (exit 4).
  allreduce  an all-reduce across the whole allocation, reported in nccl-tests' layout and read by the same
             parser: --form gloo (CPUs: torch's gloo over TCP), mpi (an MPI build of all_reduce_perf, one task per
             GPU, launched by srun with the site's PMI; this wrapper is each task), mpirun-ssh (Kubernetes: the
             first pod runs mpirun over ssh into the others' sshd, all inside the JobSet's pods). Below the
             absolute floor (--min-busbw-gbps) the allocation is refused.
  all        gate, then allreduce, in one process (the pods' form).

Ranks come from the launcher (--ranks-from slurm: SLURM_PROCID/SLURM_NTASKS; k8s: the Indexed Job's
JOB_COMPLETION_INDEX of --nodes). Every child runs in a clean environment with its own NCCL log
(poc_calibration.child_env). Events (POC_EVENT lines, and --events-dir files) as the workload's.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import ddp_train as w
import poc_calibration as cal
import poc_health as health

REFUSED = w.CALIBRATION_REFUSED


def placement(how: str, nodes: int) -> dict:
    """{rank, world, local_rank}: this process among the check's processes."""
    env = os.environ
    if how == "slurm":
        return {"rank": int(env.get("SLURM_PROCID", "0")), "world": int(env.get("SLURM_NTASKS", str(nodes))),
                "local_rank": int(env.get("SLURM_LOCALID", "0"))}
    return {"rank": int(env.get("JOB_COMPLETION_INDEX", "0")), "world": nodes, "local_rank": 0}


def parse_bench_args(text: str) -> dict:
    """nccl-tests' options the gloo form takes: -b/-e sizes, -f factor, -n iterations, -w warm-ups."""
    words, out = text.split(), {"b": 1024, "e": 16 << 20, "f": 2, "n": 20, "w": 1}
    for flag, val in zip(words[::2], words[1::2], strict=False):
        key = flag.lstrip("-")[:1]
        if key in ("b", "e"):
            out[key] = w.parse_size(val)
        elif key in ("f", "n", "w"):
            out[key] = max(1 if key != "w" else 0, int(val))
    return out


# -------------------------------------------------------------------------- the gloo group


def open_group(dist, master: str, rank: int, world: int, timeout_s: float):
    import datetime
    dist.init_process_group("gloo", init_method=f"tcp://{master}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))


def gathered(dist, obj, world: int) -> list:
    out = [None] * world
    dist.all_gather_object(out, obj)
    return out


# -------------------------------------------------------------------------- the health gate


def judge(nodes: list[dict], max_clock_offset_s: float) -> list[dict]:
    """The nodes refused, each with why; every node's clock read ("t") becomes its offset from the first node's."""
    refused, first = [], nodes[0]["t"]
    for n in nodes:
        n["clock_offset_s"] = n.pop("t") - first
        if max_clock_offset_s and abs(n["clock_offset_s"]) > max_clock_offset_s:
            n["problems"].append(f"its clock is {n['clock_offset_s']:+.3f} s off the first node's (more than "
                                 f"{max_clock_offset_s:g} s): the run's time-stamps would not line up")
        if n["problems"]:
            refused.append({"node": n["node"], "host": n["host"], "why": list(n["problems"])})
    return refused


def gate(args, ev, dist, place: dict, gloo_if: dict) -> tuple[int, list[dict]]:
    """(exit status, every node's {rank, node, host, ip}) once every node's health is decided alike."""
    t0 = time.perf_counter()
    facts = health.gather(cal.site_tool, args.gpus_per_node, args.simulated_gpus, args.dcgm_level)
    facts.update(limits=w.rlimits(), cap_ipc_lock=cal.cap_ipc_lock(), gloo_ifname=gloo_if,
                 host_loopback=w.host_resolves_to_loopback(), binding=w.binding())
    bars = {"gpus_per_node": args.gpus_per_node, "simulated": args.simulated_gpus,
            "min_power_ratio": args.min_power_ratio, "min_ib_rate_gbps": args.min_ib_rate_gbps,
            "require_gdr": args.require_gdr, "nccl_ib_hca": os.environ.get("NCCL_IB_HCA")}
    problems = health.node_problems(facts, bars) + cal.node_problems(facts, 0, False, args.min_memlock_kib)
    if os.environ.get("NCCL_SOCKET_IFNAME") and not gloo_if.get("name"):
        problems.append(gloo_if["why"])
    ip = w.ipv4_of(os.environ.get("GLOO_SOCKET_IFNAME") or "") or os.environ.get("POC_POD_IP")
    dist.barrier()
    now = time.time()    # read as the barrier releases every rank: offsets within its release skew (~ms)
    mine = {"rank": place["rank"], "node": ev.node or ev.host, "host": ev.host, "ip": ip, "t": now,
            "facts": facts, "problems": problems}
    nodes = gathered(dist, mine, place["world"])
    refused = judge(nodes, args.max_clock_offset_s)
    if place["rank"] == 0:
        ev.emit("health_gate", ok=not refused, nodes=nodes, refused=refused,
                bars={**bars, "min_memlock_kib": args.min_memlock_kib, "dcgm_level": args.dcgm_level,
                      "max_clock_offset_s": args.max_clock_offset_s}, seconds=time.perf_counter() - t0)
        if refused:
            refuse(ev, "health", f"the health gate refused node {refused[0]['node']}: " + "; ".join(refused[0]["why"])
                   + (f" (and {len(refused) - 1} more node(s))" if len(refused) > 1 else ""),
                   exclusion_tip(refused), refused)
    return (REFUSED if refused else 0), [{k: n[k] for k in ("rank", "node", "host", "ip")} for n in nodes]


def exclusion_tip(refused: list[dict]) -> str:
    names = ",".join(r["node"] for r in refused)
    return (f"exclude it and tell the site: on Slurm slurm.extra_sbatch: ['--exclude={names}'], on Kubernetes "
            "kubernetes.pod.affinity with a nodeAffinity term matchFields metadata.name NotIn "
            f"[{names}]; the calibration.* settings set the bars")


def refuse(ev, what: str, message: str, tip: str, refused: list[dict]) -> None:
    ev.emit("workload_error", error=what, message=message, tip=tip, refused=refused)
    print(f"poc-workload: ERROR {message}\npoc-workload: TIP {tip}", file=sys.stderr, flush=True)


# -------------------------------------------------------------------------- the all-reduce: gloo form


def gloo_table(dist, torch, opts: dict, world: int) -> str:
    """An in-place and an out-of-place all-reduce of every size, timed as all_reduce_perf times them (warm-ups,
    then -n iterations; the time per iteration averaged over ranks; the result checked afresh), printed in
    its table layout, so one parser reads both."""
    rank = dist.get_rank()
    lines = ["# poc_check gloo all-reduce (TCP), in all_reduce_perf's layout",
             f"# nThread 1 nGpus 0 minBytes {opts['b']} maxBytes {opts['e']} step: {opts['f']}(factor) "
             f"warmup iters: {opts['w']} iters: {opts['n']} agg iters: 1 validation: 1 graph: 0",
             "#       size         count      type   redop    root     time   algbw   busbw #wrong"
             "     time   algbw   busbw #wrong"]
    size, busbws = max(4, opts["b"]), []
    while size <= opts["e"]:
        n = size // 4
        send = torch.full((n,), float(rank + 1))
        recv = torch.empty(n)
        want = float(world * (world + 1) // 2)
        cells = []
        for in_place in (False, True):
            def once(send=send, recv=recv, in_place=in_place):
                if not in_place:
                    recv.copy_(send)
                dist.all_reduce(send if in_place else recv)
            for _ in range(opts["w"]):
                once()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(opts["n"]):
                once()
            took = torch.tensor([(time.perf_counter() - t0) / opts["n"]], dtype=torch.float64)
            dist.all_reduce(took)
            avg = float(took.item()) / world
            send.fill_(float(rank + 1))
            once()
            got = send if in_place else recv
            wrong = torch.tensor([int((got != want).sum().item())])
            dist.all_reduce(wrong)
            send.fill_(float(rank + 1))
            algbw, busbw = w.bw_figures(size, avg, world)
            cells.append(f"{avg * 1e6:8.2f} {algbw:7.2f} {busbw:7.2f} {int(wrong.item()):6d}")
            busbws.append(busbw)
        lines.append(f"{size:12d} {n:13d}     float     sum      -1 " + " ".join(cells))
        size *= opts["f"]
    lines += ["# Out of bounds values : 0 OK",
              f"# Avg bus bandwidth    : {sum(busbws) / max(1, len(busbws)):.4f}", "#"]
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------------- the all-reduce: MPI forms


def mpi_export(env: dict) -> list[str]:
    """mpirun -x for the fabric's variables and the paths: what every rank must see alike."""
    fabric = {k for k in env.get("POC_FABRIC_ENV", "").split(",") if k}
    names = sorted(k for k in env if k.startswith(("NCCL_", "UCX_", "FI_")) or k in fabric
                   or k in ("PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES"))
    return [a for k in names for a in ("-x", k)]


def ssh_agent(port: int, key: str) -> str:
    return (f"ssh -p {port} -i {key} -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
            "-o LogLevel=ERROR")


def mpirun_argv(args, hosts: list[str], key: str, env: dict) -> list[str]:
    """The first pod's mpirun: one rank per GPU on every pod (-H ip:slots), started over ssh into each pod's sshd."""
    root = ["--allow-run-as-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    # an ssh session gets sshd's PATH, not the image's: --prefix tells the other pods where Open MPI's orted is
    found = shutil.which(args.mpirun)
    prefix = ["--prefix", os.path.dirname(os.path.dirname(found))] if found else []
    return [args.mpirun, *root, *prefix, "-np", str(len(hosts) * args.gpus_per_node),
            "-H", ",".join(f"{h}:{args.gpus_per_node}" for h in hosts), "--bind-to", "none",
            "--mca", "plm_rsh_agent", ssh_agent(args.ssh_port, key), *mpi_export(env),
            args.binary, *args.args.split(), "-g", "1"]


def sshd_argv(sshd: str, port: int, listen: str, workdir: str, user: str) -> list[str]:
    """A per-run sshd on this pod's address: the run's key only, from the first pod's address only
    (authorized_keys' from=), no passwords, no forwarding; gone when the check ends."""
    return [sshd, "-D", "-e", "-p", str(port), "-h", f"{workdir}/host_key",
            "-o", f"ListenAddress={listen}", "-o", f"AuthorizedKeysFile={workdir}/authorized_keys",
            "-o", f"AllowUsers={user}", "-o", "PermitRootLogin=prohibit-password", "-o", "PasswordAuthentication=no",
            "-o", "KbdInteractiveAuthentication=no", "-o", "UsePAM=no", "-o", "StrictModes=no",
            "-o", "AllowTcpForwarding=no", "-o", "X11Forwarding=no", "-o", "PidFile=none"]


def authorized_key(pub: str, source_ip: str) -> str:
    return f'from="{source_ip}",no-pty,no-agent-forwarding,no-port-forwarding,no-X11-forwarding {pub.strip()}\n'


def mpirun_over_ssh(args, dist, place: dict, nodes: list[dict]) -> dict:
    """The Kubernetes GPU form: every pod runs a per-run sshd, the first pod runs mpirun into them."""
    work = tempfile.mkdtemp(prefix="poc-check-ssh-")
    keygen = ["ssh-keygen", "-q", "-t", "ed25519", "-N", ""]
    subprocess.run([*keygen, "-f", f"{work}/host_key"], check=True, capture_output=True)
    pub = None
    if place["rank"] == 0:
        subprocess.run([*keygen, "-f", f"{work}/id"], check=True, capture_output=True)
        with open(f"{work}/id.pub") as f:
            pub = f.read()
    first = gathered(dist, pub, place["world"])[0]
    me = nodes[place["rank"]]
    sshd = None
    if place["rank"] != 0:
        with open(f"{work}/authorized_keys", "w") as f:
            f.write(authorized_key(first, nodes[0]["ip"]))
        user = os.environ.get("USER") or ("root" if os.geteuid() == 0 else str(os.geteuid()))
        sshd = subprocess.Popen(sshd_argv(args.sshd, args.ssh_port, me["ip"], work, user))
    dist.barrier()
    res = {"argv": [], "rc": 0, "out": ""}
    try:
        if place["rank"] == 0:
            log = os.path.join(tempfile.gettempdir(), f"poc-check-nccl-{socket.gethostname()}-{os.getpid()}.log")
            env, dropped = cal.child_env(dict(os.environ), nccl_log=log)
            res = cal.site_tool(mpirun_argv(args, [n["ip"] for n in nodes], f"{work}/id", env), args.timeout_s, env)
            res.update(env_dropped=dropped, log=log)
        dist.barrier()    # the others wait for mpirun here, on the CPU
    finally:
        if sshd is not None:
            sshd.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                sshd.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
    return res


def run_mpi_task(args) -> dict:
    """This srun task's MPI rank of all_reduce_perf: the launcher's variables kept (its wire-up), the rank's
    NCCL log its own."""
    log = os.path.join(tempfile.gettempdir(), f"poc-check-nccl-{socket.gethostname()}-{os.getpid()}.log")
    env, dropped = cal.child_env(dict(os.environ), nccl_log=log, keep_launcher=True)
    res = cal.site_tool([args.binary, *args.args.split(), "-g", "1"], args.timeout_s, env)
    return {**res, "env_dropped": dropped, "log": log}


# -------------------------------------------------------------------------- the verdict, the whole step


def allreduce_report(ev, args, res: dict, world: int, node_names: list[str], t0: float) -> int:
    """Read the table (any form), judge it against the floor, emit allocation_allreduce (and the refusal)."""
    parsed = cal.parse_nccl_tests(res["out"]) if res["rc"] == 0 else {"rows": [], "version": None,
                                                                      "avg_busbw_gbps": None}
    lines = w.nccl_debug_lines(res["log"]) if res.get("log") else []
    if res.get("log"):
        with contextlib.suppress(OSError):
            os.unlink(res["log"])
    top = parsed["rows"][-1] if parsed["rows"] else None
    busbw = top["ip_busbw_gbps"] if top else None
    wrong = bool(top) and any(x.isdigit() and int(x) > 0 for x in top["wrong"])
    names = ",".join(node_names)
    if res["rc"] is None:
        why = f"{res['argv'][0]} is not installed in the job's image"
    elif res["rc"] != 0:
        why = f"{os.path.basename(res['argv'][0])} failed (exit {res['rc']})"
    elif top is None:
        why = "no result row in its output"
    elif wrong:
        why = f"wrong results at {top['bytes']} bytes"
    elif args.min_busbw_gbps and busbw < args.min_busbw_gbps:
        why = (f"{busbw:.3g} GB/s in-place at {top['bytes']} bytes, below the floor {args.min_busbw_gbps:g} GB/s "
               "(calibration.min_allreduce_busbw_gbps)")
    else:
        why = None
    ev.emit("allocation_allreduce", ok=why is None, why=why, form=args.form, argv=res["argv"], rc=res["rc"],
            version=parsed.get("version"), world=world, nodes=node_names, rows=parsed["rows"],
            bytes=top["bytes"] if top else None, busbw_gbps=busbw,
            oop_busbw_gbps=top["oop_busbw_gbps"] if top else None,
            avg_busbw_gbps=parsed.get("avg_busbw_gbps"), floor_gbps=args.min_busbw_gbps or None,
            nccl=w.nccl_facts(lines) if lines else None, env_dropped=res.get("env_dropped"),
            out_tail=res["out"][-3000:] if why else "", seconds=time.perf_counter() - t0)
    if why is None:
        return 0
    refuse(ev, "allocation_allreduce", f"the all-reduce across the allocation ({names}) was refused: {why}",
           "no one node is named by one figure across the allocation: read each node's facts in the run's "
           "health_gate event, check the fabric (fabric.env, the HCAs' state) and the image's nccl-tests; "
           "calibration.min_allreduce_busbw_gbps sets the floor", [{"node": n, "host": n, "why": [why]}
                                                                  for n in node_names])
    return REFUSED


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=["gate", "allreduce", "all"])
    ap.add_argument("--run-id", default=os.environ.get("POC_RUN_ID", "adhoc"))
    ap.add_argument("--events-dir", default="")
    ap.add_argument("--master", default="", help="HOST:PORT of the check's gloo store (the first node)")
    ap.add_argument("--ranks-from", choices=["slurm", "k8s"], default="slurm")
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--gpus-per-node", type=int, default=0)
    ap.add_argument("--simulated-gpus", action="store_true")
    ap.add_argument("--timeout-s", type=float, default=1800)
    # the gate's bars
    ap.add_argument("--min-memlock-kib", type=int, default=0)
    ap.add_argument("--min-power-ratio", type=float, default=0.9)
    ap.add_argument("--min-ib-rate-gbps", type=float, default=0)
    ap.add_argument("--require-gdr", action="store_true")
    ap.add_argument("--dcgm-level", type=int, default=0)
    ap.add_argument("--max-clock-offset-s", type=float, default=0)
    # the all-reduce
    ap.add_argument("--form", choices=["gloo", "mpi", "mpirun-ssh"], default="gloo")
    ap.add_argument("--binary", default="all_reduce_perf_mpi")
    ap.add_argument("--args", default="-b 8 -e 8G -f 2")
    ap.add_argument("--min-busbw-gbps", type=float, default=0)
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--sshd", default="/usr/sbin/sshd")
    ap.add_argument("--ssh-port", type=int, default=2222)
    args = ap.parse_args(argv)
    ev = w.Events(args.run_id, args.events_dir or None)
    place = placement(args.ranks_from, args.nodes)
    ev.rank, ev.local_rank, ev.world_size = place["rank"], place["local_rank"], place["world"]
    t0 = time.perf_counter()
    ev.emit("check_start", part=args.part, form=args.form)
    rc = 1
    try:
        if args.part == "allreduce" and args.form == "mpi":     # an srun task of the MPI step: no gloo group
            rc = mpi_task(args, ev, place, t0)
            return rc
        import torch.distributed as dist
        gloo_if = w.default_gloo_ifname()
        open_group(dist, args.master, place["rank"], place["world"], args.timeout_s)
        rc = run(args, ev, place, dist, gloo_if)
        return rc
    finally:
        ev.emit("check_done", part=args.part, rc=rc, seconds=time.perf_counter() - t0)
        ev.close()


def mpi_task(args, ev, place: dict, t0: float) -> int:
    res = run_mpi_task(args)
    if place["rank"] != 0:
        return res["rc"] or 0
    names = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST") or ev.host
    return allreduce_report(ev, args, res, place["world"], [names], t0)


def run(args, ev, place: dict, dist, gloo_if: dict) -> int:
    """The gate and the all-reduce over the check's gloo group: every node's exit status, decided alike."""
    import torch
    rc, nodes = 0, None
    if args.part in ("gate", "all"):
        rc, nodes = gate(args, ev, dist, place, gloo_if)
    if rc == 0 and args.part in ("allreduce", "all"):
        if nodes is None:
            nodes = gathered(dist, {"node": ev.node or ev.host, "ip": w.ipv4_of(os.environ.get(
                "GLOO_SOCKET_IFNAME") or "") or os.environ.get("POC_POD_IP")}, place["world"])
        t1 = time.perf_counter()
        if args.form == "mpirun-ssh":
            res = mpirun_over_ssh(args, dist, place, nodes)
        else:
            text = gloo_table(dist, torch, parse_bench_args(args.args), place["world"])
            res = {"argv": ["gloo"], "rc": 0, "out": text}
            if place["rank"] == 0:
                print(text, end="", flush=True)
        verdict = [allreduce_report(ev, args, res, place["world"], [n["node"] for n in nodes], t1)
                   if place["rank"] == 0 else None]
        dist.broadcast_object_list(verdict, src=0)   # every node stops alike
        rc = verdict[0]
    dist.barrier()
    return rc


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Out at once, the gloo group left to the exit: every node has passed the last barrier and the verdict
    # and the events are out. Tearing it down (destroy_process_group, or the interpreter's shutdown running
    # its destructors) once kept the first pod's check from ever returning after its peer had exited (the
    # lab's Kubernetes under load), and the JobSet was restarted 165 s later for nothing.
    os._exit(code)
