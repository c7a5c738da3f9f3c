"""scripts/trim_campaign.py: what is committed under results/ names no directory and no host name of the machine
that made it, the raw scheduler evidence included; the Kubernetes audit answers whose request-body digest the
cleaning changed are derived again, so `poc rederive` still finds nothing; the owner key is never committed."""
from __future__ import annotations

import gzip
import importlib.util
import json

from support.paths import RESULTS, ROOT

from harness import audit, rederive
from harness.redact_machine import Machine
from harness.store import RunRecord, load_raw, raw_bytes

spec = importlib.util.spec_from_file_location("trim_campaign", ROOT / "scripts" / "trim_campaign.py")
trim = importlib.util.module_from_spec(spec)
spec.loader.exec_module(trim)

ALICE = Machine((("/home/alice", "$HOME"), ("/home/alice/.local/state/k8s-slurm-poc", "$STATE_DIR")), ("alice-ws",))
HOST_PATH = "/home/alice/.local/state/k8s-slurm-poc/k8s-native/checkpoints/c/k8s-clean-01"


def test_paths_become_named_placeholders_longest_first(monkeypatch):
    monkeypatch.setenv("HOME", "/home/alice")
    monkeypatch.setenv("POC_STATE_DIR", "/home/alice/.local/state/k8s-slurm-poc")
    monkeypatch.setenv("POC_CACHE_DIR", "/scratch/alice/poc-cache")
    text = ('known_hosts: /home/alice/.local/state/k8s-slurm-poc/slurm/known_hosts\n'
            '{"venv": "/scratch/alice/poc-cache/venv-1", "key": "/home/alice/.ssh/id_ed25519", '
            '"home": "/home/alice", "other": "/home/alicex/file"}')
    assert trim.unmachine(text) == ('known_hosts: $STATE_DIR/slurm/known_hosts\n'
                                    '{"venv": "$CACHE_DIR/venv-1", "key": "$HOME/.ssh/id_ed25519", '
                                    '"home": "$HOME", "other": "/home/alicex/file"}')


def _k8s_run(cdir, run_id="k8s-clean-01"):
    """A Kubernetes run as an older harness stored it: its JobSet's request body holds a home path, and the
    audit answer's digest is of that body."""
    body = {"metadata": {"name": run_id}, "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {
        "template": {"spec": {"containers": [{"image": "img"}],
                              "volumes": [{"name": "ckpt", "hostPath": {"path": HOST_PATH}}]}}}}}]}}
    raw = {"name": run_id, "audit": {"readable": True, "events": [
        {"verb": "create", "objectRef": {"resource": "jobsets", "name": run_id}, "responseStatus": {"code": 201},
         "user": {"username": "poc-admin"}, "requestObject": body}]},
        "events": [{"reason": "Scheduled", "reportingInstance": "default-scheduler-alice-ws",
                    "message": "Successfully assigned poc/p to poc-n1"}]}
    run = cdir / "runs" / run_id
    run.mkdir(parents=True)
    (run / "raw.json.gz").write_bytes(raw_bytes(raw))
    rec = RunRecord(run_id=run_id, campaign="c", platform="k8s", scenario="clean", config_hash="h", started_at=0.0,
                    status="ok", stages=[], environment={"harness_host": "alice-ws"}, audit=audit.answers("k8s", raw))
    (cdir / "runs.jsonl").write_bytes(rec.to_line())
    with gzip.open(run / "events.jsonl.gz", "wt") as fh:
        fh.write(json.dumps({"kind": "note", "host": "alice-ws", "ts_ns": 1}) + "\n")
    return rec.to_json()


def test_in_place_cleans_the_raw_evidence_and_derives_the_changed_digests_again(tmp_path):
    cdir = tmp_path / "results" / "c"
    stored = _k8s_run(cdir)
    (cdir / ".owner-key").write_text("k" * 64)
    (cdir / "inflight").mkdir()
    (cdir / "inflight" / "k8s-clean-01.json").write_text("{}")
    run = cdir / "runs" / "k8s-clean-01"
    assert rederive.check_audit(stored, run) == []

    done = trim.clean_in_place(tmp_path / "results", ALICE)
    assert sorted(done["dropped"]) == sorted([str(cdir / ".owner-key"), str(cdir / "inflight")])
    assert not (cdir / ".owner-key").exists()
    raw = load_raw(run)
    assert raw["audit"]["events"][0]["requestObject"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "spec"]["volumes"][0]["hostPath"]["path"] == "$STATE_DIR/k8s-native/checkpoints/c/k8s-clean-01"
    assert raw["events"][0]["reportingInstance"] == "default-scheduler-$HOST"
    assert done["digests"][str(cdir)] == (1, [])
    rec = json.loads((cdir / "runs.jsonl").read_text())
    assert rec["environment"]["harness_host"] == "$HOST"
    # the digest of the cleaned body, as rederive computes it; the stored one of the old body would not match
    assert rederive.check_audit(rec, run) == []
    assert [f.metric for f in rederive.check_audit(stored, run)] == ["audit"]
    assert rec["audit"]["answers"]["what"]["value"] != stored["audit"]["answers"]["what"]["value"]
    assert gzip.decompress((run / "events.jsonl.gz").read_bytes()) == b'{"kind":"note","host":"$HOST","ts_ns":1}\n'
    assert trim.scan(tmp_path / "results", ("alice-ws",)) == {}
    again = trim.clean_in_place(tmp_path / "results", ALICE)   # idempotent
    assert again["changed"] == [] and again["digests"][str(cdir)] == (0, [])


