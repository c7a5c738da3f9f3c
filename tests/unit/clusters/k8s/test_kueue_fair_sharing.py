"""Kueue's fair sharing as a setting of the native cluster (k8s/rate_limits.py, k8s/tuning.py): off by default,
written into Kueue's Configuration when set on, recorded beside the rate limits, and on a running cluster Kueue
stopped for its restart only when the setting changes; `poc cluster up --kueue-fair-sharing` only on native."""
from __future__ import annotations

import subprocess
import sys

import yaml

from harness.clusters.k8s import components, rate_limits, tuning
from harness.clusters.k8s.layout import Layout, save_state


def test_fair_sharing_is_off_until_set_then_in_kueues_configuration_and_recorded(tmp_path):
    L = Layout(tmp_path)
    L.config.mkdir(parents=True)
    assert "fairSharing" not in yaml.safe_load(components.kueue_config(L).read_text())
    assert rate_limits.describe(L)["kueue fairSharing"] == "off (Kueue's default)"
    rate_limits.save_fair_sharing(L, True)
    assert yaml.safe_load(components.kueue_config(L).read_text())["fairSharing"] == {"enable": True}
    assert rate_limits.describe(L)["kueue fairSharing"] == "enable"
    (L.config / rate_limits.FAIR_FILE).write_text("not json")       # a damaged record reads as the default
    assert rate_limits.fair_sharing(L) is False


def test_a_running_kueue_is_stopped_only_when_fair_sharing_changes(tmp_path):
    L = Layout(tmp_path)
    L.config.mkdir(parents=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        save_state(L, {"ready": True, "components": {
            "kueue": {"pid": sleeper.pid, "argv": ["kueue-manager", f"--config={L.config / 'kueue.yaml'}"]}}})
        assert tuning.apply_fair_sharing(L, False) == []        # off already: nothing to restart
        assert sleeper.poll() is None
        assert tuning.apply_fair_sharing(L, True) == ["kueue"]
        assert sleeper.wait(timeout=10) is not None
        assert yaml.safe_load((L.config / "kueue.yaml").read_text())["fairSharing"] == {"enable": True}
        assert tuning.apply_fair_sharing(L, True) == []
    finally:
        sleeper.kill()


def test_fair_sharing_on_another_provider_exits_2_with_a_tip(capsys):
    from harness.cli import main
    assert main(["cluster", "up", "--k8s", "--provider", "kind", "--kueue-fair-sharing", "on"], env={}) == 2
    err = capsys.readouterr().err
    assert "--kueue-fair-sharing sets the native Kubernetes cluster's Kueue" in err and "--provider native" in err
