"""The online inference section: per platform the serve_* figures with their bounds and the
counts behind them, what serving needed beyond the platform itself, and how it was measured.

Read from the stored runs alone: a serve run (scenario "serve", run id "<platform>-serve") keeps its
figures in record["metrics"] (harness/serve/metrics.py: {value, lo, hi, detail}; the fault phases' keyed
"serve_degraded_s:kill_server"), and its load results, fault and scale stamps and the platform's own
account of what it needed in its raw evidence (raw["serve"]). Only lines that name the serve scenario
are parsed. One serve run per platform is the design: everything here is descriptive.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import StoreError
from ..serve.metrics import WINDOW_S
from ..store import latest_records, load_raw
from . import serving_evidence as sev
from .sections import fmt
from .serving_beyond import NEEDS, beyond_table, needed_text, second_platform
from .stats import PLATFORM_LABEL, platform_sort_key

__all__ = ["NEEDS", "Serve", "beyond_table", "decision_text", "load", "needed_text", "second_platform", "section"]

SCENARIO = "serve"
TITLE = "Online inference (serving)"
FAULTS = ("kill_server", "node_loss")
FAULT_TEXT = {"kill_server": "serving process killed", "node_loss": "its node lost"}
FAULT_SHORT = {"kill_server": "server killed", "node_loss": "node lost"}


@dataclass
class Serve:
    """One serve run as the report shows it; `evidence` is {} where the run kept none or it is unreadable."""
    run_id: str
    platform: str
    status: str
    error: dict | None
    metrics: dict                  # record["metrics"]: the serve_* records
    evidence: dict = field(default_factory=dict)   # raw["serve"]: deploy, phases, scale, beyond, platform
    problem: str | None = None     # why the raw evidence could not be read

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def label(self) -> str:
        return PLATFORM_LABEL.get(self.platform, self.platform)

    def m(self, name: str) -> dict:
        v = self.metrics.get(name)
        return v if isinstance(v, dict) else {}

    def value(self, name: str) -> float | None:
        return num(self.m(name).get("value"))

    def detail(self, name: str) -> dict:
        d = self.m(name).get("detail")
        return d if isinstance(d, dict) else {}

    def phases(self) -> list[dict]:
        """The load phases with a readable load result, in the order they ran."""
        out = []
        for p in self.evidence.get("phases") or []:
            if isinstance(p, dict) and isinstance(p.get("load"), dict) and isinstance(p["load"].get("started"),
                                                                                       int | float):
                out.append(p)
        return out

    def phase(self, name: str) -> dict | None:
        return next((p for p in self.phases() if p.get("name") == name), None)

    def time_weighted(self, phase: str) -> dict | None:
        p = self.phase(phase)
        return sev.time_weighted(p) if p is not None else None

    def beyond(self) -> dict:
        b = self.evidence.get("beyond")
        return b if isinstance(b, dict) else {}


def num(v) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


def load(results_dir: str) -> list[Serve]:
    """Every serve run under a results dir (a retried run's last record), platforms in report order."""
    out = [_serve(rec, d) for rec, d in latest_records(results_dir, b'"serve"',
                                                       lambda r: r.get("scenario") == SCENARIO)]
    return sorted(out, key=lambda s: (platform_sort_key(s.platform), s.run_id))


def _serve(rec: dict, run_dir: Path) -> Serve:
    s = Serve(str(rec.get("run_id")), str(rec.get("platform")), str(rec.get("status")), rec.get("error"),
              rec.get("metrics") if isinstance(rec.get("metrics"), dict) else {})
    try:
        ev = load_raw(run_dir).get("serve")
        s.evidence = ev if isinstance(ev, dict) else {}
        if not s.evidence:
            s.problem = "no serving evidence stored"
    except (StoreError, OSError, ValueError) as exc:   # a damaged file costs this run's evidence, not the report
        s.problem = f"raw evidence unreadable: {getattr(exc, 'message', exc)}"
    return s


# ---------------------------------------------------------------- cells

def ms(v: float | None) -> str:
    return "–" if v is None else f"{fmt(v * 1000)} ms"


def _bounds(m: dict, scale: float = 1.0) -> str:
    lo, hi = num(m.get("lo")), num(m.get("hi"))
    v = num(m.get("value"))
    if lo is None and hi is None:
        return ""
    if lo is not None and hi is not None and v is not None and fmt(lo * scale) == fmt(hi * scale) == fmt(v * scale):
        return ""   # an exact figure, or bounds finer than it prints
    return f" [{fmt(lo * scale) if lo is not None else 'open'}–{fmt(hi * scale) if hi is not None else 'open'}]"


def _errors(kinds: dict | None) -> str:
    if not kinds:
        return ""
    return " (" + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])) + ")"


