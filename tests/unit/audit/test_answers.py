"""The audit answers (harness/audit) from real runs' stored raw evidence, recorded on the local clusters
by tests/fixtures/audit/record.py: who submitted, what, when, where, usage, outcome, who cancelled,
each with its source; what is not answered says why. Also the readers' pure parts (which audit
events are the run's, which slurmctld lines) on recorded real output."""
from __future__ import annotations

import copy
import gzip
import json
from types import SimpleNamespace

import pytest
from support.paths import FIXTURES

from harness.audit import QUESTIONS, RETENTION, SOURCES, answers, retention_of
from harness.audit import k8s as k8s_audit
from harness.backends.k8s import auditlog as k8s_log
from harness.backends.slurm import auditlog as slurm_log

FIX = FIXTURES / "audit"


def raw_of(name: str) -> dict:
    return json.loads(gzip.open(FIX / name / "raw.json.gz").read())


def stored(name: str) -> dict:
    return json.loads((FIX / name / "record.json").read_text())


def ans(platform: str, raw: dict) -> dict:
    out = answers(platform, raw)
    assert out["platform"] == platform and tuple(out["answers"]) == QUESTIONS
    for q, a in out["answers"].items():
        assert set(a) == {"answered", "value", "source", "note"}, q
        assert a["answered"] or a["note"], (q, a)     # an unanswered question says why
    return out["answers"]


SCENARIOS = [("slurm", "slurm-completed"), ("slurm", "slurm-cancelled"), ("k8s", "k8s-completed-admin"),
             ("k8s", "k8s-deleted-running"), ("k8s", "k8s-tenant"), ("k8s", "k8s-tenant-no-audit-log")]


@pytest.mark.parametrize(("platform", "name"), SCENARIOS)
def test_every_answer_names_a_source_whose_retention_is_known(platform, name):
    if not (FIX / name).exists():
        pytest.skip(f"fixture {name} not recorded")
    result = answers(platform, raw_of(name))
    for q, a in result["answers"].items():
        keys = [k for k in SOURCES if k in a["source"]]
        assert keys, (q, a["source"])
        assert all(SOURCES[k]["platform"] == platform for k in keys), (q, keys)
        assert all("(setting: " in RETENTION[k] for k in keys)
    kept = retention_of(result)
    assert kept and all({"default", "setting", "cite"} <= set(v) for v in kept.values())


@pytest.mark.parametrize(("platform", "name"), SCENARIOS)
def test_the_answers_stored_with_the_run_come_again_from_its_raw_evidence(platform, name):
    if not (FIX / name).exists():
        pytest.skip(f"fixture {name} not recorded")
    rec = stored(name)
    assert rec.get("audit_error") is None
    assert {q: a["answered"] for q, a in answers(platform, raw_of(name))["answers"].items()} == \
        {q: a["answered"] for q, a in rec["audit"]["answers"].items()}


# ------------------------------------------------------------------ Slurm

def test_slurm_completed_run_is_the_ordinary_users_and_nobody_cancelled_it():
    a = ans("slurm", raw_of("slurm-completed"))
    assert all(a[q]["answered"] for q in QUESTIONS)
    assert a["who_submitted"]["value"] == "poc (uid 1000, account -, QOS normal)"
    assert a["who_submitted"]["source"] == "sacct (slurmdbd): User/UID/Account/QOS"
    assert a["where"]["value"].startswith("c[1-2]")
    assert a["outcome"]["value"] == "COMPLETED exit 0:0 (derived 0:0)"
    # the harness's scancel after the end is in slurmctld's log, and does not make it a cancel
    assert a["who_cancelled"]["value"] == "nobody (it ended COMPLETED)"
    assert a["who_cancelled"]["note"].startswith("a later cancel found it ended: kill request by uid 1000 (poc)")
    # 2 nodes x 22 s, 2 GPUs: 44 node-seconds = 0.0122 h each
    assert a["usage"]["value"].startswith("node-hours 0.0122, GPU-hours 0.0122 (2 nodes x 22 s, gres/gpu=2)")


