"""`poc rederive`: every stored metric re-derives from raw.json.gz + events.jsonl alone, and a corrupted
field is flagged where it lands.

The campaign here is synthetic but built the way the pipeline builds one: real event lines of the
committed smoke campaign (results/smoke-2026-12-02), a hand-made raw record of the `local` platform
(host runtime: harness/evidence/local.py reads it), stamps and metrics from the real
evidence.stamps and metrics.derive, written through the real Store."""
import gzip
import json
from pathlib import Path

import pytest
from support.paths import RESULTS

from harness import evidence, metrics
from harness.cli import main
from harness.config import from_mapping
from harness.metrics.cost import COST_RULE
from harness.rederive import check, diff, same
from harness.store import Store, load_events, load_raw

SMOKE = RESULTS / "smoke-2026-12-02" / "smoke-poc"
CONFIG = from_mapping({"campaign": "synthetic", "platforms": ["local"], "workload": {"steps": 40},
                       "resources": {"nodes": 2, "procs_per_node": 1, "gpus_per_node": 0}})
RUNS = ("local-clean-01", "local-kill-rank-01")


def _stored(run_id: str) -> dict:
    for line in (SMOKE / "runs.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["run_id"] == run_id:
            return rec
    raise KeyError(run_id)


def _raw(times: dict) -> dict:
    """What the local backend (host runtime) keeps: the bracket around the spawn calls, each agent's spawn
    bracket and the instant its waitpid() returned, and a credential that must not reach the disk."""
    sub, alloc, end = times["submitted"], times["allocated"], times["ended"]
    return {"runtime": "host",
            "submit": {"before": sub - 0.0021, "after": sub + 0.0004, "scheduler_record": None, "calls": []},
            "processes": [{"pid": 101, "spawn_before": alloc - 0.0012, "spawn_after": alloc - 0.0007,
                           "exited_at": end - 0.013, "exit_code": 0},
                          {"pid": 102, "spawn_before": alloc - 0.0005, "spawn_after": alloc,
                           "exited_at": end, "exit_code": 0}],
            "environ": {"HF_TOKEN": "hf_not_for_disk"}}


def _make_campaign(root: Path, inputs_in_record: bool = True) -> Path:
    """A campaign dir as the pipeline writes it: raw (redacted) -> stamps -> derive -> record."""
    store = Store(root, CONFIG.campaign)
    store.open(CONFIG.config_hash(), CONFIG.redacted(), resume=False)
    # a record of today names the cost rule it was derived by; an older one (no derive_inputs) was made by rule 1
    inputs = {"world": 2, "nodes": 2, "gpus_per_node": 0, "steps": 40, "price": CONFIG.pricing["local"].model_dump(),
              "cost_rule": COST_RULE if inputs_in_record else 1}
    for run_id in RUNS:
        old = _stored(run_id)
        events = load_events(SMOKE / "runs" / run_id)
        store.write_artifacts(run_id, {"events.jsonl": "".join(json.dumps(e) + "\n" for e in events)})
        store.write_raw(run_id, _raw(old["scheduler"]["times"]))
        st = evidence.stamps("local", load_raw(store.run_dir(run_id)))  # the stored (redacted) raw, as rederive sees it
        m, timeline = metrics.derive(events, st, **inputs, faults=old["faults"])
        rec = {"run_id": run_id, "campaign": CONFIG.campaign, "platform": "local", "scenario": old["scenario"],
               "config_hash": CONFIG.config_hash(), "started_at": old["started_at"], "status": "ok", "stages": [],
               "faults": old["faults"], "metrics": m, "timeline": timeline,
               "scheduler": {"stamps": evidence.to_json(st)}}
        if inputs_in_record:
            rec["derive_inputs"] = inputs
        store.append(rec)
    store.append({"run_id": "local-clean-02", "campaign": CONFIG.campaign, "platform": "local", "scenario": "clean",
                  "config_hash": CONFIG.config_hash(), "started_at": 0.0, "status": "failed", "stages": [],
                  "error": {"stage": "run", "message": "boom"}})
    store.close()
    return store.root


@pytest.fixture
def campaign(tmp_path) -> Path:
    return _make_campaign(tmp_path / "results")


def _rewrite_raw(cdir: Path, run_id: str, change) -> None:
    path = cdir / "runs" / run_id / "raw.json.gz"
    raw = json.loads(gzip.decompress(path.read_bytes()))
    change(raw)
    path.write_bytes(gzip.compress(json.dumps(raw).encode()))


def _findings(cdir: Path):
    [c] = check(cdir)
    return c, c.findings


@pytest.mark.parametrize("inputs_in_record", [True, False])
def test_a_clean_campaign_rederives_with_no_mismatch(tmp_path, inputs_in_record):
    cdir = _make_campaign(tmp_path / "r", inputs_in_record)  # False: world, steps, price from campaign.json
    c, found = _findings(cdir)
    assert found == []
    assert c.checked == list(RUNS) and c.skipped == [("local-clean-02", "failed")]
    assert b"hf_not_for_disk" not in gzip.decompress((cdir / "runs" / RUNS[0] / "raw.json.gz").read_bytes())


def test_a_corrupted_submit_bracket_flags_exactly_what_used_it(campaign):
    run_id = "local-clean-01"
    _rewrite_raw(campaign, run_id, lambda raw: raw["submit"].update(after=raw["submit"]["after"] + 0.25))
    _, found = _findings(campaign)
    assert {f.run_id for f in found} == {run_id}
    flagged = {f.metric for f in found}
    stored = json.loads((campaign / "runs.jsonl").read_text().splitlines()[0])["metrics"]
    used_submitted = {name for name, m in stored.items() if "submitted" in (m.get("stamps") or {})}
    assert "queue_s" in used_submitted
    assert flagged == used_submitted | {"stamps"}
    stamp_fields = {f.field for f in found if f.metric == "stamps"}
    assert {"submitted.hi", "submitted.t"} <= stamp_fields        # and the checks' details that print them
    assert all(f.startswith("checks[") for f in stamp_fields - {"submitted.hi", "submitted.t"})
    q = {f.field: f for f in found if f.metric == "queue_s"}
    assert q["value"].recomputed == pytest.approx(q["value"].stored - 0.125, abs=1e-6)  # t is the bracket's middle
    assert "lo" in q and "hi" not in q  # submitted.hi moved; allocated did not


def test_a_corrupted_event_flags_the_startup_it_feeds(campaign):
    run_id = "local-kill-rank-01"
    path = campaign / "runs" / run_id / "events.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()]
    firsts = [e for e in events if e["kind"] == "step" and e["attempt"] == [0, 0, 0] and e["step"] == 1]
    last = max(firsts, key=lambda e: e["ts_ns"])      # the rank whose first step closes first_step_s
    last["ts_ns"] += 30_000_000                        # 30 ms: still before that rank's second step
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    _, found = _findings(campaign)
    assert {f.run_id for f in found} == {run_id}
    flagged = {f.metric for f in found}
    assert {"first_step_s", "startup_s"} <= flagged
    assert "queue_s" not in flagged and "stamps" not in flagged  # scheduler evidence untouched
    fs = next(f for f in found if f.metric == "first_step_s" and f.field == "value")
    assert fs.recomputed == pytest.approx(fs.stored + 0.03, abs=1e-6)


def test_an_edited_stored_metric_is_flagged(campaign):
    lines = (campaign / "runs.jsonl").read_text().splitlines()
    rec = json.loads(lines[1])
    rec["metrics"]["recovery_s"]["value"] += 1e-6
    lines[1] = json.dumps(rec)
    (campaign / "runs.jsonl").write_text("\n".join(lines) + "\n")
    _, found = _findings(campaign)
    assert [(f.run_id, f.metric, f.field) for f in found] == [("local-kill-rank-01", "recovery_s", "value")]


def test_missing_raw_evidence_is_reported_not_passed(campaign):
    (campaign / "runs" / "local-clean-01" / "raw.json.gz").unlink()
    c, found = _findings(campaign)
    assert [(f.run_id, f.kind, f.field) for f in found] == [("local-clean-01", "missing", "raw")]
    assert c.count("missing") == 1 and c.count("mismatch") == 0


def test_a_run_that_cannot_be_rederived_is_an_error_finding_and_the_rest_still_checked(campaign):
    def stamps(platform, raw):
        if raw["submit"]["before"] < 1796230200:  # local-clean-01 only (submitted at 1796230186)
            raise KeyError("allocated")
        return evidence.stamps(platform, raw)

    [c] = check(campaign, stamps_fn=stamps)
    assert [(f.run_id, f.kind) for f in c.findings] == [("local-clean-01", "error")]
    assert "KeyError" in c.findings[0].stored


def test_tolerances():
    assert same(0.1 + 0.2, 0.3) and not same(1.0, 1.0 + 1e-8)
    assert same(1e6, 1e6 * (1 + 5e-10))                       # relative, for large metric values
    assert not same(1796230186.0, 1796230186.5, exact=True)   # a stamp: absolute only
    assert diff({"a": [1, {"t": 2.0}]}, {"a": [1, {"t": 2.5}], "b": 0}) == [("a[1].t", 2.0, 2.5), ("b", "<absent>", 0)]


# -- the command ----------------------------------------------------------------------------------------------------

def test_cli_clean(campaign, capsys):
    assert main(["rederive", str(campaign.parent)]) == 0
    out = capsys.readouterr().out
    assert "campaign synthetic" in out and "2 ok run(s) checked, 1 not ok skipped" in out
    assert out.rstrip().endswith("0 mismatch(es) in 2 run(s) checked; 0 without raw evidence")
    assert main(["rederive", str(campaign.parent), "--campaign", "synthetic", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is True and doc["mismatches"] == 0 and doc["runs_checked"] == 2


def test_a_torn_line_is_skipped_and_said_not_an_error(campaign, capsys):
    with open(campaign / "runs.jsonl", "a") as fh:
        fh.write('{"schema":1,"run_id":"local-clean-03","sta\n{"schema":1,"run_id":"x\n')
    assert main(["rederive", str(campaign.parent)]) == 0
    out = capsys.readouterr().out
    assert out.count("WARNING") == 2 and "line 4 is not a JSON record" in out and "line 5" in out
    assert main(["rederive", str(campaign.parent), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["campaigns"][0]["lines_unreadable"]) == 2


def test_cli_flags_a_mismatch_and_missing_evidence(campaign, capsys):
    _rewrite_raw(campaign, "local-kill-rank-01", lambda raw: raw["processes"][1].update(spawn_after=0))
    (campaign / "runs" / "local-clean-01" / "raw.json.gz").unlink()
    assert main(["rederive", str(campaign)]) == 1
    cap = capsys.readouterr()
    rows = {tuple(line.split()[:3]) for line in cap.out.splitlines()}
    assert ("local-clean-01", "-", "raw") in rows and "no raw evidence (raw.json.gz)" in cap.out
    assert ("local-kill-rank-01", "queue_s", "value") in rows
    assert ("local-kill-rank-01", "stamps", "allocated.t") in rows
    assert "1796230230.1449347" in cap.out  # epochs printed in full: a reader sees where they differ
    assert "ERROR re-derivation failed:" in cap.err and "1 without raw evidence" in cap.err and "TIP" in cap.err
    assert main(["rederive", str(campaign), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and doc["runs_without_evidence"] == 1 and doc["mismatches"] > 0
    kinds = {(f["run_id"], f["kind"]) for f in doc["campaigns"][0]["findings"]}
    assert kinds == {("local-clean-01", "missing"), ("local-kill-rank-01", "mismatch")}


def test_cli_unknown_campaign_and_empty_results(campaign, tmp_path, capsys):
    assert main(["rederive", str(campaign.parent), "--campaign", "nope"]) == 1
    err = capsys.readouterr().err
    assert "ERROR no campaign 'nope'" in err and "TIP campaigns there: synthetic" in err
    assert main(["rederive", str(tmp_path / "missing")]) == 1
    assert "ERROR results directory" in capsys.readouterr().err
    failed_only = Store(tmp_path / "f", "only-failed")
    failed_only.open("h", {}, resume=False)
    failed_only.append({"run_id": "x", "campaign": "only-failed", "platform": "local", "scenario": "clean",
                        "config_hash": "h", "started_at": 0.0, "status": "failed", "stages": []})
    failed_only.close()
    assert main(["rederive", str(failed_only.root)]) == 1
    assert "nothing to re-derive" in capsys.readouterr().err


def test_the_committed_2026_12_02_campaign_has_no_raw_evidence(capsys):
    """Stored before raw evidence was kept: every run is reported as unverifiable, none passes silently."""
    assert main(["rederive", str(SMOKE.parent), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["runs_without_evidence"] == doc["runs_checked"] == 22


def test_records_are_not_modified(campaign):
    before = {p: p.read_bytes() for p in campaign.rglob("*") if p.is_file()}
    check(campaign)
    assert {p: p.read_bytes() for p in campaign.rglob("*") if p.is_file()} == before


def test_a_campaigns_replays_are_rederived_with_its_runs(campaign):
    from harness.replay import store as rs
    from harness.scale import trace as tr
    rec = json.loads((Path(__file__).parent.parent / "fixtures" / "replay" / "k8s_records.json").read_text())
    where = campaign / rs.SCALE_DIR / "r1"
    rs.save(where, tr.loads(rec["trace"]), "k8s", {"raw": rec["raw"], "ended": True}, total_gpus=128)
    c, found = _findings(campaign)
    assert found == [] and c.checked == list(RUNS) and c.replays == ["scale/r1/k8s"]
    body = json.loads((where / "k8s.json").read_text())
    body["figures"]["makespan_s"] += 5
    (where / "k8s.json").write_text(json.dumps(body))
    _, found = _findings(campaign)
    assert [(f.run_id, f.metric, f.recomputed) for f in found] == [("scale/r1/k8s", "makespan_s",
                                                                    body["figures"]["makespan_s"] - 5)]
