"""Re-derive every stored metric of a campaign from its stored evidence alone, and list each mismatch.

For each run recorded ok, from the files under runs/<run_id>/ and nothing else:
    raw.json.gz  --harness.evidence.stamps(platform, raw)-->  stamps
    events.jsonl --harness.metrics.derive(events, stamps, ...)-->  metrics
and compare with what runs.jsonl holds: every metric's value, lo, hi and uncertainty, and the
scheduler stamps the record kept (record["scheduler"]["stamps"]). The pipeline takes the same two
calls at the end of a run, so any difference means the stored number did not come from the stored
evidence (edited, lost, or computed by other code). A run without raw evidence cannot be checked
and is reported as such, never passed.

Tolerance: metric fields are durations, rates, counts and costs, compared to 1e-9 absolute or
relative. Stamps are epoch seconds (~1.8e9), where a relative 1e-9 would be almost two seconds:
they are compared to 1e-9 s absolute, i.e. exactly (JSON keeps a float bit for bit, and both sides
do the same arithmetic on the same inputs).
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import evidence
from .context import Evidence
from .errors import StoreError
from .scenarios import kind_of, scenario_class
from .store import RAW_FILE, bounded, iter_runs, load_events, load_raw, runs_files

FIELDS = ("value", "lo", "hi", "uncertainty")
TOL = 1e-9
ABSENT = "<absent>"   # stands for a metric or field one side does not have


@dataclass(frozen=True)
class Finding:
    run_id: str
    metric: str        # a metric name; "stamps" for the record's scheduler stamps; "-" for the whole run
    field: str         # value / lo / hi / uncertainty; a stamp path (allocated.lo); or what was missing
    stored: object
    recomputed: object
    kind: str = "mismatch"   # mismatch | missing (no raw evidence, no events) | error (re-derivation raised)


@dataclass
class CampaignCheck:
    campaign: str
    dir: str
    checked: list[str] = field(default_factory=list)           # ok runs re-derived (with or without findings)
    replays: list[str] = field(default_factory=list)           # scale replays re-derived (scale/<name>/<run>)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (run_id, status) of runs not ok
    unreadable: list[str] = field(default_factory=list)  # runs.jsonl lines that are not records (torn writes)
    findings: list[Finding] = field(default_factory=list)

    def count(self, kind: str) -> int:
        if kind == "mismatch":
            return sum(1 for f in self.findings if f.kind == kind)
        return len({f.run_id for f in self.findings if f.kind == kind})


def campaign_dirs(path: str | Path, campaign: str | None = None) -> list[Path]:
    """The campaign dirs to check: PATH itself when it is one, else every campaign in it (or --campaign's)."""
    root = Path(path).expanduser()
    if campaign is None:
        return [f.parent for f in runs_files(root)]
    if (root / "runs.jsonl").exists() and root.name == campaign:
        return [root]
    if (root / campaign / "runs.jsonl").exists():
        return [root / campaign]
    there = sorted(f.parent.name for f in runs_files(root)) if root.exists() else []
    raise StoreError(f"no campaign {campaign!r} under {root}",
                     tip=f"campaigns there: {', '.join(there)}" if there else "pass the --results dir of `poc run`")


def check(path: str | Path, campaign: str | None = None, **kw) -> list[CampaignCheck]:
    return [check_campaign(d, **kw) for d in campaign_dirs(path, campaign)]


def check_campaign(cdir: Path, *, stamps_fn: Callable[[str, dict], dict] = evidence.stamps,
                   derive_fn: Callable | None = None) -> CampaignCheck:
    """stamps_fn / derive_fn: harness.evidence.stamps and harness.metrics.derive (tests pass others)."""
    if derive_fn is None:
        from .metrics import derive as derive_fn
    cdir = Path(cdir)
    config = _config(cdir)
    out = CampaignCheck(campaign=str(config.get("campaign") or cdir.name), dir=str(cdir))
    latest: dict[str, dict] = {}
    for rec in iter_runs(cdir / "runs.jsonl", out.unreadable.append):
        latest[rec["run_id"]] = rec   # --resume re-runs a failed run under its id: the last record is its dir's
    for run_id, rec in latest.items():
        if rec.get("status") != "ok":
            out.skipped.append((run_id, str(rec.get("status"))))
            continue
        out.checked.append(run_id)
        out.findings += check_run(rec, cdir / "runs" / run_id, config, stamps_fn, derive_fn)
    check_replays(cdir, out)
    return out


def check_replays(cdir: Path, out: CampaignCheck) -> None:
    """The campaign's replays of job traces (<campaign>/scale/*/): each stored replay's figures drawn again
    from its raw scheduler records (replay/store.py); their findings join the runs'."""
    from .replay import store as replaystore
    for where in replaystore.replay_dirs(cdir):
        _, stored = replaystore.load(where)
        out.replays += [f"{replaystore.SCALE_DIR}/{where.name}/{run}" for run in stored]
        out.findings += [Finding(f"{replaystore.SCALE_DIR}/{where.name}/{run}", key, "value", kept, again)
                         for run, key, kept, again in replaystore.mismatches(where)]


def check_run(rec: dict, run_dir: Path, config: dict, stamps_fn, derive_fn) -> list[Finding]:
    run_id = rec["run_id"]
    if not (run_dir / RAW_FILE).exists():
        return [Finding(run_id, "-", "raw", f"no raw evidence ({RAW_FILE})", None, "missing")]
    if kind_of(str(rec.get("scenario") or ""))[0] == "mistake":   # "mistake:<kind>"; older records: "mistake"
        return check_mistake(rec, run_dir) + check_audit(rec, run_dir)
    events = load_events(run_dir)
    if events is None:
        return [Finding(run_id, "-", "events", "no workload events (events.jsonl)", None, "missing")]
    try:
        raw = load_raw(run_dir)
        inputs = derive_inputs(rec, config)
        st = stamps_fn(rec["platform"], raw)
        # the scenario's own metrics function, the one the pipeline ran
        scen = scenario_class(str(rec.get("scenario", "")))
        own = raw.get(scen.raw_key) if scen.raw_key else None
        metrics, _timeline = scen.metrics(Evidence(
            rec["platform"], events, st, stamps_fn, inputs, derive_fn, faults=rec.get("faults") or [],
            contention=rec.get("contention"), job_ok=scen.job_ok(own), raw=own))
    except Exception as exc:  # noqa: BLE001 - whatever broke, it is this run's finding, and the others are still checked
        return [Finding(run_id, "-", "error", f"{type(exc).__name__}: {exc}", None, "error")]
    stored, stored_stamps = rec.get("metrics") or {}, (rec.get("scheduler") or {}).get("stamps")
    again, owed = evidence.to_json(st), set()
    for key, name in LATER_STAMPS.items():
        if key in (stored_stamps or {}):
            owed.add(name)           # written after the change: its metric is owed too
        elif predates(stored, name):
            again.pop(key, None)     # kept before the change: neither the key nor the metric
    found = compare_metrics(run_id, stored, metrics, frozenset(owed))
    if stored_stamps is not None:
        found += [Finding(run_id, "stamps", p, a, b) for p, a, b in diff(stored_stamps, again, exact=True)]
    return found + check_audit(rec, run_dir)


def check_audit(rec: dict, run_dir: Path) -> list[Finding]:
    """The audit answers again from the stored raw evidence (raw["audit"] and what collect kept) by the
    same pure code (harness/audit); a record stored before audit answers existed has none to check."""
    from . import audit
    stored, run_id = rec.get("audit"), rec["run_id"]
    try:
        raw = load_raw(run_dir)
        if stored is None:   # answers are owed only where the audit records were kept
            return ([Finding(run_id, "audit", "answers", ABSENT, "raw['audit'] is kept", "missing")]
                    if "audit" in raw and rec["platform"] in audit.PLATFORMS else [])
        again = audit.answers(rec["platform"], raw)
    except Exception as exc:  # noqa: BLE001 - this run's finding; the others are still checked
        return [Finding(run_id, "audit", "error", f"{type(exc).__name__}: {exc}", None, "error")]
    return [Finding(run_id, "audit", p, a, b) for p, a, b in diff(stored, again)]


def derive_inputs(rec: dict, config: dict) -> dict:
    """What metrics.derive needs beyond events and stamps: the record's own copy when it has one
    (record["derive_inputs"], written by the pipeline), else rebuilt from the campaign's config the
    way harness.spec.build does."""
    if rec.get("derive_inputs"):
        d = rec["derive_inputs"]
        # cost by the rule the run was derived by (metrics/cost.py COST_RULES); none recorded: rule 1
        return {**{k: d[k] for k in ("world", "nodes", "gpus_per_node", "steps", "price")},
                "cost_rule": int(d.get("cost_rule") or 1)}
    if not config:
        raise StoreError("campaign.json holds no config and the record no derive_inputs")
    r, w = config["resources"], config["workload"]
    return {"world": int(r["nodes"]) * int(r["procs_per_node"]), "nodes": int(r["nodes"]),
            "gpus_per_node": int(r["gpus_per_node"]), "steps": int(w["steps"]),
            "price": config["pricing"][rec["platform"]], "cost_rule": 1}


def check_mistake(rec: dict, run_dir: Path) -> list[Finding]:
    """A user-experience probe: its verdict and time_to_error_s again from the messages it saw (the raw
    evidence's user_view, each with when) by the same pure code (harness/ux/clear.py)."""
    from .ux import clear
    run_id, mk = rec["run_id"], rec.get("mistake") or {}
    try:
        seen = load_raw(run_dir).get("user_view")
        if seen is None:
            return [Finding(run_id, "-", "raw", "no user_view in the raw evidence", None, "missing")]
        v = clear.verdict(seen, mk.get("kind", ""), mk.get("wrong", ""))
    except Exception as exc:  # noqa: BLE001 - this run's finding; the others are still checked
        return [Finding(run_id, "-", "error", f"{type(exc).__name__}: {exc}", None, "error")]
    out = [Finding(run_id, "mistake", k, mk.get(k, ABSENT), v[k]) for k in v if not same(mk.get(k, ABSENT), v[k])]
    metric = f"time_to_error_s:{mk.get('kind')}"
    stored = ((rec.get("metrics") or {}).get(metric) or {}).get("value", ABSENT)
    if not same(stored, ABSENT if v["time_to_error_s"] is None else v["time_to_error_s"]):
        out.append(Finding(run_id, metric, "value", stored, v["time_to_error_s"]))
    return out


# Metrics added after campaigns were stored, by the change that added them. A record that holds none of a
# change's metrics predates it, and their absence there is no finding; a record that holds some of them was
# written after it, so one missing is still reported.
LATER_GENERATIONS = (
    frozenset({"first_log_s"}),
    # metrics/checkpoint.py, throughput.py, straggler.py
    frozenset({"checkpoint_save_s", "checkpoint_load_s", "samples_per_s", "tokens_per_s", "mfu", "straggler_ratio"}),
    # metrics/image.py, from the kubelet's events the Kubernetes stamps carry under "image_pull"
    frozenset({"image_pull_s"}),
)
LATER_METRICS = frozenset().union(*LATER_GENERATIONS)
# Keys of the scheduler stamps a later change added, with the metric made from them: a record kept before the
# change has neither (no finding); a record whose stamps have the key was written after it, so the metric is owed.
LATER_STAMPS = {"image_pull": "image_pull_s"}


def predates(stored: dict, name: str) -> bool:
    """Whether a record with these stored metrics was written before `name` existed."""
    return any(name in g and not (g & stored.keys()) for g in LATER_GENERATIONS)


def compare_metrics(run_id: str, stored: dict, recomputed: dict, owed: frozenset = frozenset()) -> list[Finding]:
    """owed: later metrics the record must have whatever else it holds (see LATER_STAMPS)."""
    out = []
    for name in sorted(stored.keys() | recomputed.keys()):
        s, r = stored.get(name), recomputed.get(name)
        if s is None and name not in owed and predates(stored, name):
            continue
        if s is None or r is None:
            out.append(Finding(run_id, name, "value", ABSENT if s is None else s.get("value"),
                               ABSENT if r is None else r.get("value")))
            continue
        for f in FIELDS:
            if f not in s and f not in r:
                continue
            a, b = s.get(f, ABSENT), r.get(f, ABSENT)
            if not same(a, b):
                out.append(Finding(run_id, name, f, a, b))
    return out


def same(a: object, b: object, exact: bool = False) -> bool:
    if _num(a) and _num(b):
        if math.isnan(a) and math.isnan(b):
            return True
        d = abs(a - b)
        return d <= TOL or (not exact and d <= TOL * max(abs(a), abs(b)))
    return a == b


def diff(a: object, b: object, path: str = "", exact: bool = False) -> list[tuple[str, object, object]]:
    """(path, a's, b's) for every leaf where two JSON structures differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(a.keys() | b.keys(), key=str):
            sub = f"{path}.{k}" if path else str(k)
            if k not in a or k not in b:
                out.append((sub, a.get(k, ABSENT), b.get(k, ABSENT)))
            else:
                out += diff(a[k], b[k], sub, exact)
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = [(f"{path}[{i}]", ABSENT if i >= len(a) else a[i], ABSENT if i >= len(b) else b[i])
               for i in range(min(len(a), len(b)), max(len(a), len(b)))]
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            out += diff(x, y, f"{path}[{i}]", exact)
        return sorted(out, key=lambda t: t[0])
    return [] if same(a, b, exact) else [(path, a, b)]


def _num(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _config(cdir: Path) -> dict:
    meta = cdir / "campaign.json"
    if not meta.exists():
        return {}
    data = bounded.load_json(meta)   # StoreError for a file that is not JSON or is past the reading limits
    if not isinstance(data, dict):
        raise StoreError(f"{meta} is not a JSON object", tip="restore the campaign's campaign.json")
    return data.get("config") or {}


# -- output ------------------------------------------------------------------------------------------------------

def totals(checks: list[CampaignCheck]) -> dict:
    return {"runs_checked": sum(len(c.checked) for c in checks), "replays_checked": sum(len(c.replays) for c in checks),
            "mismatches": sum(c.count("mismatch") for c in checks),
            "runs_without_evidence": sum(c.count("missing") for c in checks),
            "runs_failed_to_rederive": sum(c.count("error") for c in checks)}


def passed(checks: list[CampaignCheck]) -> bool:
    t = totals(checks)
    return t["runs_checked"] > 0 and not (t["mismatches"] or t["runs_without_evidence"] or t["runs_failed_to_rederive"])


def to_json(checks: list[CampaignCheck]) -> dict:
    return {"version": 1, "ok": passed(checks), **totals(checks),
            "campaigns": [{"campaign": c.campaign, "dir": c.dir, "runs_checked": c.checked,
                           **({"replays_checked": c.replays} if c.replays else {}),
                           "runs_skipped": [{"run_id": r, "status": s} for r, s in c.skipped],
                           **({"lines_unreadable": c.unreadable} if c.unreadable else {}),
                           "findings": [asdict(f) for f in c.findings]} for c in checks]}


def _fmt(v: object) -> str:
    if _num(v):
        return repr(v)  # the shortest text that reads back as the same float: two epochs that differ show it
    return v if isinstance(v, str) else json.dumps(v, default=str)


def table(checks: list[CampaignCheck]) -> str:
    lines = []
    for c in checks:
        lines.append(f"campaign {c.campaign} ({c.dir}): {len(c.checked)} ok run(s) checked"
                     + (f", {len(c.replays)} scale replay(s)" if c.replays else "")
                     + (f", {len(c.skipped)} not ok skipped" if c.skipped else ""))
        lines += [f"  WARNING {u}" for u in c.unreadable]
        if not c.findings:
            continue
        rows = [("run", "metric", "field", "stored", "recomputed")]
        rows += [(f.run_id, f.metric, f.field, _fmt(f.stored), "" if f.kind != "mismatch" else _fmt(f.recomputed))
                 for f in c.findings]
        widths = [min(max(len(r[i]) for r in rows), 40) for i in range(4)]
        lines += [("  " + "  ".join(x.ljust(w) for x, w in zip(r, widths, strict=False)) + "  " + r[4]).rstrip()
                  for r in rows]
    lines.append(summary(checks))
    return "\n".join(lines)


def summary(checks: list[CampaignCheck]) -> str:
    t = totals(checks)
    s = (f"{t['mismatches']} mismatch(es) in {t['runs_checked']} run(s)"
         + (f" and {t['replays_checked']} scale replay(s)" if t["replays_checked"] else "")
         + f" checked; {t['runs_without_evidence']} without raw evidence")
    return s + (f"; {t['runs_failed_to_rederive']} failed to re-derive" if t["runs_failed_to_rederive"] else "")
