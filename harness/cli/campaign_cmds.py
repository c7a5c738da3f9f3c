"""Day-2 commands on a campaign's store: `status`, `list`, `logs`, `cleanup` and `cancel`.

All of them read the store without its lock (harness/cli/campaign_state.py), so they work while the
campaign runs in another process; only cleanup and cancel change anything, through harness/undo.py,
which takes the lock as a campaign does.
"""
from __future__ import annotations

import copy
import os
import signal
import time
from pathlib import Path

from ..errors import ConfigError, PocError, StoreError
from ..store import bounded
from . import campaign_state as cs
from . import common, live_output
from .output import Out, asked_table, columns, data_format, emit, warn


def _plan_config(args, view: cs.CampaignView):
    """The config whose plan the campaign runs: the one it stored, unless --config or an override
    says otherwise (the stored one is what the other process is running)."""
    cfg = common.load(args)
    if getattr(args, "config", None) or args.overrides_applied or not view.meta:
        return cfg, "--config" if getattr(args, "config", None) else "the command line"
    from .. import config as cfgmod
    try:
        stored = cfgmod.from_mapping(view.meta.get("config"), f"{view.root / 'campaign.json'}")
    except ConfigError as exc:   # stored by another harness version: the plan of today's config is the best guess
        view.notes.append(f"{exc.message.splitlines()[0]}; planned runs are those of the config given here")
        return cfg, "the command line"
    return stored, "campaign.json"


def _platform_config(args, view: cs.CampaignView):
    """The config that says how to reach the campaign's platforms: --config when given, else the one
    the campaign stored (so `poc cancel` and `poc logs` from another terminal need only the campaign
    dir), with the POC_* and --set overrides applied to it: campaign.json keeps secret paths
    redacted, and an override (POC_SLURM__KEY_FILE=...) is how to give one back."""
    stored = (view.meta or {}).get("config")
    if getattr(args, "config", None) or not isinstance(stored, dict):
        return common.load(args)
    from .. import config as cfgmod
    from . import overrides

    env = getattr(args, "env", None)
    todo = overrides.from_env(os.environ if env is None else env) + overrides.from_set(getattr(args, "set", None))
    data = overrides.apply(copy.deepcopy(stored), todo)[0] if todo else stored
    try:
        return cfgmod.from_mapping(data, f"{view.root / 'campaign.json'}")
    except ConfigError as exc:   # stored by another harness version
        view.notes.append(f"{exc.message.splitlines()[0]}; the platforms are reached as the default config says "
                          "(pass the campaign's --config to say otherwise)")
        return common.load(args)


def _campaign_root(args) -> Path:
    root = Path(args.results).expanduser()
    if not getattr(args, "campaign", None) and not getattr(args, "config", None):
        found = cs.campaigns_under(root)   # --results named the campaign itself, or holds only one
        if len(found) == 1:
            return found[0]
    return root / common.load(args).campaign


def cmd_status(args) -> int:
    from ..order import arrange
    from ..scenarios import plan

    root = _campaign_root(args)
    if not cs.is_campaign(root):
        raise StoreError(f"no campaign at {root}",
                         tip=f"`poc list --results {args.results}` lists the campaigns there; pass --campaign NAME")
    view = cs.read(root)
    cfg, plan_from = _plan_config(args, view)
    plats = common.platforms(args, cfg)
    slots = arrange({p: plan(cfg, p) for p in plats}, cfg.order, cfg.seed)
    planned = [(s.platform, s.planned.run_id, s.planned.scenario) for s in slots]
    ids = {rid for _, rid, _ in planned}
    extra = [(r.get("platform"), rid, r.get("scenario")) for rid, r in view.records.items() if rid not in ids]
    extra += [(h.get("platform"), rid, "") for rid, h in view.inflight.items() if rid not in ids]
    runs = [_run_row(view, plat, rid, scen) for plat, rid, scen in planned + extra]
    # runs outside the plan (another config's, a plan that changed) are counted too, and said to be
    counts = {s: sum(1 for r in runs if r["state"] == s) for s in cs.STATES}
    holder = cs.lock_holder(root)
    data = {"campaign": root.name, "dir": str(root), "running": holder if holder is None else bool(holder),
            "pid": holder or None, "plan_from": plan_from, "planned": len(planned), "outside_plan": len(extra),
            "counts": counts, "runs": runs,
            # what `poc run --resume` runs (pipeline.campaign): every planned run not recorded ok
            "left": [r["run_id"] for r in runs[:len(planned)] if r["state"] != "ok"]}
    warn(view.notes)
    emit(args, data, table=lambda: _status_table(data))
    return 0


