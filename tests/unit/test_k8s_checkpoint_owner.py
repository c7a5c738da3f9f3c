"""A Kubernetes run's checkpoint sub-path is keyed by its campaign's token, as Slurm's run directory
is: two users' campaigns of one name (the default `smoke`) with the same run ids never resume from
each other's checkpoints, and a cleanup removes only its own campaign's directory."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from harness import config, spec
from harness.backends.base import Handle
from harness.backends.k8s.backend import KubernetesBackend
from harness.render import cleanup as rc
from harness.render import jobset as rj
from harness.render import owned_dir


def _cfg():
    return config.from_mapping({"platforms": ["k8s"], "kubernetes": {"image": "img:1"}})


def test_the_checkpoint_sub_path_carries_the_campaigns_token_and_not_outside_a_campaign():
    cfg = _cfg()
    s = spec.build(cfg, "k8s", "k8s-clean-01", None)
    assert spec.campaign_dir(s.campaign, "") == s.campaign
    mine, theirs = replace(s, owner="a1b2c3"), replace(s, owner="d4e5f6")
    _, mount, path = rj.checkpoint_volume(mine, cfg.kubernetes, "/ckpt", "team-pvc")
    assert mount["subPath"] == path == f"{s.campaign}-a1b2c3/k8s-clean-01"
    assert rj.checkpoint_volume(theirs, cfg.kubernetes, "/ckpt", "team-pvc")[2] != path
    vol, _, host = rj.checkpoint_volume(mine, cfg.kubernetes, "/ckpt", None)
    assert host == vol["hostPath"]["path"] == f"/ckpt/{s.campaign}-a1b2c3/k8s-clean-01"
    # render, validate and the goldens (no campaign, no token) keep the plain path
    assert rj.checkpoint_volume(s, cfg.kubernetes, "/ckpt", None)[2] == f"/ckpt/{s.campaign}/k8s-clean-01"


def test_cleanup_removes_its_own_campaigns_directory_and_leaves_a_same_named_one(tmp_path):
    cfg = _cfg()
    be = KubernetesBackend(cfg.kubernetes, client=SimpleNamespace(own_core=None), image="img:1",
                           checkpoint_root=str(tmp_path), checkpoint_pvc=None, local_cluster=True)
    mine, theirs = tmp_path / "smoke-a1b2c3" / "k8s-clean-01", tmp_path / "smoke-d4e5f6" / "k8s-clean-01"
    for d, token in ((mine, "a1b2c3"), (theirs, "d4e5f6")):
        (d / "ckpt").mkdir(parents=True)
        (d / owned_dir.OWNER_MARK).write_text(token)      # as each campaign's pods wrote it
    h = Handle("k8s", "k8s-clean-01", ["poc/k8s-clean-01"], 0.0,
               data={"namespace": "poc", "name": "k8s-clean-01", "campaign": "smoke", "owner": "a1b2c3",
                     "checkpoint_path": str(mine), "checkpoint_pvc": None, "lost_nodes": [], "cordoned": []})
    assert be.cleanup(h, ok=True, keep="on_failure") == {"removed": [str(mine)], "kept": []}
    assert not mine.exists() and (theirs / "ckpt").is_dir()


def test_the_cleanup_pod_removes_the_token_keyed_sub_path():
    k = _cfg().kubernetes
    pod = rc.cleanup_pod(k, "img:1", "team-pvc", spec.campaign_dir("smoke", "a1b2c3"), "k8s-clean-01", "a1b2c3")
    assert pod["spec"]["containers"][0]["command"] == owned_dir.owned_dir_argv(
        "remove", "/poc-run/smoke-a1b2c3/k8s-clean-01", "a1b2c3")
