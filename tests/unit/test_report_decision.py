"""The decision summary that opens the report: ten criteria, verdicts only where compare.py drew them,
"not measured" where the campaign has no data, and a reading built from the rows."""
import math
import re

import numpy as np
import pytest
from report_issue12 import STORED, campaign

from harness.report import decision
from harness.report.compare import Comparison
from harness.report.document import build
from harness.report.stats import Group, SummaryRow
from harness.report.table import from_records

CRITERIA = ["queue", "startup", "NCCL (all-reduce bus bandwidth)", "recovery", "contention", "user experience",
            "auditing", "upgrades", "cost", "inference"]


def _section(md: str, title: str) -> str:
    start = md.index(f"## {title}")
    return md[start:md.index("\n## ", start + 1)]


def _rows(section: str) -> dict[str, list[str]]:
    lines = [ln for ln in section.splitlines() if ln.startswith("| ") and not ln.startswith("| criterion")]
    return {cells[0]: cells[1:] for cells in ([c.strip() for c in re.split(r"(?<!\\)\|", ln)[1:-1]] for ln in lines)}


def test_the_committed_campaign_opens_with_the_summary_and_marks_what_it_did_not_measure(tmp_path):
    md = build(str(STORED), str(tmp_path / "rep"))["report.md"].read_text()
    assert md.index("## Decision summary") < md.index("## Headline")
    assert re.findall(r"^## .*$", md, re.M)[0].startswith("## Decision summary")
    rows = _rows(_section(md, "Decision summary"))
    assert list(rows) == CRITERIA
    for name in ("user experience", "auditing", "upgrades", "inference"):
        assert rows[name] == ["not measured", "–", "not measured"], name
    # its numbers are the headline's: the same cells, the same comparison
    assert "Slurm 1.04 ± 0.05 [0.115–1.88] (12), Kubernetes 0.228 ± 0.013 [0.177–0.273] (12)" in rows["queue"][0]
    assert rows["queue"][1] == "0.22 (0.13–0.68)"
    assert rows["queue"][2].startswith("no clear difference")   # Holm-adjusted p = 0.35: no verdict
    assert rows["recovery"][2] == ("kill_rank: no verdict: n 3/3, below 5 a side; "
                                   "lose_node: no verdict: n 1/1, below 5 a side")
    reading = _section(md, "Decision summary")
    assert "this campaign shows no criterion on which Slurm is ahead" in reading
    assert "this campaign shows no criterion on which Kubernetes is ahead" in reading
    assert "The campaign does not separate the platforms on any criterion it measured" in reading
    assert "Not measured in this campaign, so it says nothing about them: user experience, auditing, upgrades, " \
           "inference." in reading


def test_issue12_records_fill_the_ux_and_audit_rows(tmp_path):
    md = build(str(campaign(tmp_path)), str(tmp_path / "rep"))["report.md"].read_text()
    rows = _rows(_section(md, "Decision summary"))
    ux, audit = rows["user experience"], rows["auditing"]
    assert "`first_log_s` Slurm" in ux[0] and "`wrong_queue` Slurm not clear, Kubernetes 1.08" in ux[0]
    assert "a user writes (files / lines (not blank or comment) / objects): Slurm 1 / 52 (41) / 1" in ux[0]
    assert "calls to submit / watch / read logs / cancel (median): Slurm 1 / 30 / 3 / 1, Kubernetes 2 / 45 / 3 / 2" \
        in ux[0]
    assert "no verdict from one probe per mistake" in ux[2] and "Slurm 4/5, Kubernetes 5/5" in ux[2]
    assert "Slurm 7/7 (7)" in audit[0] and "Kubernetes 6/7 (6)" in audit[0]
    assert audit[2] == "descriptive: Slurm's records answer more questions (7 vs 6 of 7)"
    assert rows["upgrades"][0] == "not measured"
    reading = _section(md, "Decision summary")
    assert "Without a verdict (descriptive):" in reading and "Kubernetes for 5/5, median 2.20 s to it" in reading


def _comp(metric, better, ratio=0.5, lo=0.4, hi=0.6, verdict="lower"):
    return Comparison(metric, "k8s", "slurm", "s", 8, 8, 1.0, 2.0, ratio, lo, hi, 0.01, 0.001, 0.002, 0.1, None,
                      None, verdict if better else "none")


def _summ(metric, plat, median):
    return SummaryRow(plat, metric, "s", 8, median, 0.01, median * 0.9, median * 1.1, median * 0.8, median * 1.2)


def _empty_table():
    return from_records([{"schema": 1, "run_id": "x", "platform": "local", "status": "failed"}])


def test_a_verdict_becomes_a_preference_citing_its_numbers():
    gs = {(p, "queue_s"): Group("s", np.ones(8), np.arange(8), np.zeros(8)) for p in ("k8s", "slurm")}
    summ = [_summ("queue_s", "k8s", 1.0), _summ("queue_s", "slurm", 2.0)]
    rows = decision.rows(_empty_table(), gs, summ, [_comp("queue_s", better=True)])
    assert rows[0].cells()[3] == "Kubernetes ahead"
    text = decision.reading(rows, _empty_table())
    assert text[0].startswith("Prefer Slurm when …: this campaign shows no criterion")
    assert text[1] == ("Prefer Kubernetes when jobs must start soon after submission: `queue_s` 1.00 vs 2.00 s "
                       "(Kubernetes / Slurm 0.50, 95% CI 0.40–0.60).")
    assert not any("does not separate" in t for t in text)


def test_upgrade_and_serve_metrics_fill_their_rows_when_a_campaign_has_them():
    keys = ["upgrade_drain_s", "serve_p99_latency_s"]
    gs = {(p, k): Group("s", np.ones(8), np.arange(8), np.zeros(8)) for p in ("k8s", "slurm") for k in keys}
    summ = [_summ(k, p, 1.0) for p in ("k8s", "slurm") for k in keys]
    rows = {r.criterion: r for r in decision.rows(_empty_table(), gs, summ, [_comp(k, better=False) for k in keys])}
    for name, key in (("upgrades", "upgrade_drain_s"), ("inference", "serve_p99_latency_s")):
        cells = rows[name].cells()
        assert rows[name].measured and f"`{key}` Slurm 1.00" in cells[1], cells
        assert cells[3].startswith("no clear difference"), cells


@pytest.mark.parametrize("verdict, expected", [
    ("few", "no verdict: n 8/8, below 5 a side"), ("resolution", "no clear difference (below the measurement "
                                                                   "resolution)"),
    ("descriptive", "no verdict (shown, not tested)")])
def test_ahead_never_claims_more_than_the_comparison(verdict, expected):
    c = _comp("queue_s", better=True, verdict=verdict)
    assert c.better is None and decision.ahead_text(c) == expected


def test_ratio_points_leave_out_a_ratio_that_cannot_be_drawn():
    r = decision.Row("queue", comps=[_comp("queue_s", True), _comp("startup_s", False, ratio=math.nan)])
    assert [label for label, _ in decision.ratio_points([r])] == ["queue: queue_s"]