def test_slurm_script_is_the_admins_read_when_slurmdbd_refuses_the_user():
    raw = raw_of("slurm-completed")
    assert raw["audit"]["batch_script"]["text"] == ""           # poc has no slurmdbd association here
    a = ans("slurm", raw)["what"]
    assert a["answered"] and "93 lines, sha256 d8687a6b78393fcc" in a["value"]
    assert "the local cluster's admin" in a["source"] and "association" in a["note"]
    del raw["audit"]["batch_script_admin"]                       # a real cluster: no admin to ask
    a = ans("slurm", raw)["what"]
    assert not a["answered"] and "AccountingStoreFlags=job_script" in a["note"]
    assert a["value"].startswith("`sbatch --parsable /shared/poc/audit-slurm-completed/slurm-clean-01/job.sbatch`")


def test_slurm_cancel_is_attributed_to_the_uid_that_sent_it():
    a = ans("slurm", raw_of("slurm-cancelled"))
    assert a["outcome"]["value"].startswith("CANCELLED by 1000")
    assert a["who_cancelled"]["value"] == "poc (uid 1000)"
    assert a["who_cancelled"]["note"].startswith("slurmctld log: kill request by uid 1000 (poc) at ")
    assert a["who_cancelled"]["source"] == ("sacct (slurmdbd): State 'CANCELLED by 1000'; "
                                            "slurmctld log: _slurm_rpc_kill_job")


def test_slurm_without_the_controller_log_still_answers_from_accounting():
    raw = raw_of("slurm-cancelled")
    raw["audit"]["controller_log"] = {"readable": False, "source": "slurmctld log", "note": "not read: ask the admin"}
    a = ans("slurm", raw)["who_cancelled"]
    assert a["answered"] and a["value"] == "poc (uid 1000)"
    assert "slurmctld log" not in a["source"] and a["note"] == "not read: ask the admin"
    raw["audit"]["getent"] = {"text": ""}                       # the uid resolves from sacct's own UID/User pair
    assert ans("slurm", raw)["who_cancelled"]["value"] == "poc (uid 1000)"


def test_slurm_falls_back_to_the_collect_time_json_when_sacct_failed_after_cancel():
    raw = raw_of("slurm-cancelled")
    raw["audit"]["sacct"] = {"rc": 1, "text": "", "stderr": "sacct: error: slurmdbd not responding"}
    a = ans("slurm", raw)
    assert a["who_submitted"]["answered"] and a["who_submitted"]["value"].startswith("poc")
    assert "sacct --json at collect" in a["who_submitted"]["source"]
    assert not a["who_cancelled"]["answered"] and "slurmdbd not responding" in a["who_cancelled"]["note"]
    raw.pop("sacct_json")
    a = ans("slurm", raw)
    assert not any(x["answered"] for x in a.values())


def test_slurmctld_lines_are_taken_from_the_jobs_latest_submission_on():
    lines = raw_of("slurm-cancelled")["audit"]["controller_log"]["lines"]
    job = lines[0].split("JobId=")[1].split()[0]
    older = [f"[2026-01-01T00:00:00.000] _slurm_rpc_submit_batch_job: JobId={job} InitPrio=1 usec=1",
             f"[2026-01-01T00:00:01.000] _job_complete: JobId={job} done"]
    seen = []

    def docker_run(argv, **_kw):
        seen.append(argv)
        return SimpleNamespace(returncode=0, stdout="\n".join(older + lines) + "\n", stderr="")
    backend = SimpleNamespace(cfg=SimpleNamespace(controller_log=None), docker={"controller": "ctld"},
                              _docker_run=docker_run, t=None)
    got = slurm_log.controller_log(backend, job)
    assert got["readable"] and got["lines"] == lines
    assert seen[0][:3] == ["docker", "exec", "ctld"] and f"JobId={job}([^0-9]|$)" in seen[0]


def test_an_unreadable_slurmctld_log_is_recorded_as_such():
    def docker_run(argv, **_kw):
        return SimpleNamespace(returncode=2, stdout="", stderr="grep: /var/log/slurm/slurmctld.log: Permission denied")
    backend = SimpleNamespace(cfg=SimpleNamespace(controller_log=None), docker={"controller": "ctld"},
                              _docker_run=docker_run, t=None)
    got = slurm_log.controller_log(backend, "7")
    assert not got["readable"] and "Permission denied" in got["note"]
    nowhere = SimpleNamespace(cfg=SimpleNamespace(controller_log=None), docker=None, t=None)
    got = slurm_log.controller_log(nowhere, "7")
    assert not got["readable"] and "ask the cluster admin" in got["note"]


# ------------------------------------------------------------------ Kubernetes

