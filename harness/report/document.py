"""Stored runs -> report.md, a self-contained report.html, charts/*.png, summary.csv and comparisons.csv.

The report is built once as sections of blocks (paragraph, list, table, chart); Markdown and HTML
are two renderings of the same blocks, so the two cannot say different things.
"""
from __future__ import annotations

import base64
import csv
import html
import io
import math
import re
import time
from pathlib import Path

import yaml

from ..store import atomic_write
from . import audit as auditmod
from . import bottom_line, decision
from . import charts as chartmod
from . import charts_decision as chartdec
from . import charts_drill as chartdrill
from . import charts_serve as chartserve
from . import defaults as defaultsmod
from . import drills as drillmod
from . import headline as headmod
from . import sections as sec
from . import serving as servemod
from . import table as tablemod
from . import ux as uxmod
from .compare import Comparison, comparisons
from .records import RECOVERY_PHASES
from .stats import PLATFORM_LABEL, base_metric, groups, platform_sort_key, summary, summary_csv
from .verdicts import findings, method_note, tested_table

CHART_TITLES = {
    "metrics": "Headline metrics per platform",
    "timeline": "Phase timeline",
    "busbw": "All-reduce bus bandwidth",
    "step_times": "Step time distribution",
    "cost": "Cost per step",
    "contention": "Contention",
    "recovery": "Recovery broken down",
    "decision": "Kubernetes / Slurm per criterion",
    "errors": "Time to a clear error per mistake",
    "drills": "Upgrade drills: components, probes and the running job's steps",
    "serve_cdf": "Serving latency CDF per platform",
    "serve_timeline": "Serving: requests and errors per second through each fault and the scale-out",
}
# charts shown in their sections, not under "Charts"
OWN_SECTION = {"recovery", "decision", "errors", "drills", "serve_cdf", "serve_timeline"}
HARNESS_ERRORS = "Harness errors — not counted against any platform"
HARNESS_ERRORS_WHY = ("These runs stopped because the harness itself raised an unexpected error (a bug in the harness, "
                      "not a failure of the platform or the job); no platform's counts above include them.")
DEFINITIONS = [
    "`queue_s`: submit → all resources allocated; `queue_admission_s` (Kubernetes): submit → Kueue admission.",
    "`startup_s` = `launch_s` + `rendezvous_s` + `first_step_s`: allocation → first step done by every rank, "
    "sweep excluded.",
    "`submit_to_first_step_s` = `queue_s` + `startup_s` per run: submit → first step done by every rank, the edges "
    "every platform stamps the same way (lo and hi: the sums of the two parts'); the report adds it up, the runs "
    "do not store it.",
    "`allreduce_busbw_gbps`: busbw = algbw × 2(n−1)/n (nccl-tests), GB = 1e9 bytes, of the in-place "
    "all-reduce at the largest swept size with a correct result, time averaged across ranks (campaigns before "
    "issue 10 stored the peak over sizes); `allreduce_avg_busbw_gbps`: nccl-tests' \"Avg bus bandwidth\" (mean "
    "over every size, out-of-place and in-place).",
    "`queue_s:contention`, `queue_admission_s:contention`: the same, for a job submitted while a same-shape "
    "blocking job holds what it needs (Slurm: the blocker runs `--exclusive`; Kubernetes: the ClusterQueue "
    "quota fits one job) until it finishes by itself. `handover_s`: the blocker's last rank done → the "
    "waiting job allocated.",
    "`recovery_s:<fault>`: fault injected → every rank back at the step it had reached before the fault; it "
    "splits into `recovery_detection_s` (→ the scheduler or torchrun notices), `recovery_teardown_s` (→ resources "
    "released), `recovery_rescheduling_s` (→ allocated again), `recovery_restart_s` (→ rendezvous), "
    "`recovery_checkpoint_load_s` and `recovery_recompute_s` (→ back at the pre-fault step). `resume_s`: fault → "
    "every rank's first step of the new attempt (what recovery_s meant in older campaigns). `lost_steps`: "
    "steps redone.",
    "`goodput`: useful training time ÷ wall time the job held its resources (ETTR).",
    "`cost_run_usd`: the price of the resources from submit until they were released again (teardown "
    "included), with the platform's overhead; `cost_per_step_usd` = that / steps; `cost_per_step_steady_usd`: "
    "the rate × median step time; `recovery_cost_usd:<fault>`: the rate × the time the fault took from the job. "
    "Older campaigns billed submit → the last rank's done.",
    "`first_log_s`: submit → the first line of the workload's output the harness could read, as a user would "
    "(harness clock; resolution: the poll interval).",
    "Time to a clear error (user-mistake probes, one per mistake and platform, not training runs): submit → the "
    "first message the platform showed the user that names the problem (the wrong value, or the scheduler's words "
    "for an impossible request); \"not clear within N s\" when none came before the probe's deadline.",
]
CSS = ("body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}"
       "table{border-collapse:collapse;font-size:14px}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}"
       "th{background:#f3f3f3}img{max-width:100%;border:1px solid #eee;margin:.5em 0}code{background:#f6f6f6}"
       "pre{background:#f6f6f6;padding:.5em;overflow-x:auto;font-size:13px}.small{font-size:13px;color:#555}"
       "details{margin:.5em 0}summary{cursor:pointer}")
