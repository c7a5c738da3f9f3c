"""`poc run` and `poc smoke`: a campaign, its progress line, what its exit code says."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from .. import redact
from ..errors import ConfigError
from . import common
from .output import Out, RunCounter, asked_table, columns, emit, record_line, warn

log = logging.getLogger(__name__)

EXIT_OK, EXIT_PLATFORM_FAILED, EXIT_BAD_INPUT, EXIT_HARNESS_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a campaign; `left` holds the in-flight handles it did not cancel."""

    def __init__(self, left: list[dict]):
        super().__init__()
        self.left = left


def cmd_run(args) -> int:
    cfg = common.load(args)
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
    cfg.platforms = common.platforms(args, cfg)
    import time

    from . import sequential as seq

    started = time.monotonic()
    sequential = getattr(args, "design", "fixed") == "sequential" or getattr(args, "budget", None) is not None
    budget_s = seq.duration(getattr(args, "budget", None) or seq.DEFAULT_BUDGET)
    if sequential:
        seq.refuse_other_campaigns(Path(args.results), cfg.campaign, args.resume)
    # before anything runs: a plan that cannot decide is said so (or refused)
    questions = seq.check_plan(cfg, strict=args.strict_design, sequential=sequential)
    out = Out(args.quiet, args.json)
    rc = run_campaign(args, cfg, out)
    if sequential:
        family = [q.metric for q in seq.designmod.family(questions)]
        rc = max(rc, seq.extend(args, cfg, out, family, budget_s, started, run_campaign))
        out.info(f"next: poc report {args.results}   (every stage's campaign)")
    return rc


def exit_code(recs: list[dict]) -> int:
    """A harness bug outranks a platform's failure: the campaign's comparison cannot be trusted then."""
    if any(r.get("status") == "harness_error" or (r.get("error") or {}).get("origin") == "harness" for r in recs):
        return EXIT_HARNESS_ERROR
    return EXIT_OK if all(r.get("status") == "ok" for r in recs) else EXIT_PLATFORM_FAILED


def planned_counts(cfg, plats: list[str], store, resume: bool) -> dict[str, int]:
    """Runs each platform will run: its plan less, on a resume, the runs already recorded ok (read
    without the campaign's lock: the pipeline takes it, and a torn line only makes the count rough)."""
    from ..scenarios import plan
    from ..store import read_runs

    done = {r["run_id"] for r in read_runs(store.runs_path) if r.get("status") == "ok"} if resume else set()
    return {p: sum(1 for x in plan(cfg, p) if x.run_id not in done) for p in plats}


def run_campaign(args, cfg, out: Out) -> int:
    from ..backends.factory import make_backend
    from ..pipeline import campaign as run_pipeline
    from ..store import Store

    campaign = getattr(args, "campaign_fn", None) or run_pipeline
    plats = cfg.platforms
    store = Store(args.results, cfg.campaign)
    applied = getattr(args, "overrides_applied", None) or []
    if applied:
        store.meta["overrides"] = applied
    from ..config import review
    said = review.warnings(cfg)   # said before anything is submitted, and kept beside the config it came from
    if said:
        store.meta["config_warnings"] = said
        warn(list(said))
    try:
        out.counter = RunCounter(planned_counts(cfg, plats, store, args.resume))
    except Exception:  # a count is a nicety; the pipeline reports a store it cannot read
        log.debug("no run count for the progress line", exc_info=True)
    out.info(f"campaign {cfg.campaign} -> {store.root}  platforms: {', '.join(plats)}"
             + (f"  ({out.counter.total} runs)" if out.counter else ""))
    for plat in plats:
        for why in cfg.faults_left_out(plat):
            out.info(f"{plat}: not planned: fault {why}")
    log.info("campaign %s: config hash %s, overrides %s", cfg.campaign, cfg.config_hash(), applied or "none")

    def on_record(rec):
        rec = redact.scrub(rec, redact.NOWHERE).data   # what is printed of a record: credentials out, as stored
        out.stop()
        if out.counter is not None:
            out.counter.record(rec)
        err = rec.get("error") or {}
        if rec.get("scenario") == "preflight" and err:   # nothing of that platform ran: said as any ERROR is
            print(f"ERROR {rec.get('platform')} preflight: {err.get('message')}", file=sys.stderr, flush=True)
            if err.get("tip"):
                print(f"TIP {err['tip']}", file=sys.stderr, flush=True)
            return
        out.info(record_line(rec))

    try:
        make = getattr(args, "backend_fn", None) or make_backend
        recs = campaign(cfg, plats, store, lambda p: make(p, cfg), resume=args.resume,
                        progress=out.progress, on_record=on_record)
    except KeyboardInterrupt:
        raise Interrupted(store.inflight()) from None  # what could not be cancelled is still in the store
    finally:
        out.stop()
        warn(store.notes)
    all_runs = store.runs()
    warn(store.notes)
    shown = redact.scrub(recs, redact.NOWHERE).data   # as printed: credentials out
    emit(args, {"campaign": cfg.campaign, "results": str(store.root), "overrides": applied,
                "runs": [{k: r.get(k) for k in ("run_id", "platform", "scenario", "status", "error")} |
                         {"metrics": {k: v.get("value") for k, v in (r.get("metrics") or {}).items()}}
                         for r in shown]},
         asked_table(args, lambda: runs_table(shown)))
    ok = sum(1 for r in recs if r.get("status") == "ok")
    out.info(f"{ok}/{len(recs)} runs ok now; {len(all_runs)} records in {store.runs_path}")
    out.info(f"next: poc report {store.root}")
    return exit_code(recs)