def test_k8s_admin_run_is_attributed_and_its_spec_is_the_request_as_submitted():
    a = ans("k8s", raw_of("k8s-completed-admin"))
    assert all(a[q]["answered"] for q in QUESTIONS)
    assert a["who_submitted"]["value"] == "poc-admin (groups system:masters)"
    assert a["what"]["source"] == "API server audit log: requestObject of create jobsets (Request level)"
    assert "parallelism 2" in a["what"]["value"] and "nvidia.com/gpu" in a["what"]["value"]
    assert a["outcome"]["value"].startswith("Completed: AllJobsCompleted")
    assert a["who_cancelled"]["value"] == "poc-admin (groups system:masters)"
    assert a["who_cancelled"]["note"].startswith("deleted the JobSet at ")
    assert a["who_cancelled"]["note"].endswith("then deleted by system:serviceaccount:kube-system:"
                                               "generic-garbage-collector")
    assert "2 pods on 2 nodes" in a["usage"]["value"]


def test_k8s_run_deleted_while_running_says_so():
    a = ans("k8s", raw_of("k8s-deleted-running"))
    assert a["outcome"]["value"].startswith("deleted before it finished (pods ")
    assert "ended not before it was deleted" in a["when"]["value"]
    assert a["usage"]["answered"]


def test_k8s_restricted_users_run_is_theirs_not_an_admins():
    if not (FIX / "k8s-tenant").exists():
        pytest.skip("fixture k8s-tenant not recorded")
    a = ans("k8s", raw_of("k8s-tenant"))
    assert a["who_submitted"]["value"] == "poc-user (groups poc-users)"
    # sources name the record, not the run (namespace poc-gpu here, poc there): the report groups by them
    admin = ans("k8s", raw_of("k8s-completed-admin"))
    assert {q: x["source"] for q, x in a.items()} == {q: x["source"] for q, x in admin.items()}
    assert a["who_cancelled"]["value"] == "poc-user (groups poc-users)"


def test_k8s_without_a_readable_audit_log_who_is_not_answered_and_says_ask_the_admin():
    name = "k8s-tenant-no-audit-log" if (FIX / "k8s-tenant-no-audit-log").exists() else None
    raw = raw_of(name) if name else raw_of("k8s-completed-admin")
    if name is None:
        raw["audit"] = {"readable": False, "note": "the API server's audit log is not readable: ask the cluster admin"}
    a = ans("k8s", raw)
    for q in ("who_submitted", "who_cancelled"):
        assert not a[q]["answered"] and "ask the cluster admin" in a[q]["note"], a[q]
    assert a["what"]["answered"] and a["what"]["source"].startswith("JobSet object")
    assert "not the request as sent" in a["what"]["note"]
    assert all(a[q]["answered"] for q in ("when", "where", "usage", "outcome"))


def test_a_run_without_audit_evidence_answers_only_what_the_rest_of_its_raw_gives():
    raw = raw_of("k8s-completed-admin")
    raw.pop("audit")
    a = ans("k8s", raw)
    assert not a["who_submitted"]["answered"] and not a["who_cancelled"]["answered"]
    assert a["where"]["answered"] and a["outcome"]["answered"]
    assert not any(x["answered"] for x in ans("local", raw_of("k8s-completed-admin")).values())


def test_the_runs_audit_events_are_picked_from_the_whole_log(tmp_path):
    """The recorded window of the real audit log (every request in it, other runs' and controllers'
    included) gives back exactly the events the run's raw evidence kept."""
    raw = raw_of("k8s-completed-admin")
    log = tmp_path / "audit.log"
    with gzip.open(FIX / "k8s-completed-admin" / "audit-log-window.log.gz") as fh:
        log.write_bytes(fh.read())
    got = k8s_log.read(log, raw["audit"]["objects"], raw["audit"]["since"])
    assert [e["auditID"] for e in got["events"]] == [e["auditID"] for e in raw["audit"]["events"]]
    late = k8s_log.read(log, raw["audit"]["objects"], raw["audit"]["since"] + 20)   # lines before `since` are skipped
    assert late["stats"]["window_lines"] < got["stats"]["window_lines"] == got["stats"]["lines_scanned"]
    assert 0 < len(late["events"]) < len(got["events"])
    creates = [e for e in got["events"] if e["verb"] == "create" and e["objectRef"]["resource"] == "jobsets"]
    assert len(creates) == 1 and creates[0]["requestObject"]["kind"] == "JobSet"
    assert all("requestObject" not in e for e in got["events"] if e is not creates[0])


