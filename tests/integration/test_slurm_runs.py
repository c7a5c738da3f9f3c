"""`poc run --platform slurm` against the Slurm-in-Docker cluster: real jobs, real faults, bad inputs.

Each case runs a campaign through harness.pipeline with the real SlurmBackend and checks the stored
record. Uses the cluster that tests/integration/test_slurm_cluster.py describes (brought up here if
needed). POC_SLURM_RELEASE picks the release (default trixie).
"""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest
from _slurm_checks import (
    assert_fault_recovered,
    assert_run_dir_removed,
    check_raw_evidence,
    idle_nodes,
    on_cluster,
)

from harness import config
from harness.backends.factory import make_backend
from harness.clusters import slurm_docker
from harness.errors import TransportError
from harness.owner import dir_mark, load_or_create
from harness.pipeline import campaign
from harness.store import Store
from harness.transports import SshTransport

pytestmark = [
    pytest.mark.integration, pytest.mark.slurm,
    # harness.pipeline.host_facts() leaves /proc/cpuinfo open (reported to the core's owner); the
    # ResourceWarning surfaces at a random later GC and would fail whichever test is running then.
    pytest.mark.filterwarnings("ignore:unclosed file:ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]
RELEASE = os.environ.get("POC_SLURM_RELEASE", "trixie")
SMALL = {"steps": 24, "checkpoint_every": 5, "sweep": "1K:1M", "sweep_iters": 3, "sweep_warmup": 1}


@pytest.fixture(scope="module")
def cluster():
    info = slurm_docker.up(release=RELEASE, timeout=300)
    yield info
    if os.environ.get("POC_KEEP_CLUSTER") != "1":
        slurm_docker.down()


def run_campaign(tmp_path, data: dict) -> list[dict]:
    base = {"platforms": ["slurm"], "repetitions": 0, "faults": [], "workload": SMALL,
            "timeouts": {"queue_s": 120, "run_s": 400}, "allow_destructive_faults": True}
    base.update(data)
    cfg = config.from_mapping(base)
    store = Store(str(tmp_path / "results"), cfg.campaign)
    t0 = time.monotonic()
    recs = campaign(cfg, ["slurm"], store, lambda p: make_backend(p, cfg), resume=False)
    print(f"\n{cfg.campaign}: {time.monotonic() - t0:.1f}s")
    for r in recs:
        m = {k: round(v["value"], 2) for k, v in (r.get("metrics") or {}).items() if v.get("value") is not None}
        print(f"  {r['run_id']}: {r['status']} {m} {r.get('error', '')}")
    # the store holds exactly what was returned
    stored = [json.loads(line) for line in (store.root / "runs.jsonl").read_text().splitlines()]
    assert [r["run_id"] for r in stored][-len(recs):] == [r["run_id"] for r in recs]
    return recs


def assert_five_metrics(rec):
    m = rec["metrics"]
    for k in ("queue_s", "startup_s", "allreduce_busbw_gbps", "step_time_s", "cost_per_step_usd"):
        assert m[k]["value"] is not None, k
    assert set(m["queue_s"]["sources"]) >= {"submitted", "allocated"}
    t = rec["scheduler"]["times"]
    assert t["submitted"] <= t["allocated"] <= t["ended"]


def test_ssh_transport_runs_and_rejects_unknown_hosts(cluster, tmp_path):
    s = json.loads(Path(cluster.ssh_settings_path).read_text())
    t = SshTransport(s["host"], s["port"], s["user"], s["key_path"], s["known_hosts_path"])
    assert t.run(["echo", "a b;c"]).stdout == "a b;c\n"          # argv words survive quoting
    assert t.run(["sh", "-c", "exit 3"], check=False).returncode == 3
    t.close()
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    bad = SshTransport(s["host"], s["port"], s["user"], s["key_path"], str(empty))
    with pytest.raises(TransportError, match="not in known_hosts"):
        bad.run(["true"])


def test_unreachable_ssh_host_is_a_transport_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    t = SshTransport("127.0.0.1", port, "poc", retries=2, backoff_s=0.1, connect_timeout=2)
    t0 = time.monotonic()
    with pytest.raises(TransportError, match="after 3 tries"):
        t.run(["true"])
    print(f"\nunreachable: gave up after {time.monotonic() - t0:.1f} s")


def assert_one_command_per_poll(rec):
    """Every poll was one command (squeue and the event files together), plus at most one sacct at the
    end: 24.11's squeue no longer lists a finished job."""
    p = rec["scheduler"]["info"]["polls"]
    assert p["count"] > 10 and p["count"] <= p["commands"] <= p["count"] + 1, p
    print(f"\n{rec['run_id']}: {p}")


def test_clean_run_over_ssh_stores_all_five_metrics(cluster, tmp_path):
    (rec,) = run_campaign(tmp_path, {"campaign": "itest-ssh", "repetitions": 1})
    assert rec["status"] == "ok", rec.get("error")
    assert_five_metrics(rec)
    assert rec["scheduler"]["attempts"][0]["state"] == "COMPLETED"
    assert_one_command_per_poll(rec)
    check_raw_evidence(tmp_path / "results", rec)
    assert_run_dir_removed(rec)


def test_clean_run_over_local_transport_beside_a_same_named_campaign(cluster, tmp_path):
    """Two users' campaigns of one name and run ids on one cluster: each runs in its own directory,
    keyed by its campaign's token, and the second leaves the first's directory as it was."""
    (first,) = run_campaign(tmp_path / "a", {"campaign": "itest-local", "repetitions": 1,
                                             "keep_run_files": "always"})
    theirs = first["scheduler"]["info"]["run_dir"]
    try:
        assert first["status"] == "ok", first.get("error")
        assert first["cleanup"]["kept"] == [theirs]
        (rec,) = run_campaign(tmp_path / "b", {"campaign": "itest-local", "repetitions": 1,
                                               "slurm": {"transport": "local"}})
        assert rec["status"] == "ok", rec.get("error")
        assert_five_metrics(rec)
        assert_one_command_per_poll(rec)
        assert rec["run_id"] == first["run_id"] and rec["scheduler"]["info"]["run_dir"] != theirs
        assert_run_dir_removed(rec)
        owner_id = json.loads((tmp_path / "a" / "results" / "itest-local" / "campaign.json").read_text())["owner"]
        assert theirs.endswith(f"/itest-local-{owner_id}/{first['run_id']}")
        # the first campaign's mark: a keyed digest of its directory's path, which the second cannot make
        key = load_or_create(tmp_path / "a" / "results" / "itest-local")
        left = slurm_docker.run(slurm_docker.login_exec_argv(
            ["sh", "-c", 'cat "$1/.poc-owner"; echo; ls "$1"', "sh", theirs])).stdout.split()
        assert left[0] == dir_mark(key, f"itest-local-{owner_id}", first["run_id"]), left
        assert {"job.sbatch", "events"} <= set(left), left
    finally:
        slurm_docker.run(slurm_docker.login_exec_argv(["rm", "-rf", "--", str(Path(theirs).parent)]))


# kill_rank and lose_node run end to end once each, where they are checked the same way: kill_rank in
# the built-in config's campaign (test_default_config.py), lose_node in the run a crashed campaign's
# --resume repeats (test_slurm_crash.py); requeue is here alone.
def test_requeue_is_injected_and_recovered(cluster, tmp_path):
    (rec,) = run_campaign(tmp_path, {"campaign": "itest-requeue",
                                     "faults": [{"kind": "requeue", "at_step": 8, "rank": 1}]})
    assert_fault_recovered(tmp_path / "results", rec, "requeue")


def test_contention_job_waits_behind_an_exclusive_blocker(cluster, tmp_path):
    """The Slurm twin of the Kubernetes quota case: a same-shape job holds 2 of the 3 nodes
    exclusively, the measured job (2 nodes) waits until the blocker finishes by itself."""
    (rec,) = run_campaign(tmp_path, {"campaign": "itest-contention", "contention": {"runs": 1}})
    assert rec["status"] == "ok", rec.get("error")
    assert rec["scenario"] == "contention"
    assert_five_metrics(rec)
    m, c = rec["metrics"], rec["contention"]
    assert c["blocker_run_id"] == "slurm-contention-01-blocker" and c["blocker_state"] == "succeeded"
    submitted = m["queue_s"]["sources"]["submitted"]
    allocated = m["queue_s"]["sources"]["allocated"]
    # the measured job got its nodes only after the blocker's ranks were done (whole-second Start)
    assert c["released"] - submitted > 5 and allocated >= c["released"] - 1
    handover = m["handover_s"]["value"]
    assert -1.0 <= handover < 30, handover
    names = [st["name"] for st in rec["stages"]]
    assert names.index("blocker") < names.index("submit") < names.index("queue")
    blocker_script = next((tmp_path / "results" / "itest-contention" / "runs" / "slurm-contention-01" / "rendered"
                           / "blocker").glob("*.sbatch")).read_text()
    assert "#SBATCH --exclusive" in blocker_script
    print(f"\ncontention: queue_s={m['queue_s']['value']:.1f} handover_s={handover:.2f}")
    left = slurm_docker.run(slurm_docker.login_exec_argv(["squeue", "-h", "-o", "%j"])).stdout.split()
    assert not [j for j in left if j.startswith("poc-slurm-contention")], left
    assert idle_nodes() == {"c1", "c2", "c3"}


def test_unknown_partition_is_a_failed_preflight_record(cluster, tmp_path):
    (rec,) = run_campaign(tmp_path, {"campaign": "itest-bad-partition", "repetitions": 1,
                                     "slurm": {"partition": "nope"}})
    assert rec["status"] == "failed" and rec["error"]["stage"] == "preflight"
    assert "nope" in rec["error"]["message"]


def test_job_that_never_starts_times_out_and_is_cancelled(cluster, tmp_path):
    (rec,) = run_campaign(tmp_path, {"campaign": "itest-never-starts", "repetitions": 1,
                                     "slurm": {"extra_sbatch": ["--begin=now+3600"]},
                                     "timeouts": {"queue_s": 8, "run_s": 60}})
    assert rec["status"] == "failed" and rec["error"]["stage"] == "queue"
    assert rec["error"]["type"] == "RunTimeout"
    (job_id,) = rec["job_ids"]
    out = slurm_docker.run(slurm_docker.login_exec_argv(["squeue", "-h", "-j", job_id, "-o", "%T"]),
                           check=False).stdout.strip()
    assert out in ("", "CANCELLED"), out


def test_batch_script_that_fails_at_once(cluster, tmp_path):
    (rec,) = run_campaign(tmp_path, {"campaign": "itest-fails", "repetitions": 1,
                                     "slurm": {"python": "/nonexistent/python3", "max_restarts": 0}})
    assert rec["status"] == "failed" and rec["error"]["stage"] == "run"
    assert "failed" in rec["error"]["message"]
    assert rec["scheduler"]["attempts"][-1]["state"] == "FAILED"
    rdir = rec["scheduler"]["info"]["run_dir"]   # a failed run's files stay for a look (keep_run_files: on_failure)
    assert rec["cleanup"]["kept"] == [rdir] and "on_failure" in rec["cleanup"]["reason"]
    assert on_cluster(f"{rdir}/job.sbatch")
    slurm_docker.run(slurm_docker.login_exec_argv(["rm", "-rf", "--", rdir]))


def test_unreachable_login_node_is_a_failed_record(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (rec,) = run_campaign(tmp_path, {"campaign": "itest-unreachable", "repetitions": 1,
                                     "slurm": {"host": "127.0.0.1", "port": port, "user": "poc"}})
    assert rec["status"] == "failed" and rec["error"]["stage"] == "preflight"
    assert rec["error"]["type"] == "TransportError"
