"""Checks of a finished Slurm run against the Slurm-in-Docker cluster and its stored raw evidence,
shared by the tests that run one (test_slurm_runs.py, test_slurm_crash.py, test_default_config.py),
so each scenario runs end to end once and every test that runs it checks it the same way."""
from __future__ import annotations

import json
import os
from pathlib import Path

from harness.clusters import slurm_docker


def settings_without_starting(release: str) -> dict:
    """ssh.json of the running Slurm-in-Docker cluster, starting nothing while any part of it runs.

    slurm_docker.up() starts what is stopped, and a test beside the Slurm lane that called it would start
    the node container a lose_node test had just killed, so that slurmctld never sees the node lost. Only a
    cluster with nothing running (a developer running this test alone) is brought up."""
    states = slurm_docker.status()
    if any(s == "running" for s in states.values()):
        return slurm_docker.read_ssh_settings()
    return json.loads(Path(slurm_docker.up(release=release, timeout=300).ssh_settings_path).read_text())


def idle_nodes() -> set[str]:
    out = slurm_docker.run(slurm_docker.login_exec_argv(["sinfo", "-h", "-N", "-o", "%N %T"])).stdout
    return {n for n, s in (ln.split() for ln in out.splitlines() if ln.strip()) if s == "idle"}


def node_processes(nodes, needle: str) -> list[str] | None:
    """`ps` lines (state, args) on the compute node containers that mention needle; None if a node did not answer."""
    found = []
    for node in nodes:
        ps = slurm_docker.run(["docker", "exec", f"poc-slurm-{node}", "ps", "-eo", "stat=,args="], check=False)
        if ps.returncode != 0:
            return None
        found += [f"{node}: {ln.strip()}" for ln in ps.stdout.splitlines()
                  if needle in ln and not ln.strip().startswith("Z")]
    return found


def on_cluster(path: str) -> bool:
    return slurm_docker.run(slurm_docker.login_exec_argv(["test", "-e", path]), check=False).returncode == 0


def assert_run_dir_removed(rec):
    """keep_run_files: on_failure (the default): an ok run's directory is gone from the cluster."""
    rdir = rec["scheduler"]["info"]["run_dir"]
    assert rec["cleanup"] == {"removed": [rdir], "kept": []}, rec.get("cleanup")
    assert not on_cluster(rdir) and on_cluster(str(Path(rdir).parent))


def assert_allocated_narrowed(st, raw, job_id):
    """allocated lies in [Start, batch script start]: under a second wide, unless slurmctld's periodic
    pass read its Start just before a second boundary and the batch script began after Start + 1
    (harness/evidence/slurm.py; a check says so)."""
    from harness import slurm_parse as sp
    from harness.evidence.slurm import clock_lines
    rows = sp.sacct_json(raw["sacct_json"]["text"])
    start = rows[0].start
    batch = [ln["t"] for ln in clock_lines(raw["alloc_evidence"]["text"]) if ln["kind"] == "batch_start"]
    a = st["allocated"]
    assert start <= a.lo <= a.hi == batch[0], (start, a, batch)
    assert a.width < 1.0 or batch[0] >= start + 1, (start, a, batch)
    sub = st["submitted"]
    assert sub.width <= raw["submit"]["after"] - raw["submit"]["before"] + 1e-9
    assert all(c["ok"] for c in st["checks"]), st["checks"]
    print(f"\n{job_id}: allocated width {a.width:.3f} s (batch script {batch[0] - start:.3f} s "
          f"after Start), submitted width {sub.width:.3f} s")


def check_raw_evidence(results: Path, rec: dict, kind: str | None = None) -> None:
    """The run's stored raw evidence (runs/<id>/raw.json.gz, what `poc rederive` reads) -> evidence.stamps:
    sacct -D --json holds every attempt, allocation is narrowed below a second by the batch script's
    clock, a killed rank's failure is noticed by the batch script (sub-second), a lost node's records
    are kept. POC_RECORD_SLURM_RAW=DIR keeps the raw evidence as a unit-test fixture."""
    from harness import evidence
    from harness.store import load_raw

    run_dir = results / rec["campaign"] / "runs" / rec["run_id"]
    raw = load_raw(run_dir)
    record = os.environ.get("POC_RECORD_SLURM_RAW")
    if record:
        Path(record).mkdir(parents=True, exist_ok=True)
        (Path(record) / f"slurm-raw-{(kind or 'clean').replace('_', '-')}.json").write_text(
            json.dumps(raw, indent=1, sort_keys=True))
    rows = list(json.loads(raw["sacct_json"]["text"])["jobs"])
    attempts = rec["scheduler"]["attempts"]
    assert len(rows) == len(attempts) >= (2 if kind else 1)   # sacct -D --json: every attempt
    assert raw["image"]["id"] and raw["submit"]["after"] > raw["submit"]["before"]
    st = evidence.stamps("slurm", raw)
    assert evidence.to_json(st) == rec["scheduler"]["stamps"]       # what the metrics were derived from
    assert_allocated_narrowed(st, raw, rec["job_ids"][0])
    assert len(st["attempts"]) == len(attempts)
    if kind:
        first = st["attempts"][0]
        assert first["detected"] is not None and first["ended"] is not None
    if kind == "kill_rank":   # the batch script noticed srun fail: a sub-second detection
        assert st["attempts"][0]["detected"].width < 0.01
    if kind == "lose_node":
        assert [r["when"] for r in raw["nodes"]][:2] == ["inject", "collect"]
    q = rec["metrics"]["queue_s"]
    assert q["uncertainty"] < 1.0 and q["lo"] <= q["value"] <= q["hi"]
    print(json.dumps(evidence.to_json(st), indent=1))


def assert_fault_recovered(results: Path, rec: dict, kind: str) -> None:
    """A fault run ended ok after the fault: recovered, every attempt in sacct, the raw evidence
    re-derives its stamps, a lost node back for the next run, the run's directory removed."""
    assert rec["status"] == "ok", rec.get("error")
    assert rec["faults"][0]["kind"] == kind
    m = rec["metrics"]
    assert m["recovery_s"]["value"] > 0 and m["lost_steps"]["value"] is not None
    states = [a["state"] for a in rec["scheduler"]["attempts"]]
    assert len(states) >= 2 and states[-1] == "COMPLETED", states
    if kind == "lose_node":
        assert states[0] == "NODE_FAIL"
    if kind in ("kill_rank", "lose_node"):
        # the triggering event named the node as Slurm does (SLURMD_NODENAME), and the fault acted on that node
        fault = rec["faults"][0]
        assert fault["target"]["node"] in {"c1", "c2", "c3"}, fault["target"]
        assert fault["detail"]["node"] == fault["target"]["node"], fault
    assert idle_nodes() == {"c1", "c2", "c3"}  # a lost node is back for the next run
    check_raw_evidence(results, rec, kind)
    assert_run_dir_removed(rec)
