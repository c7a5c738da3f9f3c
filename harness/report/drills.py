"""The upgrade drills' section: per drill kind, what each platform's running and queued
jobs went through while its scheduler's components were restarted or upgraded in order.

Read from the stored runs alone: a drill run's record keeps the drill's summary (record["drill"]) and
its upgrade_* figures (harness/metrics/drill.py, with their bounds and details); the probes and each
component's health check are in its raw evidence (raw["drill"]), the training steps in its events.
Only lines that name a drill scenario are parsed, so a campaign of 100,000 training runs costs one
substring test a line. One drill per platform and kind is the design: everything here is descriptive.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ..drills.base import KINDS
from ..errors import StoreError
from ..store import latest_records, load_events, load_raw
from . import drills_outage
from .sections import fmt
from .stats import PLATFORM_LABEL, SummaryRow, platform_sort_key

TITLE = "Upgrades (drills)"
SCENARIO_PREFIX = "drill:"
KIND_TITLE = {"restart": "Restart drill", "upgrade": "Version-upgrade drill"}
LIST_SHOWN = 4   # errors, leftovers, changed records listed per cell


@dataclass
class Drill:
    """One drill run as the report shows it; `evidence` and `steps` are {} / [] where the run kept none."""
    run_id: str
    platform: str
    kind: str
    status: str
    error: dict | None
    summary: dict                  # record["drill"]
    metrics: dict                  # record["metrics"]: the upgrade_* records with value/lo/hi/detail
    evidence: dict = field(default_factory=dict)              # raw["drill"]: probes, full steps, snapshots
    steps: list[tuple[float, int]] = field(default_factory=list)   # rank 0's (epoch s, step), in time order
    problem: str | None = None     # why the raw evidence or events could not be read

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def label(self) -> str:
        return PLATFORM_LABEL.get(self.platform, self.platform)

    def value(self, name: str) -> float | None:
        v = (self.metrics.get(name) or {}).get("value")
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None

    def detail(self, name: str) -> dict:
        return (self.metrics.get(name) or {}).get("detail") or {}

    def components(self) -> list[dict]:
        """The steps in drill order, with the health check and poll interval where the evidence has them."""
        return list(self.evidence.get("steps") or self.summary.get("steps") or [])


def load(results_dir: str) -> list[Drill]:
    """Every drill run under a results dir (a retried run's last record), kinds then platforms in order."""
    out = [_drill(rec, d) for rec, d in latest_records(
        results_dir, b'"drill:', lambda r: str(r.get("scenario") or "").startswith(SCENARIO_PREFIX))]
    order = {k: i for i, k in enumerate(KINDS)}
    return sorted(out, key=lambda x: (order.get(x.kind, len(order)), x.kind, platform_sort_key(x.platform)))


def _drill(rec: dict, run_dir: Path) -> Drill:
    d = Drill(str(rec.get("run_id")), str(rec.get("platform")), str(rec["scenario"]).split(":", 1)[1],
              str(rec.get("status")), rec.get("error"), rec.get("drill") or {}, rec.get("metrics") or {})
    try:
        d.evidence = load_raw(run_dir).get("drill") or {}
        events = load_events(run_dir) or []
    except (StoreError, OSError) as exc:   # a damaged file costs this run's timeline, not the report
        d.problem, events = str(getattr(exc, "message", exc)), []
    d.steps = sorted((e["ts_ns"] / 1e9, int(e["step"])) for e in events
                     if e.get("kind") == "step" and e.get("rank") == 0 and "ts_ns" in e and "step" in e)
    return d


# ---------------------------------------------------------------- cells

def count(v: float | None) -> str:
    return "–" if v is None else f"{v:g}"


def seconds(v: float | None) -> str:
    return "–" if v is None else f"{fmt(v)} s"


def _bounds(m: dict) -> str:
    lo, hi = m.get("lo"), m.get("hi")
    if lo is None:
        return ""
    return f" [{fmt(lo)}–{'open' if hi is None else fmt(hi)}]"


def refused_cell(d: Drill, name: str) -> str:
    """'6.72 s [5.16–8.47]: 13 of 32 tries refused, 3 outages'; the bounds are the tries around each outage."""
    m = d.metrics.get(name) or {}
    det = m.get("detail") or {}
    if d.value(name) is None:
        return "– (no probes)" if det.get("tries") == 0 else "–"
    tail = f": {det.get('refused_tries', 0)} of {det.get('tries', 0)} tries refused"
    if det.get("outages"):
        tail += f", {det['outages']} outage{'s' if det['outages'] != 1 else ''}"
    if det.get("open_ended"):
        tail += ", still refused when the drill stopped watching"
    return f"{fmt(d.value(name))} s{_bounds(m)}{tail}"


def _versions(s: dict) -> str:
    b, a = s.get("version_before") or "", s.get("version_after") or ""
    return f" ({b} → {a})" if a and b and a != b else ""


def components_cell(d: Drill) -> str:
    parts = []
    for s in d.components():
        mark = "" if s.get("ok", True) else " (not back)"
        parts.append(f"`{s.get('component')}`{_versions(s)}{mark}")
    return " → ".join(parts) or "–"


def survived_cell(d: Drill) -> str:
    v = d.value("upgrade_job_survived")
    if v is None:
        return "–"
    restarts = d.value("upgrade_job_restarts")
    r = f"{restarts:g} restart{'s' if restarts != 1 else ''}" if restarts is not None else "restarts unknown"
    state = d.detail("upgrade_job_survived").get("job_state") or d.summary.get("job_state")
    return f"yes ({r})" if v >= 1 else f"no: the job ended {state or '?'} ({r})"


def gap_cell(d: Drill) -> str:
    v = d.value("upgrade_max_step_gap_s")
    med = d.detail("upgrade_max_step_gap_s").get("median_step_s")
    return "–" if v is None else f"{fmt(v)} s (median step {seconds(med)})"


def started_cell(d: Drill) -> str:
    q = d.summary.get("queued") or {}
    if not q:
        return "–"
    seen = "first_step_seen" in q or "allocated_seen" in q or q.get("first_step") is not None
    before = "" if q.get("waiting_before", True) else " (it was not seen waiting before the drill)"
    if seen:
        return "yes" + before
    return f"no (state {q.get('state_after') or '?'})" + before + (f"; {q['collect_error']}" if q.get("collect_error")
                                                                     else "")


def delay_cell(d: Drill, handover: SummaryRow | None) -> str:
    v = d.value("upgrade_queued_delay_s")
    if v is not None:
        text = f"{fmt(v)} s"
    elif d.summary.get("job_state") not in (None, "succeeded"):
        text = "– (the drilled job did not finish: no end to count from)"
    else:
        text = "–"
    if handover is not None:
        text += f" (without a drill: `handover_s` median {fmt(handover.median)} s, n {handover.n})"
    return text


def intact_cell(d: Drill) -> str:
    v, det = d.value("upgrade_records_intact"), d.detail("upgrade_records_intact")
    if v is None:
        return f"– ({det['why']})" if det.get("why") else "–"
    if v >= 1:
        return f"yes ({det.get('compared', '?')} compared)"
    out = []
    for what in ("changed", "missing"):
        if det.get(what):
            out.append(f"{what}: " + ", ".join(f"`{x}`" for x in det[what][:LIST_SHOWN]))
    return "no: " + "; ".join(out)


def leftovers_cell(d: Drill) -> str:
    left = d.summary.get("leftovers")
    if left is None:
        return "–"
    if not left:
        return "none"
    items = []
    for x in left[:LIST_SHOWN]:
        rest = ", ".join(f"{k} {v}" for k, v in x.items() if k != "what" and v not in (None, ""))
        items.append(f"{x.get('what', '?')}" + (f" ({rest})" if rest else ""))
    more = f" and {len(left) - LIST_SHOWN} more" if len(left) > LIST_SHOWN else ""
    return f"{len(left)}: " + "; ".join(items) + more


def duration_cell(d: Drill) -> str:
    v = d.value("upgrade_drill_s")
    if v is not None:
        return f"{fmt(v)} s"
    failed = d.detail("upgrade_drill_s").get("failed") or []
    return "– (" + ", ".join(f"`{c}`" for c in failed) + " did not come back)" if failed else "–"


def restore_cell(d: Drill) -> str:
    r = d.summary.get("restore")
    if not r:
        return "–"
    if not isinstance(r, dict):
        return str(r)
    if r.get("error"):
        return f"failed: {r['error']}"
    return "; ".join(f"{k}: {v}" for k, v in r.items())


def run_cell(d: Drill) -> str:
    if d.ok:
        return "ok" + (f" (raw evidence unreadable: {d.problem})" if d.problem else "")
    e = d.error or {}
    msg = " ".join(str(e.get("message") or "").split())
    return f"did not complete ({d.status}) at `{e.get('stage', '?')}`: {msg[:200]}"


ROWS = [("components, in order (versions before → after)", lambda d, h: components_cell(d)),
        ("running job survived", lambda d, h: survived_cell(d)),
        ("steps lost (run again after a restart)", lambda d, h: count(d.value("upgrade_steps_lost"))),
        ("longest step gap during the drill", lambda d, h: gap_cell(d)),
        ("submissions refused [bounds]", lambda d, h: refused_cell(d, "upgrade_submit_refused_s")),
        ("submissions refused, split: harness's stop wait + platform's start + after",
         lambda d, h: drills_outage.text(drills_outage.split(d.evidence, "submit"), fmt)),
        ("status queries refused [bounds]", lambda d, h: refused_cell(d, "upgrade_status_refused_s")),
        ("slowest single submission", lambda d, h: seconds(d.value("upgrade_submit_slowest_s"))),
        ("queued job started", lambda d, h: started_cell(d)),
        ("queued job's delay after the drilled job ended", delay_cell),
        ("records intact", lambda d, h: intact_cell(d)),
        ("left inconsistent", lambda d, h: leftovers_cell(d)),
        ("drill duration (first restart → last component healthy)", lambda d, h: duration_cell(d)),
        ("put back afterwards", lambda d, h: restore_cell(d))]


def kind_table(kind: str, drills: list[Drill], handover: dict[str, SummaryRow]) -> tuple[list[str], list[list[str]]]:
    mine = [d for d in drills if d.kind == kind]
    plats = sorted({d.platform for d in mine} | {"slurm", "k8s"}, key=platform_sort_key)
    by = {d.platform: d for d in mine}
    header = [""] + [PLATFORM_LABEL.get(p, p) for p in plats]
    rows = [["run"] + [run_cell(by[p]) if p in by else "not run" for p in plats]]
    for label, cell in ROWS:
        rows.append([label] + [cell(by[p], handover.get(p)) if p in by and by[p].ok else "–" for p in plats])
    return header, rows


def component_table(kind: str, drills: list[Drill]) -> tuple[list[str], list[list[str]]]:
    header = ["platform", "component", "group", "seconds to healthy (back − started)", "health check (polled every)"]
    rows = []
    for d in drills:
        if d.kind != kind:
            continue
        for s in d.components():
            started, back = s.get("started"), s.get("back")
            if back is not None and started is not None:
                took = f"{fmt(back - started)} s"
            else:
                took = "not back" + (f": {' '.join(str(s['error']).split())[:160]}" if s.get("error") else "")
            res = s.get("resolution_s")
            check = (f"`{s['health']}`" if s.get("health") else "–") + (f" ({fmt(res)} s)" if res else "")
            rows.append([d.label, f"`{s.get('component')}`{_versions(s)}", s.get("group") or "–", took, check])
    return header, rows


def probe_intervals(drills: list[Drill]) -> str:
    vals = sorted({float(d.evidence["probe_s"]) for d in drills
                   if isinstance(d.evidence.get("probe_s"), int | float)})
    return " / ".join(fmt(v) for v in vals) or "probe_s"


def note(drills: list[Drill]) -> list[str]:
    out = [f"How the drills are measured: while each component restarts, one thread tries a submission that leaves "
           f"nothing behind (Slurm `sbatch --test-only`, Kubernetes a server-side dry-run create of a JobSet) and a "
           f"status query (`squeue`; listing the JobSets) every {probe_intervals(drills)} s. Seconds refused run from "
           "the first refused try to the next accepted one; the bounds come from the tries around each outage (at "
           "least the first refusal answered → the last refusal asked, at most the last acceptance asked before → "
           "the first acceptance answered after), summed over outages. Seconds to healthy are late by at most the "
           "health check's poll interval.",
           "The queued job is a same-shape job submitted once the drill is due, holding whole nodes, so it can only "
           "start when the drilled job ends; its delay is the drilled job's last rank done → the queued job "
           "allocated. Beside it is the same wait without a drill: the platform's contention `handover_s` median, "
           "where the campaign has contention runs.",
           "The refused seconds are split by the steps' own time-stamps (report/drills_outage.py): while the harness "
           "stopped a component (SIGTERM, then SIGKILL once its grace ran out: a wait the harness chose, which a site "
           "restarting the component its own way would not have), while the new process came up until its health "
           "check passed (what the platform needs), and after or between components (e.g. a webhook the submission "
           "calls). Where the drill does not time the stop apart (Slurm's `docker restart`), all of a step's time "
           "counts as starting.",
           "One API server and one slurmctld here: every control-plane restart is an outage. A highly available "
           "control plane (several kube-apiservers behind a load balancer, restarted one at a time; slurmctld with "
           "a backup controller) would keep accepting submissions through a rolling restart, so the outage measured "
           "here is that of a single-instance control plane, not of the platforms as a site would run them.",
           "One drill per platform and kind: these figures are descriptive, shown side by side, with no verdict."]
    if any(d.platform == "slurm" for d in drills):
        out.insert(1, "Slurm's clients (`sbatch`, `squeue`) wait and retry while slurmctld is away instead of "
                      "failing: a submission made then is a wait, not a refusal. The slowest single submission shows "
                      "that wait; a refused try is one that returned an error.")
    return out


def section(drills: list[Drill], summ: list[SummaryRow], chart: Path | None) -> list[tuple[str, list]]:
    """The report's "Upgrades (drills)" section; [] for a campaign without drill runs."""
    if not drills:
        return []
    handover = {r.platform: r for r in summ if r.metric == "handover_s"}
    blocks: list = []
    for kind in dict.fromkeys(d.kind for d in drills):
        blocks += [("h3", KIND_TITLE.get(kind, f"{kind} drill")), ("table", kind_table(kind, drills, handover))]
        comps = component_table(kind, drills)
        if comps[1]:
            blocks += [("p", "Each component:"), ("table", comps)]
    if chart is not None:
        blocks.append(("img", ("drills", chart)))
    blocks += [("p", x) for x in note(drills)]
    return [(TITLE, blocks)]
