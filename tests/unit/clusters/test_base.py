"""One interface for the local clusters, one dispatch, one ERROR/TIP boundary; `status` is cheap.

No cluster is needed: the native cluster's status is read from a state directory written here.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import ROOT

from harness import cli
from harness.clusters import base, k8s_provider
from harness.clusters.kind import Kind
from harness.clusters.native_k8s import NativeK8s
from harness.clusters.slurm_docker import SlurmDocker
from harness.errors import ConfigError

REPO = ROOT


def _must_not_pull():
    raise AssertionError("only `up` may ask whether kind can get (pull) its node image")


def test_status_and_down_never_pull_with_provider_auto():
    for action in ("status", "down"):
        assert k8s_provider("auto", action, kind_usable=_must_not_pull, kind_exists=lambda: False) == "native"
        assert k8s_provider("auto", action, kind_usable=_must_not_pull, kind_exists=lambda: True) == "kind"


def test_up_decides_the_provider_by_whether_kind_can_get_its_image():
    assert k8s_provider("auto", "up", kind_usable=lambda: True, kind_exists=lambda: False) == "kind"
    assert k8s_provider("auto", "up", kind_usable=lambda: False, kind_exists=lambda: True) == "native"
    for provider in ("native", "kind"):
        assert k8s_provider(provider, "up", kind_usable=_must_not_pull, kind_exists=_must_not_pull) == provider
    with pytest.raises(ConfigError, match="unknown Kubernetes provider"):
        k8s_provider("minikube", "up")


def test_every_local_cluster_offers_the_one_interface():
    for cluster in (SlurmDocker(), NativeK8s(), Kind()):
        assert isinstance(cluster, base.LocalCluster), type(cluster).__name__
        assert cluster.name in ("slurm", "k8s-native", "kind")


def _reaped_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _native_state(root: Path) -> Path:
    """A native cluster's state file with one live component (this test process) and one dead."""
    state_dir = root / "k8s-native"
    state_dir.mkdir(parents=True)
    exe = Path(Path(f"/proc/{os.getpid()}/cmdline").read_bytes().split(b"\0")[0].decode()).name
    (state_dir / "state.json").write_text(json.dumps({"ready": True, "nodes": ["poc-n1"], "components": {
        "etcd": {"pid": os.getpid(), "exe": exe, "log": str(state_dir / "logs/etcd.log")},
        "kube-scheduler": {"pid": _reaped_pid(), "exe": "kube-scheduler", "log": str(state_dir / "logs/s.log")},
    }}))
    return state_dir


def test_cluster_status_reads_the_state_and_reports_dead_components(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("POC_STATE_DIR", str(tmp_path))
    _native_state(tmp_path)
    assert cli.main(["cluster", "status", "--k8s", "--provider", "native", "--json"]) == 0
    got = {c["name"]: c for c in json.loads(capsys.readouterr().out)["k8s"]}
    assert got["etcd"]["alive"] is True and got["etcd"]["state"] == "running"
    assert got["kube-scheduler"]["alive"] is False and got["kube-scheduler"]["state"] == "dead"
    assert NativeK8s().is_up() is False          # a dead component: not up (up would repair it)

    assert cli.main(["cluster", "status", "--k8s", "--provider", "native"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "k8s:" and lines[2].split()[:2] == ["kube-scheduler", "dead"]


def test_status_of_a_cluster_never_started_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("POC_STATE_DIR", str(tmp_path))
    assert cli.main(["cluster", "status", "--k8s", "--provider", "native"]) == 0
    assert capsys.readouterr().out.splitlines() == ["k8s:", "  (nothing running)"]


def test_a_cluster_action_needs_a_cluster_and_errors_go_through_the_cli(capsys):
    assert cli.main(["cluster", "up"]) == 2
    err = capsys.readouterr().err
    assert "ERROR say which cluster: --slurm, --k8s or both" in err and "TIP " in err


def test_a_cluster_module_returns_what_the_cli_prints_and_prints_nothing(tmp_path, capsys):
    """The cluster modules are a library below the CLI: status is data, `poc cluster status` prints it."""
    assert NativeK8s(state_dir=tmp_path).status() == [] and not NativeK8s(state_dir=tmp_path).is_up()
    assert capsys.readouterr() == ("", "")
    env = dict(os.environ, POC_STATE_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "cluster", "status", "--k8s", "--provider", "native"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["k8s:", "  (nothing running)"]
