"""Stored runs -> report.md, a self-contained report.html, charts/*.png, summary.csv and comparisons.csv.

The report is built once as sections of blocks (paragraph, list, table, chart); Markdown and HTML
are two renderings of the same blocks, so the two cannot say different things. Which sections there are,
their order and whether each applies is the registry's (registry.py); this module reads, renders and writes.
"""
from __future__ import annotations

import base64
import csv
import html
import io
import math
import re
import time
from collections.abc import Sequence
from pathlib import Path

from ..store import bounded
from . import files
from . import sections as sec
from .compare import Comparison
from .registry import HARNESS_ERRORS, REGISTRY, settings_blocks
from .section import Block, ReportContext, Section, gather
from .stats import PLATFORM_LABEL, platform_sort_key, summary_csv

# importable from here, where the report's callers have always found them
__all__ = ["HARNESS_ERRORS", "build", "comparisons_csv", "settings_blocks"]

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
    "scale_curve": "Scale curve",
}
CSS = ("body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}"
       "table{border-collapse:collapse;font-size:14px}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}"
       "th{background:#f3f3f3}img{max-width:100%;border:1px solid #eee;margin:.5em 0}code{background:#f6f6f6}"
       "pre{background:#f6f6f6;padding:.5em;overflow-x:auto;font-size:13px}.small{font-size:13px;color:#555}"
       "details{margin:.5em 0}summary{cursor:pointer}")
COMPARISON_FIELDS = list(Comparison.__dataclass_fields__)


def build(results_dir: str, out_dir: str | None = None,
          sections: Sequence[Section] = REGISTRY) -> dict[str, Path]:
    """The report of the runs under `results_dir`, written to `out_dir` (default: its report/ folder).
    `sections`: those the report may show, in its order; the registry unless a caller brings its own."""
    out = Path(out_dir or Path(results_dir) / "report")
    ctx = gather(results_dir, out)
    # every file through files.write: a link planted in report/ never redirects a write
    files.write(out / "summary.csv", summary_csv(ctx.summary))
    files.write(out / "comparisons.csv", comparisons_csv(ctx.comparisons))
    intro = _intro(ctx)
    secs = [(s.title, s.blocks(ctx)) for s in sections if s.applies(ctx)]
    files.write(out / "report.md", _markdown(intro, secs))
    files.write(out / "report.html", _html(intro, secs))
    return {"report.md": out / "report.md", "report.html": out / "report.html", "summary.csv": out / "summary.csv",
            "comparisons.csv": out / "comparisons.csv", **{f"charts/{p.name}": p for p in ctx.charts.values()}}


def _intro(ctx: ReportContext) -> str:
    table = ctx.table
    campaigns = sorted({c if c is not None else "?" for c in table.campaign})
    generated = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    runs_line = ", ".join(f"{PLATFORM_LABEL.get(p, p)} {c['ok']} ok / {c['failed'] + c.get('interrupted', 0)} not ok"
                          for p, c in sorted(sec.counts(table).items(), key=lambda kv: platform_sort_key(kv[0])))
    harness = sec.harness_errors(table)
    if harness:
        runs_line += f" · {len(harness)} harness error(s), not counted against any platform"
    if table.probe.any():
        runs_line += f" · {int(table.probe.sum())} user-mistake probe(s), not training runs"
    return f"Campaign(s): {', '.join(campaigns)} · generated {generated} · runs: {runs_line}"


def comparisons_csv(comps: list[Comparison]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COMPARISON_FIELDS)
    for c in comps:
        w.writerow(["" if v is None or (isinstance(v, float) and math.isnan(v)) else v
                    for v in (getattr(c, f) for f in COMPARISON_FIELDS)])
    return buf.getvalue()


def _markdown(intro: str, secs: list[tuple[str, list[Block]]]) -> str:
    md = ["# Kubernetes vs Slurm: DDP benchmark report", "", md_inline(intro), ""]
    for title, blocks in secs:
        md += [f"## {title}", ""] + _md_blocks(title, blocks)
    return "\n".join(md)


