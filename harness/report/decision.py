"""The decision summary that opens the report: one row per criterion of the POC, Kubernetes against Slurm,
and a short reading generated from those rows.

Every verdict here is one the comparisons already drew (compare.py, Holm-adjusted exact tests with
bootstrap intervals); this module adds none. What has no test (one probe per mistake, counts of audit
answers) is labelled descriptive, and a criterion without data says "not measured". Each row opens with
its conditions ledger (conditions.py): what differed between the platforms' runs first, then the settings
that govern the figure, then the host's load while its runs ran; a verdict from runs on a busy host
carries that flag. Recovery is judged on its setting-free part, its ratio at the site's settings shown
beside it with the share those settings set, and its projection to each platform's defaults.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from . import audit as auditmod
from . import conditions as condmod
from . import defaults, drills_outage, replay_sets
from . import drills as drillmod
from . import serving as servemod
from . import ux as uxmod
from .compare import Comparison, verdict_metrics
from .sections import PLACEHOLDER_USD_PER_HOUR, fmt, headline_cell, is_placeholder, ratio_cell, transport_text
from .stats import MIN_N, PLATFORM_LABEL, Groups, SummaryRow, base_metric
from .table import RunTable
from .verdicts import direction_text, effect_text, equivalence_text, p_text, test_text

A, B = "k8s", "slurm"   # the pair the POC decides between: ratios are Kubernetes / Slurm
E2E = "submit → first step"   # queue and startup together: the edge between them differs per platform
SCALE = "queue at scale"   # replays of a job trace at the cluster's size, on emulated nodes
BW = "all-reduce bus bandwidth"   # over whatever backend and transport the runs recorded (gloo/TCP, NCCL/IB...)
HEADER = ["criterion", "conditions (what differed first; the settings that govern it, as the runs recorded them; "
          "the host's load)", "evidence (median ± resolution [p05–p95] (n))", "Kubernetes / Slurm (95% CI)", "ahead"]
BUSY_FLAG = "⚠ busy host: "   # before a verdict drawn from runs on a busy host


@dataclass
class Row:
    """One criterion: a line per thing it rests on (a metric, the probes, what a user writes), each with its
    evidence, ratio and verdict, so no cell carries several measurements at once."""
    criterion: str
    parts: list[tuple[str, str, list[str]]] = field(default_factory=list)   # (evidence, ratio, verdicts) per line
    comps: list[Comparison] = field(default_factory=list)   # the comparisons behind it, for the reading and chart
    measured: bool = False
    settings: str = "–"    # the ledger's cell: unequal conditions first, the settings, the host's load
    conditions: list = field(default_factory=list)    # conditions.Condition, side by side
    host: condmod.HostState | None = None              # over the row's runs
    hosts: dict = field(default_factory=dict)          # platform -> condmod.HostState over its runs of the row
    runs: list[int] = field(default_factory=list)      # the table rows of the row's comparisons
    # verdicts drawn apart from the campaign's runs (queue at scale: across replays, their own Holm family):
    # whether any was tested, and (platform ahead, what and where) for each that found one
    tested_apart: bool = False
    wins_apart: list[tuple[str, str]] = field(default_factory=list)
    notes_apart: list[str] = field(default_factory=list)   # why a set of replays could not be tested

    def add(self, evidence: str, ratio: str = "–", ahead: str = "") -> None:
        self.measured = True
        self.parts.append((evidence, ratio, [ahead] if ahead else []))

    def note(self, ahead: str) -> None:
        """A verdict about the lines above as a whole: on the last line, or a line of its own."""
        if not self.parts:
            self.add("–", "–", ahead)
        else:
            self.parts[-1][2].append(ahead)

    @property
    def evidence(self) -> list[str]:
        return [ev for ev, _, _ in self.parts if ev != "–"]

    @property
    def ahead(self) -> list[str]:
        return [a for _, _, aheads in self.parts for a in aheads]

    def cells(self) -> list[list[str]]:
        """Table lines: the criterion and its conditions on the first, the other lines under it. A verdict drawn
        from runs on a busy host carries the flag."""
        if not self.measured:
            return [[self.criterion, "–", "not measured", "–", "not measured"]]
        flag = BUSY_FLAG if self.host is not None and self.host.flagged else ""
        return [[self.criterion if i == 0 else "", self.settings if i == 0 else "", ev, ratio,
                 "; ".join(flag + a if flag and _is_verdict(a) else a for a in ah) or "–"]
                for i, (ev, ratio, ah) in enumerate(self.parts)]


VERDICT_WORDS = ("ahead (", "equivalent within", "consistent direction", "no clear difference")


def _is_verdict(text: str) -> bool:
    return any(w in text for w in VERDICT_WORDS)


def _label(p: str) -> str:
    return PLATFORM_LABEL.get(p, p)


def ahead_text(c: Comparison) -> str:
    tested = f"{test_text(c)}; Holm p {p_text(c.p_holm)}" if c.tested else ""
    if c.better:
        return f"{_label(c.better)} ahead ({effect_text(c)}; {tested})"
    return {"resolution": "no clear difference (below the measurement resolution)",
            "equivalent": f"{equivalence_text(c)} ({tested})",
            "direction": f"{direction_text(c)} ({tested}); {equivalence_text(c)}",
            "none": f"no clear difference ({tested}); {equivalence_text(c)}",
            "few": f"no verdict: n {c.n_num}/{c.n_den}, below {MIN_N} a side",
            "descriptive": "no verdict (shown, not tested)",
            "refused": f"no verdict: {c.refused}"}.get(c.verdict, c.verdict)


def _metric_rows(row: Row, keys: list[str], summ: dict, comps: dict) -> None:
    for k in keys:
        have = [p for p in (B, A) if (p, k) in summ]
        if not have:
            continue
        evidence = f"`{k}` " + ", ".join(f"{_label(p)} {headline_cell(summ[(p, k)])}" for p in have)
        c = comps.get(k)
        if c is None:
            row.add(evidence, "–", f"measured on {_label(have[0])} only")
            continue
        row.comps.append(c)
        row.add(evidence, ratio_cell(c), ahead_text(c))


def _keys(gs: Groups, pick: Callable[[str], bool]) -> list[str]:
    return sorted({k for p, k in gs if p in (A, B) and pick(k)})


def _ux_row(row: Row, table: RunTable, summ: dict, comps: dict) -> None:
    _metric_rows(row, ["first_log_s"] if any(k == "first_log_s" for _, k in summ) else [], summ, comps)
    probes = uxmod.probes(table)
    mine = [p for p in probes if p.platform in (A, B)]
    if mine:
        by_kind: dict[str, dict[str, str]] = {}
        for p in mine:
            by_kind.setdefault(p.kind, {})[p.platform] = fmt(p.seconds) if p.clear else "not clear"
        for i, (k, v) in enumerate(by_kind.items()):   # a line per mistake: one cell held all five before
            head = "time to a clear error (s, one probe each): " if i == 0 else ""
            row.add(f"{head}`{k}` " + ", ".join(f"{_label(p)} {v.get(p, '–')}" for p in (B, A)))
        row.note("time to a clear error: descriptive, no verdict from one probe per mistake; clear before "
                 "the deadline: " + ", ".join(f"{_label(p)} {n_clear(mine, p)}" for p in (B, A)))
    pats = uxmod.clean_patterns(table)
    if any(p in pats for p in (A, B)):
        row.add(f"a user writes ({uxmod.WRITTEN_FORM}): " + ", ".join(
            f"{_label(p)} {uxmod.written_text(uxmod.written(pats[p]))}" for p in (B, A) if p in pats),
            "–", "descriptive: counted, not tested")
        row.add("calls to submit / watch / read logs / cancel (median): " + ", ".join(
            f"{_label(p)} " + " / ".join(uxmod.count(sum(uxmod.stage_calls(pats[p], s).values()))
                                         for s in uxmod.UX_STAGES)
            for p in (B, A) if p in pats), "–", "descriptive: counted, not tested")


def n_clear(probes: list, platform: str) -> str:
    mine = [p for p in probes if p.platform == platform]
    return f"{sum(p.clear for p in mine)}/{len(mine)}" if mine else "–"


def _audit_row(row: Row, table: RunTable) -> None:
    counts = auditmod.answered_counts(table)
    have = [p for p in (B, A) if p in counts]
    if not have:
        return
    row.add("questions the platform's own records answered in every run (in some): " + ", ".join(
        f"{_label(p)} {counts[p][0]}/{counts[p][2]} ({counts[p][1]}) from "
        + (", ".join(f"`{s}`" for s in counts[p][3]) or "no source") for p in have))
    if len(have) == 2 and counts[A][0] != counts[B][0]:
        more = A if counts[A][0] > counts[B][0] else B
        row.note(f"descriptive: {_label(more)}'s records answer more questions "
                         f"({counts[more][0]} vs {counts[B if more == A else A][0]} of {counts[more][2]})")
    else:
        row.note("descriptive: " + ("the same number of questions answered" if len(have) == 2
                                            else f"audited on {_label(have[0])} only"))


def _upgrade_row(row: Row, keys: list[str], summ: dict, comps: dict, drills: list | None) -> None:
    """The drills, one per platform and kind by design: what each platform's jobs went through, without a
    verdict. A campaign with MIN_N drill runs a side on some figure gets the usual comparison instead."""
    n = {p: max((summ[(p, k)].n for k in keys if (p, k) in summ), default=0) for p in (A, B)}
    if drills is None or min(n.values()) >= MIN_N:
        _metric_rows(row, keys, summ, comps)
        return
    mine = [d for d in drills if d.platform in (A, B)]
    if not mine:
        _metric_rows(row, keys, summ, comps)
        return
    for kind in dict.fromkeys(d.kind for d in mine):
        by = {d.platform: d for d in mine if d.kind == kind}
        row.add(f"{kind} drill — " + "; ".join(f"{_label(p)}: {drill_text(by[p])}" for p in (B, A)
                                                            if p in by))
    per = max(sum(1 for d in mine if d.platform == p and d.kind == k) for p in (A, B) for k in {d.kind for d in mine})
    row.note("descriptive: one drill per platform" if per <= 1 else f"descriptive: {per} drills per platform")


def drill_text(d) -> str:
    """One drill in a few words: survived, steps lost, refused seconds, the queued job, what broke."""
    if not d.ok:   # the section's table gives the message; here only where it stopped
        return f"did not complete ({d.status} at `{(d.error or {}).get('stage', '?')}`)"
    survived = d.value("upgrade_job_survived")
    restarts = d.value("upgrade_job_restarts")
    parts = ["job survived" if survived and survived >= 1 else "job did not survive" if survived is not None
             else "survival unknown"]
    if restarts:
        parts[0] += f" ({restarts:g} restart{'s' if restarts != 1 else ''})"
    parts.append(f"{drillmod.count(d.value('upgrade_steps_lost'))} steps lost")
    sub = d.metrics.get("upgrade_submit_refused_s") or {}
    hi = sub.get("hi")
    bounds = f" [{fmt(sub.get('lo'))}–{'open' if hi is None else fmt(hi)}]" if sub.get("lo") is not None else ""
    split = drills_outage.split(d.evidence, "submit") if d.evidence else None
    if split and split["stopping"] >= 0.01:
        # the platform's own part first: the harness's wait while it stopped a component is its choice, not
        # the platform's (report/drills_outage.py)
        own = split["starting"] + split["after"]
        parts.append(f"submissions refused {fmt(own)} s by the platform (starting again until healthy"
                     + (f", {fmt(split['after'])} s after" if split["after"] >= 0.01 else "")
                     + f") + {fmt(split['stopping'])} s while the harness stopped a component (its own wait) = "
                     f"{fmt(d.value('upgrade_submit_refused_s'))} s{bounds}")
    else:
        parts.append(f"submissions refused {fmt(d.value('upgrade_submit_refused_s'))} s{bounds}")
    parts.append(f"status refused {fmt(d.value('upgrade_status_refused_s'))} s")
    slow = d.value("upgrade_submit_slowest_s")
    if slow is not None and slow >= 1:   # a Slurm client waiting for slurmctld: a wait, not a refusal
        parts.append(f"slowest submission {fmt(slow)} s")
    delay = d.value("upgrade_queued_delay_s")
    started = drillmod.started_cell(d)
    parts.append(f"queued job's delay {fmt(delay)} s" if delay is not None
                 else f"queued job started: {started}")
    intact = d.value("upgrade_records_intact")
    parts.append("–" if intact is None else "records intact" if intact >= 1 else "records changed")
    left = d.value("upgrade_leftovers")
    parts.append("no leftovers" if left == 0 else f"{left:g} left inconsistent" if left is not None else "–")
    failed = d.detail("upgrade_drill_s").get("failed") or []
    if failed:
        parts.append("not back: " + ", ".join(f"`{c}`" for c in failed))
    return ", ".join(p for p in parts if p != "–")


def _inference_row(row: Row, keys: list[str], summ: dict, comps: dict, serves: list | None) -> None:
    """The serve runs, one per platform by design: each platform's figures side by side without a verdict,
    and what Slurm needed beyond itself. With MIN_N serve runs a side the usual comparison replaces the
    figures (the second-platform line stays: it is a fact of the runs, not a measurement to test)."""
    mine = [s for s in serves or [] if s.platform in (A, B)]
    n = {p: sum(1 for s in mine if s.platform == p and s.ok) for p in (A, B)}
    tested = min(n.values()) >= MIN_N and any((p, k) in summ for p in (A, B) for k in keys)
    if tested or not mine:
        _metric_rows(row, keys, summ, comps)
        if not mine:
            return
    else:
        latest = {s.platform: s for s in mine}   # report order: the last run a platform has is its latest
        for p in (B, A):
            if p in latest:
                row.add(f"{_label(p)}: {servemod.decision_text(latest[p])}")
        per = max(n.values())
        row.note("descriptive: " + ("one serve run per platform" if per <= 1 else
                                            f"{per} serve runs per platform, below {MIN_N} a side"))
    need = servemod.needed_text(mine)
    if need:
        row.note(need)


def _scale_row(row: Row, replays: list) -> None:
    """Queue at the cluster's size: the campaign's replay sets (replay_sets.py: several traces, each below both
    platforms' measured placement ceilings, under one named queue policy pair), a line per figure with the
    offered rate and the ceilings it stood under; the settings each replay ran under are in its report."""
    parts, row.tested_apart, row.wins_apart, row.notes_apart = replay_sets.decision(replays)
    for ev, ratio, ahead in parts:
        row.add(ev, ratio, ahead)


def _recovery_row(row: Row, gs: Groups, summ: dict, comps: dict, at_defaults: list | None) -> None:
    """Per fault: the ratio at these runs' settings (attributed: the share those settings set), the verdict on
    the setting-free part (recovery_free_s), and the projection to each platform's defaults."""
    by = {(s.platform, s.fault): s for s in at_defaults or []}
    faults = sorted({k.partition(":")[2] for p, k in gs if p in (A, B) and base_metric(k) in ("recovery_s",
                                                                                               "recovery_free_s")})
    for fault in faults:
        site, free = f"recovery_s:{fault}", f"recovery_free_s:{fault}"
        shares = "; ".join(f"{_label(p)} {defaults.share_text(by[(p, fault)])}" for p in (B, A) if (p, fault) in by)
        before, asked = len(row.parts), len(row.comps)
        _metric_rows(row, [site], summ, comps)
        del row.comps[asked:]   # shown, attributed, not a question: it would be the settings' answer
        if len(row.parts) > before:
            ev, ratio, _ = row.parts[before]
            row.parts[before] = (f"{ev} — at these runs' settings", ratio,
                                 ["not a verdict on the platforms: the settings' share of each figure"
                                  + (f": {shares}" if shares else " was not recorded")])
        _metric_rows(row, [free], summ, comps)
        if (B, fault) in by and (A, fault) in by:
            ks, ss = by[(A, fault)], by[(B, fault)]
            centre = lambda s: s.measured if s.at_defaults or not s.terms else s.projected   # noqa: E731
            ratio = f"×{centre(ks) / centre(ss):.2f}" if centre(ss) else "–"
            row.add(f"`recovery_s:{fault}` at each platform's defaults: " + ", ".join(
                f"{_label(p)} {defaults._at_defaults(by[(p, fault)])}" for p in (B, A)), ratio,
                "projected from these runs' phases, not measured" if not (ks.at_defaults and ss.at_defaults)
                else "measured at the defaults")


def _host_runs(gs: Groups, keys: list[str]) -> list[int]:
    return sorted({int(r) for p in (A, B) for k in keys if (p, k) in gs for r in gs[(p, k)].runs.tolist()})


def rows(table: RunTable, gs: Groups, summ: list[SummaryRow], comps: list[Comparison],
         drills: list | None = None, serves: list | None = None,
         at_defaults: list | None = None, replays: list | None = None,
         facts: dict | None = None, noted: dict | None = None) -> list[Row]:
    """drills: the campaign's drill runs (report/drills.py load), for the upgrades row; None leaves that row
    to the upgrade_* figures alone. serves: the serve runs (report/serving.py load), likewise for inference.
    at_defaults: recovery per platform and fault at each platform's defaults (report/defaults.py summarize),
    for the recovery row's attribution and projection. replays: the campaign's replay directories
    (replay/store.py replay_dirs), for the queue-at-scale row. facts: each platform's caps
    (conditions.platform_facts); noted: operators' notes of the host load (conditions.noted_load)."""
    s = {(r.platform, r.metric): r for r in summ}
    c = {x.metric: x for x in comps if (x.numerator, x.denominator) == (A, B)}
    bw = "allreduce_avg_busbw_gbps" if "allreduce_avg_busbw_gbps" in verdict_metrics(gs) else "allreduce_busbw_gbps"
    plain = {
        "queue": _keys(gs, lambda k: k == "queue_s"),
        "startup": _keys(gs, lambda k: k == "startup_s"),
        E2E: _keys(gs, lambda k: k == "submit_to_first_step_s"),
        BW: _keys(gs, lambda k: k == bw),
        "recovery": _keys(gs, lambda k: base_metric(k) in ("recovery_s", "recovery_free_s")),
        "contention": _keys(gs, lambda k: k in ("queue_s:contention", "handover_s")),
        "upgrades": _keys(gs, lambda k: k.startswith("upgrade_")),
        "cost": _keys(gs, lambda k: k == "cost_per_step_usd"),
        "inference": _keys(gs, lambda k: k.startswith("serve_")),
        "user experience": _keys(gs, lambda k: k == "first_log_s"),
    }
    restart = condmod.restart_policies(at_defaults or [])
    out = []
    for name in ("queue", "startup", E2E, BW, "recovery", "contention", SCALE,
                 "user experience", "auditing", "upgrades", "cost", "inference"):
        row = Row(name)
        if name == "user experience":
            _ux_row(row, table, s, c)
        elif name == "auditing":
            _audit_row(row, table)
        elif name == "upgrades":
            _upgrade_row(row, plain[name], s, c, drills)
        elif name == "inference":
            _inference_row(row, plain[name], s, c, serves)
        elif name == SCALE:
            _scale_row(row, replays or [])
        elif name == "recovery":
            _recovery_row(row, gs, s, c, at_defaults)
        else:
            _metric_rows(row, plain[name], s, c)
        if name == "cost" and row.parts:
            flagged = [p for p in (B, A) if p in table.pricing and is_placeholder(table.pricing[p])]
            if flagged:
                ev, ratio, ah = row.parts[0]
                row.parts[0] = (f"{ev} — priced at the placeholder {PLACEHOLDER_USD_PER_HOUR:g} USD per unit-hour (set "
                                + ", ".join(f"`pricing.{p}.usd_per_hour`" for p in flagged) + ")", ratio,
                                [f"{a} — at a placeholder price on both: a ratio of billed time, not of cost"
                                 if _is_verdict(a) else a for a in ah])
        if name == BW and row.parts:
            over = transport_text(table, (B, A), _label)
            if over:
                ev, ratio, ah = row.parts[0]
                row.parts[0] = (f"{ev} ({over}, as recorded)", ratio, ah)
        if row.measured and name != SCALE:
            row.runs = _host_runs(gs, plain.get(name, []))
            row.conditions = condmod.ledger(name, facts or {}, table, restart)
            runs = np.array(row.runs, dtype=np.int64)
            row.host = condmod.host_state(table, runs, noted) if row.runs else None
            row.hosts = {p: condmod.host_state(table, runs[table.platform.codes[runs] == table.platform.names.index(p)],
                                               noted)
                         for p in (B, A) if row.runs and p in table.platform.names}
            row.settings = condmod.cell(row.conditions, row.host, _label)
        elif row.measured:
            row.settings = ("emulated nodes (KWOK; slurmd --enable-multiple-slurmd) on this 2-core host; each line "
                            "names its queue policy pair and its offered rate against both platforms' placement "
                            "ceilings; each replay's report names every setting")
        out.append(row)
    return out


def ledger_table(rs: list[Row]) -> tuple[list[str], list[list[str]]]:
    """The conditions ledger of every measured row, side by side (the report's section after the summary)."""
    return condmod.table_rows([(r.criterion, r.conditions, r.hosts) for r in rs
                               if r.measured and (r.conditions or r.hosts)])


def table_of(rs: list[Row]) -> tuple[list[str], list[list[str]]]:
    return HEADER, [line for r in rs for line in r.cells()]


def reading(rs: list[Row], table: RunTable) -> list[str]:
    """What the table cannot say in a cell: the descriptive figures, what a hybrid costs, what the settings
    column means, what was not measured. The verdicts themselves open the report (bottom_line.py)."""
    out = []
    described = descriptive(table)
    if described:
        out.append("Without a verdict (descriptive): " + "; ".join(described) + ".")
    out.append(hybrid(table))
    if any(r.settings != "–" for r in rs):
        out.append("The conditions column opens with what differed between the platforms' runs (a CPU or memory cap "
                   "one platform enforced and the other did not, a node held alone on one side only), then names the "
                   "cluster settings that govern the row (a scheduler's pass interval, how long a requeued job is "
                   "held, when a lost node is noticed and its pods evicted, how often a job is restarted) with the "
                   "values these runs recorded, then the host's load while the row's runs ran: a cluster with other "
                   "values, or a quieter host, can show other figures on those rows. The ledger below lists every "
                   "condition side by side.")
    missing = [r.criterion for r in rs if not r.measured]
    if missing:
        out.append(f"Not measured in this campaign, so it says nothing about them: {', '.join(missing)}.")
    return out


def descriptive(table: RunTable) -> list[str]:
    """What the campaign shows without a test: audit answers counted, one probe per mistake."""
    out = []
    counts = auditmod.answered_counts(table)
    if any(p in counts for p in (A, B)):
        out.append("the platforms' own records answered " + ", ".join(
            f"{counts[p][0]} of {counts[p][2]} audit questions in every run on {_label(p)}" for p in (B, A)
            if p in counts))
    probes = [p for p in uxmod.probes(table) if p.platform in (A, B)]
    if probes:
        parts = []
        for plat in (B, A):
            mine = [p for p in probes if p.platform == plat]
            if mine:
                times = [p.seconds for p in mine if p.clear]
                median = f", median {fmt(float(np.median(times)))} s to it" if times else ""
                parts.append(f"{_label(plat)} for {n_clear(probes, plat)}{median}")
        out.append("a user was told clearly what was wrong, within the probes' deadline, " + ", ".join(parts)
                   + " (one probe per mistake)")
    return out


def hybrid(table: RunTable) -> str:
    """What running both costs, from what the campaign recorded: fixed overheads, two job formats, two audit trails."""
    parts = []
    over = {p: float(d["overhead_usd_per_hour"]) for p, d in table.pricing.items()
            if p in (A, B) and isinstance(d.get("overhead_usd_per_hour"), int | float)}
    if any(over.values()):
        parts.append("both platforms' fixed overhead (" + ", ".join(
            f"{_label(p)} {fmt(over[p])} USD/h" for p in (B, A) if p in over) + " in this campaign's pricing model)")
    elif over:
        parts.append("both platforms' fixed overhead (none is set in this campaign's pricing model, so it shows none)")
    pats = uxmod.clean_patterns(table)
    if all(p in pats for p in (A, B)):
        parts.append(f"two ways to write and run the same job ({uxmod.WRITTEN_FORM}: " + ", ".join(
            f"{_label(p)} {uxmod.written_text(uxmod.written(pats[p]))}" for p in (B, A)) + ")")
    counts = auditmod.answered_counts(table)
    if all(p in counts for p in (A, B)):
        parts.append("two audit trails with different sources and retention (" + "; ".join(
            f"{_label(p)}: " + ", ".join(f"`{s}`" for s in counts[p][3]) for p in (B, A)) + ")")
    if not parts:
        return "A hybrid costs running and knowing two platforms; this campaign measured nothing more specific."
    return "A hybrid costs " + ", ".join(parts) + "."


def ratio_points(rs: list[Row]) -> list[tuple[str, Comparison]]:
    """The comparisons a ratio chart can draw (a finite ratio), labelled by criterion."""
    return [(f"{r.criterion}: {c.metric}", c) for r in rs for c in r.comps if math.isfinite(c.ratio)]