def _run_row(view: cs.CampaignView, plat, run_id: str, scenario) -> dict:
    state = view.state(run_id)
    rec, handle = view.records.get(run_id) or {}, view.inflight.get(run_id)
    row = {"run_id": run_id, "platform": plat, "scenario": scenario, "state": state, "detail": ""}
    if handle is not None:
        row["ids"] = list(handle.get("ids") or [])
        since = handle.get("submitted_at")
        row["detail"] = (f"submitted {time.time() - since:.0f} s ago" if isinstance(since, (int, float)) else "") + \
            (f" as {' '.join(map(str, row['ids']))}" if row["ids"] else "")
    elif rec:
        start, end = rec.get("started_at"), rec.get("finished_at")
        if isinstance(start, (int, float)) and isinstance(end, (int, float)):
            row["duration_s"] = round(end - start, 1)
        err = rec.get("error") or {}
        # an interrupted run's KeyboardInterrupt has no message: its type says what stopped it
        msg = (err.get("message") or err.get("type") or "").splitlines()
        row["detail"] = (f"at {err.get('stage')}: {msg[0][:80] if msg else ''}" if err
                         else f"{row.get('duration_s', '')} s" if "duration_s" in row else "")
    return row


def _status_table(d: dict) -> str:
    running = {True: f"running (pid {d['pid']})", False: "not running", None: "running: unknown"}[d["running"]]
    c = d["counts"]
    head = (f"campaign {d['campaign']} at {d['dir']}: {running}\n"
            f"{d['planned']} planned (plan from {d['plan_from']})"
            f"{', ' + str(d['outside_plan']) + ' more recorded outside it' if d['outside_plan'] else ''}: "
            f"{c['ok']} ok, {c['failed']} failed, "
            f"{c['harness_error']} harness error(s), {c['interrupted']} interrupted, {c['in_flight']} in flight, "
            f"{c['to_run']} to run\n")
    rows = [[r["run_id"], r["platform"] or "", r["scenario"] or "", r["state"].replace("_", " "), r["detail"]]
            for r in d["runs"]]
    tail = ""
    if d["running"] is False and d["left"]:
        tail = (f"stopped with {len(d['left'])} left to run: {', '.join(d['left'])}; "
                "the same `poc run` plus --resume runs them\n")
    return head + columns(rows, ["RUN", "PLATFORM", "SCENARIO", "STATE", "DETAIL"]) + tail


def cmd_list(args) -> int:
    results = Path(args.results).expanduser()
    if not results.is_dir():
        raise StoreError(f"results directory {args.results!r} does not exist",
                         tip="pass the --results dir of `poc run`")
    out = []
    for root in cs.campaigns_under(results):
        view = cs.read(root)
        warn(view.notes)
        states = [view.state(rid) for rid in set(view.records) | set(view.inflight)]
        holder = cs.lock_holder(root)
        out.append({"campaign": root.name, "dir": str(root), "runs": len(states),
                    **{s: states.count(s) for s in cs.STATES if s != "to_run"},
                    "running": holder if holder is None else bool(holder),
                    "updated": (view.meta or {}).get("updated")})

    def table() -> str:
        if not out:
            return f"no campaign under {results}"
        rows = [[c["campaign"], c["runs"], c["ok"], c["failed"], c["harness_error"], c["in_flight"],
                 {True: "running", False: "", None: "?"}[c["running"]],
                 time.strftime("%Y-%m-%d %H:%M", time.localtime(c["updated"])) if c["updated"] else ""]
                for c in out]
        return columns(rows, ["CAMPAIGN", "RUNS", "OK", "FAILED", "HARNESS", "IN FLIGHT", "STATE", "UPDATED"])
    emit(args, {"results": str(results), "campaigns": out}, table=table)
    return 0


