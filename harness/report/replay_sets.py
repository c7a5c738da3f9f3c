"""Verdicts on queues at scale from several traces, each replayed on both platforms below both ceilings.

A replay set is the replay directories (one trace each, with its repeats) a campaign stored under one set
name (``poc scale replay --replay-set NAME``; a directory without one is a set of its own). A figure of the set
is tested with the exact stratified rank test (stratified.py: each trace a stratum, the replay the unit),
Holm-adjusted over the set's figures. A verdict needs:

* at least MIN_TRACES traces (a trace's repeats say how the platforms vary on it, not across traces);
* every trace below both platforms' measured placement ceilings (scale/ceiling.py: its busiest 10 s
  offered no more than each platform placed in the saturation sweep at that size and those rate limits);
  a throughput-bound or unknown trace is left out of the test and named;
* the same queue policy pair, size and settings in every trace (the set's name says so; the settings each
  replay recorded are checked and a set that mixes pairs is refused a verdict);
* a difference beyond the records' resolution (±2 s on a queue time) in the median over traces.

The figures are the all-jobs queue p50 and p99, the mean bounded slowdown and the utilisation over the
arrival window (scale/queueing.py); utilisation as work ÷ makespan is not one of them (it restates the
makespan, which the last job sets).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..replay import store as rs
from ..scale import ceiling as cl
from ..scale import load
from . import replay_verdict, stratified
from .inference import ALPHA, holm
from .stats import PLATFORM_LABEL

A, B = "k8s", "slurm"
MIN_TRACES = 3
LIGHT = 20.0            # a replay compressed at most this much is "lightly compressed"
CEILINGS_FILE = "ceilings.json"


# a figure compared across a set is a replay's figure, as replay_verdict compares them
SetFigure = replay_verdict.Figure


def _bsld(f: dict) -> float | None:
    row = ((f.get("bounded_slowdown") or {}).get("classes") or {}).get("all")
    return None if row is None else row["mean"]


FIGURES = (
    SetFigure("queue_p50_s:all", "queue p50, all jobs", "s", lambda f: f["queue_s"].get("all", {}).get("p50_s"),
              True, 1.0),
    SetFigure("queue_p99_s:all", "queue p99, all jobs", "s", lambda f: f["queue_s"].get("all", {}).get("p99_s"),
              True, 1.0),
    SetFigure("bounded_slowdown:all", "mean bounded slowdown (tau 10 s), all jobs", "", _bsld, True, 0.0),
    SetFigure("arrival_window_utilisation", "GPU utilisation by work over the arrival window", "share",
              lambda f: f.get("arrival_window_utilisation"), False, 0.0),
)


def load_ceilings(scale_dir: Path) -> list[cl.Ceiling]:
    """The ceilings a campaign's saturation sweeps measured (<scale dir>/ceilings.json); [] when none."""
    f = scale_dir / CEILINGS_FILE
    if not f.is_file():
        return []
    try:
        return cl.from_dicts(json.loads(f.read_text()).get("ceilings") or [])
    except (ValueError, TypeError, AttributeError):
        return []


@dataclass
class Trace1:
    """One replay directory: one trace, its complete replays' figures per platform, where it stands."""

    where: Path
    trace_name: str
    jobs: int
    compression: float
    nodes: int | str
    policy: str
    settings_key: tuple
    figures: dict[str, list[dict]]
    busiest: float
    standing: dict[str, cl.Standing]
    set_name: str = ""          # the replay set it joined (`--replay-set`); without one, its directory's name
    cut: int = 0                # replays stopped before their last job (time-out, interrupt): never a value

    @property
    def below(self) -> bool:
        return all(s.state == "below" for s in self.standing.values())

    def standing_text(self) -> str:
        return "; ".join(f"{PLATFORM_LABEL.get(p, p)} {s.text()}" for p, s in self.standing.items())


def trace_of(where: Path, ceilings: list[cl.Ceiling]) -> Trace1 | None:
    trace, stored = rs.load(where)
    if not all(rs.runs_of(stored, p) for p in (A, B)):
        return None
    firsts = {p: rs.runs_of(stored, p)[0] for p in (A, B)}
    st = {p: firsts[p].get("settings", {}) for p in (A, B)}
    nodes = st[A].get("nodes") or (trace.shape.nodes if trace.shape else "?")
    busiest = load.busiest_rate(trace)
    standing = {}
    for p in (A, B):
        lim = cl.limits_label(p, st[p].get("client_rate_limits_qps_burst"))
        c = cl.find(ceilings, p, int(nodes), lim) if isinstance(nodes, int) else None
        standing[p] = cl.standing(p, busiest, c)
    policy = st[A].get("queue_policy") or "site"
    # what a set's traces must share: a replay stored before fair sharing was recorded ran with it off
    fair = str((st[A].get("client_rate_limits_qps_burst") or {}).get("kueue fairSharing", "off")).startswith("enable")
    key = (policy, nodes, st[A].get("preemption"), st[A].get("topology"),
           cl.limits_label(A, st[A].get("client_rate_limits_qps_burst")), fair)
    figs = {p: [rs.figures(p, trace, b, b["total_gpus"]) for b in replay_verdict.complete(stored, p)] for p in (A, B)}
    cut = sum(len(rs.runs_of(stored, p)) - len(figs[p]) for p in (A, B))
    return Trace1(where, trace.name, len(trace.jobs), trace.compression, nodes, policy, key, figs, busiest, standing,
                  st[A].get("replay_set") or where.name, cut)


