import csv
import json
import re
import shutil

import numpy as np
import pytest
from support.paths import FIXTURES
from support.tidy_rows import tidy

from harness.cli import main
from harness.errors import StoreError
from harness.report import stats, table
from harness.report.bootstrap import bootstrap_ratio
from harness.report.document import build
from harness.report.records import DERIVED, PHASES, SETTING_FREE

FIX = FIXTURES / "local"
FIX_RUNS = [json.loads(line) for line in (FIX / "runs.jsonl").read_text().splitlines()]


@pytest.fixture
def results(tmp_path):
    d = tmp_path / "results" / "smoke"
    d.mkdir(parents=True)
    shutil.copy(FIX / "runs.jsonl", d / "runs.jsonl")
    return d


def test_report_writes_four_outputs(results, tmp_path):
    out = tmp_path / "rep"
    assert main(["report", str(results), "--out", str(out), "--quiet"]) == 0
    for name in ("report.md", "report.html", "summary.csv"):
        assert (out / name).stat().st_size > 0
    pngs = sorted(p.name for p in (out / "charts").glob("*.png"))
    assert pngs == ["busbw.png", "cost.png", "decision.png", "metrics.png", "step_times.png", "timeline.png"]
    for p in (out / "charts").glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 6 and "src=\"charts/" not in html  # self-contained
    md = (out / "report.md").read_text()
    assert "`recovery_s:kill_rank`" in md and "local (baseline)" in md


def test_a_retried_run_counts_once_by_its_last_record(results, tmp_path):
    # The fixture's local-kill-rank-01 was interrupted, then retried with --resume and succeeded:
    # the report counts one ok run and shows the interrupted attempt nowhere.
    assert [(r["run_id"], r["status"]) for r in FIX_RUNS][::2] == [("local-kill-rank-01", "interrupted"),
                                                                    ("local-kill-rank-01", "ok")]
    md = build(str(results), str(tmp_path / "rep"))["report.md"].read_text()
    assert "runs: local (baseline) 2 ok / 0 not ok" in md
    assert "## Runs that did not succeed" not in md and "interrupted" not in md


def test_summary_csv_columns_and_values(results, tmp_path):
    build(str(results), str(tmp_path / "rep"))
    rows = list(csv.DictReader((tmp_path / "rep" / "summary.csv").read_text().splitlines()))
    assert list(rows[0].keys()) == ["platform", "metric", "unit", "n", "median", "uncertainty", "p05", "p95", "min",
                                    "max"]
    by = {r["metric"]: r for r in rows}
    ok = [r for r in FIX_RUNS if r["status"] == "ok"]
    q = sorted(r["metrics"]["queue_s"]["value"] for r in ok)
    assert int(by["queue_s"]["n"]) == 2 and float(by["queue_s"]["median"]) == pytest.approx(np.median(q))
    assert int(by["recovery_s:kill_rank"]["n"]) == 1


def test_only_latest_record_of_a_run_counts_and_keeps_its_first_place():
    recs = [{"schema": 1, "run_id": "a", "campaign": "c", "platform": "local", "status": "failed"},
            {"schema": 1, "run_id": "b", "campaign": "c", "platform": "local", "status": "ok"},
            {"schema": 1, "run_id": "a", "campaign": "c", "platform": "local", "status": "ok"},
            {"schema": 1, "run_id": "a", "campaign": "other", "platform": "local", "status": "failed"}]
    t = table.from_records(recs)
    assert list(zip(t.run_id, t.campaign, [t.status[i] for i in range(len(t))], strict=True)) == [
        ("a", "c", "ok"), ("b", "c", "ok"), ("a", "other", "failed")]


def test_table_holds_what_the_records_hold():
    t = table.read(str(FIX))
    ok = [FIX_RUNS[2], FIX_RUNS[1]]   # the interrupted attempt's place, its retry's record
    assert t.run_id == [r["run_id"] for r in ok]
    for i, r in enumerate(ok):
        m = r["metrics"]
        assert t.curve_bytes.of(i).tolist() == [p["bytes"] for p in m["allreduce_busbw_gbps"]["detail"]["curve"]]
        assert t.curve_busbw.of(i).tolist() == [p["busbw_gbps"] for p in m["allreduce_busbw_gbps"]["detail"]["curve"]]
        assert t.samples.of(i).tolist() == m["step_time_s"]["detail"]["samples"]
        assert {p: v for p, v in zip(PHASES, t.timeline[i].tolist(), strict=True) if not np.isnan(v)} == r["timeline"]
        for name in (stats.ANY_SCENARIO | stats.BY_SCENARIO) - set(SETTING_FREE):
            want = m[name]["value"] if name in m else None
            if name in DERIVED:   # added up by the report, not stored
                want = sum(m[part]["value"] for part in DERIVED[name])
            got = t.values[name][i]
            assert (np.isnan(got) and want is None) or got == want, name
    # the setting-free recovery: the baseline's own recovery_s (no cluster setting in its path), NaN elsewhere
    free = {t.run_id[i]: v for i, v in enumerate(t.values["recovery_free_s"].tolist()) if not np.isnan(v)}
    assert free == {r["run_id"]: r["metrics"]["recovery_s"]["value"] for r in ok
                    if r["platform"] == "local" and r.get("faults") and "recovery_s" in r["metrics"]}
    assert t.settings["local"]["torch"] == ok[0]["environment"]["torch"]
    assert "harness_host" not in t.settings["local"]


