"""`poc scale ...`: job traces (make one, import a site's sacct history, summarise one) and replays of a
trace on the local clusters' emulated nodes, with the queue figures they give."""
from __future__ import annotations

import time
from pathlib import Path

from ..errors import ConfigError
from .output import Out, emit


def cmd_scale(args) -> int:
    return {"synth": _synth, "import": _import, "show": _show, "replay": _replay, "rederive": _rederive,
            "report": _report}[args.scale_command](args)


def _trace_out(args, trace) -> int:
    from ..scale import trace as tr
    tr.save(trace, Path(args.out))
    s = tr.summary(trace)
    emit(args, {"trace": str(args.out), "name": trace.name, "jobs": s.jobs, "sizes": s.sizes, "gpu_load": s.gpu_load},
         lambda: f"wrote {args.out} ({trace.name})\n" + "".join(f"  {ln}\n" for ln in s.lines()))
    return 0


def _weights(text: str | None, flag: str) -> dict:
    """``high=0.1,normal=0.9`` -> {"qos": (("high", 0.1), ("normal", 0.9))}; nothing when not given."""
    if not text:
        return {}
    pairs = []
    for part in text.split(","):
        name, eq, value = part.strip().partition("=")
        try:
            pairs.append((name.strip(), float(value)))
        except ValueError:
            raise ConfigError(f"{flag} {text}: {part.strip()!r} is not NAME=WEIGHT",
                              tip=f"{flag} high=0.1,normal=0.7,low=0.2") from None
        if not eq or not name.strip():
            raise ConfigError(f"{flag} {text}: {part.strip()!r} is not NAME=WEIGHT",
                              tip=f"{flag} high=0.1,normal=0.7,low=0.2")
    return {"qos": tuple(pairs)}


def _synth(args) -> int:
    from ..scale import synthetic
    params = synthetic.SyntheticParams(nodes=args.nodes, gpus_per_node=args.gpus_per_node, hours=args.hours,
                                       target_load=args.load, **_weights(args.qos, "--qos"))
    return _trace_out(args, synthetic.generate(params, args.seed))


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}", tip="give the file sacct wrote") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not text", tip="give sacct's --json or -P output") from None


def _import(args) -> int:
    from ..scale import sacct
    from ..scale.trace import NodeShape
    text = _read(args.history)
    shape = NodeShape(nodes=args.nodes, gpus_per_node=args.gpus_per_node) if args.nodes else None
    name = Path(args.history).stem
    if text.lstrip().startswith("name,cpu_milli"):      # Alibaba's GPU trace of 2023 (scale/alibaba.py)
        from ..scale import alibaba
        trace = alibaba.parse_openb(text, name=args.name or name, shape=shape, start_s=args.start, end_s=args.end,
                                    cpu_jobs=args.cpu_jobs)
        return _trace_out(args, trace)
    if args.start is not None or args.end is not None:
        raise ConfigError("--start/--end slice a history that records its own clock (the Alibaba GPU trace)",
                          tip="export the period you want from sacct with -S/-E instead")
    if text.lstrip().startswith("{"):
        trace = sacct.parse_json(text, name=args.name or name, shape=shape, tenant=args.tenant)
    else:
        trace = sacct.parse_pipe(text, name=args.name or name, shape=shape, tenant=args.tenant, tz=args.tz)
    return _trace_out(args, trace)


def _show(args) -> int:
    from ..scale import trace as tr
    trace = tr.load(Path(args.trace))
    s = tr.summary(trace)
    emit(args, {"name": trace.name, "source": trace.source, "shape": trace.shape and trace.shape.model_dump(),
                "compression": trace.compression, "jobs": s.jobs, "duration_s": s.duration_s, "sizes": s.sizes,
                "gpu_load": s.gpu_load, "notes": list(trace.notes)},
         lambda: f"{trace.name}: {trace.source}\n" + "".join(f"  {ln}\n" for ln in s.lines())
         + "".join(f"  note: {n}\n" for n in trace.notes))
    return 0


