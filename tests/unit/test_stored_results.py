"""The committed smoke campaign regenerates its report from the files alone, with no cluster."""
import csv
import re
from pathlib import Path

from harness.report.document import build

STORED = Path(__file__).parents[2] / "results" / "smoke-2026-12-02"


def test_committed_campaign_regenerates(tmp_path):
    paths = build(str(STORED), str(tmp_path / "report"))
    rows = list(csv.DictReader(paths["summary.csv"].read_text().splitlines()))
    by = {(r["platform"], r["metric"]): r for r in rows}
    for plat in ("local", "slurm", "k8s"):
        for metric in ("queue_s", "startup_s", "allreduce_busbw_gbps", "cost_per_step_usd", "recovery_s:kill_rank"):
            assert int(by[(plat, metric)]["n"]) >= 3, (plat, metric)
    for plat in ("slurm", "k8s"):
        for metric in ("recovery_s:lose_node", "queue_s:contention", "handover_s"):
            assert (plat, metric) in by, (plat, metric)
    assert ("k8s", "queue_admission_s:contention") in by
    assert paths["charts/contention.png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the regenerated report is the committed one: every number, interval and finding (all but the time it was made)
    for name in ("summary.csv", "comparisons.csv"):
        assert paths[name].read_text() == (STORED / "report" / name).read_text(), name
    stamp = re.compile(r"generated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")
    committed_md = (STORED / "report" / "report.md").read_text()
    assert stamp.search(committed_md)
    assert stamp.sub("", paths["report.md"].read_text()) == stamp.sub("", committed_md)
