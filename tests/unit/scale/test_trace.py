"""The trace model, its JSON Lines file, compress and summary."""
from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from harness.errors import ConfigError
from harness.scale.trace import (
    NodeShape,
    Trace,
    TraceJob,
    compress,
    dumps,
    load,
    loads,
    save,
    size_class,
    summary,
)

SHAPE = NodeShape(nodes=8, gpus_per_node=4)


def job(id: str, submit: int, nodes: int = 1, runtime: int = 100, limit: int = 200, gpus: int = 4,
        tenant: str = "a", qos: str = "normal") -> TraceJob:
    return TraceJob(id=id, submit_s=submit, tenant=tenant, nodes=nodes, gpus_per_node=gpus, limit_s=limit,
                    runtime_s=runtime, qos=qos)


def small() -> Trace:
    return Trace(name="t", source="hand-made", shape=SHAPE, duration_s=1000,
                 jobs=(job("b", 30, nodes=2, tenant="b"), job("a", 10), job("c", 30, nodes=8, runtime=50)))


def test_jobs_are_sorted_by_submit_and_ties_keep_their_order():
    assert [j.id for j in small().jobs] == ["a", "b", "c"]


def test_jsonl_round_trip_is_equal_and_byte_stable(tmp_path):
    t = small()
    save(t, tmp_path / "t.jsonl")
    back = load(tmp_path / "t.jsonl")
    assert back == t
    assert (tmp_path / "t.jsonl").read_text() == dumps(back)
    head, *rows = dumps(t).splitlines()
    assert json.loads(head)["format"] == "poc-scale-trace" and json.loads(head)["jobs"] == 3
    assert [json.loads(r)["id"] for r in rows] == ["a", "b", "c"]


def test_params_tuples_become_lists_so_a_loaded_trace_is_equal():
    t = Trace(name="t", source="s", duration_s=1, params={"menu": (1, 2)})
    assert t.params == {"menu": [1, 2]} and loads(dumps(t)) == t


def test_a_job_may_not_run_past_its_limit():
    with pytest.raises(ValidationError, match="over limit_s"):
        job("x", 0, runtime=201, limit=200)


def test_a_trace_refuses_a_job_its_cluster_cannot_hold():
    with pytest.raises(ValidationError, match="9 nodes"):
        Trace(name="t", source="s", shape=SHAPE, duration_s=10, jobs=(job("x", 0, nodes=9),))
    with pytest.raises(ValidationError, match="GPUs per node"):
        Trace(name="t", source="s", shape=SHAPE, duration_s=10, jobs=(job("x", 0, gpus=8),))
    Trace(name="t", source="s", duration_s=10, jobs=(job("x", 0, nodes=9),))   # no shape: no such limit


def _break(line_no: int, **change) -> str:
    """small()'s file with line ``line_no`` (1 = header) changed."""
    lines = dumps(small()).splitlines()
    obj = json.loads(lines[line_no - 1])
    obj.update(change)
    lines[line_no - 1] = json.dumps(obj)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("line", "change", "says"), [
    (2, {"submit_s": -5}, "submit_s: Input should be greater than or equal to 0"),
    (3, {"runtime_s": -1}, "runtime_s: Input should be greater than or equal to 1"),
    (3, {"limit_s": 0}, "limit_s: Input should be greater than or equal to 1"),
    (4, {"runtime_s": 500}, "over limit_s 200"),
    (4, {"nodes": 9}, "asks for 9 nodes and the trace's cluster has 8"),
    (2, {"gpus_per_node": 5}, "asks for 5 GPUs per node"),
    (3, {"id": "a"}, "job id 'a' appears twice"),
    (3, {"nodes": "2"}, "nodes: Input should be a valid integer"),
    (2, {"colour": "red"}, "colour: Extra inputs are not permitted"),
    (4, {"submit_s": 5000}, "after the trace's duration_s 1000"),
    (1, {"duration_s": 0}, "header: duration_s"),
    (1, {"version": 2}, "version 2"),
])
def test_each_validation_error_names_its_line(line, change, says):
    with pytest.raises(ConfigError) as e:
        loads(_break(line, **change), where="t.jsonl")
    assert e.value.message.startswith(f"t.jsonl:{line}: ") and says in e.value.message
    assert e.value.tip


def test_a_line_that_is_not_json_names_its_line():
    text = dumps(small()).replace('{"id":"b"', '{"id":"b",,', 1)
    with pytest.raises(ConfigError, match=r"^t\.jsonl:3: not JSON"):
        loads(text, where="t.jsonl")
    with pytest.raises(ConfigError, match=r"^t\.jsonl:2: a line must be a JSON object"):
        loads(dumps(small()).replace('{"id":"a"', '[1]\n{"id":"a"', 1), where="t.jsonl")


