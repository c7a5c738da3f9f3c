"""harness/cli/campaign_state.py: a campaign's stored config comes back with this machine's paths where the
store wrote placeholders, so `poc cancel`, `poc logs` and `poc cleanup` reach the platforms it ran on."""
from __future__ import annotations

import json

from harness.cli import campaign_state
from harness.store import Store


def test_the_stored_config_is_read_back_with_this_machine_s_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("POC_STATE_DIR", str(tmp_path / "state"))
    ckpt = str(tmp_path / "state" / "k8s-native" / "checkpoints")
    s = Store(tmp_path / "results", "c1")
    s.open("h", {"kubernetes": {"checkpoint_host_path": ckpt}, "slurm": {"workdir": "/shared/poc"}}, resume=False)
    s.close()
    stored = json.loads((s.root / "campaign.json").read_text())["config"]
    assert stored["kubernetes"]["checkpoint_host_path"] == "$STATE_DIR/k8s-native/checkpoints"
    view = campaign_state.read(s.root)
    assert view.meta["config"] == {"kubernetes": {"checkpoint_host_path": ckpt}, "slurm": {"workdir": "/shared/poc"}}
