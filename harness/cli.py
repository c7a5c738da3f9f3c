"""The `poc` command. The one place where known errors become `ERROR ...` / `TIP ...`."""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from . import __version__
from . import config as cfgmod
from .errors import ConfigError, PocError, StoreError

DEFAULT_RESULTS = "poc-results"


class Out:
    """Where human output goes: rich when it is a terminal, plain lines otherwise, nothing with --quiet."""

    def __init__(self, quiet: bool, as_json: bool):
        self.quiet = quiet
        self.as_json = as_json
        self._status = None
        self._last_plain = 0.0
        if not quiet and not as_json and sys.stderr.isatty():
            from rich.console import Console

            self.console = Console(stderr=True)
        else:
            self.console = None

    def info(self, msg: str) -> None:
        if self.quiet:
            return
        if self.console:
            self.console.print(msg, highlight=False)
        else:
            print(msg, file=sys.stderr, flush=True)

    def progress(self, platform: str, run_id: str, phase: str, elapsed: float) -> None:
        if self.quiet:
            return
        line = f"[{platform}] {run_id}: {phase} ({elapsed:5.1f}s)"
        if self.console:
            if self._status is None:
                self._status = self.console.status(line)
                self._status.start()
            else:
                self._status.update(line)
        elif time.time() - self._last_plain > 5:  # not a terminal: a line every few seconds is enough for logs
            self._last_plain = time.time()
            print(line, file=sys.stderr, flush=True)

    def stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


def _platforms(args, cfg) -> list[str]:
    if not getattr(args, "platform", None):
        return cfg.platforms
    try:
        return [cfgmod.normalize_platform(p) for p in args.platform]
    except ValueError as exc:
        raise ConfigError(str(exc), tip="use --platform local, slurm or k8s") from None


def _load(args):
    cfg = cfgmod.load(args.config)
    if getattr(args, "campaign", None):
        try:
            cfg.campaign = args.campaign
        except (ValueError, TypeError) as exc:  # pydantic's ValidationError, reduced to one line
            errs = getattr(exc, "errors", lambda: [])()
            why = errs[0].get("msg") if errs else str(exc).splitlines()[0]
            raise ConfigError(f"--campaign {args.campaign!r}: {why}",
                              tip="use lower-case letters, digits and '-'") from None
    return cfg


def _record_line(rec: dict) -> str:
    if rec.get("status") != "ok":
        err = rec.get("error") or {}
        first = (err.get("message") or "").splitlines()[0] if err.get("message") else ""
        return f"{rec['run_id']}: {rec.get('status')} at {err.get('stage')}: {first}"
    if rec.get("mistake"):
        mk = rec["mistake"]
        if not mk.get("clear"):
            return f"{rec['run_id']}: ok  no clear error within {mk.get('deadline_s', 0):g} s ({mk.get('change')})"
        first = (mk.get("message") or "").strip().splitlines()[0][:100]
        return (f"{rec['run_id']}: ok  clear error after {mk['time_to_error_s']:.1f} s"
                f"{' (at submit)' if mk.get('at_submit') else ''} from {mk.get('source')}: {first}")
    m = rec.get("metrics", {})

    def v(k, f="{:.2f}"):
        x = (m.get(k) or {}).get("value")
        return "–" if x is None else f.format(x)

    s = (f"{rec['run_id']}: ok  queue {v('queue_s')}s  startup {v('startup_s')}s"
         f"  busbw {v('allreduce_busbw_gbps')} GB/s  step {v('step_time_s', '{:.3f}')}s"
         f"  cost/step ${v('cost_per_step_usd', '{:.2e}')}")
    if "recovery_s" in m:
        s += f"  recovery {v('recovery_s')}s  lost {v('lost_steps', '{:.0f}')} steps"
    if "handover_s" in m:
        s += f"  handover {v('handover_s')}s (behind the blocker)"
    if "serve_ready_s" in m:
        s += (f"  serve: ready {v('serve_ready_s')}s  p50 {v('serve_latency_p50_s', '{:.4f}')}s"
              f"  {v('serve_throughput_rps', '{:.0f}')} req/s")
    if "upgrade_job_survived" in m:
        s += (f"  drill: job {'survived' if m['upgrade_job_survived'].get('value') else 'did not survive'}, "
              f"submissions refused {v('upgrade_submit_refused_s')}s, queued job {v('upgrade_queued_delay_s')}s late")
    return s


