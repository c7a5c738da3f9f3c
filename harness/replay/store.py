"""A replay's results directory: the trace as replayed, and per platform its raw records, the harness's
own submission log and costs, and the figures drawn from the records. `rederive` draws the figures
again from the raw records and names every one that differs.

    <results>/<replay name>/trace.jsonl     the trace as replayed (compressed: its notes say by how much)
    <results>/<replay name>/k8s.json        {"figures", "raw", "submitted", "settings", ...}
    <results>/<replay name>/slurm.json      the same for Slurm
    <results>/<replay name>/k8s-2.json      a second replay of the same trace (then -3, ...): repeats show
                                            what varies between replays of one trace on one cluster

A run's file may be gzipped (`k8s.json.gz`): a 1,000-node Kubernetes replay's records are megabytes, and
a committed results directory keeps them compressed; it reads the same.

A replay directory inside a campaign (<campaign>/scale/<replay name>/) joins that campaign's report.
"""
from __future__ import annotations

import json
from pathlib import Path

from .. import redact
from ..errors import ConfigError, StoreError
from ..fsutil import atomic_write
from ..render import replay_k8s as rr
from ..scale import outcome, queueing
from ..scale import trace as tr
from ..store import bounded
from . import k8s_records, slurm_records

PLATFORMS = ("k8s", "slurm")
# The figures a stored replay holds, by the version it was written with: 1 the queue, utilisation and
# placement figures; 2 adds bounded slowdown, overtaking, utilisation over the arrival window, per-tenant
# waits and (Kubernetes) the wait split. A replay is re-derived on the figures of its own version, so one
# stored before a figure existed still checks exactly what it stored.
FIGURES_VERSION = 2
V1_KEYS = ("jobs", "states", "queue_s", "makespan_s", "gpu_utilisation", "tenant_gpu_share", "placement_rate",
           "largest_jobs", "placement", "preemptions", "work_utilisation", "held_beyond_run", "jobs_without_record")
SCALE_DIR = "scale"   # a campaign's replays: <campaign>/scale/<replay name>/


def run_name(platform: str, i: int) -> str:
    """The name a platform's i-th replay (from 1) is stored under: k8s, k8s-2, k8s-3, ..."""
    return platform if i == 1 else f"{platform}-{i}"


def platform_of(run: str) -> str:
    return run.split("-", 1)[0]


def _run_key(run: str) -> tuple[int, int]:
    p, _, i = run.partition("-")
    return PLATFORMS.index(p), int(i or 1)


def runs_of(stored: dict[str, dict], platform: str) -> list[dict]:
    """A platform's replays in the order they ran."""
    return [stored[r] for r in sorted(stored, key=_run_key) if platform_of(r) == platform]


def run_file(where: Path, run: str) -> Path | None:
    """The stored file of a run, plain or gzipped; None when there is none."""
    return next((f for f in (where / f"{run}.json", where / f"{run}.json.gz") if f.is_file()), None)


def next_index(where: Path, platform: str) -> int:
    """The index the platform's next replay in `where` gets: 1 when it has none."""
    i = 1
    while run_file(where, run_name(platform, i)):
        i += 1
    return i


def outcomes_of(platform: str, trace: tr.Trace, result: dict) -> list[outcome.JobOutcome]:
    raw = result["raw"]
    if platform == "k8s":
        return k8s_records.outcomes(trace, raw["jobsets"], raw["pods"], raw.get("workloads") or [])
    if platform == "slurm":
        return slurm_records.outcomes(trace, result["submitted"], raw)
    raise ConfigError(f"no replay records for platform {platform!r}", tip=f"one of {', '.join(PLATFORMS)}")


def figures(platform: str, trace: tr.Trace, result: dict, total_gpus: int) -> dict:
    """The figures, and how many of the trace's jobs the scheduler's records do not show (never
    accepted, or no record): a replay that lost jobs says so beside its percentiles."""
    outs = outcomes_of(platform, trace, result)
    blocks = (k8s_records if platform == "k8s" else slurm_records).block_of(result["raw"])
    runtimes = {j.id: float(j.runtime_s) for j in trace.jobs}
    admitted = None
    if platform == "k8s":
        by_name = k8s_records.admitted_times(result["raw"].get("workloads") or [])
        admitted = {j.id: by_name[rr.jobset_name(j)] for j in trace.jobs if rr.jobset_name(j) in by_name}
    return {**outcome.figures(outs, total_gpus, blocks, runtimes), "jobs_without_record": len(trace.jobs) - len(outs),
            "bounded_slowdown": queueing.slowdown_by_size(outs, runtimes), "overtaking": queueing.overtaking(outs),
            "arrival_window_utilisation": queueing.arrival_window_utilisation(outs, runtimes, total_gpus,
                                                                              trace.duration_s),
            "per_tenant": queueing.per_tenant(outs),
            "wait_split": None if admitted is None else queueing.wait_split(outs, admitted)}