COST_KEYS = {"cost_run_usd", "cost_per_step_usd", "cost_per_step_steady_usd", "recovery_cost_usd", "goodput"}
COMPARISON_FIELDS = list(Comparison.__dataclass_fields__)


def build(results_dir: str, out_dir: str | None = None) -> dict[str, Path]:
    table = tablemod.read(results_dir)
    out = Path(out_dir or Path(results_dir) / "report")
    out.mkdir(parents=True, exist_ok=True)
    gs = groups(table)
    summ = summary(gs)
    comps = comparisons(gs, table)
    charts = chartmod.all_charts(table, gs, out / "charts")
    drill_runs = drillmod.load(results_dir)   # [] for most campaigns: the section and its chart stay out
    drill_chart = chartdrill.timeline(drill_runs, out / "charts" / "drills.png")
    if drill_chart is not None:
        charts["drills"] = drill_chart
    serve_runs = servemod.load(results_dir)   # [] without serve runs: no section, no charts
    serve_charts = chartserve.all_charts(serve_runs, out / "charts")
    charts.update(serve_charts)
    at_defaults = defaultsmod.summarize(defaultsmod.load(results_dir))
    rows = decision.rows(table, gs, summ, comps, drills=drill_runs, serves=serve_runs, at_defaults=at_defaults)
    charts["decision"] = chartdec.ratios(decision.ratio_points(rows), out / "charts" / "decision.png")
    probes = uxmod.probes(table)
    if probes:
        charts["errors"] = chartdec.time_to_error(probes, out / "charts" / "errors.png")
    atomic_write(out / "summary.csv", summary_csv(summ))
    atomic_write(out / "comparisons.csv", comparisons_csv(comps))

    campaigns = sorted({c if c is not None else "?" for c in table.campaign})
    generated = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    runs_line = ", ".join(f"{PLATFORM_LABEL.get(p, p)} {c['ok']} ok / {c['failed'] + c.get('interrupted', 0)} not ok"
                          for p, c in sorted(sec.counts(table).items(), key=lambda kv: platform_sort_key(kv[0])))
    harness = sec.harness_errors(table)
    if harness:
        runs_line += f" · {len(harness)} harness error(s), not counted against any platform"
    if table.probe.any():
        runs_line += f" · {int(table.probe.sum())} user-mistake probe(s), not training runs"
    intro = f"Campaign(s): {', '.join(campaigns)} · generated {generated} · runs: {runs_line}"

    res = {(p, k): g.resolution for (p, k), g in gs.items()}
    header, head_rows, rare_rows = headmod.table(summ, comps)
    head_blocks: list = [("table", (header, head_rows))] if head_rows else []
    if rare_rows:
        head_blocks.append(("details", (headmod.rare_summary(rare_rows), [("table", (header, rare_rows))])))
    secs: list[tuple[str, list]] = [
        bottom_line.section(rows, table, gs, comps),
        ("Decision summary: Kubernetes or Slurm for this job", [("table", decision.table_of(rows))]
         + [("p", s) for s in decision.reading(rows, table)] + [("img", ("decision", charts["decision"]))]),
        ("Headline", head_blocks or [("p", "_No successful runs yet._")]),
        ("What the numbers say", [("ul", findings(comps, res))])]
    tested = tested_table(comps)
    if comps:
        secs.append(("How verdicts are drawn", ([("table", tested)] if tested[1] else [])
                     + [("ul", method_note(comps))]))
    phases = sec.metric_table(summ, lambda k: base_metric(k) in RECOVERY_PHASES or base_metric(k) == "recovery_s")
    if "recovery" in charts:
        secs.append(("Recovery broken down", [("table", phases), ("img", ("recovery", charts["recovery"]))]))
    secs += defaultsmod.section(at_defaults, lambda p: PLATFORM_LABEL.get(p, p))
    cost_rows = sec.metric_table(summ, lambda k: base_metric(k) in COST_KEYS)
    pricing = sec.pricing_lines(table)
    if pricing or cost_rows[1]:
        secs.append(("Cost and goodput", ([("p", "Pricing model:"), ("ul", pricing)] if pricing else [])
                     + ([("table", cost_rows)] if cost_rows[1] else [])))
    secs += drillmod.section(drill_runs, summ, drill_chart)
    secs += servemod.section(serve_runs, serve_charts)
    secs += _ux_and_audit(table, summ, charts)
    secs.append(("Charts", [("img", (k, p)) for k, p in charts.items() if k not in OWN_SECTION]))
    secs.append(("Settings that shaped the numbers", [
        b for plat in sec.platforms(table) for b in settings_blocks(PLATFORM_LABEL.get(plat, plat),
                                                                     table.settings.get(plat, {}))]))
    secs.append(("Caveats", [("ul", sec.caveats(table))]))
    bad = sec.failed(table)
    if bad:
        secs.append(("Runs that did not succeed", [("ul", [f"`{r.run_id}` ({r.status}) at stage `{r.stage}`: "
                                                           f"{r.message}" for r in bad])]))
    if harness:
        secs.append((HARNESS_ERRORS, [("p", HARNESS_ERRORS_WHY), ("ul", [
            f"`{r.run_id}` ({PLATFORM_LABEL.get(r.platform, r.platform)}) at stage `{r.stage}`: {r.type}: {r.message}"
            for r in harness])]))
    secs.append(("Definitions", [("ul", DEFINITIONS)]))

    atomic_write(out / "report.md", _markdown(intro, secs))
    atomic_write(out / "report.html", _html(intro, secs))
    return {"report.md": out / "report.md", "report.html": out / "report.html", "summary.csv": out / "summary.csv",
            "comparisons.csv": out / "comparisons.csv", **{f"charts/{p.name}": p for p in charts.values()}}


