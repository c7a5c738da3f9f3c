"""The report's scale-curve section (harness/report/scale_curve.py), from a small fixture campaign: a clean
run per platform and scale runs at 1, 2 and 3 nodes on Slurm and Kubernetes (one of them failed, one
size run twice), made from a stored run's record with the figures set to known values.

It shows per platform and size the medians with n, a chart of each figure against nodes, says that one
run a size is descriptive, and keeps the scale runs out of every other figure of the report."""
from __future__ import annotations

import copy
import csv
import json

import numpy as np
import pytest
from support.paths import FIXTURES
from support.report_rows import row, section

from harness.report import scale_curve as scalemod
from harness.report.document import build
from harness.report.table import from_records

TEMPLATE = next(r for r in map(json.loads, (FIXTURES / "local" / "runs.jsonl").read_text().splitlines())
                if r["status"] == "ok" and r["scenario"] == "clean")
# platform -> nodes -> (queue_s, startup_s, busbw, step_time_s) per run; the clean runs' are apart (nodes None)
FIGS = {
    "slurm": {None: [(0.5, 3.0, 1.0, 0.100)], 1: [(0.4, 2.0, None, 0.050)], 2: [(0.6, 3.1, 1.2, 0.101)],
              3: [(0.7, 3.5, 1.1, 0.110), (0.9, 3.9, 1.3, 0.130)]},
    "k8s": {None: [(1.5, 6.0, 0.9, 0.105)], 1: [(1.0, 5.0, None, 0.052)], 2: [(1.7, 6.2, 0.95, 0.106)],
            3: [(2.0, 7.0, 0.85, 0.120)]},
}


def _record(platform: str, nodes: int | None, rep: int, figs, samples: float | None = None) -> dict:
    r = copy.deepcopy(TEMPLATE)
    r["platform"] = platform
    r["scenario"] = "clean" if nodes is None else f"scale:{nodes}"
    r["run_id"] = f"{platform}-clean-01" if nodes is None else f"{platform}-scale-{nodes}n-{rep:02d}"
    m = r["metrics"]
    for name, v in zip(("queue_s", "startup_s", "allreduce_busbw_gbps", "step_time_s"), figs, strict=True):
        if v is None:
            m.pop(name, None)
        else:
            m[name] = {**m[name], "value": v, "lo": v, "hi": v}
    if samples is not None:
        m["samples_per_s"] = {"value": samples, "unit": "samples/s", "lo": samples, "hi": samples}
    return r