def cmd_run(args) -> int:
    cfg = _load(args)
    if args.repetitions is not None:
        cfg.repetitions = args.repetitions
    if args.drill or args.confirm_cluster:   # validated like the config's own (unknown kind: ERROR/TIP)
        cfg.drills = type(cfg.drills).model_validate({**cfg.drills.model_dump(), **(
            {"kinds": args.drill} if args.drill else {}), **(
            {"confirm_cluster": args.confirm_cluster} if args.confirm_cluster else {})})
    if args.serve:
        cfg.serve.enabled = True
        if "node_loss" in cfg.serve.faults and not cfg.allow_destructive_faults:
            raise ConfigError("--serve: the serving scenario's node_loss fault takes a node away from the cluster",
                              tip="set allow_destructive_faults: true (it only touches nodes the run holds), "
                                  "or leave node_loss out of serve.faults")
    cfg.platforms = _platforms(args, cfg)
    return _run_campaign(args, cfg, Out(args.quiet, args.json))


def _run_campaign(args, cfg, out: Out) -> int:
    from .backends.factory import make_backend
    from .pipeline import campaign as run_campaign
    from .store import Store

    campaign = getattr(args, "campaign_fn", None) or run_campaign
    plats = cfg.platforms
    store = Store(args.results, cfg.campaign)
    out.info(f"campaign {cfg.campaign} -> {store.root}  platforms: {', '.join(plats)}")

    def on_record(rec):
        out.stop()
        out.info(_record_line(rec))

    try:
        recs = campaign(cfg, plats, store, lambda p: make_backend(p, cfg), resume=args.resume,
                        progress=out.progress, on_record=on_record)
    except KeyboardInterrupt:
        raise Interrupted(store.inflight()) from None  # what could not be cancelled is still in the store
    finally:
        out.stop()
    all_runs = store.runs()
    if args.json:
        print(json.dumps({"campaign": cfg.campaign, "results": str(store.root),
                          "runs": [{k: r.get(k) for k in ("run_id", "platform", "scenario", "status", "error")} |
                                   {"metrics": {k: v.get("value") for k, v in (r.get("metrics") or {}).items()}}
                                   for r in recs]}, indent=2))
    ok = sum(1 for r in recs if r.get("status") == "ok")
    out.info(f"{ok}/{len(recs)} runs ok now; {len(all_runs)} records in {store.runs_path}")
    out.info(f"next: poc report {store.root}")
    return 0 if ok == len(recs) else 1


def cmd_cleanup(args) -> int:
    """Undo what an interrupted campaign left (jobs, lost nodes) without resuming it (harness/undo.py)."""
    from .backends.factory import make_backend
    from .store import Store
    from .undo import undo_inflight

    cfg = _load(args)
    out = Out(args.quiet, args.json)
    store = Store(args.results, cfg.campaign)
    done, failed = undo_inflight(store, lambda p: make_backend(p, cfg))
    if args.json:
        print(json.dumps({"campaign": cfg.campaign, "undone": [h["run_id"] for h in done],
                          "failed": [{"run_id": h["run_id"], "error": h["error"]} for h in failed]}, indent=2))
    for h in done:
        out.info(f"undone: {h['platform']} {h['run_id']} ({' '.join(map(str, h.get('ids') or []))})")
    if not done and not failed:
        out.info(f"campaign {cfg.campaign}: nothing in flight")
    if failed:
        raise PocError(f"{len(failed)} in-flight run(s) could not be undone: "
                       + "; ".join(f"{h['run_id']}: {h['error']}" for h in failed),
                       tip="fix what the message says, then run `poc cleanup` again (the records are kept)")
    return 0