def _find_run(args) -> Path:
    """runs/<id> of the campaign named, else of the one campaign under --results that has it."""
    results = Path(args.results).expanduser()
    roots = [results / args.campaign] if args.campaign else cs.campaigns_under(results)
    found = [r for r in roots if (r / "runs" / args.run_id).is_dir() or args.run_id in cs.read_inflight(r, [])]
    if len(found) > 1:
        raise ConfigError(f"run {args.run_id} is in {len(found)} campaigns: {', '.join(r.name for r in found)}",
                          tip="choose one with --campaign NAME")
    if not found:
        raise StoreError(f"no run {args.run_id} under {results}"
                         + (f" in campaign {args.campaign}" if args.campaign else ""),
                         tip="`poc status` lists a campaign's runs and their ids")
    return found[0]


def cmd_logs(args) -> int:
    root = _find_run(args)
    run_dir = root / "runs" / args.run_id
    handle = cs.read_inflight(root, []).get(args.run_id)
    if handle is not None and live_output.readable(handle):
        if _print_live(args, root, handle):
            return 0
        if not (run_dir / "logs").is_dir():   # else: an earlier attempt's output is kept, printed below
            raise StoreError(f"{args.run_id} is in flight on {handle.get('platform')} "
                             f"({' '.join(map(str, handle.get('ids') or []))}) and its job has written no output yet",
                             tip="it may still be queued: `poc status` shows it; try again once it runs")
    if not run_dir.is_dir():
        raise StoreError(_not_kept_yet(args.run_id, handle), tip=_live_tip(handle))
    # a link planted in the run's directory is never followed: it would print a file of the reader's own
    files, skipped = bounded.files_under(run_dir)
    logs = {str(p.relative_to(run_dir)).removesuffix(".gz"): bounded.read_text(p)
            for p in files if p.relative_to(run_dir).parts[0] == "logs"}
    kept = [str(p.relative_to(run_dir)) for p in files]
    warn(skipped)
    if not logs:
        raise StoreError(f"{run_dir}: no job output kept for {args.run_id} (it holds: {', '.join(kept) or 'nothing'})"
                         + (f"; {_not_kept_yet(args.run_id, handle)}" if handle else ""),
                         tip=_live_tip(handle) if handle else
                         "a run that failed before its job started has no output; `poc status` shows where it failed")
    if handle:   # a record with a handle left: an earlier attempt's output, the job may still run
        Out(args.quiet, bool(data_format(args))).info(f"note: {_not_kept_yet(args.run_id, handle)}; "
                                                      "these are the stored files of an earlier attempt")
    emit(args, {"run_id": args.run_id, "dir": str(run_dir), "live": False, "logs": logs, "files": kept},
         table=lambda: _logs_text(logs))
    return 0


def _print_live(args, root: Path, handle: dict) -> bool:
    """A run in flight: its job's output so far, read where the job writes it (harness/cli/live_output.py);
    False when the job has written nothing yet."""
    from ..backends.factory import make_backend

    view = cs.read(root)
    cfg = _platform_config(args, view)
    warn(view.notes)
    make = getattr(args, "backend_fn", None) or make_backend
    logs = live_output.read(handle, lambda p: make(p, cfg))
    if not logs:
        return False
    ids = " ".join(map(str, handle.get("ids") or []))
    Out(args.quiet, bool(data_format(args))).info(
        f"note: {args.run_id} is in flight on {handle.get('platform')} ({ids}): its job's output so far, "
        "read where the job writes it; the store keeps it when the run finishes")
    emit(args, {"run_id": args.run_id, "dir": str(root / "runs" / args.run_id), "live": True,
                "platform": handle.get("platform"), "ids": handle.get("ids") or [], "logs": logs, "files": []},
         table=lambda: _logs_text(logs))
    return True


def _logs_text(logs: dict[str, str]) -> str:
    return "".join(f"==> {name} <==\n{text}{'' if text.endswith(chr(10)) else chr(10)}" for name, text in logs.items())


