"""The checkpoint, throughput and straggler figures in the report, and in `poc rederive`.

A committed smoke campaign is copied, and each run's record is given the figures this harness derives from
the run's stored evidence (as a campaign run with it would have stored them). Its report then shows them
where they belong, with their definitions; the committed campaign's report, whose records predate them,
shows none (test_stored_results.py holds it to the committed text). Re-derivation passes both, and still
flags a newer record that lost one of them."""
from __future__ import annotations

import json
import shutil

import pytest
from support.paths import RESULTS
from support.report_rows import section

from harness import metrics, rederive
from harness.report.document import build
from harness.report.headline import criterion_of
from harness.report.registry import SHOWN_DEFINITIONS

STORED = RESULTS / "smoke-2026-12-05"
NEW = {"checkpoint_save_s", "checkpoint_load_s", "samples_per_s", "tokens_per_s", "mfu", "straggler_ratio"}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """The copy, its records carrying the new figures; (campaign dir, run_id -> the figures added)."""
    root = tmp_path_factory.mktemp("results") / "smoke-2026-12-05"
    shutil.copytree(STORED, root, ignore=shutil.ignore_patterns("report"))
    derived: dict[str, dict] = {}

    def capture(events, stamps, **kw):
        m, timeline = metrics.derive(events, stamps, **kw)
        derived[events[0]["run_id"]] = m
        return m, timeline
    cdir = root / "smoke-poc"
    rederive.check_campaign(cdir, derive_fn=capture)
    added: dict[str, dict] = {}
    lines = []
    for line in (cdir / "runs.jsonl").read_text().splitlines():
        rec = json.loads(line)
        # image_pull_s comes with a stamps key of its own (tests/unit/report/test_image_pull.py)
        new = {k: v for k, v in derived.get(rec["run_id"], {}).items()
               if k not in rec.get("metrics", {}) and k not in rederive.LATER_STAMPS.values()}
        if new:
            rec["metrics"].update(new)
            added[rec["run_id"]] = new
        lines.append(json.dumps(rec))
    (cdir / "runs.jsonl").write_text("\n".join(lines) + "\n")
    return root, added


def test_the_figures_added_are_exactly_the_new_ones_each_where_the_run_has_evidence(campaign):
    _, added = campaign
    assert set().union(*added.values()) <= NEW
    assert len(added) == 41   # every training run (the 10 user-mistake probes train nothing)
    for run_id, new in added.items():
        restarted = "kill-rank" in run_id or "lose-node" in run_id
        # the CPU MLP: samples/s, never tokens or MFU; a restart read a checkpoint, a clean run did not
        assert set(new) == {"checkpoint_save_s", "samples_per_s", "straggler_ratio"} | (
            {"checkpoint_load_s"} if restarted else set()), run_id


def test_the_report_shows_them_under_their_criteria_with_their_definitions(campaign, tmp_path):
    root, _ = campaign
    md = build(str(root), str(tmp_path / "report"))["report.md"].read_text()
    head = section(md, "Headline")
    for metric, crit in (("samples_per_s", "all-reduce and steps"), ("straggler_ratio", "all-reduce and steps"),
                         ("checkpoint_save_s", "recovery"), ("checkpoint_load_s:kill_rank", "recovery")):
        assert f"`{metric}`" in head, metric
        assert criterion_of(metric) == crit
    assert "tokens_per_s" not in head and "`mfu`" not in head   # CPU runs of the MLP: no row, not a dash
    assert "`samples_per_s` (samples/s)" in head and "`straggler_ratio` (ratio)" in head
    rec = section(md, "Recovery broken down")
    assert "| `checkpoint_save_s` | s |" in rec and "| `checkpoint_load_s:kill_rank` | s |" in rec
    defs = section(md, "Definitions")
    for names, text in SHOWN_DEFINITIONS:
        assert (text in defs) == bool(names & NEW), sorted(names)   # image_pull_s: none of these runs has it
    # the committed report of the same runs, whose records predate the figures, defines none of them
    committed = (STORED / "report" / "report.md").read_text()
    assert not any(text in committed for _names, text in SHOWN_DEFINITIONS)
    assert "`samples_per_s`" not in committed


def test_rederive_passes_records_with_the_figures_and_records_from_before_them(campaign):
    root, _ = campaign
    for where in (root, STORED):
        checks = rederive.check(where)
        assert rederive.passed(checks), rederive.table(checks)[-2000:]
        assert rederive.totals(checks)["mismatches"] == 0 and rederive.totals(checks)["runs_checked"] == 51


def test_rederive_flags_a_newer_record_that_lost_one_of_them(campaign):
    root, added = campaign
    run_id = next(r for r, new in added.items() if "checkpoint_load_s" in new)
    recs = [json.loads(x) for x in (root / "smoke-poc" / "runs.jsonl").read_text().splitlines()]
    rec = next(r for r in recs if r["run_id"] == run_id)
    stored = dict(rec["metrics"])
    recomputed = {**stored}
    del stored["checkpoint_load_s"]
    found = rederive.compare_metrics(run_id, stored, recomputed)
    assert [(f.metric, f.stored) for f in found] == [("checkpoint_load_s", rederive.ABSENT)]
    # a record with none of the change's figures predates it: nothing to report
    old = {k: v for k, v in stored.items() if k not in NEW}
    assert rederive.compare_metrics(run_id, old, recomputed) == []
    # and a changed value is a mismatch as for any metric
    bad = {**recomputed, "samples_per_s": {**recomputed["samples_per_s"], "value": 1.0}}
    assert [f.metric for f in rederive.compare_metrics(run_id, bad, recomputed)] == ["samples_per_s"]
