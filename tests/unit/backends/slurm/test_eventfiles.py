"""Property tests for the Slurm event-file reader (harness/backends/slurm/eventfiles.py).

The framing parser takes any text without raising. The poll script itself runs for real (POSIX sh,
coreutils) on files in a temporary directory that grow between polls by arbitrary byte cuts: lines
split anywhere (inside a UTF-8 character too), junk lines, files that appear later. Across all polls,
every event of every complete line is handed over exactly once.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as s

from harness import events as evmod
from harness.backends.slurm import eventfiles as ef
from harness.transports import LocalTransport

fast = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
real_sh = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NONCE = "0123456789abcdef"


def header(kind: str, *fields) -> str:
    return f"\n@@{NONCE} {kind} " + " ".join(map(str, fields)) + "\n"


sections = s.one_of(
    s.builds(header, s.just("file"), s.integers(-2, 4), s.integers(-5, 10**6), s.integers(-5, 10**6),
             s.text(max_size=10)),
    s.builds(header, s.sampled_from(["squeue", "squeue_stderr", "file", "x", ""]), s.text(max_size=10)),
    s.text(max_size=60))


@fast
@given(s.lists(sections, max_size=8), s.integers(0, 4))
def test_any_output_splits_into_sections_without_raising(parts, runs):
    look = ef.parse("".join(parts), NONCE, runs)
    assert all(0 <= c.run < runs and c.name for c in look.chunks)
    assert look.squeue is None or isinstance(look.squeue[0], int)


@fast
@given(s.text(max_size=200), s.integers(0, 100), s.integers(0, 100))
def test_take_never_raises_and_never_moves_backwards(text, start, extra):
    rf = ef.RunFiles("/d")
    events = rf.take(ef.Chunk(0, "f.jsonl", start, start + extra, text))
    assert isinstance(events, list) and rf.offsets["f.jsonl"] >= start


def event_line(i: int, host: str) -> str:
    return json.dumps({"kind": "step", "ts_ns": i + 1, "rank": 0, "step": i, "host": host, "pid": 7,
                       "note": "é✓"}) + "\n"


junk = s.one_of(
    s.text(alphabet=s.characters(blacklist_characters="\n", blacklist_categories=["Cs"]), max_size=30).map(
        lambda t: (t + "\n").encode()),
    s.binary(max_size=12).map(lambda b: b.replace(b"\n", b"") + b"\n"))   # not UTF-8: offsets must still hold


@real_sh
@given(s.lists(s.lists(s.one_of(s.integers(0, 50), junk), max_size=8), min_size=1, max_size=3),
       s.lists(s.lists(s.integers(0, 200), min_size=3, max_size=3), min_size=1, max_size=6))
def test_events_are_handed_over_once_however_the_files_grow(files, polls):
    streams = []
    for n, items in enumerate(files):
        host = f"c{n}"
        streams.append(b"".join(event_line(100 * n + x, host).encode() if isinstance(x, int) else x for x in items))
    with tempfile.TemporaryDirectory() as tmp:
        rf = ef.RunFiles(tmp)
        got, written = [], [0] * len(streams)
        for cuts in [*polls, [10**6] * 3]:   # the last poll comes after everything was written
            for n, data in enumerate(streams):
                new = data[written[n]:written[n] + cuts[n]]
                if new:   # a file that got no bytes yet does not exist yet
                    with open(Path(tmp) / f"events-c{n}-7.jsonl", "ab") as fh:
                        fh.write(new)
                    written[n] += len(new)
            out = LocalTransport().run(ef.argv(NONCE, [], [rf]))
            for c in ef.parse(out.stdout, NONCE, 1).chunks:
                got += rf.take(c)
    want = [e for data in streams for e in evmod.parse_lines(data.decode(errors="replace").split("\n"))]
    keys = [evmod.event_key(e) for e in got]
    assert len(keys) == len(set(keys))
    assert set(keys) == {evmod.event_key(e) for e in want}
    assert {e["ts_ns"] for e in got} >= {100 * n + x + 1 for n, items in enumerate(files) for x in items
                                          if isinstance(x, int)}