def runs_table(recs: list[dict]) -> str:
    """The runs this invocation recorded, one line each, in the words of the lines on stderr."""
    def detail(r: dict) -> str:
        said = record_line(r).removeprefix(f"{r.get('run_id')}: ")
        return said.removeprefix(f"{r.get('status')}").strip()
    return columns([[r.get("run_id"), r.get("platform"), r.get("scenario"), r.get("status"), detail(r)]
                    for r in recs], ["RUN", "PLATFORM", "SCENARIO", "STATUS", "DETAIL"])


def cmd_smoke(args) -> int:
    import time

    from ..smoke import SMOKE_CAMPAIGN, SMOKE_FAULT_ROUNDS, ensure_clusters, native_tenant, smoke_config
    from . import sequential as seq
    from .results_cmds import cmd_report

    started = time.monotonic()
    budget = getattr(args, "budget", None)
    sequential = getattr(args, "design", "fixed") == "sequential" or budget is not None
    budget_s = seq.duration(budget or seq.DEFAULT_BUDGET)
    base = common.load(args)
    plats = common.platforms(args, base) if args.platform else None
    reps = args.repetitions if args.repetitions is not None or not sequential else seq.FIRST_STAGE_REPETITIONS
    # the sequential design's first stage: MIN_N rounds of kill_rank too, then rounds where still open
    faults = seq.FIRST_STAGE_REPETITIONS if sequential else SMOKE_FAULT_ROUNDS
    cfg = smoke_config(base, plats, reps, fault_rounds=faults)
    if not args.campaign:
        cfg.campaign = SMOKE_CAMPAIGN
    if sequential:
        seq.refuse_other_campaigns(Path(args.results), cfg.campaign, args.resume)
    questions = seq.check_plan(cfg, strict=getattr(args, "strict_design", False), sequential=sequential)
    out = Out(args.quiet, args.json)
    if not args.no_clusters:
        ensure_clusters(cfg.platforms, out.info)
    if "k8s" in cfg.platforms:   # the probes run as the native cluster's restricted user, once it exists
        cfg = smoke_config(base, plats, reps, tenant=native_tenant(), fault_rounds=faults)
        if not args.campaign:
            cfg.campaign = SMOKE_CAMPAIGN
    args.repetitions = cfg.repetitions
    rc = run_campaign(args, cfg, out)
    where = Path(args.results) / cfg.campaign
    if sequential:
        family = [q.metric for q in seq.designmod.family(questions)]
        rc = max(rc, seq.extend(args, cfg, out, family, budget_s, started, run_campaign))
        where = Path(args.results)   # the report covers every stage's campaign
    cmd_report(argparse.Namespace(results_dir=str(where), out=None, quiet=args.quiet, json=False, output=None))
    return rc
