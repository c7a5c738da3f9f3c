"""The report's upgrade-drill part: the section, its timeline chart and the decision row, built
from the stored fixture campaign tests/fixtures/report/drills/ (made by the real pipeline and store with
a scripted scheduler: tests/support/report_drills_fixture.py regenerates it)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from support.paths import FIXTURES
from support.report_rows import criteria, lines

from harness.report import decision
from harness.report import drills as drillmod
from harness.report.document import build
from harness.report.sections import fmt
from harness.report.stats import Group, SummaryRow

FIXTURE = FIXTURES / "report" / "drills"
CAMPAIGN = FIXTURE / "drills-fixture"
RECORDS = {r["run_id"]: r for r in map(json.loads, (CAMPAIGN / "runs.jsonl").read_text().splitlines())}


def _section(md: str, title: str) -> str:
    start = md.index(f"## {title}")
    end = md.find("\n## ", start + 1)
    return md[start:] if end < 0 else md[start:end]


def _row(table: str, label: str) -> list[str]:
    line = next(x for x in table.splitlines() if x.startswith(f"| {label} |"))
    return [c.strip() for c in line.strip("|").split(" | ")]


def _m(run_id: str, name: str) -> dict:
    return RECORDS[run_id]["metrics"][name]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("rep")
    paths = build(str(FIXTURE), str(out))
    return paths, paths["report.md"].read_text()


def test_the_section_sits_after_cost_and_before_user_experience(report):
    _, md = report
    titles = [x[3:] for x in md.splitlines() if x.startswith("## ")]
    i = titles.index("Upgrades (drills)")
    assert titles[i - 1] in ("Cost and goodput", "How verdicts are drawn", "What the numbers say")
    assert titles[i + 1] in ("User experience", "Auditing", "Charts")
    assert "drills.png" not in _section(md, "Charts")


def test_restart_table_reads_each_platforms_figures_with_their_bounds(report):
    _, md = report
    sec = _section(md, "Upgrades (drills)")
    restart = sec[sec.index("### Restart drill"):sec.index("### Version-upgrade drill")]
    assert _row(restart, "")[1:] == ["Slurm", "Kubernetes"]
    assert _row(restart, "run")[1:] == ["ok", "ok"]
    assert _row(restart, "components, in order (versions before → after)")[1] == \
        "`slurmdbd` → `slurmctld` → `slurmd@c1` → `slurmd@c2`"
    assert _row(restart, "running job survived")[1:] == ["yes (0 restarts)"] * 2
    k = _m("k8s-drill-restart", "upgrade_submit_refused_s")
    d = k["detail"]
    assert _row(restart, "submissions refused [bounds]")[2] == (
        f"{fmt(k['value'])} s [{fmt(k['lo'])}–{fmt(k['hi'])}]: {d['refused_tries']} of {d['tries']} tries refused, "
        f"{d['outages']} outage{'s' if d['outages'] != 1 else ''}")
    s = _m("slurm-drill-restart", "upgrade_submit_refused_s")["detail"]
    assert _row(restart, "submissions refused [bounds]")[1] == f"0 s [0–0]: 0 of {s['tries']} tries refused"
    slow = _m("slurm-drill-restart", "upgrade_submit_slowest_s")["value"]
    assert slow > 1 and _row(restart, "slowest single submission")[1] == f"{fmt(slow)} s"   # slurmctld away: a wait
    gap = _m("slurm-drill-restart", "upgrade_max_step_gap_s")
    assert _row(restart, "longest step gap during the drill")[1] == \
        f"{fmt(gap['value'])} s (median step {fmt(gap['detail']['median_step_s'])} s)"
    handover = RECORDS["k8s-contention-01"]["metrics"]["handover_s"]["value"]
    delay = _m("k8s-drill-restart", "upgrade_queued_delay_s")["value"]
    assert _row(restart, "queued job's delay after the drilled job ended")[2] == \
        f"{fmt(delay)} s (without a drill: `handover_s` median {fmt(handover)} s, n 1)"
    assert _row(restart, "queued job started")[1:] == ["yes", "yes"]
    assert _row(restart, "records intact")[1:] == ["yes (2 compared)", "yes (4 compared)"]
    assert _row(restart, "left inconsistent")[1:] == ["none", "none"]
    assert _row(restart, "put back afterwards")[1] == "did: nothing: a restart keeps the versions"


def test_upgrade_table_shows_the_refused_drill_the_lost_job_and_what_broke(report):
    _, md = report
    sec = _section(md, "Upgrades (drills)")
    upgrade = sec[sec.index("### Version-upgrade drill"):]
    run = _row(upgrade, "run")
    assert run[1].startswith("did not complete (failed) at `drill:prepare`: the upgrade drill restarts the "
                             "cluster's scheduler, and this cluster is not known to be yours")
    assert _row(upgrade, "running job survived")[1:] == ["–", "no: the job ended failed (0 restarts)"]
    comps = _row(upgrade, "components, in order (versions before → after)")[2]
    assert comps.startswith("`kube-apiserver` (v1.31.4 → v1.32.0) → ") and "`kueue` (v0.9.1 → v0.10.0)" in comps
    assert comps.endswith("`kubelet@poc-worker-2` (v1.31.4 → v1.32.0) (not back)")
    assert _row(upgrade, "queued job's delay after the drilled job ended")[2].startswith(
        "– (the drilled job did not finish: no end to count from)")
    assert _row(upgrade, "records intact")[2] == "no: changed: `k8s-drill-upgrade-queued workload uid`"
    assert _row(upgrade, "left inconsistent")[2] == ("2: Workload still admitted after its JobSet ended (workload "
                                                     "jobset-k8s-drill-upgrade); node not Ready (node poc-worker-2)")
    assert _row(upgrade, "drill duration (first restart → last component healthy)")[2] == \
        "– (`kubelet@poc-worker-2` did not come back)"
    assert _row(upgrade, "put back afterwards")[2] == \
        "recreated: the native cluster at the pinned versions; seconds: 61.5"


def test_each_component_with_its_health_check_and_the_notes(report):
    _, md = report
    sec = _section(md, "Upgrades (drills)")
    steps = {s["component"]: s for s in RECORDS["slurm-drill-restart"]["drill"]["steps"]}
    ctl = _row(sec, "Slurm")   # the first component row of the restart drill
    assert ctl[1:] == ["`slurmdbd`", "database", f"{fmt(steps['slurmdbd']['back'] - steps['slurmdbd']['started'])} s",
                       "`sacctmgr -n show cluster answers with the cluster` (0.5 s)"]
    assert "| Kubernetes | `kubelet@poc-worker-2` (v1.31.4 → v1.32.0) | nodes | not back: not healthy within 4s: " \
           "node poc-worker-2 NotReady" in sec
    assert "every 0.5 s" in sec and "the bounds come from the tries around each outage" in sec
    assert "a submission made then is a wait, not a refusal" in sec
    assert "One drill per platform and kind: these figures are descriptive" in sec
    assert "![Upgrade drills: components, probes and the running job's steps](charts/drills.png)" in sec


def test_the_decision_row_is_descriptive_one_drill_per_platform(report):
    _, md = report
    cells = ["upgrades"] + criteria(md)["upgrades"]   # a line per drill kind, merged
    k = _m("k8s-drill-restart", "upgrade_submit_refused_s")
    assert cells[1].startswith("restart drill — Slurm: job survived, 0 steps lost, submissions refused 0 s [0–0], "
                               f"status refused 0 s, slowest submission "
                               f"{fmt(_m('slurm-drill-restart', 'upgrade_submit_slowest_s')['value'])} s, "
                               "queued job's delay ")
    assert (f"Kubernetes: job survived, 0 steps lost, submissions refused {fmt(k['value'])} s "
            f"[{fmt(k['lo'])}–{fmt(k['hi'])}]") in cells[1]
    assert "; upgrade drill — Slurm: did not complete (failed at `drill:prepare`); Kubernetes:" in cells[1]
    assert [c[1].split(" — ")[0] for c in lines(md) if " drill — " in c[1]] == ["restart drill", "upgrade drill"]
    assert "Kubernetes: job did not survive, 0 steps lost" in cells[1] and "records changed, 2 left inconsistent, " \
           "not back: `kubelet@poc-worker-2`" in cells[1]
    # no setting bounds a drill row; the host's load while it ran does (these records predate its sampling)
    assert cells[2:] == ["–", "host load: not recorded (these runs predate its sampling): a busy host cannot be ruled "
                               "out", "descriptive: one drill per platform"]


def test_the_timeline_chart_is_written(report):
    paths, _ = report
    png = paths["charts/drills.png"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 40_000
    assert len(drillmod.load(str(FIXTURE))) == 4
    from harness.report.charts_drill import drawable
    assert [d.run_id for d in drawable(drillmod.load(str(FIXTURE)))] == \
        ["slurm-drill-restart", "k8s-drill-restart", "k8s-drill-upgrade"]   # the refused one has nothing to draw


def _copy(tmp_path: Path, keep=lambda r: True) -> Path:
    dest = tmp_path / "results" / "drills-fixture"
    shutil.copytree(CAMPAIGN, dest)
    lines = [x for x in (CAMPAIGN / "runs.jsonl").read_text().splitlines() if keep(json.loads(x))]
    (dest / "runs.jsonl").write_text("".join(x + "\n" for x in lines))
    return dest.parent


def test_a_campaign_without_drills_has_no_drills_section(tmp_path):
    results = _copy(tmp_path, keep=lambda r: not r["scenario"].startswith("drill:"))
    paths = build(str(results), str(tmp_path / "rep"))
    md = paths["report.md"].read_text()
    assert "## Upgrades (drills)" not in md and "charts/drills.png" not in paths
    assert not (tmp_path / "rep" / "charts" / "drills.png").exists()
    assert "| upgrades | – | not measured | – | not measured |" in md


def test_unreadable_raw_evidence_costs_the_timeline_not_the_report(tmp_path):
    results = _copy(tmp_path)
    run = results / "drills-fixture" / "runs"
    (run / "k8s-drill-restart" / "raw.json.gz").write_bytes(b"not gzip")
    (run / "slurm-drill-restart" / "raw.json.gz").unlink()
    (run / "slurm-drill-restart" / "events.jsonl").unlink()
    paths = build(str(results), str(tmp_path / "rep"))
    sec = _section(paths["report.md"].read_text(), "Upgrades (drills)")
    assert "| run | ok | ok (raw evidence unreadable: " in sec
    assert _row(sec, "running job survived")[1:] == ["yes (0 restarts)"] * 2   # the record's own figures
    assert "charts/drills.png" in paths   # the k8s upgrade still draws


def test_enough_drill_runs_a_side_get_the_usual_comparison():
    key = "upgrade_submit_refused_s:drill:restart"
    gs = {(p, key): Group("s", np.ones(6), np.arange(6), np.zeros(6)) for p in ("k8s", "slurm")}
    summ = [SummaryRow(p, key, "s", 6, 1.0, 0.01, 0.9, 1.1, 0.8, 1.2) for p in ("k8s", "slurm")]
    drills = drillmod.load(str(FIXTURE))
    from harness.report.table import from_records
    t = from_records([{"schema": 1, "run_id": "x", "platform": "local", "status": "failed"}])
    row = {r.criterion: r for r in decision.rows(t, gs, summ, [], drills=drills)}["upgrades"]
    assert row.measured and row.evidence[0].startswith(f"`{key}` Slurm 1.00 ± 0.01 [0.9–1.10] (6), Kubernetes")
    assert not any("descriptive" in a for a in row.ahead)
