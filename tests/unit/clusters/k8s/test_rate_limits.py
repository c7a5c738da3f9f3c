"""The controllers' client rate limits as a setting of the native cluster (k8s/rate_limits.py,
k8s/tuning.py): parsed from --client-qps, written into Kueue's Configuration and kube-controller-
manager's flags, recorded as set or default, and on a running cluster only the controllers whose limit
changes are stopped for their restart."""
from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from harness.clusters.k8s import commands, components, rate_limits, tuning
from harness.clusters.k8s.layout import Layout, load_state, save_state
from harness.clusters.k8s.pki import CertPair
from harness.errors import ConfigError


def test_parse_takes_qps_and_burst_a_burst_defaults_to_twice_and_default_clears():
    assert rate_limits.parse("kueue=200/300,kube-controller-manager=100") == {
        "kueue": (200, 300), "kube-controller-manager": (100, 200)}
    assert rate_limits.parse("kueue=50/10") == {"kueue": (50, 50)}      # a burst is never below the QPS
    assert rate_limits.parse("default") == {}


@pytest.mark.parametrize("text", ["kube-scheduler=100", "kueue", "kueue=fast", "kueue=0", "kueue=200/x"])
def test_a_bad_setting_is_refused_with_the_form_to_give(text):
    with pytest.raises(ConfigError) as e:
        rate_limits.parse(text)
    assert "--client-qps" in e.value.message and "kueue=200/300" in e.value.tip


def test_the_setting_reaches_kueues_configuration_and_the_controller_managers_flags(tmp_path):
    L = Layout(tmp_path)
    L.config.mkdir(parents=True)
    certs = {n: CertPair(tmp_path / f"{n}.crt", tmp_path / f"{n}.key") for n in ("ca", "sa")}
    assert "clientConnection" not in yaml.safe_load(components.kueue_config(L).read_text())
    assert not [a for a in commands.kube_controller_manager(L, certs).argv if a.startswith("--kube-api")]
    assert rate_limits.describe(L)["kueue"] == "20/30 (Configuration clientConnection, default)"
    rate_limits.save(L, {"kueue": (200, 300), "kube-controller-manager": (100, 150)})
    assert yaml.safe_load(components.kueue_config(L).read_text())["clientConnection"] == {"qps": 200, "burst": 300}
    argv = commands.kube_controller_manager(L, certs).argv
    assert argv[-2:] == ["--kube-api-qps=100", "--kube-api-burst=150"]
    assert rate_limits.with_kcm_flags([*argv[:-2], "--kube-api-qps=5", "--kube-api-burst=6"], L) == argv
    described = rate_limits.describe(L)
    assert described["kueue"] == "200/300 (Configuration clientConnection, set by poc cluster up --client-qps)"
    assert described["kube-scheduler"].startswith("50/100") and described["jobset"].startswith("500")


def test_a_running_cluster_stops_only_the_controllers_whose_limit_changes(tmp_path):
    L = Layout(tmp_path)
    L.config.mkdir(parents=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        state = {"ready": True, "components": {
            "kueue": {"pid": sleeper.pid, "argv": ["kueue-manager", f"--config={L.config / 'kueue.yaml'}"]},
            "kube-controller-manager": {"pid": 2 ** 22 + 7, "argv": ["kcm", "--v=1"]},   # not running
            "kube-scheduler": {"pid": 1, "argv": ["kube-scheduler"]}}}
        save_state(L, state)
        assert tuning.apply_rate_limits(L, {"kueue": (200, 300)}) == ["kueue"]
        assert sleeper.wait(timeout=10) is not None       # stopped, for `up` to start again
        assert yaml.safe_load((L.config / "kueue.yaml").read_text())["clientConnection"]["qps"] == 200
        # the same again changes nothing; back to the default stops it again
        assert tuning.apply_rate_limits(L, {"kueue": (200, 300)}) == []
        both = tuning.apply_rate_limits(L, {"kube-controller-manager": (40, 80)})
        assert both == ["kueue", "kube-controller-manager"]
        assert load_state(L)["components"]["kube-controller-manager"]["argv"] == [
            "kcm", "--v=1", "--kube-api-qps=40", "--kube-api-burst=80"]
        assert rate_limits.load(L) == {"kube-controller-manager": (40, 80)}
    finally:
        sleeper.kill()


@pytest.mark.parametrize("argv, words", [
    (["--provider", "native", "--client-qps", "kueue=fast"], "QPS must be a whole number"),
    (["--provider", "kind", "--client-qps", "kueue=200"], "native Kubernetes cluster's controllers"),
])
def test_a_bad_client_qps_exits_2_with_a_tip_before_any_cluster_starts(capsys, argv, words):
    from harness.cli import main
    assert main(["cluster", "up", "--k8s", *argv], env={}) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR ") and words in err and "\nTIP " in err and "Traceback" not in err