def settings_blocks(label: str, settings: dict) -> list:
    """A platform's recorded settings: plain values as a list, nested ones (node lists, quotas, the Slurm
    configuration) as YAML, never as a Python repr."""
    plain = [f"`{k}`: {'–' if v is None else v}" for k, v in settings.items() if not isinstance(v, dict | list)]
    nested = {k: v for k, v in settings.items() if isinstance(v, dict | list)}
    out: list = [("h3", label)]
    if plain:
        out.append(("ul", plain))
    if nested:
        out.append(("pre", yaml.safe_dump(nested, sort_keys=False, allow_unicode=True, width=100).rstrip()))
    return out


def _ux_and_audit(table, summ, charts) -> list[tuple[str, list]]:
    out = []
    job = uxmod.job_table(table, uxmod.first_log_rows(summ))
    errors = uxmod.error_table(table)
    blocks = ([("h3", "The same clean job"), ("table", job), ("p", uxmod.NOTE_JOB)] if len(job[0]) > 1 else [])
    if errors[1]:
        blocks += [("h3", "Time to a clear error"), ("table", errors), ("p", uxmod.NOTE_ERRORS),
                   ("img", ("errors", charts["errors"]))]
    if blocks:
        out.append(("User experience", blocks))
    audits = auditmod.tables(table)
    if audits:
        out.append(("Auditing", [b for label, t, kept in audits
                                 for b in (("h3", label), ("table", t), ("p", "How long those records are kept:"),
                                           ("table", kept))]
                    + [("p", auditmod.NOTE)]))
    return out