def test_groups_hold_one_value_per_run_and_metric():
    rows = tidy(FIX_RUNS)
    ok = [r for r in FIX_RUNS if r["status"] == "ok"]
    derived = sum(all(p in r["metrics"] for p in parts) for r in ok for parts in DERIVED.values())
    derived += sum(r["platform"] == "local" and bool(r.get("faults")) and "recovery_s" in r["metrics"] for r in ok)
    assert len(rows) == sum(len(r["metrics"]) for r in ok) + derived
    assert {r["run_id"] for r in rows if r["metric"] == "recovery_s:kill_rank"} == {"local-kill-rank-01"}
    row = next(r for r in rows if r["run_id"] == "local-clean-01" and r["metric"] == "startup_s")
    assert row["value"] == ok[0]["metrics"]["startup_s"]["value"] and row["unit"] == "s"


def test_ratio_bootstrap_interval_brackets_point():
    a, b = np.array([2.0, 2.1, 1.9, 2.05]), np.array([1.0, 1.1, 0.95, 1.02])
    point, lo, hi = bootstrap_ratio(a, b)
    assert lo <= point <= hi and point == pytest.approx(np.median(a) / np.median(b))
    assert lo > 1.5


def test_two_platforms_add_ratios(results, tmp_path):
    # The recorded clean run six times per platform, spread a little, the second platform 3x slower,
    # to check the comparison layout (MIN_N runs a side at least, or there is no verdict).
    clean = next(r for r in FIX_RUNS if r["status"] == "ok" and r["scenario"] == "clean")
    runs = []
    for plat, scale in (("local", 1), ("slurm", 3)):
        for i in range(6):
            r = json.loads(json.dumps(clean))
            r["platform"], r["run_id"] = plat, f"{plat}-clean-{i:02d}"
            for m in r["metrics"].values():
                if isinstance(m.get("value"), (int, float)):
                    m["value"] *= scale * (1 + i / 100)
            runs.append(r)
    (results / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    paths = build(str(results), str(tmp_path / "rep"))
    md = paths["report.md"].read_text()
    assert "Slurm / local (baseline) (95% CI)" in md
    assert re.search(r"`startup_s`: Slurm is higher than local \(baseline\) by ×3\.00 .*exact rank-sum test "
                     r"\(unpaired\), p = 0\.0022, Holm-adjusted 0\.0[0-9]+ \(against the no-scheduler baseline\); "
                     r"advantage local \(baseline\)", md)


def test_report_of_missing_dir_is_a_clear_error(tmp_path, capsys):
    assert main(["report", str(tmp_path / "none")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ERROR results directory") and "TIP " in err


def test_a_record_of_the_wrong_shape_is_a_clear_error(results, capsys):
    rec = json.loads((results / "runs.jsonl").read_text().splitlines()[1])
    rec["metrics"]["queue_s"]["value"] = "fast"
    with open(results / "runs.jsonl", "a") as fh:
        fh.write(json.dumps(rec) + "\n")
    assert main(["report", str(results)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"ERROR {results / 'runs.jsonl'}: line 4: ") and "$.metrics.queue_s.value" in err
    assert "TIP " in err and "Traceback" not in err


def test_a_line_torn_anywhere_is_skipped_with_a_warning_and_the_rest_is_read(results, tmp_path, capsys):
    text = (results / "runs.jsonl").read_text()
    first, rest = text.split("\n", 1)
    # a blank line anywhere is skipped silently; a torn line (a crash, a full disk) with a warning
    (results / "runs.jsonl").write_text(first + "\n\n" + rest + '{"schema": 1, "run_id": "local-clean-09", "sta')
    assert table.read(str(results)).run_id == ["local-kill-rank-01", "local-clean-01"]
    assert capsys.readouterr().err.count("line 5 is not a JSON record") == 1     # said once
    (results / "runs.jsonl").write_text(text + '{"schema": 1, "run_id": "local-clean-09", "sta\n\n')
    assert table.read(str(results)).run_id == ["local-kill-rank-01", "local-clean-01"]
    assert "line 4 is not a JSON record" in capsys.readouterr().err
    (results / "runs.jsonl").write_text("not json\n" + text)
    assert table.read(str(results)).run_id == ["local-kill-rank-01", "local-clean-01"]
    err = capsys.readouterr().err
    assert err.startswith(f"WARNING {results / 'runs.jsonl'}: line 1 is not a JSON record"), err
    (results / "runs.jsonl").write_text(text.replace('"schema":1', '"schema":2', 1))
    with pytest.raises(StoreError, match="line 1 has schema 2"):
        table.read(str(results))
