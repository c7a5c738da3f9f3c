"""The calibration section: what each run found in its own allocation before training (config
calibration.enabled; the workload's calibrate and the step before training, workloads/poc_check.py; the figures
in harness/metrics/calibration.py): the health gate's node facts and refusals, the all-reduce across the whole
allocation against its floor, the ranks' CPUs beside their GPUs', the calibration's peer comparison.

Read from the stored runs: an ok run's record keeps the calibration_* figures, their details holding a
summary of every node; a run the calibration stopped has no metrics (its job failed), so its figures
are derived here from its stored events by the same code. Only the runs the report's table holds
last for a (campaign, run_id) and that calibrated are read, so a campaign without the phase costs one
look at two columns.

calibration_s is shown here and not in the headline: it is the harness's own phase, run only where the
config asks for it, before the sweep and training. A platform whose runs calibrated would otherwise
show a longer submit-to-training than one whose runs did not, for work no user's job does
(report/stats.py gives it no metric key, as it gives none to the calibration_* figures).
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import StoreError
from ..metrics.calibration import GOAL, GOAL_TEXT, allocation_check, calibration
from ..store import latest_records, load_events
from .charts import size_label
from .section import Block
from .sections import fmt
from .stats import PLATFORM_LABEL, platform_sort_key
from .table import RunTable

TITLE = "Calibration: the allocation before training"
# a run the calibration stopped says so in its error (the workload's workload_error, pipeline's words)
REFUSED_MARKS = ("calibration refused", "the health gate refused", "the all-reduce across the allocation")
NAMES = ("calibration_allreduce_busbw_gbps", "calibration_nccl_tests_busbw_gbps",
         "calibration_workload_vs_nccl_tests", "calibration_nodes_refused")
CHECK_NAMES = ("allocation_allreduce_busbw_gbps", "health_nodes_refused")
DEFINITIONS = [
    "`calibration_s`: rendezvous → every rank done calibrating (config `calibration.enabled`): the harness's "
    "check of the allocation before the sweep; left out of `startup_s` and `sweep_s`, and out of the headline.",
    "`calibration_allreduce_busbw_gbps`: busbw (nccl-tests' formula) of one all-reduce size over every rank of "
    "the job, in-place, 5 timed iterations after a warm-up, before the sweep; none when the sum was wrong. "
    "`calibration_nccl_tests_busbw_gbps`: the median over GPU nodes of nccl-tests' `all_reduce_perf` in-place busbw "
    "at its largest size over the node's GPUs; `calibration_workload_vs_nccl_tests`: per node the workload's own "
    "in-place all-reduce among the node's ranks at that size ÷ nccl-tests' busbw, the lowest node's (goal "
    f"{GOAL_TEXT}); `calibration_nodes_refused`: the nodes the calibration refused (the run then stops).",
    "`allocation_check_s`: the step before training (its first start → its last end: the health gate, then the "
    "all-reduce across the allocation), left out of `launch_s`. `allocation_allreduce_busbw_gbps`: that all-reduce's "
    "in-place busbw at its largest size, over every rank of the allocation (GPUs: an MPI build of nccl-tests, one "
    "rank per GPU; CPUs: gloo), refused below `calibration.min_allreduce_busbw_gbps`; `health_nodes_refused`: the "
    "nodes the health gate refused.",
]


@dataclass
class Run:
    """One calibrated run as the section shows it: its calibration_* records (derived from its events
    where its job stopped), and its calibration_s."""
    run_id: str
    campaign: str | None
    platform: str
    status: str
    metrics: dict
    calibration_s: float | None = None
    check_s: float | None = None
    problem: str | None = None   # why its events could not be read

    def detail(self, name: str) -> dict:
        return (self.metrics.get(name) or {}).get("detail") or {}

    def value(self, name: str) -> float | None:
        v = (self.metrics.get(name) or {}).get("value")
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None

    @property
    def nodes(self) -> list[dict]:
        return self.detail("calibration_nodes_refused").get("nodes") or []

    @property
    def refused(self) -> list[dict]:
        return self.detail("calibration_nodes_refused").get("refused") or []

    @property
    def health(self) -> list[dict]:
        return self.detail("health_nodes_refused").get("nodes") or []


def _calibrated(table: RunTable) -> list[int]:
    """The table's runs that calibrated or were checked: figures recorded, or stopped by either."""
    have: set[int] = set()
    for name in ("calibration_nodes_refused", *CHECK_NAMES):
        col = table.values.get(name)
        have |= set(np.flatnonzero(~np.isnan(col)).tolist()) if col is not None else set()
    have |= {i for i, e in table.errors.items() if any(m in str(e.get("message") or "") for m in REFUSED_MARKS)}
    return sorted(i for i in have if not table.probe[i]) if table.probe.size else sorted(have)