def comparisons_csv(comps: list[Comparison]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COMPARISON_FIELDS)
    for c in comps:
        w.writerow(["" if v is None or (isinstance(v, float) and math.isnan(v)) else v
                    for v in (getattr(c, f) for f in COMPARISON_FIELDS)])
    return buf.getvalue()


def _markdown(intro: str, secs: list[tuple[str, list]]) -> str:
    md = ["# Kubernetes vs Slurm: DDP benchmark report", "", intro, ""]
    for title, blocks in secs:
        md += [f"## {title}", ""] + _md_blocks(title, blocks)
    return "\n".join(md)


def _md_blocks(title: str, blocks: list) -> list[str]:
    md: list[str] = []
    for kind, body in blocks:
        if kind == "p":
            md += [body, ""]
        elif kind == "small":
            md += [f"<sub>{body}</sub>", ""]
        elif kind == "pre":
            md += ["```yaml", body, "```", ""]
        elif kind == "details":
            summary, inner = body
            md += [f"<details><summary>{html.escape(summary)}</summary>", ""] + _md_blocks(title, inner) \
                + ["</details>", ""]
        elif kind == "h3":
            md += [f"### {body}", ""]
        elif kind == "ul":
            md += [f"- {x}" for x in body] + [""]
        elif kind == "table":
            md += [sec.md_table(*body), ""]
        else:
            key, path = body
            # a chart alone in a section of its own name needs no second heading
            md += ([] if CHART_TITLES[key] == title else [f"### {CHART_TITLES[key]}", ""]) \
                + [f"![{CHART_TITLES[key]}](charts/{path.name})", ""]
    return md


_CODE = re.compile(r"`([^`]*)`")


def _inline(text: str) -> str:
    return _CODE.sub(r"<code>\1</code>", html.escape(str(text))).replace("_No successful runs yet._",
                                                                          "<em>No successful runs yet.</em>")


def _html(intro: str, secs: list[tuple[str, list]]) -> str:
    h = ["<!doctype html><html><head><meta charset='utf-8'><title>Kubernetes vs Slurm report</title>"
         f"<style>{CSS}</style></head><body>",
         "<h1>Kubernetes vs Slurm: DDP benchmark report</h1>", f"<p>{_inline(intro)}</p>"]
    for title, blocks in secs:
        h.append(f"<h2>{html.escape(title)}</h2>")
        h += _html_blocks(title, blocks)
    h.append("</body></html>")
    return "\n".join(h)


def _html_blocks(title: str, blocks: list) -> list[str]:
    h: list[str] = []
    for kind, body in blocks:
        if kind == "p":
            h.append(f"<p>{_inline(body)}</p>")
        elif kind == "small":
            h.append(f"<p class='small'>{_inline(body)}</p>")
        elif kind == "pre":
            h.append(f"<pre>{html.escape(body)}</pre>")
        elif kind == "details":
            summary, inner = body
            h.append(f"<details><summary>{html.escape(summary)}</summary>")
            h += _html_blocks(title, inner)
            h.append("</details>")
        elif kind == "h3":
            h.append(f"<h3>{_inline(body)}</h3>")
        elif kind == "ul":
            h.append("<ul>" + "".join(f"<li>{_inline(x)}</li>" for x in body) + "</ul>")
        elif kind == "table":
            header, rows = body
            h.append("<table><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in header) + "</tr>" + "".join(
                "<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in rows) + "</table>")
        else:
            key, path = body
            data = base64.b64encode(path.read_bytes()).decode()
            h.append(("" if CHART_TITLES[key] == title else f"<h3>{CHART_TITLES[key]}</h3>")
                     + f'<img alt="{html.escape(CHART_TITLES[key])}" src="data:image/png;base64,{data}">')
    return h
