"""The conditions ledger: what each platform ran under, read from the runs' own records, and the host's load."""
from __future__ import annotations

import json
import math

import numpy as np
from support.paths import RESULTS

from harness.report import conditions as cond
from harness.report import table

SMOKE = RESULTS / "smoke-2026-12-05"


def test_each_platforms_caps_come_from_what_it_recorded():
    """Kubernetes' pods carried a 1-CPU, 3 GiB limit, the baseline's containers docker's --cpus=1; Slurm asked
    --cpus-per-task=1 and --mem=3072M with TaskPlugin task/none, so nothing confined its tasks."""
    facts = cond.platform_facts(str(SMOKE))
    assert set(facts) == {"local", "slurm", "k8s"}
    assert facts["k8s"].cpu[1] == (1.0, True) and facts["k8s"].memory[1] == (3072.0, True)
    assert facts["local"].cpu[1] == (1.0, True)
    assert facts["slurm"].cpu[1] == (1.0, False) and facts["slurm"].memory[1] == (3072.0, False)
    assert "TaskPlugin task/none" in facts["slurm"].cpu[0]
    assert facts["slurm"].exclusive[1] == facts["k8s"].exclusive[1] == ("shared", 1.0, 2.0)
    led = {c.name: c for c in cond.ledger("startup", facts, table.read(str(SMOKE)))}
    assert led["CPU cap"].equal() is False and led["exclusivity"].equal() is True and led["image"].equal() is True
    assert [c.name for c in cond.unequal(list(led.values()))] == ["CPU cap", "memory cap"]
    assert "CPU cap" not in {c.name for c in cond.ledger("queue", facts, table.read(str(SMOKE)))}


def _table(loads):
    recs = []
    for i, h in enumerate(loads):
        r = {"schema": 1, "run_id": f"r{i}", "campaign": "c", "platform": "slurm", "status": "ok",
             "metrics": {"startup_s": {"value": 1.0}}}
        if h is not None:
            r["host_load"] = h
        recs.append(r)
    return table.from_records(recs)


def _h(load1_max, other=0.0, steal=0.0, cpus=2, wall=100.0):
    return {"version": 1, "cpus": cpus, "during": {"load1_max": load1_max},
            "cpu": {"wall_s": wall, "steal_share": steal},
            "groups_cpu_s": {"other": other * wall * cpus, "harness": 1.0, "clusters": 50.0},
            "busiest": [{"name": "cc1", "group": "other", "cpu_s": other * wall * cpus}] if other else []}


def test_a_host_is_busy_by_its_load_other_processes_or_steal():
    t = _table([_h(3.9), _h(4.1), _h(1.0, other=0.3), _h(1.0, steal=0.2), None])
    assert cond.busy_runs(t).tolist() == [False, True, True, True, False]
    quiet = cond.host_state(t, np.array([0]))
    assert quiet.state == "quiet" and not quiet.flagged and quiet.load_per_cpu == 1.95
    busy = cond.host_state(t, np.arange(5))
    assert busy.state == "busy" and (busy.busy, busy.recorded, busy.runs) == (3, 4, 5)
    assert busy.text().startswith("busy in 3 of 4 runs: 1-min load up to 4.1 on 2 CPUs (2.0 a CPU), other processes "
                                  "30 % of its CPU, steal 20 % (busiest: `cc1` 60 s)")
    assert busy.text().endswith("; 1 run(s) without samples")
    unknown = cond.host_state(t, np.array([4]))
    assert unknown.state == "unknown" and math.isnan(unknown.load_max)


def test_an_operators_note_stands_in_for_runs_that_predate_sampling(tmp_path):
    """2026-12-05's runs recorded no load; the operator noted 12 on 2 cores: the report says so, as noted."""
    noted = cond.noted_load(str(SMOKE))
    assert noted["smoke-poc"]["load1_max"] == 12
    t = table.read(str(SMOKE))
    st = cond.host_state(t, np.flatnonzero(t.ok), noted)
    assert st.state == "noted" and st.flagged
    assert st.text(short=True) == ("busy, as noted for the campaign (not sampled by its runs): 1-min load up to 12 on "
                                   "2 CPUs during `smoke-poc`")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "runs.jsonl").write_text("")
    (tmp_path / "c" / "campaign.json").write_text(json.dumps({"campaign": "c"}))
    assert cond.noted_load(str(tmp_path)) == {}


def test_the_campaigns_own_notes_open_the_report(tmp_path):
    """A regenerated campaign's maker says which earlier verdicts it changes and why (campaign.json "notes"): the
    opening shows it right after its first sentence."""
    from support.report_rows import section

    from harness.report.document import build

    d = tmp_path / "c"
    d.mkdir()
    (d / "runs.jsonl").write_text(json.dumps({"schema": 1, "run_id": "r", "campaign": "c", "platform": "slurm",
                                              "status": "ok", "metrics": {"startup_s": {"value": 1.0}}}) + "\n")
    (d / "campaign.json").write_text(json.dumps({"campaign": "c", "notes": [
        "Startup: 2026-12-03 found Slurm ahead ×1.15; 2026-12-05 (load 12) called it equivalent; here ..."]}))
    assert cond.campaign_notes(str(tmp_path)) == [
        "Startup: 2026-12-03 found Slurm ahead ×1.15; 2026-12-05 (load 12) called it equivalent; here ..."]
    opening = section(build(str(tmp_path), str(tmp_path / "rep"))["report.md"].read_text(), "Bottom line")
    assert opening.split("\n\n")[2] == ("Noted with the campaign: Startup: 2026-12-03 found Slurm ahead ×1.15; "
                                        "2026-12-05 (load 12) called it equivalent; here ...")


def test_the_ledger_reads_a_campaign_within_the_reading_limits(tmp_path):
    """campaign.json nested past the limit, a runs.jsonl line past it, or a link: left out, never a traceback."""
    d = tmp_path / "c"
    d.mkdir()
    deep = '{"a":' * 100_000 + "1" + "}" * 100_000
    (d / "runs.jsonl").write_text('{"schema":1,"run_id":"r","platform":"k8s","status":"ok","x":' + deep + "}\n")
    (d / "campaign.json").write_text('{"campaign":"c","notes":' + deep + "}")
    assert cond.noted_load(str(tmp_path)) == {} and cond.campaign_notes(str(tmp_path)) == []
    assert cond.platform_facts(str(tmp_path)) == {}
    (d / "campaign.json").unlink()
    (tmp_path / "elsewhere.json").write_text(json.dumps({"campaign": "c", "notes": ["planted"]}))
    (d / "campaign.json").symlink_to(tmp_path / "elsewhere.json")
    assert cond.campaign_notes(str(tmp_path)) == []
