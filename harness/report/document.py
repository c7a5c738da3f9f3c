"""Stored runs -> report.md, a self-contained report.html, charts/*.png and summary.csv."""
from __future__ import annotations

import base64
import html
import time
from pathlib import Path

from ..store import atomic_write
from . import charts as chartmod
from . import table as tablemod
from .sections import NotOk, caveats, counts, failed, findings, harness_errors, headline_table, md_table, platforms
from .stats import PLATFORM_LABEL, groups, platform_sort_key, ratios, summary, summary_csv

CHART_TITLES = {
    "metrics": "Headline metrics per platform",
    "timeline": "Phase timeline",
    "busbw": "All-reduce bus bandwidth",
    "step_times": "Step time distribution",
    "cost": "Cost per step",
    "contention": "Contention",
}
HARNESS_ERRORS = "Harness errors — not counted against any platform"
HARNESS_ERRORS_WHY = ("These runs stopped because the harness itself raised an unexpected error (a bug in the harness, "
                      "not a failure of the platform or the job); no platform's counts above include them.")
DEFINITIONS = [
    "- `queue_s`: submit → all resources allocated; `queue_admission_s` (Kubernetes): submit → Kueue admission.",
    "- `startup_s` = `launch_s` + `rendezvous_s` + `first_step_s`: allocation → first step done by every rank, "
    "sweep excluded.",
    "- `allreduce_busbw_gbps`: peak of busbw = algbw × 2(n−1)/n (nccl-tests), GB = 1e9 bytes.",
    "- `queue_s:contention`, `queue_admission_s:contention`: the same, for a job submitted while a same-shape "
    "blocking job holds what it needs (Slurm: the blocker runs `--exclusive`; Kubernetes: the ClusterQueue "
    "quota fits one job) until it finishes by itself. `handover_s`: the blocker's last rank done → the "
    "waiting job allocated (scheduler times are whole seconds, so ±1 s).",
    "- `recovery_s:<fault>`: fault injected → first step done by every rank after the restart; "
    "`lost_steps`: steps redone.",
    "- `cost_per_step_usd`: price × units × (done − submit) / steps; `cost_per_step_steady_usd`: price × units × "
    "median step time.",
]
CSS = ("body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}"
       "table{border-collapse:collapse;font-size:14px}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}"
       "th{background:#f3f3f3}img{max-width:100%;border:1px solid #eee;margin:.5em 0}code{background:#f6f6f6}")