def latency_cell(s: Serve, name: str) -> str:
    m, d = s.m(name), s.detail(name)
    if s.value(name) is None:
        return "– (" + d["note"] + ")" if d.get("note") else "–"
    n = d.get("count")
    tail = f"; {n:g} ok requests, {d.get('clients', '?')} clients" if isinstance(n, int | float) else ""
    return f"{ms(s.value(name))}{_bounds(m, 1000)}{tail}"


def seconds_cell(s: Serve, name: str) -> str:
    m, d = s.m(name), s.detail(name)
    v = s.value(name)
    if v is None:
        return "– (" + d["note"] + ")" if d.get("note") else "–"
    tail = []
    if d.get("failed") is not None:
        tail.append(f"{d['failed']:g} failed requests")
    if d.get("first_error"):
        tail.append(f"first error `{d['first_error']}`")
    if d.get("successes_in_between"):
        tail.append(f"{d['successes_in_between']:g} successes in between")
    if d.get("note"):
        tail.append(str(d["note"]))
    return f"{fmt(v)} s{_bounds(m)}" + (f"; {', '.join(tail)}" if tail else "")


def throughput_cell(s: Serve, name: str) -> str:
    d = s.detail(name)
    v = s.value(name)
    if v is None:
        return "–"
    return (f"{fmt(v)} req/s ({d.get('ok', '?')} ok in {fmt(num(d.get('elapsed_s')))} s, {d.get('clients', '?')} "
            f"clients, stopped by {d.get('stopped_by', '?')})")


def availability_cell(s: Serve, name: str) -> str:
    d = s.detail(name)
    v = s.value(name)
    if v is None:
        return "– (no request in the window)" if d.get("requests") == 0 else "–"
    return f"{v:.4f} ({d.get('ok', '?')} of {d.get('requests', '?')} ok){_errors(d.get('errors'))}"


def time_weighted_cell(s: Serve, phase: str) -> str:
    tw = s.time_weighted(phase)
    if s.phase(phase) is None:
        return "– (no stored requests)"
    if tw is None or tw["value"] is None:
        return "– (no request in the window)"
    return (f"{tw['value']:.4f} ({fmt(tw['ok_s'])} s of {fmt(tw['client_s'])} client-seconds in successful "
            "requests; the phase's length, set by its settle time, weighs in it)")


def _interval(v: float | None, lo: float | None, hi: float | None, digits: str = "") -> str:
    if v is None:
        return "–"
    f = (lambda x: f"{x:{digits}}") if digits else fmt
    return f"{f(v)}" + (f" [{f(lo)}–{f(hi)}]" if lo is not None and hi is not None and f(lo) != f(hi) else "")


def success_cell(s: Serve, phase: str) -> str:
    p = s.phase(phase)
    ff = sev.fault_figures(p) if p else None
    if ff is None:
        return "– (no stored requests)"
    t = ff["time_to_success"]
    if t["value"] is None:
        return f"– ({t['note']})"
    return f"{_interval(t['value'], t['lo'], t['hi'])} s"


def window_cell(s: Serve, phase: str) -> str:
    p = s.phase(phase)
    ff = sev.fault_figures(p) if p else None
    if ff is None:
        return "– (no stored requests)"
    w = ff["window"]
    if w["value"] is None:
        return "–"
    return (f"{_interval(w['value'], w['lo'], w['hi'], '.3f')} ({fmt(w['degraded_s'])} s degraded of the "
            f"{w['window_s']:g} s from the fault; the load ran {fmt(w['load_s'])} s of them)")


def caveat_cell(s: Serve, phase: str) -> str:
    p = s.phase(phase)
    return "; ".join(sev.caveats(p, s.platform)) or "–" if p else "–"