def cmd_smoke(args) -> int:
    from .smoke import SMOKE_CAMPAIGN, ensure_clusters, native_tenant, smoke_config

    base = _load(args)
    plats = _platforms(args, base) if args.platform else None
    cfg = smoke_config(base, plats, args.repetitions)
    out = Out(args.quiet, args.json)
    if not args.no_clusters:
        ensure_clusters(cfg.platforms, out.info)
    if "k8s" in cfg.platforms:   # the probes run as the native cluster's restricted user, once it exists
        cfg = smoke_config(base, plats, args.repetitions, tenant=native_tenant())
    if not args.campaign:
        cfg.campaign = SMOKE_CAMPAIGN
    args.repetitions = cfg.repetitions
    rc = _run_campaign(args, cfg, out)
    cmd_report(argparse.Namespace(results_dir=str(Path(args.results) / cfg.campaign), out=None,
                                  quiet=args.quiet, json=False))
    return rc


def cmd_render(args) -> int:
    from .backends.factory import make_backend
    from .spec import Planned, blocker_spec, build, run_plan

    cfg = _load(args)
    plats = _platforms(args, cfg)
    for plat in plats:
        plan = run_plan(cfg, plat) or [Planned(f"{plat}-clean-01")]
        want = args.run_id or plan[0].run_id
        # a planned run renders as planned (its fault, its scenario); "<contention run>-blocker" is
        # that run's blocking job; any other id renders the first planned run under that name
        planned = {p.run_id: p for p in plan}
        blocker = want.endswith("-blocker") and want.removesuffix("-blocker") in planned
        p = planned.get(want.removesuffix("-blocker") if blocker else want) or plan[0]._replace(run_id=want)
        run_cfg = cfg
        if p.scenario.startswith("mistake:"):   # a probe renders with its mistake in it, as it is submitted
            from .ux import mistakes, probe
            m = mistakes.make(cfg, plat, p.scenario.split(":", 1)[1])
            run_cfg, spec = m.cfg, probe.probe_spec(m, p.run_id)
        else:
            spec = build(cfg, plat, p.run_id, p.fault, p.scenario)
        if blocker and p.scenario == "contention":
            spec = blocker_spec(spec, cfg.contention.blocker_steps if cfg.contention else None)
        backend = make_backend(plat, run_cfg)
        rendered = backend.render(spec)
        if args.out:
            d = Path(args.out) / plat if len(plats) > 1 else Path(args.out)
            d.mkdir(parents=True, exist_ok=True)
            for name, text in rendered.files.items():
                (d / name).write_text(text)
                print(str(d / name))
        else:
            for name, text in rendered.files.items():
                if len(rendered.files) > 1 or len(plats) > 1:
                    print(f"# ---- {plat}: {name} ----")
                print(text, end="" if text.endswith("\n") else "\n")
    return 0


def cmd_report(args) -> int:
    from .report.document import build

    out = Out(args.quiet, args.json)
    paths = build(args.results_dir, args.out)
    if args.json:
        print(json.dumps({k: str(v) for k, v in paths.items()}, indent=2))
    else:
        for k in ("report.md", "report.html", "summary.csv"):
            out.info(f"wrote {paths[k]}")
        charts = [k for k in paths if k.startswith("charts/")]
        out.info(f"wrote {len(charts)} charts in {paths['report.md'].parent / 'charts'}")
    return 0


def cmd_rederive(args) -> int:
    from . import rederive

    checks = rederive.check(args.results_dir, args.campaign)
    if args.json:
        print(json.dumps(rederive.to_json(checks), indent=2, default=str))
    elif not args.quiet:
        print(rederive.table(checks))
    t = rederive.totals(checks)
    if t["runs_checked"] == 0:
        raise StoreError(f"no run recorded ok under {args.results_dir}: nothing to re-derive",
                         tip="re-derivation checks finished runs; run the campaign (or --resume it) first")
    if not rederive.passed(checks):
        raise StoreError(f"re-derivation failed: {rederive.summary(checks)}",
                         tip="the table lists each finding; a run stored before raw evidence was kept "
                             "(raw.json.gz) cannot be checked")
    return 0