def _img_tag(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def build(results_dir: str, out_dir: str | None = None) -> dict[str, Path]:
    table = tablemod.read(results_dir)
    out = Path(out_dir or Path(results_dir) / "report")
    out.mkdir(parents=True, exist_ok=True)
    gs = groups(table)
    summ = summary(gs)
    rat = ratios(gs)
    charts = chartmod.all_charts(table, gs, out / "charts")
    atomic_write(out / "summary.csv", summary_csv(summ))

    header, rows = headline_table(summ, rat)
    find = findings(rat)
    sets = {p: table.settings.get(p, {}) for p in platforms(table)}
    cav = caveats(table)
    bad, harness = failed(table), harness_errors(table)
    campaigns = sorted({c if c is not None else "?" for c in table.campaign})
    generated = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    runs_line = ", ".join(f"{PLATFORM_LABEL.get(p, p)} {c['ok']} ok / {c['failed'] + c.get('interrupted', 0)} not ok"
                          for p, c in sorted(counts(table).items(), key=lambda kv: platform_sort_key(kv[0])))
    if harness:
        runs_line += f" · {len(harness)} harness error(s), not counted against any platform"
    intro = f"Campaign(s): {', '.join(campaigns)} · generated {generated} · runs: {runs_line}"

    md = ["# Kubernetes vs Slurm: DDP benchmark report", "", intro, "",
          "## Headline", "", md_table(header, rows) if rows else "_No successful runs yet._", "",
          "## What the numbers say", ""] + [f"- {f}" for f in find] + [""]
    md += ["## Charts", ""]
    for key, path in charts.items():
        md += [f"### {CHART_TITLES[key]}", "", f"![{CHART_TITLES[key]}](charts/{path.name})", ""]
    md += ["## Settings that shaped the numbers", ""]
    for plat, d in sets.items():
        md += [f"### {PLATFORM_LABEL.get(plat, plat)}", ""]
        md += [f"- `{k}`: {v}" for k, v in d.items()]
        md.append("")
    md += ["## Caveats", ""] + [f"- {c}" for c in cav] + [""]
    if bad:
        md += ["## Runs that did not succeed", ""]
        md += [f"- `{r.run_id}` ({r.status}) at stage `{r.stage}`: {r.message}" for r in bad]
        md.append("")
    if harness:
        md += [f"## {HARNESS_ERRORS}", "", HARNESS_ERRORS_WHY, ""]
        md += [f"- `{r.run_id}` ({PLATFORM_LABEL.get(r.platform, r.platform)}) at stage `{r.stage}`: "
               f"{r.type}: {r.message}" for r in harness]
        md.append("")
    md += ["## Definitions", ""] + DEFINITIONS + [""]
    atomic_write(out / "report.md", "\n".join(md))
    atomic_write(out / "report.html", _html(intro, header, rows, find, charts, sets, cav, bad, harness))
    return {"report.md": out / "report.md", "report.html": out / "report.html", "summary.csv": out / "summary.csv",
            **{f"charts/{p.name}": p for p in charts.values()}}


def _html(intro: str, header: list[str], rows: list[list[str]], find: list[str], charts: dict[str, Path],
          sets: dict[str, dict], cav: list[str], bad: list[NotOk], harness: list[NotOk]) -> str:
    esc = html.escape
    h = ["<!doctype html><html><head><meta charset='utf-8'><title>Kubernetes vs Slurm report</title>"
         f"<style>{CSS}</style></head><body>",
         "<h1>Kubernetes vs Slurm: DDP benchmark report</h1>",
         f"<p>{esc(intro)}</p>", "<h2>Headline</h2>"]
    if rows:
        h.append("<table><tr>" + "".join(f"<th>{esc(c)}</th>" for c in header) + "</tr>")
        for r in rows:
            h.append("<tr>" + "".join(f"<td>{esc(c.strip('`'))}</td>" for c in r) + "</tr>")
        h.append("</table>")
    else:
        h.append("<p><em>No successful runs yet.</em></p>")
    h.append("<h2>What the numbers say</h2><ul>" + "".join(f"<li>{esc(f.replace('`', ''))}</li>" for f in find)
             + "</ul>")
    h.append("<h2>Charts</h2>")
    for key, path in charts.items():
        h.append(f"<h3>{CHART_TITLES[key]}</h3>{_img_tag(path, CHART_TITLES[key])}")
    h.append("<h2>Settings that shaped the numbers</h2>")
    for plat, d in sets.items():
        h.append(f"<h3>{esc(PLATFORM_LABEL.get(plat, plat))}</h3><ul>" +
                 "".join(f"<li><code>{esc(k)}</code>: {esc(str(v))}</li>" for k, v in d.items()) + "</ul>")
    h.append("<h2>Caveats</h2><ul>" + "".join(f"<li>{esc(c)}</li>" for c in cav) + "</ul>")
    if bad:
        h.append("<h2>Runs that did not succeed</h2><ul>" + "".join(
            f"<li><code>{esc(r.run_id)}</code> ({esc(str(r.status))}) at stage {esc(str(r.stage))}</li>" for r in bad)
            + "</ul>")
    if harness:
        h.append(f"<h2>{esc(HARNESS_ERRORS)}</h2><p>{esc(HARNESS_ERRORS_WHY)}</p><ul>" + "".join(
            f"<li><code>{esc(r.run_id)}</code> ({esc(PLATFORM_LABEL.get(r.platform, r.platform))}) at stage "
            f"{esc(str(r.stage))}: {esc(str(r.type))}: {esc(r.message)}</li>" for r in harness) + "</ul>")
    h.append("</body></html>")
    return "\n".join(h)
