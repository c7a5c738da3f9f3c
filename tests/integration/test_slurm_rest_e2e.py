"""`poc run --platform slurm` with ``slurm.transport: rest``: the scheduler through slurmrestd (auth/jwt).

The local Slurm-in-Docker cluster runs slurmrestd with ``rest_auth/jwt`` (harness/clusters/slurm/restd.py).
A token for user poc is minted at test start (``scontrol token`` in the controller) and handed to the
harness in an environment variable only; the run's files go over ssh to the login node. Run it as
the other Slurm integration tests are run: ``flock /tmp/poc-slurm.lock pytest tests/integration/...``.
"""
from __future__ import annotations

import gzip
import json
import os
import time

import pytest

from harness import config
from harness import slurm_parse as sp
from harness.backends.factory import make_backend
from harness.clusters import slurm_docker
from harness.pipeline import campaign
from harness.store import Store, load_raw

pytestmark = [
    pytest.mark.integration, pytest.mark.slurm,
    pytest.mark.filterwarnings("ignore:unclosed file:ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]
RELEASE = os.environ.get("POC_SLURM_RELEASE", "trixie")
SMALL = {"steps": 24, "checkpoint_every": 5, "sweep": "1K:1M", "sweep_iters": 3, "sweep_warmup": 1}
TOKEN_ENV = "POC_TEST_SLURM_JWT"


@pytest.fixture(scope="module")
def cluster():
    info = slurm_docker.up(release=RELEASE, timeout=300)
    yield info
    if os.environ.get("POC_KEEP_CLUSTER") != "1":
        slurm_docker.down()


@pytest.fixture
def token(cluster, monkeypatch):
    tok = slurm_docker.rest_token(user="poc", lifespan_s=900)
    monkeypatch.setenv(TOKEN_ENV, tok)
    return tok


def run(tmp_path, data: dict) -> dict:
    base = {"platforms": ["slurm"], "repetitions": 1, "faults": [], "workload": SMALL,
            "timeouts": {"queue_s": 120, "run_s": 400},
            "slurm": {"transport": "rest", "rest": {"token_env": TOKEN_ENV}}}
    base.update(data)
    cfg = config.from_mapping(base)
    store = Store(str(tmp_path / "results"), cfg.campaign)
    t0 = time.monotonic()
    (rec,) = campaign(cfg, ["slurm"], store, lambda p: make_backend(p, cfg), resume=False)
    print(f"\n{cfg.campaign}: {time.monotonic() - t0:.1f}s {rec['status']} {rec.get('error', '')}")
    return rec


def every_file_text(root) -> dict[str, str]:
    out = {}
    for p in root.rglob("*"):
        if p.is_file():
            data = p.read_bytes()
            if p.suffix == ".gz":
                data = gzip.decompress(data)
            out[str(p)] = data.decode(errors="replace")
    return out


def test_clean_run_through_slurmrestd_keeps_metrics_evidence_and_no_token(token, tmp_path):
    from harness import evidence

    rec = run(tmp_path, {"campaign": "itest-rest"})
    assert rec["status"] == "ok", rec.get("error")
    m = rec["metrics"]
    for k in ("queue_s", "startup_s", "allreduce_busbw_gbps", "step_time_s", "cost_per_step_usd"):
        assert m[k]["value"] is not None, k
    t = json.dumps(rec)   # preflight's transport description is stored with the run (no token in it)
    assert '"transport": "rest"' in t and '"api_version": "v0.0.42"' in t
    assert rec["scheduler"]["attempts"][0]["state"] == "COMPLETED"
    # raw evidence: slurmrestd's slurmdbd record in the sacct --json shape, read by evidence.slurm
    raw = load_raw(tmp_path / "results" / rec["campaign"] / "runs" / rec["run_id"])
    assert raw["sacct_json"]["source"] == "slurmrestd" and raw["sacct_json"]["rc"] == 200
    assert "sacct_parsable" not in raw
    rows = sp.sacct_json(raw["sacct_json"]["text"])
    assert len(rows) == len(rec["scheduler"]["attempts"]) == 1
    st = evidence.stamps("slurm", raw)
    assert evidence.to_json(st) == rec["scheduler"]["stamps"]
    assert st["allocated"] is not None and st["allocated"].width < 1.5
    assert all(c["ok"] for c in st["checks"]), st["checks"]
    q = m["queue_s"]
    assert q["lo"] <= q["value"] <= q["hi"]
    # the JWT (or its signature) is nowhere under the results directory
    sig = token.rsplit(".", 1)[-1]
    for path, text in every_file_text(tmp_path / "results").items():
        assert token not in text and sig not in text, path
    p = rec["scheduler"]["info"]["polls"]
    print(f"polls {p}; queue_s {q['value']:.3f} [{q['lo']:.3f}, {q['hi']:.3f}] "
          f"startup_s {m['startup_s']['value']:.2f} step_time_s {m['step_time_s']['value']:.4f}")


def test_a_bad_token_fails_at_preflight_with_a_tip(cluster, tmp_path, monkeypatch):
    bad = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjEsInN1biI6InBvYyJ9.c2lnbmF0dXJlLW5vdC12YWxpZA"
    monkeypatch.setenv(TOKEN_ENV, bad)
    rec = run(tmp_path, {"campaign": "itest-rest-bad-token"})
    assert rec["status"] == "failed" and rec["error"]["stage"] == "preflight"
    assert "refused the token" in rec["error"]["message"]
    assert "scontrol token" in (rec["error"].get("tip") or "")
    for path, text in every_file_text(tmp_path / "results").items():
        assert bad not in text and bad.rsplit(".", 1)[-1] not in text, path


def test_a_missing_token_fails_at_preflight_with_a_tip(cluster, tmp_path, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    rec = run(tmp_path, {"campaign": "itest-rest-no-token"})
    assert rec["status"] == "failed" and rec["error"]["stage"] == "preflight"
    assert f"${TOKEN_ENV} is empty" in rec["error"]["message"]
    assert "scontrol token" in (rec["error"].get("tip") or "")


@pytest.mark.parametrize("version", ["v0.0.40", "v0.0.41", "v0.0.42"])
def test_every_api_version_the_harness_speaks_submits_reads_and_cancels(token, version):
    """One job description serves all three data_parser versions 24.11 offers: exclusive, GPUs per
    node and the node count arrive; an impossible GPU request is refused at submit in Slurm's words."""
    from harness.backends.slurm.files import MountTransport
    from harness.backends.slurm.rest import RestClient, RestScheduler
    from harness.errors import SubmitError

    url = slurm_docker.read_ssh_settings()["rest_url"]
    # with files through a mount there is no login shell to read the site's environment from: it is configured
    sched = RestScheduler(RestClient(url, "poc", token, f"${TOKEN_ENV}", version),
                          MountTransport("/shared/poc", "/nonexistent"),
                          job_environment={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"})
    slurm_docker.run(slurm_docker.login_exec_argv(["mkdir", "-p", "/shared/poc/itest-rest-versions"]))
    script = (f"#!/bin/bash\n#SBATCH --job-name=poc-itest-{version} --nodes=2 --exclusive --gpus-per-node=2\n"
              "#SBATCH --time=00:02:00 --begin=now+600\nsleep 1\n")
    with pytest.raises(Exception, match="--begin"):    # not mapped: refused before anything is sent
        sched.submit(script, "/shared/poc/itest-rest-versions")
    job_id = sched.submit(script.replace(" --begin=now+600", ""), "/shared/poc/itest-rest-versions")
    try:
        rc, text, _ = sched.squeue([job_id])
        (j,) = sp.squeue_json(text)
        doc = json.loads(text)["jobs"][0]
        assert rc == 0 and j.name == f"poc-itest-{version}" and j.state.value in ("pending", "starting", "running")
        assert doc["tres_per_node"] == "gres/gpu:2" and doc["node_count"]["number"] == 2
        assert doc["shared"] == ["none"]
    finally:
        sched.cancel([job_id])
    with pytest.raises(SubmitError, match="Requested node configuration is not available"):
        sched.submit("#!/bin/bash\n#SBATCH --nodes=2 --gpus-per-node=8\nsleep 1\n", "/shared/poc/itest-rest-versions")


@pytest.mark.parametrize("kind", ["kill_rank", "lose_node"])
def test_a_fault_over_rest_is_injected_and_recovered(token, tmp_path, kind):
    """kill_rank: srun --overlap over the ssh files channel (slurmrestd has no step signal for one
    pid); lose_node: the node's record and its return read through slurmrestd."""
    rec = run(tmp_path, {"campaign": f"itest-rest-{kind.replace('_', '-')}", "allow_destructive_faults": True,
                         "repetitions": 0, "faults": [{"kind": kind, "at_step": 8, "rank": 1}]})
    assert rec["status"] == "ok", rec.get("error")
    assert rec["metrics"]["recovery_s"]["value"] > 0
    states = [a["state"] for a in rec["scheduler"]["attempts"]]
    assert len(states) >= 2 and states[-1] == "COMPLETED", states
    if kind == "kill_rank":     # the batch script requeued itself: named as sacct -P names it
        assert states[0] == "REQUEUED"
    raw = load_raw(tmp_path / "results" / rec["campaign"] / "runs" / rec["run_id"])
    if kind == "lose_node":
        assert states[0] == "NODE_FAIL"
        assert [r["when"] for r in raw["nodes"]][:2] == ["inject", "collect"]
        assert all(r["source"] == "slurmrestd" and r["rc"] == 200 for r in raw["nodes"])
    for path, text in every_file_text(tmp_path / "results").items():
        assert token not in text, path
    print(f"{kind}: recovery_s {rec['metrics']['recovery_s']['value']:.2f} attempts {states}")
