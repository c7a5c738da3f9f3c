"""`poc smoke`'s campaign: the built-in config widened to every platform, runnable on this machine's
own GPU-shaped clusters (their node loss allowed, their GPU taint tolerated)."""
from __future__ import annotations

from harness import config, spec
from harness.render import jobset as rj
from harness.smoke import NATIVE_GPU_TOLERATION, SMOKE_PLATFORMS, smoke_config


def test_the_smoke_campaign_validates_and_its_pods_tolerate_the_native_clusters_gpu_taint():
    cfg = smoke_config(config.load(None), None, None)
    assert cfg.platforms == SMOKE_PLATFORMS and cfg.kubernetes.native
    # lose_node is destructive: allowed here because the clusters are the project's own
    assert cfg.allow_destructive_faults and any(f.kind == "lose_node" for f in cfg.faults)
    config.from_mapping(cfg.model_dump(mode="json"))          # what is stored with the results loads again
    s = spec.build(cfg, "k8s", "k8s-clean-01", None)
    pod = rj.render_jobset(s, cfg.kubernetes, "poc/worker:1", "/tmp/ckpt").jobset["spec"]["replicatedJobs"][0]
    assert NATIVE_GPU_TOLERATION in pod["template"]["spec"]["template"]["spec"]["tolerations"]
    again = smoke_config(cfg, None, None)                     # not added twice
    assert again.kubernetes.pod.tolerations.count(NATIVE_GPU_TOLERATION) == 1


def test_a_config_for_another_cluster_keeps_its_own_tolerations():
    cfg = config.from_mapping({"kubernetes": {"kubeconfig": "/etc/kc", "image": "reg.example/t:1"}})
    assert NATIVE_GPU_TOLERATION not in smoke_config(cfg, ["k8s"], 1).kubernetes.pod.tolerations
