"""Checkpoint save and load: the workload's own timings of them (perf_counter), with what was written where.

- checkpoint_save_s: the median `save_s` over the run's `checkpoint_saved` events (every attempt; rank 0
  saves while the others wait at a barrier): torch.save of the model and optimizer state to a temporary
  file and its rename into place; rotating older checkpoints away is not counted. Detail: n, the slowest
  save, `bytes` (the file's size: the newest save's), `fs` (the file system(s) written), `gbps` = the
  median over saves of bytes / save_s (GB = 1e9 bytes), and each save. Saves fall between steps, outside
  every step's dur_s (goodput counts them as time not useful).
- checkpoint_load_s: a restart's checkpoint read, per rank torch.load and load_state_dict of the model
  and optimizer. The value is the slowest rank's: the restart goes on only once every rank has loaded.
  Only loads that read a file count (a start with no checkpoint emits `checkpoint_loaded` with no path
  and load_s 0). Detail: n, the median load, the slowest rank, its bytes and fs, `gbps` = its bytes /
  load_s, and each load; more than one restart: the slowest over all, each load listed with its attempt.
Each is absent (no key) when the run saved, or loaded, none.

How they relate to recovery (recovery.py): recovery_checkpoint_load_s is the span rendezvous -> every
rank's `checkpoint_loaded` event, which builds the model, wraps it in DDP and then reads the checkpoint.
checkpoint_load_s is that read alone, a part of the span: it is never added to recovery_s again.
Events written before the workload recorded sizes and file systems have none: bytes, fs and gbps are None.
"""
from __future__ import annotations

import statistics

from .. import events as ev
from .common import _metric, _t


def checkpoint(events: list[dict]) -> dict[str, dict]:
    """checkpoint_save_s and checkpoint_load_s by name; only those the run has evidence for."""
    out = {}
    saves = [e for e in ev.of_kind(events, "checkpoint_saved") if _num(e.get("save_s"))]
    if saves:
        out["checkpoint_save_s"] = _saves(sorted(saves, key=_t))
    loads = [e for e in ev.of_kind(events, "checkpoint_loaded") if e.get("path") and _num(e.get("load_s"))]
    if loads:
        out["checkpoint_load_s"] = _loads(sorted(loads, key=_t))
    return out


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _gbps(nbytes, seconds: float) -> float | None:
    return nbytes / seconds / 1e9 if _num(nbytes) and seconds > 0 else None


def _fs(evs: list[dict]) -> list[str] | None:
    return sorted({str(e["fs"]) for e in evs if e.get("fs")}) or None


def _saves(saves: list[dict]) -> dict:
    took = [float(e["save_s"]) for e in saves]
    rates = [r for r in (_gbps(e.get("bytes"), float(e["save_s"])) for e in saves) if r is not None]
    return _metric(
        "checkpoint_save_s", statistics.median(took), {"first_save": _t(saves[0]), "last_save": _t(saves[-1])},
        n=len(saves), max_s=max(took), bytes=saves[-1].get("bytes"), fs=_fs(saves),
        gbps=statistics.median(rates) if rates else None,
        saves=[{"step": e.get("step"), "attempt": list(ev.attempt_of(e)), "rank": e.get("rank"),
                "save_s": float(e["save_s"]), "bytes": e.get("bytes"), "why": e.get("why")} for e in saves])


def _loads(loads: list[dict]) -> dict:
    slowest = max(loads, key=lambda e: float(e["load_s"]))
    took = float(slowest["load_s"])
    return _metric(
        "checkpoint_load_s", took, {"first_load": _t(loads[0]), "last_load": _t(loads[-1])},
        n=len(loads), median_s=statistics.median(float(e["load_s"]) for e in loads),
        slowest_rank=slowest.get("rank"), slowest_host=slowest.get("host"), bytes=slowest.get("bytes"),
        fs=_fs(loads), gbps=_gbps(slowest.get("bytes"), took),
        attempts=[list(a) for a in sorted({ev.attempt_of(e) for e in loads})],
        loads=[{"rank": e.get("rank"), "attempt": list(ev.attempt_of(e)), "step": e.get("step"),
                "load_s": float(e["load_s"]), "bytes": e.get("bytes")} for e in loads])
