"""Property tests: any generated trace is valid and round-trips; compress keeps every job valid; the
trace file and the sacct parsers answer any input with a Trace or a ConfigError, never a traceback.
"""
from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as s
from support.paths import FIXTURES

from harness.errors import ConfigError
from harness.scale import sacct
from harness.scale.synthetic import SyntheticParams, generate
from harness.scale.trace import NodeShape, Trace, TraceJob, compress, dumps, loads

fast = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

params = s.builds(
    SyntheticParams,
    nodes=s.integers(1, 300), gpus_per_node=s.integers(0, 8), hours=s.floats(0.5, 12),
    target_load=s.floats(0.05, 1.5), size_decay=s.floats(0.1, 2.0), partial_node_share=s.floats(0, 1),
    runtime_median_s=s.floats(30, 7200), runtime_sigma=s.floats(0, 2.5), day_amplitude=s.floats(0, 0.95),
    start_hour=s.floats(0, 24))


@fast
@given(params, s.integers(0, 2**32))
def test_a_generated_trace_is_valid_fits_its_cluster_and_round_trips(p, seed):
    t = generate(p, seed)
    assert all(1 <= j.nodes <= p.nodes and j.gpus_per_node <= p.gpus_per_node for j in t.jobs)
    assert all(1 <= j.runtime_s <= j.limit_s and 0 <= j.submit_s < t.duration_s for j in t.jobs)
    text = dumps(t)
    assert loads(text) == t and dumps(generate(p, seed)) == text


jobs = s.lists(s.builds(lambda sub, run, extra, nodes: (sub, run, run + extra, nodes),
                        s.integers(0, 10**6), s.integers(1, 10**5), s.integers(0, 10**5), s.integers(1, 64)),
               max_size=30)


@fast
@given(jobs, s.floats(0.01, 10_000))
def test_compress_keeps_every_job_valid_and_in_order(rows, factor):
    t = Trace(name="p", source="p", duration_s=10**6, shape=NodeShape(nodes=64, gpus_per_node=8),
              jobs=tuple(TraceJob(id=str(i), submit_s=sub, tenant="a", nodes=n, gpus_per_node=8, limit_s=lim,
                                  runtime_s=run) for i, (sub, run, lim, n) in enumerate(rows)))
    c = compress(t, factor)
    assert [j.id for j in c.jobs] == [j.id for j in t.jobs]          # the order survives rounding
    assert all(1 <= j.runtime_s <= j.limit_s for j in c.jobs)
    assert all(abs(a.submit_s - b.submit_s / factor) <= 0.5 for a, b in zip(c.jobs, t.jobs, strict=True))
    assert loads(dumps(c)) == c


json_values = s.recursive(s.none() | s.booleans() | s.integers() | s.floats() | s.text(max_size=10),
                          lambda kids: s.lists(kids, max_size=3) | s.dictionaries(s.text(max_size=10), kids,
                                                                                   max_size=4), max_leaves=12)
JOB_KEYS = ["id", "submit_s", "tenant", "nodes", "gpus_per_node", "limit_s", "runtime_s", "qos"]


@fast
@given(s.lists(s.dictionaries(s.sampled_from(JOB_KEYS), json_values | s.integers(0, 100), max_size=8), max_size=4))
def test_any_job_lines_give_a_trace_or_a_config_error(lines):
    head = dumps(Trace(name="p", source="p", duration_s=1000)).replace('"jobs":0', f'"jobs":{len(lines)}')
    text = head + "".join(json.dumps(x) + "\n" for x in lines)
    try:
        loads(text)
    except ConfigError as e:
        assert e.message.startswith("<trace>:")


@fast
@given(s.text(max_size=300))
def test_any_text_gives_a_trace_or_a_config_error(text):
    for parse in (loads, sacct.parse_json, lambda x: sacct.parse_pipe(x, tz="UTC")):
        try:
            parse(text)
        except ConfigError:
            pass


RECORDED = json.loads((FIXTURES / "scale" / "sacct" / "sacct.json").read_text())
SACCT_KEYS = ["job_id", "time", "allocation_nodes", "tres", "state", "array", "het", "user", "account", "qos"]


@fast
@given(s.lists(s.tuples(s.integers(0, len(RECORDED["jobs"]) - 1), s.sampled_from(SACCT_KEYS), json_values),
               max_size=4))
def test_recorded_json_with_fields_of_the_wrong_type_gives_a_trace_or_a_config_error(damage):
    doc = json.loads(json.dumps(RECORDED))
    for n, key, value in damage:
        doc["jobs"][n][key] = value
    try:
        sacct.parse_json(json.dumps(doc))
    except ConfigError:
        pass