def cmd_validate(args) -> int:
    from .render.validate import check_config

    cfg = _load(args)
    check_config(cfg)  # what `poc render` and a run would refuse is refused here too
    dry = None
    if args.server_dry_run:   # the Kubernetes API server's own verdict on the rendered objects
        from .backends.k8s import dryrun
        dry = dryrun.validate_config(cfg)
        if (err := dryrun.failure(dry)) is not None:
            raise err
        if not args.json and not args.quiet:
            print(f"OK server dry-run at {dry['api_server']}: {len(dry['objects'])} objects accepted")
    if args.json:
        print(json.dumps({"ok": True, "config_hash": cfg.config_hash(), **({"server_dry_run": dry} if dry else {})}))
    elif not args.quiet:
        print(f"OK {args.config or '<built-in default>'}: campaign {cfg.campaign}, "
              f"platforms {', '.join(cfg.platforms)}, "
              f"{cfg.resources.nodes} nodes x {cfg.resources.procs_per_node} ranks, {cfg.workload.steps} steps, "
              f"{cfg.repetitions} clean run(s) + {len(cfg.faults)} fault(s) per platform")
    return 0


def cmd_config_show(args) -> int:
    if args.config is None:
        print(cfgmod.default_yaml(), end="")
    else:
        import yaml

        cfg = _load(args)
        print(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False), end="")
    return 0


