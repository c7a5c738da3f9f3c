"""A run the harness itself broke (status harness_error, error.origin "harness") is no platform's failure."""
import json

import pytest
from support.paths import FIXTURES

from harness.report import sections, table
from harness.report.document import HARNESS_ERRORS, build

FIX = FIXTURES / "local"
OK = [r for r in map(json.loads, (FIX / "runs.jsonl").read_text().splitlines()) if r["status"] == "ok"]


def _record(run_id: str, status: str, origin: str | None, message: str, type_: str = "BackendError") -> dict:
    rec = {k: v for k, v in OK[0].items() if k not in ("metrics", "timeline")}
    error = {"stage": "observe", "type": type_, "message": message, "tip": None}
    if origin:
        error["origin"] = origin
    return {**rec, "run_id": run_id, "status": status, "error": error}


@pytest.fixture
def campaign(tmp_path):
    runs = OK + [
        _record("local-clean-02", "harness_error", "harness", "'ts_ns'\nsecond line", "KeyError"),
        _record("local-clean-03", "failed", "platform", "job ended failed"),
        # an older writer's record: status failed, but the error names the harness as its origin
        _record("local-clean-04", "failed", "harness", "'NoneType' object has no attribute 'pid'",
                "AttributeError"),
    ]
    d = tmp_path / "smoke"
    d.mkdir()
    (d / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    return d


def test_harness_errors_are_listed_apart_and_not_counted_against_the_platform(campaign, tmp_path):
    paths = build(str(campaign), str(tmp_path / "rep"))
    md = paths["report.md"].read_text()
    # 2 ok and 1 platform failure; the two harness errors count for no platform
    assert "runs: local (baseline) 2 ok / 1 not ok · 2 harness error(s), not counted against any platform" in md
    failed_part = md.split("## Runs that did not succeed\n")[1].split("\n## ")[0]
    assert "`local-clean-03` (failed) at stage `observe`: job ended failed" in failed_part
    assert "local-clean-02" not in failed_part and "local-clean-04" not in failed_part
    harness_part = md.split(f"## {HARNESS_ERRORS}\n")[1].split("\n## ")[0]
    assert "- `local-clean-02` (local (baseline)) at stage `observe`: KeyError: 'ts_ns'" in harness_part
    assert "- `local-clean-04` (local (baseline)) at stage `observe`: AttributeError: 'NoneType' object" in harness_part
    assert "local-clean-03" not in harness_part
    html = paths["report.html"].read_text()
    assert f"<h2>{HARNESS_ERRORS}</h2>" in html and "local-clean-02" in html.split(HARNESS_ERRORS)[1]


def test_counts_leave_harness_errors_out(campaign):
    t = table.read(str(campaign))
    assert sections.counts(t) == {"local": {"ok": 2, "failed": 1, "interrupted": 0}}
    assert [r.run_id for r in sections.harness_errors(t)] == ["local-clean-02", "local-clean-04"]
    assert [r.run_id for r in sections.failed(t)] == ["local-clean-03"]


def test_a_platform_failure_with_no_origin_stays_the_platforms():
    rec = table.from_records([_record("local-clean-05", "failed", None, "node lost")])
    assert sections.counts(rec) == {"local": {"ok": 0, "failed": 1, "interrupted": 0}}
    assert sections.harness_errors(rec) == []