def compared_keys(body: dict) -> tuple[str, ...] | None:
    """The figure keys a stored replay is re-derived on (its figures version's); None: every one."""
    return V1_KEYS if body.get("figures_version", 1) == 1 else None


def save(where: Path, trace: tr.Trace, platform: str, result: dict, total_gpus: int, index: int = 1) -> dict:
    """Write the trace and the platform's result (its `index`-th replay of the trace) with its figures;
    the figures. Every replay in a directory is of the very trace it holds: records of another would be
    read against the wrong jobs."""
    where.mkdir(parents=True, exist_ok=True)
    kept = where / "trace.jsonl"
    if kept.is_file() and _trace_text(kept) != tr.dumps(trace):
        raise ConfigError(f"{where} holds replays of another trace",
                          tip="repeat a replay with the same trace and --compress, or choose another --name")
    tr.save(trace, kept)
    # the clusters' records as stored, secrets and this machine out (harness/redact.py); the figures are
    # drawn from what is stored, as rederive draws them again
    result = redact.scrub(result).data
    figs = figures(platform, trace, result, total_gpus)
    body = {**result, "total_gpus": total_gpus, "figures": figs, "figures_version": FIGURES_VERSION}
    atomic_write(where / f"{run_name(platform, index)}.json", json.dumps(body, indent=1, sort_keys=True, default=str))
    return figs


def load(where: Path) -> tuple[tr.Trace, dict[str, dict]]:
    """The trace and every stored replay, by run name (run_name), in the order they ran per platform."""
    if not (where / "trace.jsonl").is_file():
        raise ConfigError(f"{where} is not a replay's results directory (no trace.jsonl)",
                          tip="give the directory `poc scale replay` printed")
    stored = {}
    for p in PLATFORMS:
        i = 1
        while f := run_file(where, run_name(p, i)):
            try:
                body = bounded.load_json(f)   # within the reading limits, a link never followed
            except StoreError as e:
                raise ConfigError(e.message, tip="the file was cut or edited; replay again") from None
            if not isinstance(body, dict):
                raise ConfigError(f"{f} is a JSON {type(body).__name__}, not a replay's record",
                                  tip="the file was cut or edited; replay again")
            stored[run_name(p, i)] = body
            i += 1
    path = where / "trace.jsonl"
    return tr.loads(_trace_text(path), where=str(path)), stored


def _trace_text(path: Path) -> str:
    """A stored trace's text, read within the reading limits, each line within the nesting limit (the
    trace's own parser takes any depth its JSON parser does)."""
    try:
        text = bounded.read_text(path)
    except StoreError as e:
        raise ConfigError(e.message, tip=e.tip) from None
    for n, line in enumerate(text.splitlines(), 1):
        try:
            bounded.loads(line)
        except bounded.TooDeep as e:
            raise ConfigError(f"{path}:{n}: JSON {e}", tip="the file was cut or edited; replay again") from None
        except ValueError:
            pass   # the trace's parser names the line that is not JSON
    return text


def replay_dirs(results: Path) -> list[Path]:
    """The replay directories a campaign holds (<campaign>/scale/*/ with a trace), by name; `results` is a
    campaign's directory or a directory of campaigns, as the report takes either."""
    roots = [results / SCALE_DIR, *sorted(results.glob(f"*/{SCALE_DIR}"))]
    return sorted((d for r in roots if r.is_dir() for d in r.iterdir() if (d / "trace.jsonl").is_file()),
                  key=lambda d: (d.parent.parent.name, d.name))


def mismatches(where: Path) -> list[tuple[str, str, object, object]]:
    """(run, figure, stored, from the raw records) of each stored figure the raw records do not give again."""
    trace, stored = load(where)
    bad = []
    for run, body in stored.items():
        again = json.loads(json.dumps(figures(platform_of(run), trace, body, body["total_gpus"])))
        kept = body.get("figures", {})
        keys = compared_keys(body)
        if keys is not None:
            again = {k: v for k, v in again.items() if k in keys}
        bad += [(run, key, kept.get(key), again.get(key)) for key in sorted(set(again) | set(kept))
                if again.get(key) != kept.get(key)]
    return bad


def rederive(where: Path) -> list[str]:
    """Each stored figure that the raw records do not give again, as 'run: key stored X, raw Y'."""
    return [f"{run}: {key} stored {a!r}, raw gives {b!r}" for run, key, a, b in mismatches(where)]