def cmd_cluster(args) -> int:
    from .clusters import dispatch

    return dispatch(args, say=Out(args.quiet, args.json).info)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="poc",
                                description="Run the same PyTorch DDP job on Kubernetes and Slurm and compare them.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", "-c", help="YAML config (default: the built-in local smoke config)")
    common.add_argument("--quiet", "-q", action="store_true", help="print nothing but errors")
    common.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    # what `run` and `smoke` share: where results go and how an interrupted campaign continues
    campaign_opts = argparse.ArgumentParser(add_help=False)
    campaign_opts.add_argument("--results", default=DEFAULT_RESULTS,
                               help=f"results directory (default: ./{DEFAULT_RESULTS})")
    campaign_opts.add_argument("--resume", action="store_true",
                               help="continue an interrupted campaign: cancel what it left, skip runs already done")

    r = sub.add_parser("run", parents=[common, campaign_opts], help="run a campaign and store its results")
    r.add_argument("--platform", "-p", action="append", help="local, slurm or k8s (repeatable; default: the config's)")
    r.add_argument("--campaign", help="campaign name (default: the config's)")
    r.add_argument("--repetitions", type=int, help="clean runs per platform (overrides the config)")
    r.add_argument("--drill", action="append", choices=["restart", "upgrade"],
                   help="an upgrade drill on each scheduler platform (repeatable; overrides drills.kinds)")
    r.add_argument("--serve", action="store_true",
                   help="add the serving scenario on each scheduler platform (overrides serve.enabled)")
    r.add_argument("--confirm-cluster", metavar="NAME",
                   help="the cluster's name (Slurm ClusterName, the kubeconfig context's cluster): your word that "
                        "it is yours to restart; the local clusters need none")
    r.set_defaults(func=cmd_run)

    cu = sub.add_parser("cleanup", parents=[common],
                        help="undo what an interrupted campaign left (jobs, lost nodes) without resuming it")
    cu.add_argument("--results", default=DEFAULT_RESULTS, help=f"results directory (default: ./{DEFAULT_RESULTS})")
    cu.add_argument("--campaign", help="campaign name (default: the config's)")
    cu.set_defaults(func=cmd_cleanup)

    sm = sub.add_parser("smoke", parents=[common, campaign_opts],
                        help="local clusters up, the default campaign on every platform, the report")
    sm.add_argument("--platform", "-p", action="append", help="limit to these platforms (default: local, slurm, k8s)")
    sm.add_argument("--campaign", help="campaign name (default: smoke-poc)")
    sm.add_argument("--repetitions", type=int,
                    help="clean runs per platform (default: 8, enough for a verdict; see harness/smoke.py)")
    sm.add_argument("--no-clusters", action="store_true",
                    help="do not start the local clusters (use what the config points at)")
    sm.set_defaults(func=cmd_smoke)

    rd = sub.add_parser("render", parents=[common], help="print or write the job as each platform would receive it")
    rd.add_argument("--platform", "-p", action="append", help="local, slurm or k8s (repeatable)")
    rd.add_argument("--out", help="write files into this directory instead of printing")
    rd.add_argument("--run-id", help="run id to render (default: the first planned run; "
                                     "<contention run id>-blocker renders its blocking job)")
    rd.set_defaults(func=cmd_render)

    rp = sub.add_parser("report", parents=[common], help="write report.md/.html, charts and summary.csv from results")
    rp.add_argument("results_dir", help="a results directory or one campaign inside it")
    rp.add_argument("--out", help="output directory (default: RESULTS_DIR/report)")
    rp.set_defaults(func=cmd_report)

    rv = sub.add_parser("rederive", parents=[common],
                        help="re-derive every stored metric from the stored raw evidence and list each mismatch")
    rv.add_argument("results_dir", help="a results directory or one campaign inside it")
    rv.add_argument("--campaign", help="only this campaign of the results directory")
    rv.set_defaults(func=cmd_rederive)

    v = sub.add_parser("validate", parents=[common], help="check a config file")
    v.add_argument("--server-dry-run", action="store_true",
                   help="also send the rendered Kubernetes objects to the API server with dryRun=All "
                        "(schema, RBAC and webhooks check them; nothing is created)")
    v.set_defaults(func=cmd_validate)

    c = sub.add_parser("config", help="configuration helpers")
    csub = c.add_subparsers(dest="config_command", required=True, metavar="SUBCOMMAND")
    cs = csub.add_parser("show", parents=[common], help="print the default config (or --config's, resolved) as YAML")
    cs.set_defaults(func=cmd_config_show)

    cl = sub.add_parser("cluster", help="local clusters: Slurm in Docker, native Kubernetes, kind")
    clsub = cl.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")
    release_help = "Debian release of the images (trixie: Slurm 24.11, bookworm: 22.05)"
    for action, what in (("up", "start the local cluster(s), building what is missing; cheap when running"),
                         ("down", "stop and remove the local cluster(s)"),
                         ("status", "the components of the local cluster(s); never builds or pulls")):
        a = clsub.add_parser(action, parents=[common], help=what)
        a.add_argument("--slurm", action="store_true", help="the Slurm-in-Docker cluster")
        a.add_argument("--k8s", action="store_true", help="the local Kubernetes cluster")
        a.add_argument("--provider", choices=["auto", "native", "kind"], default="auto",
                       help="Kubernetes provider (auto: for up, kind when its node image can be had, else native)")
        a.add_argument("--nodes", type=int, default=3, help="Kubernetes nodes (two for the job, one spare)")
        a.add_argument("--release", default=None, help=release_help)
        a.set_defaults(func=cmd_cluster)
    im = clsub.add_parser("images", parents=[common], help="build the project's container images that are missing")
    im.add_argument("what", nargs="?", default="all", choices=["base", "worker", "slurm", "mariadb", "all", "prune"],
                    help="which image (default: all); prune removes tags whose build inputs changed")
    im.add_argument("--release", default=None, help=release_help)
    im.set_defaults(func=cmd_cluster)
    return p


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a campaign; `left` holds the in-flight handles it did not cancel."""

    def __init__(self, left: list[dict]):
        super().__init__()
        self.left = left


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt  # same path as Ctrl-C: cancel what was submitted, keep what was measured


def main(argv: list[str] | None = None, *, campaign_fn=None) -> int:
    """campaign_fn: stands in for harness.pipeline.campaign (tests pass one; None runs the real one)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.campaign_fn = campaign_fn
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return args.func(args)
    except PocError as exc:
        print(f"ERROR {exc.message}", file=sys.stderr)
        if exc.tip:
            print(f"TIP {exc.tip}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        left = getattr(exc, "left", None) or []
        if left:
            jobs = "; ".join(f"{h.get('platform')} {h.get('run_id')} ({' '.join(map(str, h.get('ids') or []))})"
                             for h in left)
            print(f"ERROR interrupted: {len(left)} submitted job(s) may still be running: {jobs}; "
                  "finished runs are kept", file=sys.stderr)
            print("TIP the same command plus --resume cancels them first, then continues", file=sys.stderr)
        else:
            print("ERROR interrupted: submitted jobs were cancelled and finished runs are kept", file=sys.stderr)
            print("TIP continue with the same command plus --resume", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
