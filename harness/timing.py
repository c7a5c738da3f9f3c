"""Timestamps as evidence: an instant known to lie in [lo, hi], with where it came from.

A scheduler that prints whole seconds (Slurm's Submit/Start, Kubernetes' creationTimestamp and
conditions) says only that the instant lies in [T, T + 1); the harness's own clock around a call
says it lies between the call's start and its return. A metric is a difference of two instants,
so its honest value is an interval too: [b.lo - a.hi, b.hi - a.lo]. Nothing is rounded here;
the report decides how to print.

JSON form (stored with every run): {"t", "lo", "hi", "source", "resolution_s"} where t is the
best single estimate (the middle of [lo, hi] unless a source says better), source names the
clock and record (e.g. "slurmctld Start (sacct -D, whole s)"), resolution_s that record's unit.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True)
class Stamp:
    t: float
    lo: float
    hi: float
    source: str
    resolution_s: float = 0.0

    def __post_init__(self) -> None:
        if not self.lo <= self.t <= self.hi:
            raise ValueError(f"stamp {self.source}: t={self.t} outside [{self.lo}, {self.hi}]")

    @classmethod
    def exact(cls, t: float, source: str, resolution_s: float = 1e-6) -> Stamp:
        """A clock read with (about) microsecond resolution: time.time(), time_ns(), eventTime."""
        return cls(t, t, t + resolution_s, source, resolution_s)

    @classmethod
    def truncated(cls, t: float, source: str, resolution_s: float = 1.0) -> Stamp:
        """A record that truncates to whole units (Slurm's time_t, RFC 3339 without fraction)."""
        return cls(t + resolution_s / 2, t, t + resolution_s, source, resolution_s)

    @classmethod
    def between(cls, lo: float, hi: float, source: str, resolution_s: float = 1e-6) -> Stamp:
        """An instant bracketed by two reads of one clock (before and after a call)."""
        return cls((lo + hi) / 2, lo, hi, source, resolution_s)

    @property
    def width(self) -> float:
        return self.hi - self.lo

    def narrowed(self, other: Stamp) -> Stamp | None:
        """Both stamps are evidence of the same instant: their intersection, or None when they
        disagree (different clocks, or a wrong assumption: the caller keeps both and says so)."""
        lo, hi = max(self.lo, other.lo), min(self.hi, other.hi)
        if lo > hi:
            return None
        t = min(max(self.t, lo), hi) if self.width <= other.width else min(max(other.t, lo), hi)
        return Stamp(t, lo, hi, f"{self.source} ∩ {other.source}", min(self.resolution_s, other.resolution_s))

    def to_json(self) -> dict:
        return {"t": self.t, "lo": self.lo, "hi": self.hi, "source": self.source,
                "resolution_s": self.resolution_s}

    @classmethod
    def from_json(cls, d: dict) -> Stamp:
        return cls(float(d["t"]), float(d["lo"]), float(d["hi"]), str(d["source"]),
                   float(d.get("resolution_s", 0.0)))


@dataclass(frozen=True)
class Span:
    """b - a for two stamps: the value and the interval it must lie in."""
    value: float
    lo: float
    hi: float

    @classmethod
    def between(cls, a: Stamp, b: Stamp) -> Span:
        return cls(b.t - a.t, b.lo - a.hi, b.hi - a.lo)

    @property
    def uncertainty(self) -> float:
        """Half the width of the interval: the value is known to +- this."""
        return (self.hi - self.lo) / 2

    def plus(self, other: Span) -> Span:
        return Span(self.value + other.value, self.lo + other.lo, self.hi + other.hi)


def stamp_of(d: dict | Stamp | None) -> Stamp | None:
    if d is None or isinstance(d, Stamp):
        return d
    return Stamp.from_json(d)


_RFC3339 = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")


def docker_time(text: str | None) -> float | None:
    """dockerd's RFC 3339 time (nanoseconds) -> epoch seconds; None for Go's zero time or junk.

    Parsed by hand: datetime keeps microseconds only, and the nanoseconds are added back here."""
    if not text:
        return None
    m = _RFC3339.match(text.strip())
    if not m:
        return None
    whole, frac, zone = m.groups()
    if whole.startswith("0001-"):
        return None     # Go's zero time: the container never started / has not finished
    tz = UTC if zone == "Z" else datetime.strptime(zone.replace(":", ""), "%z").tzinfo
    base = datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=tz).timestamp()
    return base + (int(frac.ljust(9, "0")) / 1e9 if frac else 0.0)
