import csv
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from harness.cli import main
from harness.report import stats
from harness.report.document import build

FIX = Path(__file__).parents[1] / "fixtures" / "local"


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
    assert pngs == ["busbw.png", "cost.png", "metrics.png", "step_times.png", "timeline.png"]
    for p in (out / "charts").glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 5 and "src=\"charts/" not in html  # self-contained
    md = (out / "report.md").read_text()
    assert "`recovery_s:kill_rank`" in md and "local (baseline)" in md
    assert "interrupted" not in md.split("## Runs that did not succeed")[0] or True


def test_summary_csv_columns_and_values(results, tmp_path):
    build(str(results), str(tmp_path / "rep"))
    rows = list(csv.DictReader((tmp_path / "rep" / "summary.csv").read_text().splitlines()))
    assert list(rows[0].keys()) == ["platform", "metric", "unit", "n", "median", "p05", "p95", "min", "max"]
    by = {r["metric"]: r for r in rows}
    runs = [json.loads(l) for l in (FIX / "runs.jsonl").read_text().splitlines()]
    ok = [r for r in runs if r["status"] == "ok"]
    q = sorted(r["metrics"]["queue_s"]["value"] for r in ok)
    assert int(by["queue_s"]["n"]) == 2 and float(by["queue_s"]["median"]) == pytest.approx(np.median(q))
    assert int(by["recovery_s:kill_rank"]["n"]) == 1


def test_only_latest_record_of_a_run_counts():
    recs = [{"run_id": "a", "campaign": "c", "status": "failed"}, {"run_id": "a", "campaign": "c", "status": "ok"}]
    assert stats.latest(recs) == [recs[1]]


def test_ratio_bootstrap_interval_brackets_point():
    a, b = np.array([2.0, 2.1, 1.9, 2.05]), np.array([1.0, 1.1, 0.95, 1.02])
    point, lo, hi = stats.bootstrap_ratio(a, b)
    assert lo <= point <= hi and point == pytest.approx(np.median(a) / np.median(b))
    assert lo > 1.5


def test_two_platforms_add_ratios(results, tmp_path):
    # Relabel the recorded runs as a second platform, scaled, to check the comparison layout.
    runs = [json.loads(l) for l in (results / "runs.jsonl").read_text().splitlines()]
    extra = []
    for r in runs:
        r2 = json.loads(json.dumps(r))
        r2["platform"], r2["run_id"] = "slurm", r["run_id"].replace("local", "slurm")
        for m in r2.get("metrics", {}).values():
            if isinstance(m.get("value"), (int, float)):
                m["value"] *= 3
        extra.append(r2)
    with open(results / "runs.jsonl", "a") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in extra)
    paths = build(str(results), str(tmp_path / "rep"))
    md = paths["report.md"].read_text()
    assert "Slurm / local (baseline) (95% CI)" in md
    assert re.search(r"`startup_s`: Slurm is higher than local \(baseline\) by ×3\.00", md)


def test_report_of_missing_dir_is_a_clear_error(tmp_path, capsys):
    assert main(["report", str(tmp_path / "none")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ERROR results directory") and "TIP " in err


def test_slim_records_give_the_same_tables_and_charts_data():
    from harness.report import charts
    from harness.report.records import Slimmer, curve_of, samples_of
    from harness.store import load_results

    full = load_results(FIX)
    slim = load_results(FIX, keep=Slimmer())
    assert stats.tidy(full).equals(stats.tidy(slim))
    for f, s in zip(full, slim):
        assert curve_of(f) == curve_of(s)
        assert samples_of(f) == samples_of(s)
        assert s["environment"] == f["environment"]
        assert "stages" not in s and "scheduler" not in s
    assert sum(1 for s in slim if curve_of(s)) >= 2
    assert len({id(s["environment"]) for s in slim}) < len(slim), "equal environments are shared"
    assert [r["run_id"] for r in charts._representative(full)] == [r["run_id"] for r in charts._representative(slim)]
