"""The local baseline end to end: a real 2-process gloo DDP job with a real rank kill."""
import json
import math
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.local]

HEADLINE = ("queue_s", "startup_s", "allreduce_busbw_gbps", "recovery_s", "cost_per_step_usd")


def test_local_campaign_and_report(tmp_path):
    res = tmp_path / "results"
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--platform", "local", "--results", str(res)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = [json.loads(line) for line in (res / "smoke" / "runs.jsonl").read_text().splitlines()]
    assert [(r["run_id"], r["status"]) for r in recs] == [("local-clean-01", "ok"), ("local-kill-rank-01", "ok")]
    fault_run = recs[1]
    for name in HEADLINE:
        m = fault_run["metrics"][name]
        assert m["value"] is not None and math.isfinite(m["value"]), name
        assert m["sources"], name
    assert fault_run["metrics"]["lost_steps"]["value"] >= 0
    assert fault_run["faults"][0]["target"]["rank"] == 1
    assert fault_run["metrics"]["allreduce_busbw_gbps"]["detail"]["all_correct"]
    assert fault_run["environment"]["torch"] and fault_run["environment"]["world_size"] == 2
    assert (res / "smoke" / "runs" / "local-kill-rank-01" / "events.jsonl").stat().st_size > 0
    assert (res / "smoke" / "runs" / "local-kill-rank-01" / "rendered" / "launch.sh").exists()

    # resume: nothing left to do, nothing re-run
    again = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--platform", "local", "--results", str(res),
                            "--resume", "--json"], capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0 and json.loads(again.stdout)["runs"] == []

    rep = subprocess.run([sys.executable, "-m", "harness.cli", "report", str(res)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert rep.returncode == 0, rep.stderr
    for name in ("report.md", "report.html", "summary.csv"):
        assert (res / "report" / name).exists()
