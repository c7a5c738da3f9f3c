"""What the report keeps of each run record: a slim copy, so 100,000 runs fit in memory.

A stored record carries every metric's sources and details, the stages and the scheduler's
facts; the report needs the values, the all-reduce curve, the step samples, the timeline and
the environment. Equal environments are shared between records (one campaign has a handful).
"""
from __future__ import annotations

import json

KEEP = ("run_id", "campaign", "platform", "scenario", "status", "timeline", "_dir")


class Slimmer:
    def __init__(self) -> None:
        self._envs: dict[str, dict] = {}

    def __call__(self, rec: dict) -> dict:
        m = rec.get("metrics") or {}
        out = {k: rec[k] for k in KEEP if k in rec}
        out["metrics"] = {n: v.get("value") for n, v in m.items() if isinstance(v, dict)}
        out["curve"] = [(pt["bytes"], pt["busbw_gbps"]) for pt in _detail(m, "allreduce_busbw_gbps").get("curve") or []]
        out["samples"] = _detail(m, "step_time_s").get("samples") or []
        err = rec.get("error")
        if err:
            out["error"] = {"stage": err.get("stage"), "message": err.get("message")}
        env = rec.get("environment") or {}
        out["environment"] = self._envs.setdefault(json.dumps(env, sort_keys=True, default=str), env)
        return out


def _detail(metrics: dict, name: str) -> dict:
    m = metrics.get(name)
    return (m.get("detail") or {}) if isinstance(m, dict) else {}


def value_of(rec: dict, name: str):
    """A metric's value from a stored record or a slim one."""
    m = (rec.get("metrics") or {}).get(name)
    return m.get("value") if isinstance(m, dict) else m


def curve_of(rec: dict) -> list[tuple[int, float]]:
    """(bytes, busbw_gbps) of the all-reduce sweep, from a stored record or a slim one."""
    if "curve" in rec:
        return rec["curve"]
    return [(pt["bytes"], pt["busbw_gbps"]) for pt in _detail(rec.get("metrics") or {}, "allreduce_busbw_gbps").get("curve") or []]


def samples_of(rec: dict) -> list[float]:
    if "samples" in rec:
        return rec["samples"]
    return _detail(rec.get("metrics") or {}, "step_time_s").get("samples") or []
