"""The recovery section says, beside the figures, how a failed run restarts on each platform, from what the
runs recorded: Slurm requeues (its batch script, or Slurm after a node failure) with slurm.conf's requeue
settings; Kubernetes follows the run's own JobSet failurePolicy, and Kueue's waitForPodsReady where it could be
read. Records from before these were kept say nothing (the committed reports stay as they are)."""
from __future__ import annotations

import copy
import json

import pytest
from support.paths import FIXTURES, RESULTS

from harness import config
from harness import slurm_parse as sp
from harness.backends.k8s.preflight import failure_policy_of
from harness.backends.slurm.backend import recovery_settings
from harness.report import defaults as d

CAMPAIGN = RESULTS / "smoke-2026-12-03-ux-audit"
JOBSET = json.loads((FIXTURES / "k8s" / "recorded" / "k8s-kill-rank-01.raw.json").read_text())["jobset"]
NATIVE_KUEUE = {"source": "/state/k8s-native/config/kueue.yaml (the native cluster's kueue-manager --config)",
                "waitForPodsReady": None}
SLURM_SAID = ("requeued, never restarted inside its allocation (torchrun --max_restarts=0): after a failed srun the "
              "batch script requeues its own job (scontrol requeue) while fewer than 3 restarts (slurm.max_restarts) "
              "were made; after a node failure Slurm requeues it (sbatch --requeue); slurm.conf JobRequeue 1, "
              "RequeueExit not set, RequeueExitHold not set, MaxBatchRequeue 5")
K8S_SAID = ("the run's JobSet failurePolicy: maxRestarts 3, restartStrategy Recreate, no rules; its Jobs' "
            f"backoffLimit 0; Kueue waitForPodsReady off (not set in {NATIVE_KUEUE['source']})")


@pytest.fixture(scope="module")
def records() -> dict[str, dict]:
    lines = (CAMPAIGN / "smoke-poc" / "runs.jsonl").read_text().splitlines()
    return {r["run_id"]: r for r in map(json.loads, lines)}


def slurm_now(rec: dict) -> dict:
    """The committed record as preflight records a Slurm run now (the local cluster's scontrol show config)."""
    rec = copy.deepcopy(rec)
    conf = sp.show_config((FIXTURES / "slurm" / "trixie" / "scontrol_show_config.txt").read_text())
    rec["environment"]["slurm_recovery"] = recovery_settings(config.from_mapping({"platforms": ["slurm"]}).slurm, conf)
    return rec


def k8s_now(rec: dict, kueue: dict = NATIVE_KUEUE) -> dict:
    rec = copy.deepcopy(rec)
    rec["scheduler"]["info"]["failure_policy"] = failure_policy_of(JOBSET)
    rec["environment"]["kueue_config"] = kueue
    return rec


def test_slurm_says_it_requeues_with_its_settings(records):
    assert d.restart_text(slurm_now(records["slurm-kill-rank-01"])) == SLURM_SAID


def test_kubernetes_says_what_its_jobset_and_kueue_do(records):
    assert d.restart_text(k8s_now(records["k8s-kill-rank-01"])) == K8S_SAID
    unread = {"source": "ConfigMap kueue-system/kueue-manager-config, key controller_manager_config.yaml",
              "unreadable": 'HTTP 403: configmaps "kueue-manager-config" is forbidden'}
    assert d.restart_text(k8s_now(records["k8s-kill-rank-01"], unread)).endswith(
        "; Kueue's configuration unreadable here (ConfigMap kueue-system/kueue-manager-config, key "
        "controller_manager_config.yaml: HTTP 403: configmaps \"kueue-manager-config\" is forbidden)")
    on = {"source": "ConfigMap kueue-system/kueue-manager-config, key controller_manager_config.yaml",
          "waitForPodsReady": {"enable": True, "timeout": "10m", "recoveryTimeout": "3m"}}
    assert d.restart_text(k8s_now(records["k8s-kill-rank-01"], on)).endswith(
        "; Kueue waitForPodsReady on (timeout 10m, recoveryTimeout 3m; ConfigMap kueue-system/kueue-manager-config, "
        "key controller_manager_config.yaml)")
    js = copy.deepcopy(JOBSET)
    js["spec"]["failurePolicy"]["rules"] = [{"name": "config-error", "action": "FailJobSet",
                                             "onJobFailureReasons": ["PodFailurePolicy"]}]
    rec = k8s_now(records["k8s-kill-rank-01"])
    rec["scheduler"]["info"]["failure_policy"] = failure_policy_of(js)
    assert "restartStrategy Recreate, rules config-error: FailJobSet on PodFailurePolicy;" in d.restart_text(rec)


def test_the_section_states_it_beside_the_figures(records):
    recs = [slurm_now(records["slurm-kill-rank-01"]), k8s_now(records["k8s-kill-rank-01"]),
            k8s_now(records["k8s-lose-node-04"])]
    summaries = d.summarize(p for p in map(d.project, recs) if p is not None)
    notes = [text for kind, text in d.section(summaries, {"slurm": "Slurm", "k8s": "Kubernetes"}.get)[0][1]
             if kind == "p"]
    assert f"How a failed run restarts on Slurm, as its runs recorded it: {SLURM_SAID}." in notes
    assert notes.count(f"How a failed run restarts on Kubernetes, as its runs recorded it: {K8S_SAID}.") == 1


def test_records_from_before_say_nothing(records):
    for run_id in ("slurm-kill-rank-01", "k8s-kill-rank-01", "k8s-lose-node-04"):
        assert d.restart_text(records[run_id]) is None
        assert d.project(records[run_id]).restart is None
    summaries = d.summarize(d.project(records[r]) for r in ("slurm-kill-rank-01", "k8s-kill-rank-01"))
    assert not any("restarts on" in str(b) for b in d.section(summaries, str)[0][1])