def test_trim_copies_a_campaign_clean_and_never_its_owner_key(tmp_path):
    src = tmp_path / "src"
    _k8s_run(src)
    (src / ".owner-key").write_text("k" * 64)
    (src / "campaign.json").write_text(json.dumps({"schema": 1, "campaign": "c", "config": {
        "fabric": {"env": {"HF_TOKEN": "hf_" + "x1" * 20}}, "dir": "/home/alice/poc"}}, indent=2) + "\n")
    rendered = src / "runs" / "k8s-clean-01" / "rendered"
    rendered.mkdir()
    (rendered / "job.sbatch").write_text("#SBATCH --chdir=/home/alice/poc/r1\nexport WANDB_API_KEY=" + "ab" * 20 + "\n")
    logs = src / "runs" / "k8s-clean-01" / "logs"
    logs.mkdir()
    (logs / "w-0.log").write_text("".join(f"line {i} on alice-ws\n" for i in range(500)))
    (src / "design.json").write_text(json.dumps({"rule": "e", "stages": [{"campaign": "c"}],
                                                 "stopped": "budget, on alice-ws"}) + "\n")
    trim.trim(src, tmp_path / "dst", ALICE)
    dst = tmp_path / "dst"
    # a sequential design's stages and why it stopped: the report reads them from the first campaign's directory
    assert json.loads((dst / "design.json").read_text()) == {"rule": "e", "stages": [{"campaign": "c"}],
                                                             "stopped": "budget, on $HOST"}
    assert not (dst / ".owner-key").exists()
    meta = json.loads((dst / "campaign.json").read_text())
    assert meta["config"] == {"fabric": {"env": {"HF_TOKEN": "<redacted>"}}, "dir": "$HOME/poc"}
    assert (dst / "runs" / "k8s-clean-01" / "rendered" / "job.sbatch").read_text() == \
        "#SBATCH --chdir=$HOME/poc/r1\nexport WANDB_API_KEY=<redacted>\n"
    log = gzip.decompress((dst / "runs" / "k8s-clean-01" / "logs" / "w-0.log.gz").read_bytes()).decode()
    assert log.splitlines() == [f"line {i} on $HOST" for i in range(100, 500)]
    rec = json.loads((dst / "runs.jsonl").read_text())
    assert rederive.check_audit(rec, dst / "runs" / "k8s-clean-01") == []
    assert trim.scan(dst, ("alice-ws",)) == {}


def test_the_scan_finds_a_machine_wherever_it_is(tmp_path):
    (tmp_path / "runs" / "r").mkdir(parents=True)
    (tmp_path / "runs" / "r" / "raw.json.gz").write_bytes(raw_bytes({"Source": "/root/.local/state/x",
                                                                     "LogPath": "/var/lib/docker/containers/a"}))
    (tmp_path / "runs.jsonl").write_text('{"harness_host": "vm", "dir": "/work/main/harness"}\n')
    assert trim.scan(tmp_path) == {("raw.json.gz", "path"): 2, ("runs.jsonl", "path"): 1, ("runs.jsonl", "host"): 1}
    # a report's inlined chart is a picture, whatever its base64 spells; its text is read
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "report.html").write_text('<img src="data:image/png;base64,iVBO+vm+Zs=="><p>on vm</p>')
    assert trim.scan(tmp_path)[("report/", "host")] == 1


def test_the_committed_results_name_no_machine_path_and_no_host():
    """Every file under results/, decompressed, the raw evidence included: none of this machine's or the
    committed campaigns' makers' directories (/root, /work, the state, cache and Docker directories), none of
    their host names (the makers' from the campaigns' provenance, and this machine's)."""
    makers = set()
    for runs in RESULTS.rglob("runs.jsonl"):
        for line in runs.read_text().splitlines():
            env = json.loads(line).get("environment") or {}
            makers |= {env.get("harness_host"), env.get("hostname")} - {None, "$HOST"}
    assert makers == set(), makers   # provenance keeps the placeholder, never a name
    assert trim.scan(RESULTS, tuple(makers)) == {}