def applies(table: RunTable) -> bool:
    return bool(_calibrated(table))


def load(results_dir: str, table: RunTable) -> list[Run]:
    """The calibrated runs, in report order."""
    rows = _calibrated(table)
    want = {(table.campaign[i], table.run_id[i]): i for i in rows}
    # every such line says "calibration": a figure's name, or the refusal's TIP (calibration.* settings)
    found = latest_records(results_dir, b"calibration", lambda r: (r.get("campaign"), r.get("run_id")) in want)
    by_row = {want[(rec.get("campaign"), rec.get("run_id"))]: (rec, d) for rec, d in found}
    return [_run(*by_row[i]) for i in rows if i in by_row]


def _run(rec: dict, run_dir) -> Run:
    m = rec.get("metrics") or {}
    r = Run(str(rec.get("run_id")), rec.get("campaign"), str(rec.get("platform")), str(rec.get("status")),
            {k: v for k, v in m.items() if k in NAMES + CHECK_NAMES},
            ((m.get("calibration_s") or {}).get("value")), ((m.get("allocation_check_s") or {}).get("value")))
    if not m:   # its job stopped: no metrics; its events have what it found
        try:
            events = load_events(run_dir) or []
        except (StoreError, OSError) as exc:
            r.problem, events = str(getattr(exc, "message", exc)), []
        r.metrics = {**calibration(events), **allocation_check(events)}
        if not events:
            r.problem = r.problem or "no stored events"
    return r


# ---------------------------------------------------------------- cells

def _num(v) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


def spread(values: list[float], unit: str = "") -> str:
    """'2.41 (2.20–2.63, 4 runs)': the median, and the range where runs differ ('2.41 (4 runs)' where not)."""
    xs = [x for x in values if x is not None]
    if not xs:
        return "–"
    med = fmt(statistics.median(xs))
    if len(xs) == 1:
        return f"{med}{unit}"
    lo, hi = fmt(min(xs)), fmt(max(xs))
    return f"{med}{unit} ({len(xs)} runs)" if lo == hi else f"{med}{unit} ({lo}–{hi}, {len(xs)} runs)"


def memlock_text(v) -> str:
    if v == "unlimited":
        return "unlimited"
    return f"{v // 1024} KiB" if isinstance(v, int) and not isinstance(v, bool) else "–"


def _distinct(values, text: Callable = str) -> str:
    seen = []
    for v in values:
        t = text(v)
        if t not in seen:
            seen.append(t)
    return ", ".join(seen) if seen else "–"


def versions_text(n: dict) -> str:
    parts = [f"torch {n['torch']}" if n.get("torch") else ""]
    parts += [f"{k.upper() if k != 'driver' else 'driver'} {n[k]}" for k in ("cuda", "nccl", "driver") if n.get(k)]
    return " · ".join(p for p in parts if p) or "–"


def rdma_text(n: dict) -> str:
    devs = n.get("ibv_devices")
    text = "none found" if devs is None else (", ".join(devs) if devs else "none")
    return text + (f" (OFED {n['ofed']})" if n.get("ofed") else "")


def gpus_text(n: dict) -> str:
    if n.get("gpus") is None:
        return "–"
    names = ", ".join(n.get("gpu_names") or [])
    return f"{n['gpus']} × {names}" if names else str(n["gpus"])


def _hosts(runs: list[Run]) -> dict[str, list[tuple[Run, dict]]]:
    out: dict[str, list[tuple[Run, dict]]] = {}
    for r in runs:
        for n in r.nodes:
            out.setdefault(str(n.get("host")), []).append((r, n))
    return out


