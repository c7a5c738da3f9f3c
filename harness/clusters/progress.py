"""Progress of the long builds behind `poc cluster up` and `poc smoke` (Go components, images).

On a fresh machine a build runs for minutes with no output of its own; while it runs a line like

    [k8s] building kueue v0.14.5 … 3m10s elapsed (last build took 8m28s, ~5m18s to go)

goes to `say` every ~20 s. The estimate is the last recorded build of that component, from
``build-times.jsonl`` in the cache directory (one JSON line per finished build).
"""
from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from harness.clusters.base import Say
from harness.paths import build_times_file

INTERVAL_S = 20.0


def stderr_say(msg: str) -> None:
    """The default `say` of the cluster modules' Python API (the CLI passes its own, which --quiet silences)."""
    print(msg, file=sys.stderr, flush=True)


def fmt_duration(seconds: float) -> str:
    """45s, 3m10s, 1h02m."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def progress_line(scope: str, what: str, elapsed: float, last: float | None) -> str:
    if last is None:
        hint = "no earlier build recorded"
    elif elapsed < last:
        hint = f"last build took {fmt_duration(last)}, ~{fmt_duration(last - elapsed)} to go"
    else:
        hint = f"last build took {fmt_duration(last)}"
    return f"[{scope}] building {what} … {fmt_duration(elapsed)} elapsed ({hint})"


class BuildTimes:
    """The build-times.jsonl ledger: read the last duration of a component, append a new one."""

    def __init__(self, path: Path | None = None):
        self.path = path or build_times_file()

    def _records(self) -> list[dict]:
        try:
            lines = self.path.read_text().splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue   # a torn line from a build that was killed mid-write
            if isinstance(rec, dict) and isinstance(rec.get("seconds"), (int, float)):
                out.append(rec)
        return out

    def last(self, component: str, version: str | None = None) -> float | None:
        """Seconds of the latest build of component (of that version when one is recorded)."""
        recs = [r for r in self._records() if r.get("component") == component]
        same = [r for r in recs if version is not None and r.get("version") == version]
        pick = (same or recs)[-1:]
        return float(pick[0]["seconds"]) if pick else None

    def record(self, component: str, version: str, seconds: float) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(json.dumps({"component": component, "version": version, "seconds": round(seconds, 1),
                                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")


class Ticker:
    """While a build runs (inside `with`), say a progress line every `interval` seconds from a thread."""

    def __init__(self, say: Say, scope: str, what: str, last: float | None, *,
                 interval: float = INTERVAL_S, clock: Callable[[], float] = time.monotonic):
        self.say, self.scope, self.what, self.last = say, scope, what, last
        self.interval, self.clock = interval, clock
        self.t0 = clock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def line(self) -> str:
        return progress_line(self.scope, self.what, self.clock() - self.t0, self.last)

    def elapsed(self) -> float:
        return self.clock() - self.t0

    def run(self, wait: Callable[[float], bool]) -> None:
        """Say a line each time wait(interval) returns False (timed out); stop when it returns True."""
        while not wait(self.interval):
            self.say(self.line())

    def __enter__(self) -> Ticker:
        self._thread = threading.Thread(target=self.run, args=(self._stop.wait,), name="build-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def timed_build(say: Say | None, scope: str, component: str, version: str, what: str, build: Callable[[], object],
                *, log: str | Path | None = None, times: BuildTimes | None = None) -> float:
    """Run build() with progress lines; record and return its duration in seconds."""
    say = say or stderr_say
    times = times or BuildTimes()
    last = times.last(component, version)
    est = f"last build took {fmt_duration(last)}" if last is not None else "no earlier build recorded: minutes"
    say(f"[{scope}] building {what} ({est}{f'; log: {log}' if log else ''})")
    with Ticker(say, scope, what, last) as t:
        build()
        secs = t.elapsed()
    times.record(component, version, secs)
    say(f"[{scope}] built {what} in {fmt_duration(secs)}")
    return secs