@dataclass
class SetRow:
    figure: SetFigure
    per_trace: list[tuple[str, float, float]]      # (trace, median Kubernetes, median Slurm)
    ratio: float = math.nan                        # geometric mean of the per-trace ratios
    p: float = math.nan
    p_holm: float = math.nan
    verdict: str = "few"                            # few | resolution | ahead | none
    ahead: str | None = None


@dataclass
class ReplaySet:
    name: str
    traces: list[Trace1]
    rows: list[SetRow] = field(default_factory=list)
    left_out: list[Trace1] = field(default_factory=list)   # throughput-bound or no ceiling
    mixed: bool = False

    @property
    def tested(self) -> list[Trace1]:
        return [t for t in self.traces if t not in self.left_out]

    @property
    def light(self) -> list[Trace1]:
        return [t for t in self.tested if t.compression <= LIGHT]


def _median(vals: list[float]) -> float:
    return float(np.median(vals))


def evaluate(name: str, traces: list[Trace1]) -> ReplaySet:
    s = ReplaySet(name, traces)
    s.mixed = len({t.settings_key for t in traces}) > 1
    s.left_out = [t for t in traces if not t.below]
    tested = s.tested
    for fig in FIGURES:
        per, strata = [], []
        for t in tested:
            vals = {p: [fig.get(f) for f in t.figures[p]] for p in (A, B)}
            if not all(vals[p] and all(v is not None for v in vals[p]) for p in (A, B)):
                continue
            per.append((t.trace_name, _median(vals[A]), _median(vals[B])))
            strata.append(([float(v) for v in vals[A]], [float(v) for v in vals[B]]))
        row = SetRow(fig, per)
        ratios = [a / b for _, a, b in per if b > 0 and a > 0]
        if ratios and len(ratios) == len(per):
            row.ratio = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        if len(per) >= MIN_TRACES and not s.mixed:
            row.p = stratified.van_elteren_p(strata)
        s.rows.append(row)
    tested_rows = [r for r in s.rows if math.isfinite(r.p)]
    for r, p_adj in zip(tested_rows, holm([r.p for r in tested_rows]), strict=True):
        r.p_holm = p_adj
        diff = _median([a - b for _, a, b in r.per_trace])
        if r.figure.resolution and abs(diff) <= 2 * r.figure.resolution:
            r.verdict = "resolution"
        elif p_adj < ALPHA:
            r.verdict = "ahead"
            k_higher = diff > 0
            r.ahead = B if k_higher == r.figure.lower_is_better else A
        else:
            r.verdict = "none"
    return s


def sets(replay_dirs: list[Path]) -> list[ReplaySet]:
    """The replay sets of a campaign's replay directories, each evaluated against the ceilings stored beside
    them (one ceilings.json per scale directory)."""
    by: dict[str, list[Trace1]] = {}
    cache: dict[Path, list[cl.Ceiling]] = {}
    for where in replay_dirs:
        if where.parent not in cache:
            cache[where.parent] = load_ceilings(where.parent)
        t = trace_of(where, cache[where.parent])
        if t is not None:
            by.setdefault(t.set_name, []).append(t)
    return [evaluate(n, ts) for n, ts in by.items()]


def _v(x: float, unit: str) -> str:
    return f"{x:.1%}" if unit == "share" else f"{x:.3g}" if unit == "" else f"{x:g}"


def verdict_text(s: ReplaySet, r: SetRow) -> str:
    if r.verdict == "ahead":
        return (f"{PLATFORM_LABEL.get(r.ahead, r.ahead)} ahead (stratified rank test over {len(r.per_trace)} traces, "
                f"Holm p {r.p_holm:.2g})")
    if r.verdict == "resolution":
        return f"no difference beyond the records' resolution (±{2 * r.figure.resolution:g} s)"
    if r.verdict == "none":
        return f"no difference shown (stratified rank test over {len(r.per_trace)} traces, Holm p {r.p_holm:.2g})"
    why = []
    if s.mixed:
        why.append("its traces ran under different policies or settings")
    if len(r.per_trace) < MIN_TRACES:
        why.append(f"{len(r.per_trace)} trace{'s' if len(r.per_trace) != 1 else ''} below both ceilings; a verdict "
                   f"needs {MIN_TRACES} (a trace's repeats do not replicate across traces)")
    return "descriptive: " + "; ".join(why or ["not tested"])