def test_a_cut_or_headerless_file_is_refused(tmp_path):
    text = dumps(small())
    with pytest.raises(ConfigError, match="header says 3 jobs and the file has 2"):
        loads("\n".join(text.splitlines()[:3]))
    with pytest.raises(ConfigError, match=":1: not a trace header"):
        loads("\n".join(text.splitlines()[1:]))
    with pytest.raises(ConfigError, match="empty trace file"):
        loads("\n\n")
    with pytest.raises(ConfigError, match="cannot read trace"):
        load(tmp_path / "missing.jsonl")


def test_compress_divides_every_time_alike_and_records_the_factor():
    t = Trace(name="t", source="s", duration_s=3600, shape=SHAPE,
              jobs=(job("a", 0, runtime=600, limit=1200), job("b", 1800, runtime=3, limit=60),
                    job("c", 3599, runtime=1, limit=2)))
    c = compress(t, 10)
    assert [(j.submit_s, j.runtime_s, j.limit_s) for j in c.jobs] == [(0, 60, 120), (180, 1, 6), (360, 1, 1)]
    assert c.duration_s == 360 and c.compression == 10 and c.shape == SHAPE
    assert "2 run time(s) under 1 s kept at 1 s" in c.notes[-1]
    assert compress(c, 2).compression == 20 and len(compress(c, 2).notes) == 2
    assert compress(t, 1).jobs == t.jobs


def test_compress_rounds_half_up_not_to_even():
    t = Trace(name="t", source="s", duration_s=100, jobs=(job("a", 5, runtime=5, limit=15), job("b", 15)))
    assert [(j.submit_s, j.runtime_s, j.limit_s) for j in compress(t, 10).jobs] == [(1, 1, 2), (2, 10, 20)]


@pytest.mark.parametrize("bad", [0, -2, float("inf"), float("nan"), "2"])
def test_compress_refuses_a_factor_that_is_not_a_positive_number(bad):
    with pytest.raises(ConfigError, match="positive number"):
        compress(small(), bad)


def test_size_classes_are_fixed_node_counts():
    assert [size_class(n) for n in (1, 2, 8, 9, 64, 65, 1000)] == ["1", "2-8", "2-8", "9-64", "9-64", ">64", ">64"]


def test_summary_counts_sizes_load_and_tenant_shares():
    s = summary(small())
    assert s.jobs == 3 and s.sizes == {"1": 1, "2-8": 2, "9-64": 0, ">64": 0}
    node_s = 1 * 100 + 2 * 100 + 8 * 50
    assert s.node_load == pytest.approx(node_s / (8 * 1000))
    assert s.node_load_requested == pytest.approx((1 * 200 + 2 * 200 + 8 * 200) / (8 * 1000))
    assert s.gpu_load == pytest.approx(node_s * 4 / (32 * 1000))
    assert s.tenants["a"].jobs == 2 and s.tenants["a"].node_share == pytest.approx(500 / 700)
    assert s.tenants["b"].gpu_share == pytest.approx(200 / 700)
    assert any("offered load" in line for line in s.lines())


def test_summary_without_a_shape_has_no_load_unless_given_one():
    t = small().model_copy(update={"shape": None})
    assert summary(t).node_load is None and summary(t).lines()[2].startswith("offered load: nodes n/a")
    assert summary(t, NodeShape(nodes=16, gpus_per_node=0)).gpu_load is None
    assert summary(t, NodeShape(nodes=16, gpus_per_node=0)).node_load == pytest.approx(700 / 16000)


def test_a_deep_line_a_huge_file_or_bytes_that_are_not_utf8_are_refused_by_name(tmp_path, monkeypatch):
    from harness.scale import trace as tr

    deep = dumps(small()).replace('{"id":"b"', "[" * 100_000 + "]" * 100_000 + '\n{"id":"b"', 1)
    with pytest.raises(ConfigError, match=r"^t\.jsonl:3: nested too deep to be a trace line"):
        loads(deep, where="t.jsonl")
    path = tmp_path / "t.jsonl"
    path.write_bytes(dumps(small()).encode() + b"\xff\n")
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        load(path)
    monkeypatch.setattr(tr, "MAX_TRACE_BYTES", 100)
    with pytest.raises(ConfigError, match="is over 0 MiB; not read"):
        load(path)