def figure_lines(platform: str, figs: dict) -> list[str]:
    """A replay's figures as the lines a person reads (whole seconds: the records' resolution)."""
    out = [f"{platform}: {figs['jobs']} jobs ({', '.join(f'{k} {v}' for k, v in figs['states'].items())}), "
           f"makespan {figs['makespan_s']} s, GPU utilisation "
           + ("n/a" if figs["gpu_utilisation"] is None else f"{figs['gpu_utilisation']:.1%}")]
    for cls, row in figs["queue_s"].items():
        out.append(f"  queue {cls:>5} nodes: {row['jobs']:5d} jobs, {row['started']:5d} started, "
                   f"p50 {row['p50_s']} s, p90 {row['p90_s']} s, p99 {row['p99_s']} s, max {row['max_s']} s")
    out.append("  GPU-seconds by tenant: " + ", ".join(f"{t} {v:.1%}" for t, v in figs["tenant_gpu_share"].items()))
    rate, big = figs.get("placement_rate"), figs.get("largest_jobs")
    if rate:
        out.append(f"  busiest {rate['window_s']:g} s: {rate['jobs_per_s']:g} jobs and {rate['nodes_per_s']:g} nodes "
                   "placed per second")
    where = figs.get("placement")
    if where:
        out.append(f"  placement: {where['in_fewest_blocks']} of {where['multi_node_jobs']} multi-node jobs in the "
                   f"fewest blocks they fit ({where['extra_blocks']} blocks more in all)")
    pre = figs.get("preemptions")
    if pre and pre["events"]:
        out.append(f"  preemptions: {pre['events']} ({pre['jobs']} jobs preempted, {pre['most_per_job']} the most for "
                   "one job); queue times run to each job's last, finished run")
    if big:
        out.append(f"  largest jobs ({big['nodes']} nodes, {big['jobs']}): queue p50 {big['p50_s']} s, "
                   f"max {big['max_s']} s")
    return out


def _replay(args) -> int:
    from ..render import replay_priority as rp
    from ..replay import local
    from ..replay import store as rs
    from ..scale import trace as tr
    out = Out(args.quiet, args.output in ("json", "yaml"))
    platforms = _replay_platforms(args.platform)
    if args.repeat < 1:
        raise ConfigError(f"--repeat {args.repeat}: replay at least once",
                          tip="--repeat 6 gives a verdict over every size class")
    try:
        priorities = rp.parse_priorities(args.qos_priority)
    except ValueError as e:
        raise ConfigError(f"--qos-priority: {e}", tip="--qos-priority high=10000,normal=1000,low=100") from None
    trace = tr.load(Path(args.trace))
    if args.compress != 1:
        trace = tr.compress(trace, args.compress)
    where = replay_dir(args, trace)
    prio = {"preemption": args.preemption, "priorities": priorities, "policy": args.queue_policy}
    run = {"k8s": lambda *a, **kw: local.replay_k8s(*a, topology=args.k8s_topology, **prio, **kw),
           "slurm": lambda *a, **kw: local.replay_slurm(*a, **prio, **kw)}
    figs, lines, ended = {}, [], True
    for _ in range(args.repeat):
        # one after the other, alternating, so a drift of this machine's load touches both alike (side by side
        # they would share its CPUs); each replay is stored as it ends, so an interrupt keeps those done
        for p in platforms:
            i = rs.next_index(where, p)
            result, total_gpus = run[p](trace, where.name, timeout_s=args.timeout, say=out.info)
            if args.replay_set:      # the replay set it joins: several traces judged together (report/replay_sets.py)
                result.setdefault("settings", {})["replay_set"] = args.replay_set
            key = rs.run_name(p, i)
            figs[key] = rs.save(where, trace, p, result, total_gpus, index=i)
            ended = ended and result["ended"]
            lines += [*figure_lines(key, figs[key]), f"  harness CPU {result['harness_cpu_s']} s for "
                      f"{figs[key]['jobs']} jobs; {result['looks']} looks; times are whole seconds"]
            if result.get("interrupted"):
                out.info(f"interrupted: stored the records of {key} until then in {where}; "
                         "what it had submitted is cancelled or deleted")
                emit(args, {"results": str(where), "interrupted": key, **figs},
                     lambda done=lines: "\n".join([f"stored {where} (interrupted)", *done]))
                return 130
    emit(args, {"results": str(where), **figs}, lambda: "\n".join([f"stored {where}", *lines]))
    return 0 if ended else 1


