"""`poc rederive` on a campaign made by the real pipeline: a local campaign (host runtime: torchrun agents of
this Python, a clean run and a rank kill) re-derives with 0 mismatches from its stored raw evidence and
events alone; one corrupted raw field, in a copy of the campaign, is flagged on that run only."""
import gzip
import json
import shutil
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.local]


def _poc(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_a_real_campaign_rederives_and_a_corrupted_field_is_flagged(tmp_path):
    res, cfg = tmp_path / "results", tmp_path / "c.json"
    cfg.write_text(json.dumps({"campaign": "rederive", "platforms": ["local"], "local": {"runtime": "host"}}))
    run = _poc("run", "--config", str(cfg), "--results", str(res))
    assert run.returncode == 0, run.stderr[-3000:]
    cdir = res / "rederive"
    recs = [json.loads(line) for line in (cdir / "runs.jsonl").read_text().splitlines()]
    assert [r["status"] for r in recs] == ["ok", "ok"]
    for r in recs:
        assert (cdir / "runs" / r["run_id"] / "raw.json.gz").stat().st_size > 0, r["run_id"]

    ok = _poc("rederive", str(res), "--json", timeout=120)
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-2000:]
    doc = json.loads(ok.stdout)
    assert doc["ok"] and doc["mismatches"] == 0 and doc["runs_checked"] == 2 and doc["runs_without_evidence"] == 0

    # corrupt one field of one run's raw evidence, in a copy (the campaign itself stays as made)
    copy = tmp_path / "copy" / "rederive"
    shutil.copytree(cdir, copy)
    victim = recs[0]["run_id"]
    raw_path = copy / "runs" / victim / "raw.json.gz"
    raw = json.loads(gzip.decompress(raw_path.read_bytes()))
    raw["submit"]["after"] += 0.25
    raw_path.write_bytes(gzip.compress(json.dumps(raw).encode()))
    bad = _poc("rederive", str(copy.parent), "--json", timeout=120)
    assert bad.returncode == 1 and "ERROR re-derivation failed" in bad.stderr
    found = json.loads(bad.stdout)["campaigns"][0]["findings"]
    assert {f["run_id"] for f in found} == {victim}
    assert ("queue_s", "value") in {(f["metric"], f["field"]) for f in found}
    table = _poc("rederive", str(copy.parent), timeout=120)
    assert table.returncode == 1 and victim in table.stdout and "queue_s" in table.stdout