def _not_kept_yet(run_id: str, handle: dict | None) -> str:
    if handle is None:
        return f"nothing is kept for {run_id} yet: it has not run"
    return (f"nothing is kept for {run_id} yet: it is in flight on {handle.get('platform')} "
            f"({' '.join(map(str, handle.get('ids') or []))}); the store keeps its output when it finishes")


def _live_tip(handle: dict | None) -> str:
    if handle is None:
        return "`poc status` shows which runs have run"
    plat, ids = handle.get("platform"), " ".join(map(str, handle.get("ids") or []))
    return {"slurm": f"until then, the job's output is on the cluster: `scontrol show job {ids}` names its StdOut",
            "k8s": f"until then, `kubectl logs -l poc/run-id={handle.get('run_id')} --all-containers` reads it",
            }.get(plat, "until then, the output is only in the running job's containers or processes")


def cmd_cleanup(args) -> int:
    """Undo what an interrupted campaign left (jobs, lost nodes) without resuming it (harness/undo.py);
    `cancel` first stops the campaign's running process, if any, the way Ctrl-C would. The campaign is
    found as `status` finds it (--results may name its dir), and its platforms are reached with the
    config it stored unless --config says otherwise."""
    from ..backends.factory import make_backend
    from ..store import Store
    from ..undo import undo_inflight

    root = _campaign_root(args)
    if not cs.is_campaign(root):
        raise StoreError(f"no campaign at {root}",
                         tip=f"pass the campaign's dir as --results, or `poc list --results {args.results}` "
                             "and --campaign NAME")
    view = cs.read(root)
    cfg = _platform_config(args, view)
    warn(view.notes)
    out = Out(args.quiet, bool(data_format(args)))
    store = Store(root.parent, root.name)
    stopped = _stop_running(store.root, args.wait, out) if getattr(args, "wait", None) is not None else None
    try:
        done, failed = undo_inflight(store, lambda p: (getattr(args, "backend_fn", None) or make_backend)(p, cfg))
    finally:
        warn(store.notes)
    emit(args, {"campaign": root.name, "dir": str(root), "stopped_pid": stopped,
                "undone": [h["run_id"] for h in done],
                "failed": [{"run_id": h["run_id"], "error": h["error"]} for h in failed]},
         asked_table(args, lambda: columns(
             [[h["run_id"], h.get("platform"), "undone", " ".join(map(str, h.get("ids") or []))] for h in done]
             + [[h["run_id"], h.get("platform"), "failed", h["error"]] for h in failed],
             ["RUN", "PLATFORM", "RESULT", "DETAIL"])))
    for h in done:
        out.info(f"undone: {h['platform']} {h['run_id']} ({' '.join(map(str, h.get('ids') or []))})")
    if not done and not failed:
        out.info(f"campaign {root.name}: nothing in flight")
    if failed:
        redacted = "" if getattr(args, "config", None) else \
            " (the platforms were reached with the config in campaign.json, whose secret paths are redacted: " \
            "pass the campaign's --config)"
        tips = list(dict.fromkeys(h["tip"] for h in failed if h.get("tip")))
        raise PocError(f"{len(failed)} in-flight run(s) could not be undone: "
                       + "; ".join(f"{h['run_id']}: {h['error']}" for h in failed),
                       tip=(" ".join(tips) if tips else f"fix what the message says, then run `poc {args.command}` "
                                                        f"again (the records are kept){redacted}"))
    return 0


def _stop_running(root: Path, wait_s: float, out: Out) -> int | None:
    """SIGTERM to the process that holds the campaign's lock (it cancels what it submitted, keeps what it
    measured and exits), then wait for the lock to be free. The pid is one that has this campaign's lock
    file open (campaign_state.lock_holder), never a process found by name."""
    pid = cs.lock_holder(root)
    if not pid:
        return None
    out.info(f"campaign {root.name}: stopping its process {pid} (SIGTERM: it cancels its jobs, keeps its results)")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return pid
    deadline = time.monotonic() + wait_s
    while cs.lock_holder(root) and time.monotonic() < deadline:
        time.sleep(0.2)
    if cs.lock_holder(root):
        raise StoreError(f"campaign {root} is still running (pid {pid}) {wait_s:g} s after SIGTERM",
                         tip="its cancels may be slow; run `poc cancel` again, or wait longer with --wait SECONDS")
    return pid