def replay_dir(args, trace) -> Path:
    """Where a replay is stored: <results>/<name>, or <results>/<campaign>/scale/<name> so that campaign's
    report shows it. An existing directory takes more replays only of the very trace it holds."""
    from ..errors import StoreError
    from ..replay import store as rs
    from ..scale import trace as tr
    from ..store import bounded
    name = args.name or f"replay-{trace.name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    root = Path(args.results) / args.campaign / rs.SCALE_DIR if args.campaign else Path(args.results)
    where = root / name
    kept = where / "trace.jsonl"
    want = tr.dumps(trace)
    try:   # within the reading limits, never through a link: a results directory is anyone's to write
        held = bounded.read_text(kept, limit=len(want.encode()) + 1) if kept.is_file() else None
    except StoreError:
        held = None
    if where.exists() and held != want:
        raise ConfigError(f"{where} exists and holds no replay of this trace (at this --compress)",
                          tip="choose another --name, or give the trace and --compress it was replayed with")
    return where


def _replay_platforms(asked: list[str] | None) -> list[str]:
    """k8s and slurm unless --platform narrows it, in that order, each once."""
    norm = {"k8s": "k8s", "kubernetes": "k8s", "kube": "k8s", "slurm": "slurm"}
    bad = [p for p in asked or [] if p not in norm]
    if bad:
        raise ConfigError(f"--platform {bad[0]}: a replay runs on k8s or slurm", tip="--platform k8s --platform slurm")
    chosen = {norm[p] for p in asked} if asked else {"k8s", "slurm"}
    return [p for p in ("k8s", "slurm") if p in chosen]


def _rederive(args) -> int:
    from ..replay import store as rs
    bad = rs.rederive(Path(args.replay_dir))
    emit(args, {"mismatches": bad},
         lambda: "\n".join(bad) if bad else f"{args.replay_dir}: every figure re-derives from the raw records")
    return 1 if bad else 0


def _report(args) -> int:
    from ..report import replay
    path = replay.write(Path(args.replay_dir), Path(args.out) if args.out else None)
    emit(args, {"report": str(path)}, lambda: f"wrote {path}")
    return 0