def caveats(s: Serve) -> list[str]:
    """Each phase's caveats, named by phase."""
    return [f"{FAULT_SHORT.get(p.get('name'), str(p.get('name')).replace('_', ' '))}: {c}" for p in s.phases()
            for c in sev.caveats(p, s.platform)]


def replicas_cell(s: Serve, phase: str) -> str:
    p = s.phase(phase)
    return "– (no stored requests)" if p is None else sev.shares_text(sev.replicas(p))


def proxy_cell(s: Serve, _: str) -> str:
    return sev.proxy_text(s.platform, s.evidence) if s.evidence else "–"


def failed_cell(s: Serve, name: str) -> str:
    v = s.value(name)
    return "–" if v is None else f"{v:g}{_errors(s.detail(name).get('errors'))}"


def ratio_cell(s: Serve, name: str) -> str:
    d = s.detail(name)
    v = s.value(name)
    if v is None:
        return "–"
    return (f"{v:.2f} (p50 {ms(num(d.get('p50_one_s')))} → {ms(num(d.get('p50_two_s')))}; throughput "
            f"{fmt(num(d.get('throughput_one_rps')))} → {fmt(num(d.get('throughput_two_rps')))} req/s)")


def cost_cell(s: Serve, name: str) -> str:
    m, d = s.m(name), s.detail(name)
    v = s.value(name)
    if v is None:
        return "– (" + d["note"] + ")" if d.get("note") else "–"
    tail = f"; {fmt(num(d.get('billed_s')))} s billed, {d.get('ok_requests', '?')} ok requests"
    steady = num(d.get("steady"))
    if steady is not None:
        tail += f"; while busy {fmt(steady, 'USD')} USD"
    return f"{fmt(v, 'USD')} USD{_bounds(m)}{tail}"


def cell_for(name: str):
    base = name.split(":", 1)[0]
    if base.startswith("serve_latency_"):
        return latency_cell
    return {"serve_throughput_rps": throughput_cell, "serve_availability": availability_cell,
            "serve_failed_requests": failed_cell, "serve_scaleout_p50_ratio": ratio_cell,
            "serve_cost_per_1k_usd": cost_cell}.get(base, seconds_cell)


# Rows in reading order: label, metric key. Any other serve_* key a run has follows these, so every
# figure stored is shown even one a newer harness adds.
ROWS = [("submitted → first successful response", "serve_ready_s"),
        *[(f"latency p{p}, one replica (histogram bucket)", f"serve_latency_p{p}_s") for p in (50, 95, 99)],
        ("throughput, one replica", "serve_throughput_rps"),
        ("availability, steady load, time-weighted", "~steady"),
        ("availability, steady load, request-weighted", "serve_availability"),
        ("failed requests, steady load", "serve_failed_requests"),
        ("seconds degraded, steady load", "serve_degraded_s"),
        *[r for f in FAULTS for r in (
            (f"{FAULT_TEXT[f]}: seconds degraded [bounds]", f"serve_degraded_s:{f}"),
            (f"{FAULT_TEXT[f]}: failed requests", f"serve_failed_requests:{f}"),
            (f"{FAULT_TEXT[f]}: fault → first success after the last failure [bounds]", f"!{f}"),
            (f"{FAULT_TEXT[f]}: availability over the {WINDOW_S:g} s from the fault [bounds]", f"%{f}"),
            (f"{FAULT_TEXT[f]}: availability over the phase, time-weighted", f"~{f}"),
            (f"{FAULT_TEXT[f]}: availability over the phase, request-weighted", f"serve_availability:{f}"),
            (f"{FAULT_TEXT[f]}: answered by (replica: share of requests)", f"@{f}"),
            (f"{FAULT_TEXT[f]}: caveats from the stored requests", f"?{f}"))],
        ("scale-out: second replica asked → its first answer", "serve_scaleout_s"),
        *[(f"latency p{p}, two replicas", f"serve_latency_p{p}_s:two_replicas") for p in (50, 95, 99)],
        ("throughput, two replicas", "serve_throughput_rps:two_replicas"),
        ("two replicas: requests per replica", "@two_replicas"),
        ("two replicas: caveats from the stored requests", "?two_replicas"),
        ("p50 two replicas / one", "serve_scaleout_p50_ratio"),
        ("cost per 1,000 successful requests", "serve_cost_per_1k_usd"),
        ("the proxy in the request path (its own time per request)", "^proxy")]