def node_table(runs: list[Run]) -> tuple[list[str], list[list[str]]]:
    """One row per node over the platform's calibrated runs (a node in several runs: the median and range)."""
    header = ["node", "runs", "ranks", "matmul GFLOP/s", "share of the nodes' median (lowest)",
              "memlock (ulimit -l)", "versions", "GPUs", "RDMA devices", "problems", "verdict"]
    rows = []
    for host, seen in _hosts(runs).items():
        ns = [n for _, n in seen]
        ratios = [x for x in (_num(n.get("compute_ratio")) for n in ns) if x is not None]
        problems = _distinct([p for n in ns for p in n.get("problems") or []])
        refused = sum(bool(n.get("refused")) for n in ns)
        verdict = (f"refused in {refused} of {len(ns)} run(s)" if refused
                   else "passed" if len(ns) == 1 else f"passed in all {len(ns)} runs")
        rows.append([f"`{host}`", str(len(ns)), _distinct([len(n.get("ranks") or []) for n in ns]),
                     spread([_num(n.get("gflops")) for n in ns]),
                     fmt(min(ratios)) if ratios else "–",
                     _distinct([n.get("memlock_soft") for n in ns], memlock_text),
                     _distinct(ns, versions_text), _distinct(ns, gpus_text), _distinct(ns, rdma_text),
                     problems if problems != "–" else "none", verdict])
    return header, rows


def check_table(by_plat: dict[str, list[Run]]) -> tuple[list[str], list[list[str]]]:
    """Per platform: how many runs calibrated and were stopped, how long it took, the job-wide all-reduce check."""
    header = ["platform", "runs calibrated", "stopped by it", "`calibration_s` (s)", "job-wide all-reduce",
              "`calibration_allreduce_busbw_gbps` (GB/s)", "sum correct"]
    rows = []
    for plat, runs in by_plat.items():
        dets = [r.detail("calibration_allreduce_busbw_gbps") for r in runs]
        what = _distinct([d for d in dets if d], lambda d: (
            f"{size_label(d['bytes']) if d.get('bytes') else '?'} over {d.get('world_size', '?')} ranks, "
            f"{d.get('transport') or d.get('backend') or '?'}"))
        stopped = sum(bool(r.refused) or r.detail("calibration_nodes_refused").get("job_check_correct") is False
                      for r in runs)
        correct = sum(bool(d.get("correct")) for d in dets)
        rows.append([PLATFORM_LABEL.get(plat, plat), str(len(runs)), str(stopped),
                     spread([r.calibration_s for r in runs]), what,
                     spread([r.value("calibration_allreduce_busbw_gbps") for r in runs]),
                     f"{correct} of {len(dets)}"])
    return header, rows


def nccl_table(runs: list[Run]) -> tuple[list[str], list[list[str]]]:
    """Per GPU node: nccl-tests' in-place busbw beside the workload's own at the same size, and their ratio."""
    header = ["node", "size", "nccl-tests busbw (GB/s, in-place)", "the workload's busbw (GB/s, in-place)",
              f"ratio (lowest; goal {GOAL_TEXT})", "note"]
    per: dict[str, dict] = {}
    for r in runs:
        ref = r.detail("calibration_nccl_tests_busbw_gbps")
        ratio = r.detail("calibration_workload_vs_nccl_tests").get("per_node") or {}
        for host, bw in (ref.get("per_node") or {}).items():
            p = per.setdefault(host, {"ref": [], "mine": [], "ratio": [], "bytes": set()})
            p["ref"].append(_num(bw))
            if host in ratio:
                p["mine"].append(_num(ratio[host].get("workload_busbw_gbps")))
                p["ratio"].append(_num(ratio[host].get("ratio")))
                p["bytes"].add(ratio[host].get("bytes"))
    rows = []
    for host, p in per.items():
        low = min((x for x in p["ratio"] if x is not None), default=None)
        note = ("–" if low is None else f"meets {GOAL_TEXT}" if low >= GOAL else f"below {GOAL_TEXT}")
        sizes = ", ".join(size_label(b) for b in sorted(b for b in p["bytes"] if b))
        rows.append([f"`{host}`", sizes or "–", spread(p["ref"]), spread(p["mine"]), fmt(low), note])
    return header, rows


