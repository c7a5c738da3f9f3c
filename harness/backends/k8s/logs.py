"""Reading a pod's log incrementally (pure): lines with timestamps in, new text and events out.

The API offers ``sinceSeconds`` (whole seconds) and ``timestamps=true`` (each line prefixed by an
RFC 3339 nano time): the backend re-reads a little around the last line and this cursor keeps
only lines newer than the last one it took. Not every answer is a log: while a node is lost the
API server may answer with its own message ("unable to retrieve container logs for ..."), and a
line may be cut short. A line without a valid timestamp is kept aside as a note, never parsed as
time; the harness must not fail a run because of text it does not control.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ... import events as evmod
from .api import parse_time

# the kubelet's prefix: 2026-12-02T14:09:24.860832123Z (fraction trimmed of trailing zeros, or absent)
_STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$")
TEXT_LIMIT = 200_000


def split_stamp(line: str) -> tuple[str, str] | None:
    """(sortable timestamp, rest of the line) for a timestamped log line; None for anything else.
    The sortable form pads the fraction to 9 digits, so text order is time order."""
    ts, sep, rest = line.partition(" ")
    m = _STAMP.match(ts)
    if not sep or m is None or m.group(3) not in ("Z", "+00:00") or parse_time(m.group(1) + "Z") is None:
        return None
    return f"{m.group(1)}.{(m.group(2) or ''):0<9}", rest


@dataclass
class PodLog:
    """What has been read of one pod's log."""
    text: str = ""                 # the log's lines so far (trimmed to the last TEXT_LIMIT characters)
    last: str = ""                 # newest line's sortable timestamp
    since: float | None = None     # newest line's time, epoch seconds (whole seconds: sinceSeconds' unit)
    notes: list[str] = field(default_factory=list)   # answers that were not log lines (last few)

    def since_seconds(self, now: float) -> int | None:
        """sinceSeconds for the next read: back to a little before the newest line taken."""
        return None if self.since is None else max(1, int(now - self.since) + 2)

    def feed(self, answer: str) -> list[dict]:
        """Take one answer of the log endpoint; return the events in its log lines (repeats included)."""
        events = []
        for line in answer.splitlines():
            parts = split_stamp(line)
            if parts is None:
                if line.strip():
                    self.notes = (self.notes + [line.strip()[:200]])[-5:]
                continue
            key, rest = parts
            if key > self.last:
                self.text = (self.text + rest + "\n")[-TEXT_LIMIT:]
                self.last = key
                self.since = parse_time(key[:19] + "Z")
            e = evmod.parse_line(rest)   # re-read lines too: the caller's Unseen drops repeats
            if e is not None:
                events.append(e)
        return events

    def feed_locked(self, answer: str, lock) -> list[dict]:
        with lock:
            return self.feed(answer)
