"""A replay's results directory: the trace as replayed, and per platform its raw records, the harness's
own submission log and costs, and the figures drawn from the records. `rederive` draws the figures
again from the raw records and names every one that differs.

    <results>/<replay name>/trace.jsonl     the trace as replayed (compressed: its notes say by how much)
    <results>/<replay name>/k8s.json        {"figures", "raw", "submitted", "settings", ...}
    <results>/<replay name>/slurm.json      the same for Slurm
"""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import ConfigError
from ..fsutil import atomic_write
from ..scale import outcome
from ..scale import trace as tr
from . import k8s_records, slurm_records

PLATFORMS = ("k8s", "slurm")


def outcomes_of(platform: str, trace: tr.Trace, result: dict) -> list[outcome.JobOutcome]:
    raw = result["raw"]
    if platform == "k8s":
        return k8s_records.outcomes(trace, raw["jobsets"], raw["pods"])
    if platform == "slurm":
        return slurm_records.outcomes(trace, result["submitted"], raw)
    raise ConfigError(f"no replay records for platform {platform!r}", tip=f"one of {', '.join(PLATFORMS)}")


def figures(platform: str, trace: tr.Trace, result: dict, total_gpus: int) -> dict:
    """The figures, and how many of the trace's jobs the scheduler's records do not show (never
    accepted, or no record): a replay that lost jobs says so beside its percentiles."""
    outs = outcomes_of(platform, trace, result)
    blocks = (k8s_records if platform == "k8s" else slurm_records).block_of(result["raw"])
    return {**outcome.figures(outs, total_gpus, blocks), "jobs_without_record": len(trace.jobs) - len(outs)}


def save(where: Path, trace: tr.Trace, platform: str, result: dict, total_gpus: int) -> dict:
    """Write the trace and the platform's result with its figures; the figures."""
    where.mkdir(parents=True, exist_ok=True)
    tr.save(trace, where / "trace.jsonl")
    figs = figures(platform, trace, result, total_gpus)
    body = {**result, "total_gpus": total_gpus, "figures": figs}
    atomic_write(where / f"{platform}.json", json.dumps(body, indent=1, sort_keys=True, default=str))
    return figs


def load(where: Path) -> tuple[tr.Trace, dict[str, dict]]:
    if not (where / "trace.jsonl").is_file():
        raise ConfigError(f"{where} is not a replay's results directory (no trace.jsonl)",
                          tip="give the directory `poc scale replay` printed")
    stored = {}
    for p in PLATFORMS:
        f = where / f"{p}.json"
        if f.is_file():
            try:
                stored[p] = json.loads(f.read_text())
            except json.JSONDecodeError as e:
                raise ConfigError(f"{f} is not JSON: {e}", tip="the file was cut or edited; replay again") from None
    return tr.load(where / "trace.jsonl"), stored


def rederive(where: Path) -> list[str]:
    """Each stored figure that the raw records do not give again, as 'platform: key stored X, raw Y'."""
    trace, stored = load(where)
    bad = []
    for p, body in stored.items():
        again = json.loads(json.dumps(figures(p, trace, body, body["total_gpus"])))
        for key in sorted(set(again) | set(body.get("figures", {}))):
            if again.get(key) != body.get("figures", {}).get(key):
                bad.append(f"{p}: {key} stored {body.get('figures', {}).get(key)!r}, raw gives {again.get(key)!r}")
    return bad