def allocation_table(by_plat: dict[str, list[Run]]) -> tuple[list[str], list[list[str]]]:
    """Per platform: the step before training: how long, what all-reduced, its figure against the floor."""
    header = ["platform", "runs checked", "refused by the health gate", "refused by the floor",
              "`allocation_check_s` (s)", "all-reduce across the allocation",
              "`allocation_allreduce_busbw_gbps` (GB/s)", "floor (GB/s)"]
    rows = []
    for plat, runs in by_plat.items():
        checked = [r for r in runs if any(n in r.metrics for n in CHECK_NAMES)]
        if not checked:
            continue
        dets = [r.detail("allocation_allreduce_busbw_gbps") for r in checked]
        what = _distinct([d for d in dets if d], lambda d: (
            f"{d.get('form')}: {size_label(d['bytes']) if d.get('bytes') else '?'} over {d.get('ranks', '?')} ranks"
            + (f", {d['transport']}" if d.get("transport") else "")))
        gate = sum(bool(r.detail("health_nodes_refused").get("refused")) for r in checked)
        floor = sum(d.get("ok") is False for d in dets if d)
        rows.append([PLATFORM_LABEL.get(plat, plat), str(len(checked)), str(gate), str(floor),
                     spread([r.check_s for r in checked]), what,
                     spread([r.value("allocation_allreduce_busbw_gbps") for r in checked]),
                     _distinct([d.get("floor_gbps") for d in dets if d], lambda v: "none" if not v else f"{v:g}")])
    return header, rows


def health_table(runs: list[Run]) -> tuple[list[str], list[list[str]]]:
    """One row per node the health gate saw: GPUs, throttling, power, NVLink, HCA ports, GPUDirect, clock, CPUs."""
    header = ["node", "runs", "GPUs (throttled)", "power limit (W)", "NVLinks active", "HCA ports", "GPUDirect",
              "clock offset (s)", "ranks' CPUs / GPUs' CPUs", "topology", "problems"]
    per: dict[str, list[dict]] = {}
    for r in runs:
        for n in r.health:
            per.setdefault(str(n.get("node")), []).append(n)
    rows = []
    for node, ns in per.items():
        last = ns[-1]
        gpus = "–" if last.get("gpus") is None else f"{last['gpus']} ({last.get('throttled') or 0})"
        gdr = last.get("gdr") or {}
        gdr_text = "–" if not gdr else ("nvidia_peermem" if gdr.get("peermem") else "DMA-BUF" if gdr.get("dma_buf")
                                        else "not ready")
        cpus = ", ".join(f"{k}: {v}" for k, v in sorted((last.get("rank_cpus") or {}).items())) or "–"
        near = ", ".join(f"{k}: {v}" for k, v in sorted((last.get("gpu_cpus") or {}).items()))
        problems = _distinct([p for n in ns for p in n.get("problems") or []])
        rows.append([f"`{node}`", str(len(ns)), gpus, _distinct(last.get("power_limit_w") or [], lambda v: f"{v:g}"),
                     _distinct(last.get("nvlinks_active") or []), _distinct(last.get("ib_ports") or []), gdr_text,
                     spread([_num(n.get("clock_offset_s")) for n in ns]), cpus + (f" / {near}" if near else ""),
                     str(last.get("topology_addr") or "–"), problems if problems != "–" else "none"])
    return header, rows


def notes(runs: list[Run]) -> list[str]:
    """What did not fit a table: nccl-tests not installed or failed, sizes that differ, later attempts."""
    out, n = [], len({r.campaign for r in runs})
    for r in runs:
        if r.problem:
            out.append(f"{run_name(r, n)}: {r.problem}")
        for name in NAMES:
            note = r.detail(name).get("note")
            if note:
                out.append(f"{run_name(r, n)} `{name}`: {note}")
        why = r.detail("allocation_allreduce_busbw_gbps").get("why")
        if why:
            out.append(f"{run_name(r, n)} the all-reduce across the allocation was refused: {why}")
        warned = r.detail("health_nodes_refused").get("locality_warnings") or []
        out += [f"WARNING {run_name(r, n)} {w}" for w in warned]
    return _distinct_list(out)


def _distinct_list(xs: list[str]) -> list[str]:
    return list(dict.fromkeys(xs))


