"""Property tests: the Kubernetes backend's parsers of text the harness does not control never raise.

Pod logs (harness/backends/k8s/logs.py, with the kubelet's timestamps, or the API server's own messages
instead), a followed log cut anywhere, API timestamps and quantities, and whole API objects of any shape.
Each property also pins what a valid input must still give, so a parser that swallowed everything would
fail too. The POC_EVENT lines' properties are in tests/unit/test_events.py.
"""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as s
from support.paths import FIXTURES

from harness import events as evmod
from harness.backends.k8s import api
from harness.backends.k8s import state as st
from harness.backends.k8s.logs import PodLog, split_stamp

FIX = FIXTURES / "local"
REAL_LINES = (FIX / "clean_events.jsonl").read_text().splitlines()
STAMP = "2026-12-02T14:09:24.86083Z"
fast = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = s.recursive(s.none() | s.booleans() | s.integers() | s.floats(allow_nan=False) | s.text(max_size=20),
                          lambda kids: s.lists(kids, max_size=4) | s.dictionaries(s.text(max_size=12), kids,
                                                                                   max_size=5), max_leaves=20)


RFC3339ISH = r"\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{0,12})?(Z|[+-]\d\d:\d\d)?\Z"


@fast
@given(s.one_of(s.text(max_size=40), s.from_regex(RFC3339ISH)))
def test_api_timestamps_never_raise(text):
    t = api.parse_time(text)
    assert t is None or isinstance(t, float)


@fast
@given(s.text(max_size=20))
def test_quantities_never_raise(text):
    assert isinstance(api.qty(text), float)


log_lines = s.one_of(
    s.text(max_size=80),
    s.just("unable to retrieve container logs for containerd://0123abcd"),
    s.builds(lambda line: f"{STAMP} {line}", s.sampled_from(REAL_LINES[:20]).map(lambda x: evmod.EVENT_PREFIX + x)),
    s.builds(lambda frac, rest: f"2026-12-02T14:09:{frac} {rest}",
             s.from_regex(r"\A[0-5]\d(\.\d{1,9})?Z\Z"), s.text(max_size=30)),
)


@fast
@given(s.lists(log_lines, max_size=30))
def test_pod_log_answers_never_raise_and_keep_only_stamped_lines(lines):
    log = PodLog()
    answer = "\n".join(lines)
    events = log.feed(answer)
    stamped = [x for x in answer.splitlines() if split_stamp(x) is not None]
    assert len(log.text.splitlines()) <= len(stamped)
    assert len(events) <= len(stamped)
    if stamped:
        assert log.since is not None and log.since_seconds(log.since + 10) >= 1
    assert len(log.notes) <= 5


def test_api_server_message_instead_of_a_log_is_a_note():
    """What failed k8s-lose-node-04: the answer was the API server's message, not log lines."""
    log = PodLog()
    good = f"{STAMP} {evmod.EVENT_PREFIX}{REAL_LINES[0]}"
    assert len(log.feed(good)) == 1
    assert log.feed("unable to retrieve container logs for containerd://abc") == []
    assert log.notes == ["unable to retrieve container logs for containerd://abc"]
    assert log.last.startswith("2026-12-02T14:09:24.860830000")
    # a re-read around the last line repeats it: the text keeps it once
    log.feed(good + f"\n2026-12-02T14:09:25Z {evmod.EVENT_PREFIX}{REAL_LINES[1]}")
    assert log.text.count(REAL_LINES[0]) == 1 and REAL_LINES[1] in log.text


@fast
@given(s.one_of(s.none(), json_values), s.one_of(s.none(), json_values), s.lists(json_values, max_size=4))
def test_state_of_api_objects_of_any_shape_never_raises(j, w, pods):
    pods = [p for p in pods if isinstance(p, dict)]
    j = j if isinstance(j, dict) or j is None else {"status": j}
    w = w if isinstance(w, dict) or w is None else None
    v = st.native_state(2, j, w, pods)
    assert v.native in st.STATE_TABLE
    st.update_times({}, {}, 2, j, w, pods, {})
    st.with_capacity(v, [{"cpu": "1"}])


@fast
@given(s.lists(s.integers(min_value=0, max_value=2000), max_size=12))
def test_a_followed_log_cut_anywhere_gives_the_same_events(cuts):
    from itertools import pairwise

    from harness.backends.k8s.logfollow import whole_lines
    body = "".join(f"2026-12-02T14:09:{24 + i // 10:02d}.{i:06d}Z {evmod.EVENT_PREFIX}{line}\n"
                   for i, line in enumerate(REAL_LINES[:30])).encode()
    bounds = sorted({0, len(body), *[c % (len(body) + 1) for c in cuts]})
    log = PodLog()
    followed = [e for text in whole_lines(body[a:b] for a, b in pairwise(bounds)) for e in log.feed(text)]
    whole = PodLog().feed(body.decode())
    assert [e["ts_ns"] for e in followed] == [e["ts_ns"] for e in whole] and len(whole) == 30