# Rows not from a metric record but computed from the stored requests (serving_evidence.py), keyed by
# a prefix and the phase: "~" time-weighted availability, "@" who answered, "^" the proxy.
DERIVED = {"~": time_weighted_cell, "@": replicas_cell, "^": proxy_cell, "!": success_cell, "%": window_cell,
           "?": caveat_cell}


def run_cell(s: Serve) -> str:
    if s.ok:
        return "ok" + (f" ({s.problem})" if s.problem else "")
    e = s.error if isinstance(s.error, dict) else {}
    msg = " ".join(str(e.get("message") or "").split())
    return f"did not complete ({s.status}) at `{e.get('stage', '?')}`: {msg[:200]}"


def figures_table(serves: list[Serve]) -> tuple[list[str], list[list[str]]]:
    plats = sorted({s.platform for s in serves} | {"slurm", "k8s"}, key=platform_sort_key)
    by = {s.platform: s for s in serves}
    header = ["figure"] + [PLATFORM_LABEL.get(p, p) for p in plats]
    rows = [["run"] + [run_cell(by[p]) if p in by else "not run" for p in plats]]
    known = [k for _, k in ROWS]
    extra = sorted({k for s in serves for k in s.metrics if k.startswith("serve_") and k not in known})
    for label, key in ROWS + [(f"`{k}`", k) for k in extra]:
        if key[0] in DERIVED:
            # beside the metric rows of the same phase, so only where those are shown
            phase = key[1:]
            if phase != "proxy" and not any(s.phase(phase) for s in serves):
                continue
            if key[0] == "?" and not any(caveat_cell(s, phase) != "–" for s in serves):
                continue
            rows.append([label] + [DERIVED[key[0]](by[p], phase) if p in by else "–" for p in plats])
            continue
        if not any(key in s.metrics for s in serves):
            continue
        rows.append([label] + [cell_for(key)(by[p], key) if p in by and key in by[p].metrics else "–"
                               for p in plats])
    return header, rows


# ---------------------------------------------------------------- method

def _plans(serves: list[Serve]) -> dict:
    """The load plans of the steady phases: clients, request and time bounds, timeout, error pause."""
    out: dict[str, set] = {k: set() for k in ("clients", "requests", "duration_s", "timeout_s", "error_pause_s")}
    for s in serves:
        for p in s.phases():
            plan = p["load"].get("plan") or {}
            if p.get("name") == "ready":
                continue
            for k in out:
                if isinstance(plan.get(k), int | float):
                    out[k].add(plan[k])
    return {k: " / ".join(f"{v:g}" for v in sorted(vs)) or "?" for k, vs in out.items()}


def note(serves: list[Serve]) -> list[str]:
    pl = _plans(serves)
    return [f"How the load is made: the same closed-loop generator on both platforms (harness/serve/load.py), "
            f"{pl['clients']} concurrent clients each sending its next request when its last was answered, so a slow "
            "server is not buried under a queue the generator made. Every phase is bounded twice, by a request count "
            f"({pl['requests']}) and by time ({pl['duration_s']} s), each under a hard cap; a request times out after "
            f"{pl['timeout_s']} s and a client pauses {pl['error_pause_s']} s after a failure, which bounds how finely "
            "a recovery can be timed.",
            "Latency is that of successful requests only (a refused connection answers in microseconds and would "
            "make a dead server look fast), recorded in an HdrHistogram of microseconds with 3 significant digits; "
            "a percentile's bounds are the histogram bucket it fell in. A fault is judged first by figures no harness "
            "constant enters: seconds degraded (the first failed request to the first success after the last one, "
            "bounded by the requests around them), failed requests, the fault's instant to the first success after "
            f"the last failure, and availability over a fixed {WINDOW_S:g} s from the fault's instant, the same window "
            "on both platforms (1 − the degraded seconds inside it ÷ its length; after the phase's load stopped, "
            "the service having answered for the settle time, the rest counts as available). Availability over the "
            "phase is kept beside them, time-weighted (the share of the clients' time in successful requests) and by "
            "requests, but a phase ends a settle time after the service recovers, so over the phase it is about "
            "settle ÷ (settle + degraded): the harness's settle time in disguise. All are computed from the stored "
            "request log "
            "(report/serving_evidence.py). Which replica answered is the server's X-Poc-Replica header (host/pid), "
            "recorded per request where the campaign's load generator kept it. Slurm's latency includes the "
            "harness's userspace proxy (the row above gives its own time where recorded); Kubernetes' path has "
            "kube-proxy's in-kernel forwarding instead. Cost per 1,000 requests "
            "divides the platform's price for the serve run's billed time by its successful requests.",
            "One serve run per platform: these figures are descriptive, shown side by side, with no verdict."]


