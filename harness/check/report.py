"""One check's verdict, how it is timed, and how a list of them is printed and judged.

A check is a function that returns a message (ok), or raises ``Failed`` (ERROR, with a tip) or
``Note`` (worth saying, not a problem: a quota this identity may not read). Checks of one platform
run in order; one that later checks depend on (the ssh connection, the API server) is a gate: when
it fails, the rest are listed as skipped rather than failing with the same cause again.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from ..errors import PocError

OK, ERROR, NOTE, SKIPPED = "ok", "error", "note", "skipped"


class Failed(Exception):
    def __init__(self, message: str, tip: str | None = None):
        super().__init__(message)
        self.message, self.tip = message, tip


class Note(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Check:
    platform: str
    name: str
    status: str          # ok | error | note | skipped
    message: str
    tip: str | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.status != ERROR

    def as_dict(self) -> dict:
        return {"platform": self.platform, "name": self.name, "ok": self.ok, **{
            k: v for k, v in asdict(self).items() if k not in ("platform", "name")}}


class Runner:
    """Runs one platform's checks in order, each timed with ``clock``; a failed gate skips the rest."""

    def __init__(self, platform: str, clock: Callable[[], float] = time.monotonic,
                 on_check: Callable[[Check], None] | None = None):
        self.platform, self.clock, self.on_check = platform, clock, on_check
        self.checks: list[Check] = []
        self.blocked: str | None = None    # the gate that failed

    def run(self, name: str, fn: Callable[[], str], *, gate: bool = False) -> bool:
        """fn() as the check `name`; True when it passed (ok or a note)."""
        if self.blocked is not None:
            return self._add(name, SKIPPED, f"not checked: {self.blocked} failed", None, 0.0)
        t0 = self.clock()
        try:
            status, msg, tip = OK, fn(), None
        except Failed as exc:
            status, msg, tip = ERROR, exc.message, exc.tip
        except Note as exc:
            status, msg, tip = NOTE, exc.message, None
        except PocError as exc:   # what the backends raise already says what went wrong and what to do
            status, msg, tip = ERROR, exc.message, exc.tip
        ok = self._add(name, status, msg, tip, self.clock() - t0)
        if gate and not ok:
            self.blocked = name
        return ok

    def _add(self, name: str, status: str, msg: str, tip: str | None, seconds: float) -> bool:
        c = Check(self.platform, name, status, msg, tip, round(seconds, 3))
        self.checks.append(c)
        if self.on_check is not None:
            self.on_check(c)
        return c.ok


def lines(c: Check) -> tuple[list[str], bool]:
    """The human view of one check and whether it is an error (the caller prints those on stderr):
    `[slurm] ok    sinfo (0.05 s): ...`, or `ERROR [slurm] partition (0.01 s): ...` and a `TIP ...` line."""
    if c.status == ERROR:
        out = [f"ERROR [{c.platform}] {c.name} ({c.seconds:.2f} s): {c.message}"]
        return out + ([f"TIP {c.tip}"] if c.tip else []), True
    word = {OK: "ok", NOTE: "note", SKIPPED: "skip"}[c.status]
    return [f"[{c.platform}] {word:<5} {c.name} ({c.seconds:.2f} s): {c.message}"], False


def summary(checks: list[Check]) -> str:
    errors = [c for c in checks if c.status == ERROR]
    took = sum(c.seconds for c in checks)
    if errors:
        return f"{len(errors)} of {len(checks)} checks failed ({took:.2f} s): " + ", ".join(
            f"{c.platform} {c.name}" for c in errors)
    return f"all {len(checks)} checks passed ({took:.2f} s)"


def as_data(checks: list[Check]) -> dict:
    return {"ok": all(c.ok for c in checks), "checks": [c.as_dict() for c in checks]}


def exit_code(checks: list[Check]) -> int:
    return 0 if all(c.ok for c in checks) else 1