def condition_text(s: ReplaySet) -> str:
    """What the set's verdicts hold under: size, policy pair, compressions, offered rate against ceilings."""
    ts = s.traces
    comp = sorted({t.compression for t in ts})
    shares = [sh for t in s.tested for st in t.standing.values() if (sh := st.share) is not None]
    nodes = sorted({str(t.nodes) for t in ts})
    text = (f"`{s.name}`: {len(ts)} trace{'s' if len(ts) != 1 else ''} ({', '.join(t.trace_name for t in ts)}) on "
            f"{'/'.join(nodes)} emulated nodes, queue policy pair {'/'.join(sorted({t.policy for t in ts}))}, "
            f"compressed {'–'.join(f'{c:g}' for c in (comp[0], comp[-1]) if c) if len(comp) > 1 else f'{comp[0]:g}'}×"
            f" (lightly, ≤ {LIGHT:g}×: {len(s.light)}); busiest 10 s offered "
            f"{min(t.busiest for t in ts):g}–{max(t.busiest for t in ts):g} jobs/s")
    if shares:
        text += f", at most {max(shares):.0%} of either platform's measured placement ceiling"
    reps = "; ".join(f"{t.trace_name} Slurm {len(t.figures[B])}, Kubernetes {len(t.figures[A])}" for t in ts)
    text += f"; complete replays a side: {reps}"
    if cut := sum(t.cut for t in ts):
        text += f" ({cut} stopped before their last job left out)"
    if s.left_out:
        text += "; left out as throughput-bound or without a measured ceiling: " + "; ".join(
            f"{t.trace_name} ({t.standing_text()})" for t in s.left_out)
    return text


def _ratio(r: SetRow) -> str:
    if not math.isfinite(r.ratio):
        return "–"
    per = [a / b for _, a, b in r.per_trace if b > 0]
    return f"×{r.ratio:.2f}" + (f" (per trace {', '.join(f'×{x:.2f}' for x in per)})" if len(per) > 1 else "")


def decision(replay_dirs: list[Path]) -> tuple[list[tuple[str, str, str]], bool, list[tuple[str, str]], list[str]]:
    """The decision summary's "queue at scale" lines, one per set figure: (evidence, ratio, verdict), the
    evidence opening with what the set holds under (condition_text); whether any figure was tested; each
    verdict that found a platform ahead as (platform, what, with its conditions); and a note per set that
    could not be tested, for the opening."""
    out: list[tuple[str, str, str]] = []
    tested, wins, notes = False, [], []
    for s in sets(replay_dirs):
        head = condition_text(s)
        for i, r in enumerate(s.rows):
            unit = "" if r.figure.unit in ("share", "") else " " + r.figure.unit
            per = "; ".join(f"{t} Slurm {_v(b, r.figure.unit)}{unit}, Kubernetes {_v(a, r.figure.unit)}{unit}"
                            for t, a, b in r.per_trace) or "no trace below both ceilings"
            out.append(((head + " — " if i == 0 else "") + f"{r.figure.label}: {per}", _ratio(r), verdict_text(s, r)))
            tested = tested or r.verdict != "few"
            if r.verdict == "ahead":
                shares = [sh for t in s.tested for st in t.standing.values() if (sh := st.share) is not None]
                wins.append((r.ahead, f"{r.figure.label} on {'/'.join(sorted({str(t.nodes) for t in s.tested}))} "
                                      f"nodes under queue policy {'/'.join(sorted({t.policy for t in s.tested}))} "
                                      f"(`{s.name}`, {len(r.per_trace)} traces, {_ratio(r)}, Holm p {r.p_holm:.2g}; "
                                      f"busiest 10 s at most {max(shares):.0%} of the lower placement ceiling)"))
        if not any(r.verdict != "few" for r in s.rows):
            if s.left_out and len(s.left_out) == len(s.traces):
                notes.append(f"`{s.name}` is throughput-bound or has no measured ceiling "
                             f"({s.left_out[0].standing_text()})")
            else:
                notes.append(f"`{s.name}` has {len(s.tested)} trace{'s' if len(s.tested) != 1 else ''} below both "
                             f"ceilings, and a verdict needs {MIN_TRACES}")
    return out, tested, wins, notes