def section(serves: list[Serve], charts: dict[str, Path]) -> list[tuple[str, list]]:
    """The report's inference section; [] for a campaign without serve runs."""
    if not serves:
        return []
    blocks: list = [("table", figures_table(serves))]
    if "serve_cdf" in charts:
        blocks.append(("img", ("serve_cdf", charts["serve_cdf"])))
    if "serve_timeline" in charts:
        blocks.append(("img", ("serve_timeline", charts["serve_timeline"])))
    if any(s.beyond() for s in serves):
        blocks += [("h3", "What serving needed beyond the platform"), ("table", beyond_table(serves))]
        blocks += [("p", x) for x in second_platform(serves)]
    blocks += [("p", x) for x in note(serves)]
    return [(TITLE, blocks)]


# ---------------------------------------------------------------- the decision summary's words

def _with_bounds(s: Serve, name: str, scale: float = 1.0, unit: str = "s") -> str:
    return f"{fmt(s.value(name) * scale)} {unit}{_bounds(s.m(name), scale)}"


def decision_text(s: Serve) -> str:
    """One serve run in a line: ready, p50/p99, availability under each fault, scale-out, cost per 1k."""
    if not s.ok:   # the section's table gives the message; here only where it stopped
        e = s.error if isinstance(s.error, dict) else {}
        return f"did not complete ({s.status} at `{e.get('stage', '?')}`)"
    parts = []
    if s.value("serve_ready_s") is not None:
        parts.append(f"ready {_with_bounds(s, 'serve_ready_s')}")
    lat = [f"p{p} {ms(s.value(f'serve_latency_p{p}_s'))}" for p in (50, 99)
           if s.value(f"serve_latency_p{p}_s") is not None]
    if lat:
        parts.append(" / ".join(lat))
    for f in FAULTS:
        if s.value(f"serve_degraded_s:{f}") is None and s.phase(f) is None:
            continue
        bits = []
        deg = s.value(f"serve_degraded_s:{f}")
        if deg is not None:
            bits.append(f"{_with_bounds(s, f'serve_degraded_s:{f}')} degraded")
        elif s.detail(f"serve_degraded_s:{f}").get("failed"):
            bits.append("not healthy again while the load ran")
        failed = s.value(f"serve_failed_requests:{f}")
        if failed is not None:
            bits.append(f"{failed:g} failed requests")
        ff = sev.fault_figures(s.phase(f)) if s.phase(f) else None
        if ff and ff["time_to_success"]["value"] is not None:
            bits.append(f"first success {fmt(ff['time_to_success']['value'])} s after the fault")
        if ff and ff["window"]["value"] is not None:
            bits.append(f"availability {ff['window']['value']:.3f} over the {WINDOW_S:g} s from the fault")
        parts.append(f"{FAULT_SHORT[f]}: " + ", ".join(bits))
    if s.value("serve_scaleout_s") is not None:
        ratio = s.value("serve_scaleout_p50_ratio")
        parts.append(f"scale-out to 2 replicas {_with_bounds(s, 'serve_scaleout_s')}"
                     + (f" (p50 × {ratio:.2f})" if ratio is not None else ""))
    if s.value("serve_cost_per_1k_usd") is not None:
        parts.append(f"{fmt(s.value('serve_cost_per_1k_usd'), 'USD')} USD per 1,000 requests")
    said = caveats(s)
    if said:
        parts.append("caveat — " + "; ".join(said))
    return ", ".join(parts) or "no serving figure stored"