def run_name(r: Run, campaigns: int) -> str:
    """`run_id`, or `campaign/run_id` where the report covers several campaigns (run ids repeat across them)."""
    return f"`{r.campaign}/{r.run_id}`" if campaigns > 1 and r.campaign else f"`{r.run_id}`"


def refused_items(runs: list[Run]) -> list[str]:
    n = len({r.campaign for r in runs})
    return [f"{run_name(r, n)} ({PLATFORM_LABEL.get(r.platform, r.platform)}): `{x.get('node') or x.get('host')}`"
            f"{' (health gate)' if gate else ''}: " + "; ".join(x.get("why") or ["(no reason recorded)"])
            for r in runs for gate, xs in ((True, r.detail("health_nodes_refused").get("refused") or []),
                                           (False, r.refused)) for x in xs]


def settings_text(runs: list[Run]) -> str:
    dets = [r.detail("calibration_nodes_refused") for r in runs]
    ratio = _distinct([d.get("min_ratio") for d in dets if d.get("min_ratio") is not None], lambda v: f"{v:g}")
    kib = _distinct([d.get("min_memlock_kib") for d in dets if d.get("min_memlock_kib") is not None],
                    lambda v: f"{v} KiB" + (" (recorded only)" if v == 0 else ""))
    return f"`calibration.min_peer_ratio` {ratio}, `calibration.min_memlock_kib` {kib}"


def method(runs: list[Run]) -> str:
    return ("In each run's own allocation and image, after the rendezvous and before the all-reduce sweep, every "
            "rank multiplies matrices for about half a second (bf16 on GPUs, fp32 on CPUs) and the job all-reduces "
            "one size, its sum checked; one rank per node records its limits, torch/CUDA/NCCL and driver versions, "
            "GPUs and RDMA devices, and on GPU nodes runs nccl-tests' `all_reduce_perf` over the node's GPUs beside "
            "the workload's own all-reduce among them at nccl-tests' largest size. A node whose slowest rank "
            "multiplies below `min_peer_ratio` of the nodes' median, or that has a problem (memlock below "
            "`min_memlock_kib`, GPUs missing, uncorrected ECC errors), is refused and the run stops, naming it. "
            f"Settings here: {settings_text(runs)}. The phase is `calibration_s`, left out of `startup_s` and "
            "`sweep_s`; the figures are each run's first attempt's.")


CHECK_METHOD = ("Before training, in the same allocation, a step of its own (`workloads/poc_check.py`): the health "
                "gate on every node (GPUs' throttle reasons, power limits, application clocks, MIG and compute mode, "
                "ECC and remapped rows, NVLink, the HCA ports' state and rate, GPUDirect RDMA, XIDs where readable, "
                "DCGM where asked; memlock, the interface gloo binds, the clock against the first node's), then an "
                "all-reduce across the whole allocation against an absolute floor. A refused node, or a figure below "
                "the floor, stops the run untrained. Its time is `allocation_check_s`, left out of `launch_s`.")


def section(runs: list[Run]) -> list[Block]:
    runs = sorted(runs, key=lambda r: platform_sort_key(r.platform))   # stable: report order within a platform
    by_plat: dict[str, list[Run]] = {}
    for r in runs:
        by_plat.setdefault(r.platform, []).append(r)
    blocks: list[Block] = [("p", method(runs))]
    check = allocation_table(by_plat)
    if check[1]:
        blocks += [("p", CHECK_METHOD), ("table", check)]
    blocks += [("table", check_table(by_plat))]
    for plat, rs in by_plat.items():
        blocks += [("h3", f"{PLATFORM_LABEL.get(plat, plat)}: the nodes")]
        health = health_table(rs)
        if health[1]:
            blocks += [("p", "The health gate, before training:"), ("table", health)]
        if any(r.nodes for r in rs):
            blocks += [("table", node_table(rs))]
        gpu = nccl_table(rs)
        if gpu[1]:
            blocks += [("p", "nccl-tests beside the workload on the same GPUs and size:"), ("table", gpu)]
    refused = refused_items(runs)
    if refused:
        blocks += [("h3", "Refused nodes"), ("ul", refused)]
    extra = notes(runs)
    if extra:
        blocks += [("p", "Notes:"), ("ul", extra)]
    return blocks
