"""image_pull_s in the report and in `poc rederive`.

A committed smoke campaign is copied, and each Kubernetes run's record is given what this harness now
stores for it (the stamps' image_pull facts and the image_pull_s figure, from the run's stored evidence).
Its report shows the figure beside launch_s, with its definition; the committed report, whose records
predate it, shows neither (test_stored_results.py holds the committed reports to their text). Re-derivation
passes both, and flags a newer record that lost the figure or the facts."""
from __future__ import annotations

import json
import shutil

import pytest
from support.paths import RESULTS
from support.report_rows import section

from harness import evidence, metrics, rederive
from harness.report.document import build
from harness.report.headline import criterion_of
from harness.report.registry import SHOWN_DEFINITIONS

STORED = RESULTS / "smoke-2026-12-05"
DEFINITION = next(text for names, text in SHOWN_DEFINITIONS if "image_pull_s" in names)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """(campaign dir, run ids given the figure)."""
    root = tmp_path_factory.mktemp("results") / "smoke-2026-12-05"
    shutil.copytree(STORED, root, ignore=shutil.ignore_patterns("report"))
    cdir = root / "smoke-poc"
    stamps: dict[str, dict] = {}
    derived: dict[str, dict] = {}

    def capture(events, st, **kw):
        m, timeline = metrics.derive(events, st, **kw)
        derived[events[0]["run_id"]] = m
        stamps[events[0]["run_id"]] = st
        return m, timeline
    rederive.check_campaign(cdir, derive_fn=capture)
    added, lines = [], []
    for line in (cdir / "runs.jsonl").read_text().splitlines():
        rec = json.loads(line)
        m = derived.get(rec["run_id"], {})
        if "image_pull_s" in m:
            rec["metrics"]["image_pull_s"] = m["image_pull_s"]
            rec["scheduler"]["stamps"]["image_pull"] = evidence.to_json(stamps[rec["run_id"]])["image_pull"]
            added.append(rec["run_id"])
        lines.append(json.dumps(rec))
    (cdir / "runs.jsonl").write_text("\n".join(lines) + "\n")
    return root, added


def test_every_kubernetes_training_run_and_no_other_gets_it(campaign):
    _, added = campaign
    assert added and all(r.startswith("k8s-") for r in added)
    assert {"k8s-clean-01", "k8s-kill-rank-01", "k8s-lose-node-06", "k8s-contention-01"} <= set(added)


def test_the_report_shows_it_with_launch_s_and_defines_it(campaign, tmp_path):
    root, _ = campaign
    md = build(str(root), str(tmp_path / "report"))["report.md"].read_text()
    assert criterion_of("image_pull_s") == "startup"
    row = next(line for line in section(md, "Headline").splitlines() if "`image_pull_s`" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "`image_pull_s` (s)"
    assert cells[2] == "–" and cells[3] == "–" and cells[4].startswith("0")   # local, Slurm: none; Kubernetes: 0
    head = section(md, "Headline").splitlines()
    order = [i for i, line in enumerate(head) for k in ("`launch_s`", "`image_pull_s`") if k in line]
    assert len(order) == 2 and order[1] - order[0] in (-1, 1), "beside launch_s"
    assert DEFINITION in section(md, "Definitions")
    assert "inside `srun`" in DEFINITION and ".sqsh" in DEFINITION and "not added to it" in DEFINITION
    committed = (STORED / "report" / "report.md").read_text()
    assert "image_pull_s" not in committed and DEFINITION not in committed


def test_rederive_passes_records_with_it_and_records_from_before_it(campaign):
    root, _ = campaign
    for where in (root, STORED):
        checks = rederive.check(where)
        assert rederive.passed(checks), rederive.table(checks)[-2000:]
        assert rederive.totals(checks)["mismatches"] == 0 and rederive.totals(checks)["runs_checked"] == 51


@pytest.mark.parametrize("lose", ["metric", "stamps", "value"])
def test_rederive_flags_a_newer_record_that_lost_it_or_its_facts(campaign, lose):
    root, _ = campaign
    cdir = root / "smoke-poc"
    original = (cdir / "runs.jsonl").read_text()
    recs = [json.loads(x) for x in original.splitlines()]
    rec = next(r for r in recs if r["run_id"] == "k8s-clean-01")
    if lose == "metric":
        del rec["metrics"]["image_pull_s"]      # the stamps still say the record was written after the change
    elif lose == "stamps":
        del rec["scheduler"]["stamps"]["image_pull"]
    else:
        rec["metrics"]["image_pull_s"]["value"] = 3.0
    try:
        (cdir / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
        found = [f for c in rederive.check(root) for f in c.findings]
    finally:
        (cdir / "runs.jsonl").write_text(original)
    assert [(f.run_id, f.metric, f.field.split(".")[0]) for f in found] == [
        ("k8s-clean-01", {"metric": "image_pull_s", "stamps": "stamps", "value": "image_pull_s"}[lose],
         {"metric": "value", "stamps": "image_pull", "value": "value"}[lose])]
