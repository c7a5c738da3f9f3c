"""The committed smoke campaigns regenerate their reports from the files alone, with no cluster; the
issue-10 campaign also re-derives every stored metric from its raw evidence with no mismatch."""
import csv
import re
from pathlib import Path

import pytest

from harness import provenance, rederive
from harness.report.document import build
from harness.store import load_results

RESULTS = Path(__file__).parents[2] / "results"
OLD, NEW = RESULTS / "smoke-2026-12-02", RESULTS / "smoke-2026-12-03"


@pytest.mark.parametrize("stored", [OLD, NEW], ids=lambda p: p.name)
def test_committed_campaign_regenerates(tmp_path, stored):
    paths = build(str(stored), str(tmp_path / "report"))
    rows = list(csv.DictReader(paths["summary.csv"].read_text().splitlines()))
    by = {(r["platform"], r["metric"]): r for r in rows}
    clean_n = 3 if stored == OLD else 8
    for plat in ("local", "slurm", "k8s"):
        for metric in ("queue_s", "startup_s", "allreduce_busbw_gbps", "cost_per_step_usd"):
            assert int(by[(plat, metric)]["n"]) >= clean_n, (plat, metric)
        assert int(by[(plat, "recovery_s:kill_rank")]["n"]) >= 3, plat
    for plat in ("slurm", "k8s"):
        for metric in ("recovery_s:lose_node", "queue_s:contention", "handover_s"):
            assert (plat, metric) in by, (plat, metric)
    assert ("k8s", "queue_admission_s:contention") in by
    assert paths["charts/contention.png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the regenerated report is the committed one: every number, interval and finding (all but the time it was made)
    for name in ("summary.csv", "comparisons.csv"):
        assert paths[name].read_text() == (stored / "report" / name).read_text(), name
    stamp = re.compile(r"generated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")
    committed_md = (stored / "report" / "report.md").read_text()
    assert stamp.search(committed_md)
    assert stamp.sub("", paths["report.md"].read_text()) == stamp.sub("", committed_md)


def test_new_campaign_rederives_from_its_raw_evidence_alone():
    checks = rederive.check(NEW)
    totals = rederive.totals(checks)
    assert rederive.passed(checks), rederive.table(checks)[-3000:]
    assert totals["mismatches"] == 0 and totals["runs_checked"] >= 30, totals


def test_new_campaign_baseline_and_clusters_ran_one_torch_build():
    runs = [r for r in load_results(NEW) if r.get("status") == "ok"]
    builds = {r["platform"]: r["environment"]["build"] for r in runs}
    assert set(builds) == {"local", "slurm", "k8s"}
    assert all(provenance.same_build(r["environment"]["build"], builds["local"]) for r in runs)
    assert "debian" in builds["local"]["torch"]
    # every figure carries its interval, and every run its raw evidence's stamps
    for r in runs:
        for name in ("queue_s", "startup_s", "allreduce_busbw_gbps", "cost_per_step_usd"):
            m = r["metrics"][name]
            assert m["lo"] <= m["value"] <= m["hi"] and m["uncertainty"] >= 0, (r["run_id"], name)
        assert r["scheduler"]["stamps"]["submitted"]["source"], r["run_id"]
