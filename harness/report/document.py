"""Stored runs -> report.md, a self-contained report.html, charts/*.png and summary.csv."""
from __future__ import annotations

import base64
import html
import math
import time
from pathlib import Path

import pandas as pd

from ..metrics import HEADLINE
from ..store import atomic_write, load_results
from . import charts as chartmod
from .records import Slimmer
from .stats import PLATFORM_LABEL, latest, platform_sort_key, ratios, summary, tidy

CHART_TITLES = {
    "metrics": "Headline metrics per platform",
    "timeline": "Phase timeline",
    "busbw": "All-reduce bus bandwidth",
    "step_times": "Step time distribution",
    "cost": "Cost per step",
    "contention": "Contention",
}
# Environment facts worth showing; secrets never reach the records in the first place.
SETTING_KEYS_SKIP = {"harness_host"}


def fmt(v: float | None, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    a = abs(v)
    if unit == "USD":
        s = f"{v:.3g}" if a < 0.01 else f"{v:.4f}"
    elif a >= 100:
        s = f"{v:.0f}"
    elif a >= 1:
        s = f"{v:.2f}"
    else:
        s = f"{v:.3g}"
    return s


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def headline_table(summ: pd.DataFrame, rat: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    plats = sorted(summ.platform.unique(), key=platform_sort_key)
    header = ["metric", "unit"] + [f"{PLATFORM_LABEL.get(p, p)} median [p05–p95] (n)" for p in plats]
    pairs = [] if rat.empty else sorted({(r.numerator, r.denominator) for r in rat.itertuples()},
                                        key=lambda p: (p != ("k8s", "slurm"), p))
    header += [f"{PLATFORM_LABEL.get(a, a)} / {PLATFORM_LABEL.get(b, b)} (95% CI)" for a, b in pairs]
    rows = []
    order = {m: i for i, m in enumerate(HEADLINE)}
    metrics = sorted(summ.metric.unique(), key=lambda m: (order.get(m.split(":")[0], 99), m))
    for m in metrics:
        sub = summ[summ.metric == m]
        unit = sub.unit.iloc[0]
        row = [f"`{m}`", unit]
        for p in plats:
            s = sub[sub.platform == p]
            if s.empty:
                row.append("–")
            else:
                s = s.iloc[0]
                row.append(f"{fmt(s['median'], unit)} [{fmt(s['p05'], unit)}–{fmt(s['p95'], unit)}] ({s['n']})")
        for a, b in pairs:
            r = rat[(rat.metric == m) & (rat.numerator == a) & (rat.denominator == b)]
            row.append("–" if r.empty else f"{r.iloc[0].ratio:.2f} ({r.iloc[0].ci_low:.2f}–{r.iloc[0].ci_high:.2f})")
        rows.append(row)
    return header, rows


def findings(rat: pd.DataFrame) -> list[str]:
    """Plain statements the data supports: a difference only where the whole interval is on one side of 1."""
    out = []
    if rat.empty:
        return ["Only one platform has results, so there is nothing to compare yet."]
    for r in rat.itertuples():
        base = r.metric.split(":")[0]
        if base not in HEADLINE and base not in ("lost_steps", "handover_s"):
            continue
        a, b = PLATFORM_LABEL.get(r.numerator, r.numerator), PLATFORM_LABEL.get(r.denominator, r.denominator)
        higher_better = base == "allreduce_busbw_gbps"
        if min(r.n_num, r.n_den) < 2:
            out.append(f"`{r.metric}`: too few runs to compare {a} and {b} (n={r.n_num} and n={r.n_den}; "
                       f"an interval needs at least 2 on each side).")
            continue
        if not (math.isfinite(r.ratio) and math.isfinite(r.ci_low) and math.isfinite(r.ci_high)):
            out.append(f"`{r.metric}`: no ratio of {a} to {b}: a median is 0 (Slurm records whole seconds, "
                       f"so sub-second waits read as 0).")
            continue
        small = min(r.n_num, r.n_den) < 3
        caveat = " (fewer than 3 runs on a side: treat as indicative)" if small else ""
        if r.ci_low > 1 or r.ci_high < 1:
            more = r.ratio > 1
            better = more == higher_better
            word = "higher" if more else "lower"
            out.append(f"`{r.metric}`: {a} is {word} than {b} by ×{r.ratio:.2f} (95% CI {r.ci_low:.2f}–{r.ci_high:.2f}); "
                       f"{'advantage ' + a if better else 'advantage ' + b}{caveat}.")
        else:
            out.append(f"`{r.metric}`: no clear difference between {a} and {b} (ratio {r.ratio:.2f}, "
                       f"95% CI {r.ci_low:.2f}–{r.ci_high:.2f} includes 1){caveat}.")
    return out


def settings(runs: list[dict]) -> dict[str, dict]:
    per: dict[str, dict] = {}
    for r in latest(runs):
        env = r.get("environment") or {}
        d = per.setdefault(r["platform"], {})
        for k, v in env.items():
            if k in SETTING_KEYS_SKIP or v in (None, "", [], {}):
                continue
            d.setdefault(k, v)
    return dict(sorted(per.items(), key=lambda kv: platform_sort_key(kv[0])))


def caveats(runs: list[dict]) -> list[str]:
    out = []
    envs = [r.get("environment") or {} for r in runs]
    if not any(e.get("gpus_visible") for e in envs):
        out.append("CPU only: the all-reduce figures are gloo over loopback/virtual networks, not NCCL over a fabric; "
                   "they compare the platforms' plumbing, not GPU interconnects.")
    hosts = {e.get("harness_host") for e in envs if e.get("harness_host")}
    if len(hosts) <= 1:
        out.append("All platforms ran on one host, sharing its CPUs: runs were sequential, but background "
                   "daemons (dockerd, kubelets, slurmd) compete for the same cores.")
    torch_by_plat: dict[str, set] = {}
    for r in runs:
        t = (r.get("environment") or {}).get("torch")
        if t:
            torch_by_plat.setdefault(r["platform"], set()).add(t)
    if len({v for vs in torch_by_plat.values() for v in vs}) > 1:
        out.append("Different torch builds ran on different platforms (" +
                   "; ".join(f"{PLATFORM_LABEL.get(p, p)}: {', '.join(sorted(v))}" for p, v in sorted(torch_by_plat.items())) +
                   "): step time and bandwidth differences may come from the build, not the platform.")
    out.append("Clocks: scheduler timestamps come from the scheduler (Slurm records whole seconds), workload "
               "timestamps from each node's wall clock; on one host they are the same clock.")
    out.append("The all-reduce sweep is excluded from startup_s and reported as sweep_s.")
    return out


def _img_tag(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def build(results_dir: str, out_dir: str | None = None) -> dict[str, Path]:
    runs = load_results(results_dir, keep=Slimmer())
    out = Path(out_dir or Path(results_dir) / "report")
    out.mkdir(parents=True, exist_ok=True)
    df = tidy(runs)
    summ = summary(df)
    rat = ratios(df)
    charts = chartmod.all_charts(runs, df, out / "charts")
    atomic_write(out / "summary.csv", summ.to_csv(index=False))

    lr = latest(runs)
    counts = {}
    for r in lr:
        c = counts.setdefault(r["platform"], {"ok": 0, "failed": 0, "interrupted": 0})
        c[r.get("status", "failed")] = c.get(r.get("status", "failed"), 0) + 1
    failed = [r for r in lr if r.get("status") != "ok"]
    header, rows = headline_table(summ, rat)
    find = findings(rat)
    sets = settings(runs)
    cav = caveats(lr)
    campaigns = sorted({r.get("campaign", "?") for r in lr})
    generated = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())

    md = ["# Kubernetes vs Slurm: DDP benchmark report", "",
          f"Campaign(s): {', '.join(campaigns)} · generated {generated} · runs: " +
          ", ".join(f"{PLATFORM_LABEL.get(p, p)} {c['ok']} ok / {c['failed'] + c.get('interrupted', 0)} not ok"
                    for p, c in sorted(counts.items(), key=lambda kv: platform_sort_key(kv[0]))), "",
          "## Headline", "", _md_table(header, rows) if rows else "_No successful runs yet._", "",
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
    if failed:
        md += ["## Runs that did not succeed", ""]
        md += [f"- `{r['run_id']}` ({r.get('status')}) at stage `{(r.get('error') or {}).get('stage')}`: "
               f"{((r.get('error') or {}).get('message') or '').splitlines()[0] if (r.get('error') or {}).get('message') else ''}"
               for r in failed]
        md.append("")
    md += ["## Definitions", "",
           "- `queue_s`: submit → all resources allocated; `queue_admission_s` (Kubernetes): submit → Kueue admission.",
           "- `startup_s` = `launch_s` + `rendezvous_s` + `first_step_s`: allocation → first step done by every rank, sweep excluded.",
           "- `allreduce_busbw_gbps`: peak of busbw = algbw × 2(n−1)/n (nccl-tests), GB = 1e9 bytes.",
           "- `queue_s:contention`, `queue_admission_s:contention`: the same, for a job submitted while a same-shape "
           "blocking job holds what it needs (Slurm: the blocker runs `--exclusive`; Kubernetes: the ClusterQueue "
           "quota fits one job) until it finishes by itself. `handover_s`: the blocker's last rank done → the "
           "waiting job allocated (scheduler times are whole seconds, so ±1 s).",
           "- `recovery_s:<fault>`: fault injected → first step done by every rank after the restart; `lost_steps`: steps redone.",
           "- `cost_per_step_usd`: price × units × (done − submit) / steps; `cost_per_step_steady_usd`: price × units × median step time.",
           ""]
    md_text = "\n".join(md)
    atomic_write(out / "report.md", md_text)

    css = ("body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}"
           "table{border-collapse:collapse;font-size:14px}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}"
           "th{background:#f3f3f3}img{max-width:100%;border:1px solid #eee;margin:.5em 0}code{background:#f6f6f6}")
    h = [f"<!doctype html><html><head><meta charset='utf-8'><title>Kubernetes vs Slurm report</title><style>{css}</style></head><body>",
         "<h1>Kubernetes vs Slurm: DDP benchmark report</h1>",
         f"<p>{html.escape(md[2])}</p>", "<h2>Headline</h2>"]
    if rows:
        h.append("<table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in header) + "</tr>")
        for r in rows:
            h.append("<tr>" + "".join(f"<td>{html.escape(c.strip('`'))}</td>" for c in r) + "</tr>")
        h.append("</table>")
    else:
        h.append("<p><em>No successful runs yet.</em></p>")
    h.append("<h2>What the numbers say</h2><ul>" + "".join(f"<li>{html.escape(f.replace('`', ''))}</li>" for f in find) + "</ul>")
    h.append("<h2>Charts</h2>")
    for key, path in charts.items():
        h.append(f"<h3>{CHART_TITLES[key]}</h3>{_img_tag(path, CHART_TITLES[key])}")
    h.append("<h2>Settings that shaped the numbers</h2>")
    for plat, d in sets.items():
        h.append(f"<h3>{html.escape(PLATFORM_LABEL.get(plat, plat))}</h3><ul>" +
                 "".join(f"<li><code>{html.escape(k)}</code>: {html.escape(str(v))}</li>" for k, v in d.items()) + "</ul>")
    h.append("<h2>Caveats</h2><ul>" + "".join(f"<li>{html.escape(c)}</li>" for c in cav) + "</ul>")
    if failed:
        h.append("<h2>Runs that did not succeed</h2><ul>" + "".join(
            f"<li><code>{html.escape(r['run_id'])}</code> ({html.escape(str(r.get('status')))}) at stage "
            f"{html.escape(str((r.get('error') or {}).get('stage')))}</li>" for r in failed) + "</ul>")
    h.append("</body></html>")
    atomic_write(out / "report.html", "\n".join(h))
    return {"report.md": out / "report.md", "report.html": out / "report.html", "summary.csv": out / "summary.csv",
            **{f"charts/{p.name}": p for p in charts.values()}}