def _md_blocks(title: str, blocks: list[Block]) -> list[str]:
    md: list[str] = []
    for kind, body in blocks:
        if kind == "p":
            md += [md_inline(body), ""]
        elif kind == "small":
            md += [f"<sub>{md_inline(body)}</sub>", ""]
        elif kind == "pre":
            fence = "`" * max(3, 1 + max(map(len, _BACKTICKS.findall(body)), default=0))
            md += [f"{fence}yaml", body, fence, ""]
        elif kind == "details":
            summary, inner = body
            # one line: a blank line would end the HTML block, and what follows would be Markdown again
            one_line = str(summary).replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
            md += [f"<details><summary>{html.escape(one_line)}</summary>", ""] + _md_blocks(title, inner) \
                + ["</details>", ""]
        elif kind == "h3":
            md += [f"### {md_inline(body)}", ""]
        elif kind == "ul":
            md += [f"- {md_inline(x)}" for x in body] + [""]
        elif kind == "table":
            header, rows = body
            md += [sec.md_table([md_inline(c) for c in header], [[md_inline(c) for c in r] for r in rows]), ""]
        else:
            key, path = body
            # a chart alone in a section of its own name needs no second heading
            md += ([] if CHART_TITLES[key] == title else [f"### {CHART_TITLES[key]}", ""]) \
                + [f"![{CHART_TITLES[key]}](charts/{path.name})", ""]
    return md


_CODE = re.compile(r"`([^`]*)`")
_STRONG = re.compile(r"\*\*([^*]+)\*\*")   # what the Markdown bolds (an unequal condition, a busy host)
_BACKTICKS = re.compile(r"`+")
# What would make Markdown text more than text, outside code spans: the start of an HTML tag, comment,
# declaration or autolink (a '<' before a letter, '/', '!' or '?'), and a link's destination ('](').
_HTML_START = re.compile(r"<(?=[A-Za-z/!?])")
# a line that would define a link reference ([label]: destination), which a "[label]" elsewhere would use
_LINK_DEFINITION = re.compile(r" {0,3}\[(?:[^\[\]\\]|\\.)*\]:")
_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def md_inline(text: object) -> str:
    """Text (much of it from the records: messages, names, facts) as one line of Markdown that stays
    text: no HTML, no link. Markdown renders raw HTML, and a record is anyone's to write.

    Code spans are kept as written (their content is literal in Markdown: the report writes commands
    like `squeue -j <id>` there); outside them a tag's '<' becomes '&lt;', '](' has its parenthesis
    escaped, and a line that would define a link reference ([label]: ...) its '['. The code spans are
    found as CommonMark finds them (a backtick run closes at the next run of the same length; a
    backslash escapes a backtick outside them), so no text a record holds can make the two disagree.
    Line breaks become spaces: a new line could start a block (a table row, an HTML block) of its own."""
    s = str(text).replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == "\\" and i + 1 < n and s[i + 1] in _PUNCT:   # an escaped character, never a delimiter
            out.append(s[i:i + 2])
            i += 2
        elif c == "`":
            run = _BACKTICKS.match(s, i).end() - i
            close = next((m.start() for m in _BACKTICKS.finditer(s, i + run) if m.end() - m.start() == run), None)
            end = i + run if close is None else close + run   # no closing run: the backticks are text
            out.append(s[i:end])
            i = end
        else:
            j = i + 1
            while j < n and s[j] not in "`\\":
                j += 1
            out.append(_HTML_START.sub("&lt;", s[i:j]).replace("](", "]\\("))
            i = j
    line = "".join(out)
    return "\\" + line if _LINK_DEFINITION.match(line) else line


def _inline(text: str) -> str:
    return _STRONG.sub(r"<strong>\1</strong>", _CODE.sub(r"<code>\1</code>", html.escape(str(text)))).replace(
        "_No successful runs yet._", "<em>No successful runs yet.</em>")


def _html(intro: str, secs: list[tuple[str, list[Block]]]) -> str:
    h = ["<!doctype html><html><head><meta charset='utf-8'><title>Kubernetes vs Slurm report</title>"
         f"<style>{CSS}</style></head><body>",
         "<h1>Kubernetes vs Slurm: DDP benchmark report</h1>", f"<p>{_inline(intro)}</p>"]
    for title, blocks in secs:
        h.append(f"<h2>{html.escape(title)}</h2>")
        h += _html_blocks(title, blocks)
    h.append("</body></html>")
    return "\n".join(h)


def _html_blocks(title: str, blocks: list[Block]) -> list[str]:
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
            data = base64.b64encode(bounded.read_bytes(path)).decode()   # the chart just written, no link
            h.append(("" if CHART_TITLES[key] == title else f"<h3>{CHART_TITLES[key]}</h3>")
                     + f'<img alt="{html.escape(CHART_TITLES[key])}" src="data:image/png;base64,{data}">')
    return h
