"""The run table against the plain reading of the same records: latest record per run, report order,
environment settings and facts, per-run values. Retries, platforms and environments are drawn at random."""
import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.report import sections, table
from harness.report.table import SETTING_KEYS_SKIP

SCALARS = st.one_of(st.none(), st.just(""), st.sampled_from(["a", "b", "2.6.0", "2.7.0"]), st.integers(0, 2))
ENVS = st.tuples(
    st.dictionaries(st.sampled_from(["torch", "gpus_visible", "harness_host", "scheduler", "cuda"]), SCALARS),
    st.dictionaries(st.just("nodes"), st.one_of(st.just([]), st.just({}), st.lists(st.sampled_from(["n1", "n2"]))))
).map(lambda pair: {**pair[0], **pair[1]})
RECORDS = st.lists(st.fixed_dictionaries({
    "run_id": st.sampled_from(["r1", "r2", "r3", "r4", "r5"]),
    "campaign": st.sampled_from(["c", "d"]),
    "platform": st.sampled_from(["local", "slurm", "k8s"]),
    "status": st.sampled_from(["ok", "failed", "interrupted"]),
    "value": st.one_of(st.just("absent"), st.none(), st.floats(0, 100)),   # None: an explicit null
    "environment": ENVS,
}), max_size=25)


def _stored(r: dict) -> dict:
    rec = {"schema": 1, **{k: v for k, v in r.items() if k != "value"}}
    if r["value"] != "absent":
        # a null after a number in the record's metrics: the number must stay in its place
        rec["metrics"] = {"queue_s": {"value": 1.5, "unit": "s", "sources": {}, "detail": {}},
                          "startup_s": {"value": r["value"], "unit": "s", "sources": {}, "detail": {}}}
    return rec


def _latest(runs: list[dict]) -> list[dict]:
    by_key: dict[tuple, dict] = {}
    for r in runs:
        by_key[(r.get("campaign"), r["run_id"])] = r
    return list(by_key.values())


def _settings(latest: list[dict]) -> dict[str, dict]:
    per: dict[str, dict] = {}
    for r in latest:
        d = per.setdefault(r["platform"], {})
        for k, v in r["environment"].items():
            if k in SETTING_KEYS_SKIP or v in (None, "", [], {}):
                continue
            d.setdefault(k, v)
    return per


@settings(max_examples=300, deadline=None)
@given(RECORDS)
def test_table_reads_records_as_their_plain_reading_does(records):
    runs = [_stored(r) for r in records]
    t = table.from_records(runs)
    want = _latest(runs)
    assert [(r["campaign"], r["run_id"]) for r in want] == list(zip(t.campaign, t.run_id, strict=True))
    assert [r["status"] for r in want] == [t.status[i] for i in range(len(t))]
    assert [r["platform"] for r in want] == [t.platform[i] for i in range(len(t))]
    for name in ("queue_s", "startup_s"):
        assert [r.get("metrics", {}).get(name, {}).get("value") for r in want] == [
            None if np.isnan(v) else v for v in t.values[name].tolist()]
    # the settings shown: same facts, same values, in the same order
    got = {p: list(d.items()) for p, d in t.settings.items() if p in set(t.platform.names[c] for c in t.platform.codes)}
    assert got == {p: list(d.items()) for p, d in _settings(want).items()}
    assert bool(t.gpus_visible.any()) == any(r["environment"].get("gpus_visible") for r in want)
    assert {h for h in t.harness_host if h} == {r["environment"].get("harness_host") for r in want
                                               if r["environment"].get("harness_host")}


def test_a_retry_that_replaces_the_record_a_setting_came_from_is_read_again(tmp_path):
    # r1's first record gave `scheduler`; its retry does not have it, so the next run's value shows
    runs = [{"schema": 1, "run_id": "r1", "platform": "slurm", "status": "failed",
             "environment": {"scheduler": "from-the-failed-attempt", "torch": "2.6"}},
            {"schema": 1, "run_id": "r2", "platform": "slurm", "status": "ok",
             "environment": {"scheduler": "slurm 25.05", "torch": "2.7"}},
            {"schema": 1, "run_id": "r1", "platform": "slurm", "status": "ok", "environment": {"torch": "2.7"}}]
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    t = table.read(str(tmp_path))
    assert t.settings == {"slurm": {"torch": "2.7", "scheduler": "slurm 25.05"}}
    assert not any("Different torch builds" in c for c in sections.caveats(t))