def add_parsers(sub, sub_parser, common, out_parent, results_parent) -> None:
    """`poc scale` and its commands, on the main parser (sub_parser: parser.py's _sub)."""
    sc = sub_parser(sub, "scale", "job traces and their replays on emulated nodes (queues at a cluster's size)",
                    "poc scale synth --nodes 64 --hours 24 --out trace.jsonl")
    ss = sc.add_subparsers(dest="scale_command", required=True, metavar="SUBCOMMAND")
    sy = sub_parser(ss, "synth", "write a seeded synthetic trace (docs/scale-traces.md says its shapes)",
                    "poc scale synth --nodes 256 --hours 24 --load 0.7 --seed 1 --out t.jsonl", (out_parent,))
    sy.add_argument("--nodes", type=int, default=64, help="the cluster's nodes (default 64)")
    sy.add_argument("--gpus-per-node", type=int, default=8, help="GPUs per node (default 8)")
    sy.add_argument("--hours", type=float, default=24.0, help="the arrival window (default 24)")
    sy.add_argument("--load", type=float, default=0.7, help="offered GPU load over the window (default 0.7)")
    sy.add_argument("--seed", type=int, default=0)
    sy.add_argument("--qos", metavar="NAME=W,...",
                    help="QOS classes drawn by weight, e.g. high=0.1,normal=0.7,low=0.2 (default: all normal)")
    sy.add_argument("--out", required=True, metavar="PATH", help="the trace file to write (JSON Lines)")
    im = sub_parser(ss, "import", "a Slurm site's own history (sacct --json or -P) as a trace",
                    "sacct -a -X --json -S 2026-01-01 -E 2026-02-01 > h.json && poc scale import h.json --out t.jsonl",
                    (out_parent,))
    im.add_argument("history", help="sacct's output (--json, or -P with its header), or Alibaba's GPU trace of 2023 "
                    "(openb_pod_list_*.csv) (docs/scale-traces.md)")
    im.add_argument("--start", type=int, metavar="S", help="Alibaba trace: the slice's first second (creations from)")
    im.add_argument("--end", type=int, metavar="S", help="Alibaba trace: the slice's end (creations before; runs cut)")
    im.add_argument("--cpu-jobs", choices=["keep", "drop"], default="keep",
                    help="Alibaba trace: CPU-only pods kept as CPU jobs (default) or dropped, counted either way")
    im.add_argument("--name", help="the trace's name (default: the file's)")
    im.add_argument("--out", required=True, metavar="PATH", help="the trace file to write (JSON Lines)")
    im.add_argument("--tenant", choices=["account", "user"], default="account", help="who a job's tenant is")
    im.add_argument("--tz", help="the zone of -P's local times (not needed with SLURM_TIME_FORMAT=%%s or --json)")
    im.add_argument("--nodes", type=int, help="check the jobs against a cluster of this many nodes")
    im.add_argument("--gpus-per-node", type=int, default=8, help="with --nodes: GPUs per node (default 8)")
    sh = sub_parser(ss, "show", "a trace's summary: sizes, offered load, tenants, what was changed on import",
                    "poc scale show t.jsonl -o json", (out_parent,))
    sh.add_argument("trace")
    rp = sub_parser(ss, "replay", "replay a trace on the local clusters' emulated nodes (Kubernetes, then Slurm) "
                    "and store the records and figures", "poc scale replay t.jsonl --compress 60 --results out",
                    (out_parent, results_parent))
    rp.add_argument("trace")
    rp.add_argument("--platform", "-p", action="append", metavar="{k8s,slurm}",
                    help="replay on this one only (repeatable; default: both)")
    rp.add_argument("--compress", type=float, default=1.0, metavar="X", help="replay X times faster (default 1)")
    rp.add_argument("--name", help="the replay's directory under --results (default: replay-<trace>-<UTC time>); "
                    "an existing one of the same trace takes the new replays beside its others")
    rp.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="replay N times on each platform, alternating (default 1; a verdict needs 5 a side, 6 when "
                         "every size class is compared)")
    rp.add_argument("--k8s-topology", choices=["preferred", "required", "off"], default="preferred",
                    help="Kueue topology-aware scheduling for each gang: preferably (default, as Slurm's "
                         "topology/tree) or strictly inside one block, or off")
    rp.add_argument("--preemption", choices=["off", "priority"], default="off",
                    help="priority: each QOS class a Kueue WorkloadPriorityClass and a Slurm QOS, and a job may "
                         "preempt (requeue) jobs of lower classes; off (default): classes are labels only")
    rp.add_argument("--qos-priority", metavar="NAME=N,...",
                    help="the classes' priorities with --preemption priority (default low=100,normal=1000,"
                         "high=10000; other classes take normal's)")
    rp.add_argument("--queue-policy", default="site", metavar="PAIR",
                    help="the queue policy pair (docs/scale-traces.md): site (default), defaults, strict-fifo or "
                         "no-size; Kueue gets its side here, the emulated Slurm cluster must run its side "
                         "(`poc cluster up --slurm --emulated N --queue-policy PAIR`)")
    rp.add_argument("--replay-set", metavar="NAME",
                    help="the replay set this trace joins: a campaign's report tests the platforms across the "
                         "set's traces (3 or more, each below both placement ceilings) under one policy pair")
    rp.add_argument("--campaign", metavar="NAME",
                    help="store under --results/NAME/scale/, so that campaign's `poc report` shows the replay")
    rp.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                    help="stop watching after this long (default: the last submit plus the longest limit, "
                         "plus two minutes)")
    rv = sub_parser(ss, "rederive", "draw a replay's figures again from its raw records; list what differs",
                    "poc scale rederive out/replay-t-20261206T120000Z", (out_parent,))
    rv.add_argument("replay_dir")
    rr = sub_parser(ss, "report", "a replay's report: the platforms side by side, queue-time CDFs, GPUs over time, "
                    "tenant shares", "poc scale report out/replay-t-20261206T120000Z", (out_parent,))
    rr.add_argument("replay_dir")
    rr.add_argument("--out", help="output directory (default: REPLAY_DIR/report)")
    for p in (sy, im, sh, rp, rv, rr):
        p.set_defaults(func=cmd_scale)