def test_about_run_keeps_only_the_runs_objects():
    objs = {"namespace": "poc", "name": "r-1", "configmap": "r-1-workload", "workload_prefix": "jobset-r-1-",
            "child_prefix": "r-1-"}

    def ev(res, name, ns="poc"):
        return {"objectRef": {"resource": res, "name": name, "namespace": ns}}
    assert k8s_log.about_run(ev("jobsets", "r-1"), objs)
    assert k8s_log.about_run(ev("pods", "r-1-w-0-0-abcde"), objs)
    assert k8s_log.about_run(ev("workloads", "jobset-r-1-3f2a1"), objs)
    assert k8s_log.about_run(ev("configmaps", "r-1-workload"), objs)
    assert not k8s_log.about_run(ev("jobsets", "r-10"), objs)              # another run's name prefix
    assert not k8s_log.about_run(ev("pods", "r-10-w-0-0-abcde"), objs)
    assert not k8s_log.about_run(ev("jobsets", "r-1", ns="other"), objs)
    assert not k8s_log.about_run(ev("secrets", "r-1-workload"), objs)


def test_no_audit_log_configured_off_the_native_cluster_is_not_read():
    backend = SimpleNamespace(cfg=SimpleNamespace(audit_log=None), local=False)
    path, why = k8s_log.location(backend)
    assert path is None and "ask the cluster admin" in why
    h = SimpleNamespace(data={"namespace": "ns", "name": "r", "configmap": "r-workload"}, submitted_at=0.0)
    got = k8s_log.gather(backend, h, clock=lambda: 5.0)
    assert got["readable"] is False and got["note"] == why
    k = copy.deepcopy(backend)
    k.cfg.audit_log = "/nonexistent/audit.log"
    got = k8s_log.gather(k, h, clock=lambda: 5.0)
    assert got["readable"] is False and "--audit-log-path" in got["note"]


def test_an_earlier_run_of_the_same_name_torn_down_just_before_the_submit_is_not_this_runs():
    """Recorded: the window before a run's submit held the deletion of an earlier JobSet of the same
    name; only the events from this run's ConfigMap and JobSet creation on are its own."""
    with gzip.open(FIX / "same-name-earlier-run.events.json.gz", "rt") as fh:
        d = json.load(fh)
    mine = k8s_log.own(d["events"], d["submitted_at"])
    assert len(mine) < len(d["events"])
    assert (mine[0]["verb"], mine[0]["objectRef"]["resource"]) == ("create", "configmaps")
    uids = {e["objectRef"].get("uid") for e in mine if e["objectRef"].get("resource") == "jobsets"} - {None}
    assert uids == {d["uid"]}                      # no status update of the earlier JobSet is left
    deletes = [e for e in mine if e["verb"] == "delete" and e["objectRef"]["resource"] == "jobsets"]
    assert len(deletes) == 1 and deletes[0]["requestReceivedTimestamp"] > mine[0]["requestReceivedTimestamp"]
    assert k8s_log.own(d["events"], d["submitted_at"] + 3600) == mine      # the nearest creation, however far


@pytest.mark.parametrize("kind,why", [("wrong_queue", "the Workload was never admitted (LocalQueue"),
                                      ("missing_checkpoint_volume", "its pods were never bound to a node")])
def test_a_k8s_run_that_never_held_a_node_is_answered_nowhere_from_its_objects(kind, why):
    """Recorded on the native cluster (tests/fixtures/k8s/mistakes): the objects as they stood before
    the cancel. They say the run ran nowhere and used nothing: an answer, not a gap in the records."""
    snap = json.loads((FIX.parent / "k8s" / "mistakes" / f"{kind}.json").read_text())["snapshots"]["final"]
    got = k8s_audit.answers({**snap, "audit": {"readable": False, "note": "no log"}})
    assert got["where"]["answered"] and got["where"]["value"].startswith("nowhere: " + why), got["where"]
    assert got["usage"]["answered"] and got["usage"]["value"] == "node-hours 0, GPU-hours 0 (never ran)"
    # with nothing recorded at all there is no answer
    assert not k8s_audit.answers({"audit": {"readable": False, "note": "no log"}})["where"]["answered"]
