"""The committed smoke campaign regenerates its report from the files alone, with no cluster."""
import csv
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
    assert (STORED / "report" / "charts" / "contention.png").exists() and "charts/contention.png" in paths
    # the regenerated numbers are the committed ones
    committed = {(r["platform"], r["metric"]): r for r in
                 csv.DictReader((STORED / "report" / "summary.csv").read_text().splitlines())}
    assert {k: v["median"] for k, v in by.items()} == {k: v["median"] for k, v in committed.items()}
