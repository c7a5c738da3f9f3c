"""The workload's event lines (harness/events.py): the kinds it knows, and properties of the parser.

The workload (harness/data/workloads/ddp_train.py and its top-level copy workloads/ddp_train.py) writes
`POC_EVENT {json}` lines through `Events.emit(kind, ...)`; every kind it can emit must be one events.py
knows (KINDS), read from the script's source with `ast`, so a new kind is declared where the events
are parsed. The parser takes any text or JSON without raising, and a valid line still parses.
"""
from __future__ import annotations

import ast
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as s
from support.paths import FIXTURES, ROOT

from harness import events as evmod

WORKLOADS = (ROOT / "harness" / "data" / "workloads" / "ddp_train.py",   # what the harness ships
             ROOT / "workloads" / "ddp_train.py")                        # the copy for people
REAL_LINES = (FIXTURES / "local" / "clean_events.jsonl").read_text().splitlines()
fast = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = s.recursive(s.none() | s.booleans() | s.integers() | s.floats(allow_nan=False) | s.text(max_size=20),
                          lambda kids: s.lists(kids, max_size=4) | s.dictionaries(s.text(max_size=12), kids,
                                                                                   max_size=5), max_leaves=20)


def emitted_kinds(source: str) -> tuple[set[str], list[int]]:
    """The kinds of every `<events>.emit(kind, ...)` call in source, and the lines of those whose kind is
    not a string literal (which no reading of the source can check)."""
    kinds, unread = set(), []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "emit"):
            continue
        kind = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "kind"), None)
        if isinstance(kind, ast.Constant) and isinstance(kind.value, str):
            kinds.add(kind.value)
        else:
            unread.append(node.lineno)
    return kinds, unread


def test_every_event_kind_the_workload_emits_is_known_to_events():
    for script in WORKLOADS:
        kinds, unread = emitted_kinds(script.read_text())
        assert unread == [], f"{script}: emit() with a kind that is not a string literal at lines {unread}"
        assert {"process_start", "step", "done"} <= kinds, f"{script}: the emit() calls were not found"
        unknown = sorted(kinds - set(evmod.KINDS))
        assert unknown == [], f"{script} emits {unknown}, which harness/events.py KINDS does not name: add them there"
    for name in ("poc_calibration.py", "poc_check.py", "poc_health.py"):     # shipped beside it, emitting too
        kinds, unread = emitted_kinds((ROOT / "harness" / "data" / "workloads" / name).read_text())
        assert unread == [] and sorted(kinds - set(evmod.KINDS)) == [], name


@fast
@given(s.text(max_size=300))
def test_event_lines_never_raise(line):
    ev = evmod.parse_line(line)
    assert ev is None or (isinstance(ev["kind"], str) and isinstance(ev["ts_ns"], int))


@fast
@given(s.dictionaries(s.sampled_from(["kind", "ts_ns", "rank", "step", "attempt", "host", "pid", "bytes"]),
                      json_values, max_size=8))
def test_event_json_of_any_shape_is_an_event_or_nothing(obj):
    ev = evmod.parse_line(evmod.EVENT_PREFIX + json.dumps(obj))
    if ev is not None:   # whatever is accepted sorts and dedupes with real events
        evmod.dedupe([ev, *evmod.parse_lines(REAL_LINES[:5])])
        assert all(isinstance(a, int) for a in ev["attempt"])


def test_real_event_lines_still_parse():
    assert len(evmod.parse_lines(REAL_LINES)) == len(REAL_LINES) > 100


def test_event_lines_glued_by_two_writers_give_both_events():
    """Seen in the worker image: two ranks on one pipe, one's newline written after the other's line."""
    a, b = REAL_LINES[0], REAL_LINES[1]
    glued = f"{evmod.EVENT_PREFIX}{a}{evmod.EVENT_PREFIX}{b}"
    assert [e["ts_ns"] for e in evmod.parse_lines([glued, ""])] == \
        [e["ts_ns"] for e in evmod.parse_lines([evmod.EVENT_PREFIX + a, evmod.EVENT_PREFIX + b])]
