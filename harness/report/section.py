"""What a report section is, and what every section may read.

A section is a title, whether it applies to the campaign at hand, and its blocks. The document walks an
ordered list of them (registry.py) and renders the blocks of those that apply; one that does not apply
emits nothing, not even its heading. A scenario's section says from the campaign whether it applies, so
a campaign without serve runs has no inference section, and a new scenario adds its section by one line
in the registry rather than by a branch in the document.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..replay import store as replaystore
from . import charts as chartmod
from . import charts_decision as chartdec
from . import charts_drill as chartdrill
from . import charts_serve as chartserve
from . import conditions as condmod
from . import decision, files
from . import defaults as defaultsmod
from . import design as designmod
from . import drills as drillmod
from . import scale_curve as scalemod
from . import serving as servemod
from . import table as tablemod
from . import ux as uxmod
from .compare import Comparison, comparisons
from .stats import Groups, SummaryRow, groups, summary

BlockKind = Literal["p", "small", "h3", "pre", "ul", "table", "img", "details"]
# ("p" | "small" | "h3" | "pre", text), ("ul", [items]), ("table", (header, rows)), ("img", (chart key, path)),
# ("details", (summary, [blocks])): Markdown and HTML are two renderings of the same blocks.
Block = tuple[BlockKind, Any]


@dataclass(frozen=True)
class ReportContext:
    """The campaign as the document read it, with its charts drawn: what any section may show."""
    results_dir: str
    charts_dir: Path
    table: tablemod.RunTable
    groups: Groups
    summary: list[SummaryRow]
    comparisons: list[Comparison]
    charts: dict[str, Path]                  # key -> PNG, in the order they were drawn
    drills: list[drillmod.Drill]             # [] unless the campaign ran upgrade drills
    serves: list[servemod.Serve]             # [] unless it ran the serving scenario
    at_defaults: list[defaultsmod.Summary]   # [] unless its fault runs could be projected to the defaults
    decision_rows: list[decision.Row]
    probes: list[uxmod.Probe]                # [] unless it probed user mistakes
    replays: list[Path]                      # [] unless it holds replays of job traces (<campaign>/scale/*/)
    host: condmod.HostState | None = None    # the host's load over every training run (conditions.py)
    design: designmod.Design | None = None   # the sequential design that made the campaign, if one did
    notes: tuple[str, ...] = ()              # what its maker wrote beside it for the opening (campaign.json)


def always(ctx: ReportContext) -> bool:
    return True


@dataclass(frozen=True)
class Section:
    title: str
    blocks: Callable[[ReportContext], list[Block]]
    # asked before blocks(): a section that does not apply is left out whole, heading included
    applies: Callable[[ReportContext], bool] = always


def gather(results_dir: str, out: Path) -> ReportContext:
    """Read the campaign and draw its charts. The decision summary weighs every scenario, so the scenarios'
    runs are read here for all sections at once; a section only its own scenario feeds may read more from
    `results_dir` itself."""
    table = tablemod.read(results_dir)
    files.real_dir(out)   # after the read: a campaign that cannot be read leaves no folder
    charts_dir = out / "charts"
    gs = groups(table)
    summ = summary(gs)
    design = designmod.read(results_dir)
    comps = designmod.apply(comparisons(gs, table), table, gs, design)
    charts = chartmod.all_charts(table, gs, charts_dir)
    drill_runs = drillmod.load(results_dir)
    drill_chart = chartdrill.timeline(drill_runs, charts_dir / "drills.png")
    if drill_chart is not None:
        charts["drills"] = drill_chart
    serve_runs = servemod.load(results_dir)
    charts.update(chartserve.all_charts(serve_runs, charts_dir))
    scale_chart = scalemod.chart(table, charts_dir / f"{scalemod.CHART}.png")
    if scale_chart is not None:
        charts[scalemod.CHART] = scale_chart
    at_defaults = defaultsmod.summarize(defaultsmod.load(results_dir))
    replays = replaystore.replay_dirs(Path(results_dir))
    noted = condmod.noted_load(results_dir)
    rows = decision.rows(table, gs, summ, comps, drills=drill_runs, serves=serve_runs, at_defaults=at_defaults,
                         replays=replays, facts=condmod.platform_facts(results_dir), noted=noted)
    host = condmod.host_state(table, np.flatnonzero(table.ok), noted)
    charts["decision"] = chartdec.ratios(decision.ratio_points(rows), charts_dir / "decision.png")
    probes = uxmod.probes(table)
    if probes:
        charts["errors"] = chartdec.time_to_error(probes, charts_dir / "errors.png")
    return ReportContext(results_dir, charts_dir, table, gs, summ, comps, charts, drill_runs, serve_runs, at_defaults,
                         rows, probes, replays, host, design, tuple(condmod.campaign_notes(results_dir)))
