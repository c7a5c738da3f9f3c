"""What one run's stages share, below the pipeline and the scenarios that plug into it.

``RunContext``: the backend, store, config and clocks a run is executed with (tests pass simulated
clocks and a scripted backend). ``Stages``: the run's stage records (name, start, end, ok, error and
the API calls each made), in the order they ran; a failure inside one is re-raised as ``StageFailed``
naming the stage, so the record says where a run failed.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

from . import evidence, footprint
from .backends.base import Backend
from .config import Config
from .store import Store

Progress = Callable[[str, str, str, float], None]  # platform, run_id, phase, seconds since submit


def _noop(*_a) -> None:
    pass


class StageFailed(Exception):
    def __init__(self, stage: str, error: BaseException):
        super().__init__(f"{stage}: {error}")
        self.stage = stage
        self.error = error


@dataclass
class Stages:
    items: list[dict] = field(default_factory=list)
    clock: Callable[[], float] = time.time
    calls: Callable[[], dict] = dict          # the backend's cumulative call counts: each stage keeps its own

    @contextmanager
    def stage(self, name: str):
        rec = {"name": name, "start": self.clock(), "end": None, "ok": False}
        self.items.append(rec)
        before = self.calls()
        try:
            yield rec
            rec["ok"] = True
        except StageFailed:
            raise
        except BaseException as exc:
            rec["error"] = str(exc).splitlines()[0][:500] if str(exc) else type(exc).__name__
            raise StageFailed(name, exc) from exc
        finally:
            rec["end"] = self.clock()
            made = footprint.diff(before, self.calls())
            if made:
                rec["calls"] = made


@dataclass
class RunContext:
    backend: Backend
    store: Store
    cfg: Config
    platform_info: dict
    progress: Progress = _noop
    poll_s: float = 0.5
    clock: Callable[[], float] = time.time          # epoch seconds; tests pass a simulated one
    sleep: Callable[[float], None] = time.sleep
    # raw scheduler evidence -> time-stamps; pure-logic tests with a scripted backend pass their own
    stamps: Callable[[str, dict], dict] = evidence.stamps