def _campaign(tmp_path, with_samples: bool = False, failed: bool = True, figs_of=FIGS):
    recs = []
    for plat, by in figs_of.items():
        for nodes, runs in by.items():
            for i, figs in enumerate(runs, start=1):
                samples = 64 * (nodes or 2) / figs[3] if with_samples else None
                recs.append(_record(plat, nodes, i, figs, samples))
    if failed:   # a 3-node Kubernetes run that did not succeed: counted among the size's runs, no figures
        bad = _record("k8s", 3, 2, (None, None, None, None))
        bad.update(status="failed", error={"stage": "queue", "type": "BackendError", "message": "never admitted"})
        bad.pop("metrics")
        recs.append(bad)
    d = tmp_path / "results" / "scale-fixture"
    d.mkdir(parents=True)
    (d / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return d.parent, recs


@pytest.fixture
def report(tmp_path):
    results, recs = _campaign(tmp_path)
    paths = build(str(results), str(tmp_path / "report"))
    return paths, paths["report.md"].read_text(), recs


def test_the_section_shows_the_medians_per_platform_and_size_with_n(report):
    _, md, _ = report
    sec = section(md, "Scale curve")
    print(sec)
    table = sec.split("\n\n")[2]
    assert table.splitlines()[0] == ("| platform | nodes | n | `queue_s` (s) | `startup_s` (s) | "
                                     "`allreduce_busbw_gbps` (GB/s) | `step_time_s` (s) |")
    assert row(table, "Slurm")[:3] == ["Slurm", "1", "1"]
    lines = [ln for ln in table.splitlines()[2:]]
    assert [ln.split(" | ")[:3] for ln in lines] == [
        ["| Slurm", "1", "1"], ["| Slurm", "2", "1"], ["| Slurm", "3", "2"],
        ["| Kubernetes", "1", "1"], ["| Kubernetes", "2", "1"], ["| Kubernetes", "3", "1 of 2"]]
    # the medians: Slurm's two 3-node runs give 0.8, 3.7, 1.2, 0.12; no busbw at 1 node
    assert "| Slurm | 3 | 2 | 0.8 | 3.70 | 1.20 | 0.12 |" in table
    assert "| Slurm | 1 | 1 | 0.4 | 2.00 | – | 0.05 |" in table
    assert "| Kubernetes | 3 | 1 of 2 | 2.00 | 7.00 | 0.85 | 0.12 |" in table
    assert "samples_per_s" not in sec   # no run recorded it
    assert "weak scaling" in sec and "kept out of every other section's figures" in sec
    assert "At most 2 runs per size and platform (as few as 1)" in sec and "draws no verdict" in sec
    assert "![Scale curve](charts/scale_curve.png)" in sec


def test_one_run_per_size_is_said_to_be_descriptive(tmp_path):
    one = copy.deepcopy(FIGS)
    one["slurm"][3] = one["slurm"][3][:1]   # one run a size
    results, _ = _campaign(tmp_path, failed=False, figs_of=one)
    sec = section(build(str(results), str(tmp_path / "rep"))["report.md"].read_text(), "Scale curve")
    assert "One run per size and platform: the table describes those runs." in sec
    assert "this section draws no verdict" in sec


def test_the_chart_is_drawn_and_in_its_section_only(report):
    paths, md, _ = report
    png = paths["charts/scale_curve.png"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert md.count("charts/scale_curve.png") == 1                     # not again under "Charts"
    assert section(md, "Charts").count("scale_curve") == 0
    assert paths["report.html"].read_text().count('alt="Scale curve"') == 1


def test_throughput_shows_where_the_runs_recorded_it(tmp_path):
    results, recs = _campaign(tmp_path, with_samples=True)
    t = from_records(recs)
    if "samples_per_s" not in t.values:
        pytest.skip("this harness's records carry no samples_per_s yet")
    sec = section(build(str(results), str(tmp_path / "rep"))["report.md"].read_text(), "Scale curve")
    assert "`samples_per_s` (samples/s)" in sec.splitlines()[4]
    assert "| Slurm | 2 | 1 | 0.6 | 3.10 | 1.20 | 0.101 | 1267 |" in sec


def test_the_scale_runs_stay_out_of_every_other_figure(report, tmp_path):
    paths, md, recs = report
    rows = list(csv.DictReader(paths["summary.csv"].read_text().splitlines()))
    by = {(r["platform"], r["metric"]): r for r in rows}
    # the headline's figures are the clean job's alone: one run per platform, its value
    for plat, clean in (("slurm", FIGS["slurm"][None][0]), ("k8s", FIGS["k8s"][None][0])):
        for name, v in zip(("queue_s", "startup_s", "allreduce_busbw_gbps", "step_time_s"), clean, strict=True):
            assert int(by[(plat, name)]["n"]) == 1 and float(by[(plat, name)]["median"]) == pytest.approx(v), name
    assert not any("scale" in r["metric"] for r in rows)
    # the other charts of the config's job: the timeline has a line per platform's clean run only
    assert "scale:" not in section(md, "Headline")
    t = from_records(recs)
    from harness.report.charts import config_job, representative
    assert [t.scenario[r] for r in representative(t)] == ["clean", "clean"]
    assert config_job(t).sum() == 2
    # the failed scale run is listed with the runs that did not succeed
    assert "`k8s-scale-3n-02` (failed) at stage `queue`: never admitted" in section(md, "Runs that did not succeed")


def test_no_scale_runs_no_section_and_no_chart(tmp_path):
    results, recs = _campaign(tmp_path, failed=False)
    clean_only = [r for r in recs if r["scenario"] == "clean"]
    (results / "scale-fixture" / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in clean_only))
    paths = build(str(results), str(tmp_path / "rep"))
    assert "## Scale curve" not in paths["report.md"].read_text() and "charts/scale_curve.png" not in paths
    assert not scalemod.applies(from_records(clean_only)) and scalemod.section(from_records(clean_only), None) == []


def test_points_read_the_size_from_the_scenario(tmp_path):
    _, recs = _campaign(tmp_path)
    pts = scalemod.points(from_records(recs))
    assert [(p.platform, p.nodes, p.runs, p.n) for p in pts] == [
        ("slurm", 1, 1, 1), ("slurm", 2, 1, 1), ("slurm", 3, 2, 2), ("k8s", 1, 1, 1), ("k8s", 2, 1, 1),
        ("k8s", 3, 2, 1)]
    assert np.isnan(pts[0].median("allreduce_busbw_gbps")) and pts[2].median("step_time_s") == pytest.approx(0.12)
    assert scalemod.nodes_of("scale:16") == 16 and scalemod.nodes_of("clean") is None
    assert scalemod.nodes_of("scale:x") is None

