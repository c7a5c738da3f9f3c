"""`poc check` against the local clusters: one all-ok run of both, and each problem it must find
(exit code 1, an ERROR line naming it and a TIP on stderr), made without changing the shared clusters:

* wrong ssh host: a loopback port nothing listens on;
* unknown host key: an empty known_hosts file;
* missing partition: a config naming one that does not exist;
* no accounting: sacct on the login node reading a copy of the cluster's slurm.conf (SLURM_CONF, in a
  temporary directory there) that says accounting_storage/none, or puts slurmdbd at an address nothing
  listens on: what a user sees on a cluster without accounting, or with slurmdbd down. slurmctld and
  slurmdbd are not touched; the checks run through a real transport that sets the variable;
* missing RBAC verb: the native cluster's restricted user (harness/clusters/k8s/tenant.py: the Role
  `poc render` prints for a config without the serving scenario) with a config that adds it, whose
  Deployment and Service need rights that Role lacks;
* missing LocalQueue: a config naming one that does not exist;
* missing CRD version: `--require-api kueue.x-k8s.io/v1beta2/workloads`; the cluster's Kueue (0.14)
  serves v1beta1 only, as a cluster does before the Kueue upgrade a newer renderer would need.
* missing CRD: `--require-api trainer.kubeflow.org/v1alpha1/trainjobs`, a group no CRD on the cluster
  defines: what `poc check` says of JobSet or Kueue on a cluster that lacks them (the same check; the
  group is the only difference).
  (Removing a CRD from the shared cluster is out of the question, and any authenticated user reads the
  same discovery, so no kubeconfig context here lacks JobSet or Kueue.)

Each test prints the seconds every check took (no timed assertions)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
from _poc import poc_argv
from _slurm_checks import settings_without_starting

from harness.backends.slurm import SlurmBackend
from harness.cli.entry import main
from harness.clusters import slurm_docker
from harness.transports import LocalTransport

# reads both clusters and changes nothing: runs beside the lanes that do (scripts/test.sh)
pytestmark = [pytest.mark.integration, pytest.mark.readonly]
RELEASE = os.environ.get("POC_SLURM_RELEASE", "trixie")


@pytest.fixture(scope="module")
def login() -> dict:
    return settings_without_starting(RELEASE)


@pytest.fixture(scope="module")
def tenant() -> dict:
    if os.geteuid() != 0:  # pragma: no cover - depends on the machine
        pytest.skip("the native cluster needs root")
    from _native import native_cluster, restricted_tenant
    return restricted_tenant(native_cluster())


def show(capsys, label: str, doc: dict) -> None:
    with capsys.disabled():
        print(f"\n  poc check, {label}:")
        for c in doc["checks"]:
            print(f"    {c['platform']:<5} {c['name']:<20} {c['status']:<7} {c['seconds']:6.3f} s")


def poc_check(tmp_path: Path, cfg: dict, *extra: str) -> tuple[int, dict, str]:
    path = tmp_path / "poc.json"
    path.write_text(json.dumps(cfg))
    p = subprocess.run(poc_argv("check", "--config", str(path), "-o", "json", *extra), capture_output=True,
                       text=True, timeout=120, check=False)
    return p.returncode, json.loads(p.stdout), p.stderr


def failed(doc: dict, rc: int, err: str, name: str) -> dict:
    """The failed check `name`: exit 1, its ERROR line and a TIP line on stderr."""
    assert rc == 1, (rc, doc, err)
    got = {c["name"]: c for c in doc["checks"]}[name]
    assert got["ok"] is False and got["status"] == "error" and got["tip"], got
    lines = err.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith(f"ERROR [{got['platform']}] {name} ("))
    assert lines[i + 1] == f"TIP {got['tip']}", err
    return got


def ssh_cfg(s: dict, **over) -> dict:
    return {"platforms": ["slurm"], "slurm": {"host": s["host"], "port": s["port"], "user": s["user"],
                                              "key_file": s["key_path"], "known_hosts": s["known_hosts_path"],
                                              **over}}


def k8s_cfg(t: dict, **kube) -> dict:
    from harness.clusters.images import worker_ref
    return {"platforms": ["k8s"], "kubernetes": {"kubeconfig": t["kubeconfig"], "namespace": t["namespace"],
                                                 "local_queue": t["local_queue"], "image": worker_ref(), **kube}}


def test_all_ok_on_both(tmp_path, capsys, login, tenant):
    rc, doc, err = poc_check(tmp_path, {"platforms": ["slurm", "k8s"]})
    show(capsys, "all ok, Slurm and the native cluster's admin", doc)
    assert rc == 0 and doc["ok"] and err == "", (doc, err)
    by = {(c["platform"], c["name"]): c for c in doc["checks"]}
    assert {n for p, n in by if p == "slurm"} == {"ssh reachable", "ssh host key", "ssh login", "sinfo", "partition",
                                                  "sbatch --test-only", "accounting"}
    managed = {("k8s", "local queue"), ("k8s", "quota")}
    assert all(c["status"] == "ok" for k, c in by.items() if k not in managed), doc
    assert "Slurm would start the job at " in by[("slurm", "sbatch --test-only")]["message"]
    # the native cluster's namespace and queues come from the first campaign's setup (another suite's,
    # maybe, or none yet on a fresh machine): absent, the checks note that the setup creates them;
    # present, its ClusterQueue fits this job, or is short and the note says the setup resizes it
    queue, quota = by[("k8s", "local queue")], by[("k8s", "quota")]
    if queue["status"] == "note":
        assert queue["message"].startswith("LocalQueue 'poc-queue' does not exist in namespace 'poc' yet; the "
                                           "campaign's setup") and quota["status"] == "note", (queue, quota)
    else:
        assert queue["status"] == "ok" and queue["message"].startswith("LocalQueue poc-queue -> "), queue
        assert (quota["status"], quota["message"].startswith("the job fits ClusterQueue poc-cluster-queue")) in (
            ("ok", True), ("note", False)) and (quota["status"] == "ok" or "resizes it" in quota["message"]), quota
    # as the restricted user: all ok too, its quota not readable (a note, not an error)
    rc, doc, err = poc_check(tmp_path, k8s_cfg(tenant))
    show(capsys, "all ok, the restricted user", doc)
    assert rc == 0 and err == "", (doc, err)
    quota = {c["name"]: c for c in doc["checks"]}["quota"]
    assert quota["status"] == "note" and "not readable with these rights" in quota["message"]


def test_all_ok_through_slurmrestd(tmp_path, capsys, login, monkeypatch):
    monkeypatch.setenv("POC_TEST_SLURM_JWT", slurm_docker.rest_token(user="poc", lifespan_s=300))
    rc, doc, err = poc_check(tmp_path, {"platforms": ["slurm"],
                                        "slurm": {"transport": "rest", "rest": {"token_env": "POC_TEST_SLURM_JWT"}}})
    show(capsys, "all ok, Slurm through slurmrestd", doc)
    assert rc == 0 and err == "", (doc, err)
    by = {c["name"]: c for c in doc["checks"]}
    assert by["accounting"]["message"].startswith("slurmrestd's slurmdb answers")
    assert by["sbatch --test-only"]["status"] == "ok"   # on the login node of the files channel (ssh)


def test_wrong_ssh_host(tmp_path, capsys, login):
    with socket.socket() as s:   # a loopback port nothing listens on once this socket closes
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rc, doc, err = poc_check(tmp_path, ssh_cfg(login, port=port))
    show(capsys, "wrong ssh port", doc)
    got = failed(doc, rc, err, "ssh reachable")
    assert got["message"].startswith(f"cannot reach 127.0.0.1:{port}: ") and "refused" in got["message"]
    assert all(c["status"] == "skipped" for c in doc["checks"][1:])


def test_unknown_host_key(tmp_path, capsys, login):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    rc, doc, err = poc_check(tmp_path, ssh_cfg(login, known_hosts=str(empty)))
    show(capsys, "unknown host key", doc)
    got = failed(doc, rc, err, "ssh host key")
    assert f"[127.0.0.1]:{login['port']} is not in {empty}: the server offers ssh-" in got["message"]
    assert f"ssh-keyscan -p {login['port']} 127.0.0.1 >> {empty}" in got["tip"]


def test_missing_partition(tmp_path, capsys, login):
    rc, doc, err = poc_check(tmp_path, {"platforms": ["slurm"], "slurm": {"partition": "no-such-partition"}})
    show(capsys, "missing partition", doc)
    got = failed(doc, rc, err, "partition")
    assert got["message"] == "partition 'no-such-partition' does not exist; the partitions are: debug"


@pytest.mark.parametrize("case, sed, words", [
    ("not configured", "s|^AccountingStorageType=.*|AccountingStorageType=accounting_storage/none|",
     "Slurm accounting storage is disabled"),
    ("slurmdbd unreachable", "s|^AccountingStorageHost=.*|AccountingStorageHost=127.0.0.1|",
     "Problem talking to the database: Connection refused")])
def test_no_accounting(capsys, login, case, sed, words):
    as_user = ["docker", "exec", "-i", "-u", login["user"], login["login_container"]]
    tmp = subprocess.run([*as_user, "mktemp", "-d"], capture_output=True, text=True, check=True).stdout.strip()
    try:
        subprocess.run([*as_user, "sh", "-c", 'sed "$1" /etc/slurm/slurm.conf > "$2/slurm.conf"', "sh", sed, tmp],
                       check=True, timeout=30)
        t = LocalTransport([*as_user[:-1], "-e", f"SLURM_CONF={tmp}/slurm.conf", login["login_container"]])
        rc = main(["check", "-p", "slurm", "-o", "json", "--set", "slurm.transport=local"],
                  backend_fn=lambda platform, cfg: SlurmBackend(cfg.slurm, t), env={})
        out, err = capsys.readouterr()
    finally:
        subprocess.run([*as_user, "rm", "-rf", "--", tmp], check=False, timeout=30)
    doc = json.loads(out)
    show(capsys, f"no accounting ({case})", doc)
    got = failed(doc, rc, err, "accounting")
    assert got["message"].startswith("no accounting: sacct failed") and words in got["message"]
    assert "recovery evidence" in got["tip"]
    assert {c["name"]: c["status"] for c in doc["checks"]}["sbatch --test-only"] == "ok"


def test_missing_rbac_verb(tmp_path, capsys, tenant):
    cfg = dict(k8s_cfg(tenant), serve={"enabled": True, "faults": ["kill_server"]})
    rc, doc, err = poc_check(tmp_path, cfg)
    show(capsys, "missing RBAC verb (restricted user, serving scenario)", doc)
    got = failed(doc, rc, err, "rbac")
    ns = tenant["namespace"]
    assert f"rights the harness uses are not allowed: create deployments.apps in namespace {ns}; " in got["message"]
    assert f'Role poc-harness in namespace {ns}: {{apiGroups: ["apps"], resources: ["deployments"], ' \
           f'verbs: [create, get, delete]}}' in got["tip"]


def test_missing_local_queue(tmp_path, capsys, tenant):
    rc, doc, err = poc_check(tmp_path, k8s_cfg(tenant, local_queue="no-such-queue"))
    show(capsys, "missing LocalQueue", doc)
    got = failed(doc, rc, err, "local queue")
    assert got["message"] == (f"LocalQueue 'no-such-queue' does not exist in namespace '{tenant['namespace']}'; "
                              f"the LocalQueues there: {tenant['local_queue']}")


def test_missing_crd_version(tmp_path, capsys, tenant):
    rc, doc, err = poc_check(tmp_path, k8s_cfg(tenant), "--require-api", "kueue.x-k8s.io/v1beta2/workloads")
    show(capsys, "missing CRD version", doc)
    got = failed(doc, rc, err, "apis served")
    assert got["message"] == "kueue.x-k8s.io/v1beta2 is not served (it serves kueue.x-k8s.io/v1beta1)"
    assert "install Kueue" in got["tip"]


def test_missing_crd(tmp_path, capsys, tenant):
    rc, doc, err = poc_check(tmp_path, k8s_cfg(tenant), "--require-api", "trainer.kubeflow.org/v1alpha1/trainjobs")
    show(capsys, "missing CRD (an API group the cluster does not serve)", doc)
    got = failed(doc, rc, err, "apis served")
    assert got["message"] == ("trainer.kubeflow.org/v1alpha1 is not served: the API server has no "
                              "trainer.kubeflow.org API group")
    assert got["tip"].startswith("install the operator that serves trainer.kubeflow.org/v1alpha1")
