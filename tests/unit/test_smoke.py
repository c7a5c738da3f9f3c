"""`poc smoke`'s campaign: the built-in config widened to every platform, runnable on this machine's
own GPU-shaped clusters (their node loss allowed, their GPU taint tolerated)."""
from __future__ import annotations

from harness import config, scenarios, spec
from harness.backends.k8s.taints import tolerates
from harness.clusters.k8s.gpu_shape import GPU_TAINT, GPU_TOLERATION
from harness.config.kubernetes import NATIVE_NODE_TOLERATIONS
from harness.render import jobset as rj
from harness.smoke import SMOKE_PLATFORMS, smoke_config

(NATIVE_GPU_TOLERATION,) = NATIVE_NODE_TOLERATIONS


def test_the_smoke_campaign_validates_and_its_pods_tolerate_the_native_clusters_gpu_taint():
    cfg = smoke_config(config.load(None), None, None)
    assert cfg.platforms == SMOKE_PLATFORMS and cfg.kubernetes.native
    # lose_node is destructive: allowed here because the clusters are the project's own
    assert cfg.allow_destructive_faults and any(f.kind == "lose_node" for f in cfg.faults)
    config.from_mapping(cfg.model_dump(mode="json"))          # what is stored with the results loads again
    s = spec.build(cfg, "k8s", "k8s-clean-01", None)
    pod = rj.render_jobset(s, cfg.kubernetes, "poc/worker:1", "/tmp/ckpt").jobset["spec"]["replicatedJobs"][0]
    assert NATIVE_GPU_TOLERATION in pod["template"]["spec"]["template"]["spec"]["tolerations"]
    again = smoke_config(cfg, None, None)                     # never twice
    assert again.kubernetes.tolerations.count(NATIVE_GPU_TOLERATION) == 1


def test_the_built_in_config_tolerates_the_native_clusters_gpu_taint_and_only_there():
    """The default config runs on the project's own cluster with no file to write; a config written
    for another cluster gets exactly the tolerations it names."""
    cfg = config.load(None)
    assert cfg.kubernetes.native and cfg.kubernetes.pod.tolerations == []
    s = spec.build(cfg, "k8s", "k8s-clean-01", None)
    pod = rj.render_jobset(s, cfg.kubernetes, "poc/worker:1", "/tmp/ckpt").jobset["spec"]["replicatedJobs"][0]
    assert NATIVE_GPU_TOLERATION in pod["template"]["spec"]["template"]["spec"]["tolerations"]
    # the toleration is the one the native nodes' taint asks for (clusters/k8s/gpu_shape.py)
    assert NATIVE_GPU_TOLERATION == GPU_TOLERATION and tolerates(NATIVE_GPU_TOLERATION, GPU_TAINT)
    written = config.from_mapping({"kubernetes": {"pod": {"tolerations": [dict(NATIVE_GPU_TOLERATION)]}}})
    assert written.kubernetes.tolerations == [NATIVE_GPU_TOLERATION]
    elsewhere = config.from_mapping({"kubernetes": {"kubeconfig": "/etc/kc", "image": "reg.example/t:1"}})
    assert elsewhere.kubernetes.tolerations == []


def test_a_config_for_another_cluster_keeps_its_own_tolerations():
    cfg = config.from_mapping({"kubernetes": {"kubeconfig": "/etc/kc", "image": "reg.example/t:1"}})
    assert NATIVE_GPU_TOLERATION not in smoke_config(cfg, ["k8s"], 1).kubernetes.tolerations


def test_the_smoke_campaign_probes_every_mistake_as_the_native_clusters_restricted_user():
    from harness.config.ux import MISTAKES
    from harness.ux import mistakes
    tenant = {"user": "poc-user", "kubeconfig": "/state/restricted-kubeconfig", "namespace": "poc-gpu",
              "local_queue": "poc-gpu-queue", "priority_class": "poc-gpu-normal"}
    cfg = smoke_config(config.load(None), None, None, tenant=tenant)
    assert cfg.ux.mistakes == list(MISTAKES)
    kinds = [p.scenario for p in scenarios.plan(cfg, "slurm")]
    # the mistakes, then the serving run, then the drill
    assert kinds[-len(MISTAKES) - 2:] == [f"mistake:{k}" for k in MISTAKES] + ["serve", "drill:restart"]
    assert [p.scenario for p in scenarios.plan(cfg, "local")].count("serve") == 0
    config.from_mapping(cfg.model_dump(mode="json"))          # stored with the results, loads again
    probe = mistakes.probe_config(cfg, "k8s").kubernetes
    assert (probe.kubeconfig, probe.namespace, probe.local_queue) == (
        "/state/restricted-kubeconfig", "poc-gpu", "poc-gpu-queue")
    assert probe.pod.priority_class == "poc-gpu-normal" and NATIVE_GPU_TOLERATION in probe.pod.tolerations
    assert probe.image and probe.image_pull_policy == "Never"   # the local image, never pulled
    assert probe.audit_log and probe.audit_log.endswith("audit.log")   # the admin reads the user's runs too
    # without a tenant (a cluster made before it had one) the probes run as the campaign's identity
    assert smoke_config(config.load(None), None, None).ux.kubernetes == {}


def test_the_smoke_campaign_ends_each_scheduler_with_the_restart_drill_and_never_the_upgrade():
    cfg = smoke_config(config.load(None), None, None)
    for plat in ("slurm", "k8s"):
        assert scenarios.plan(cfg, plat)[-1].scenario == "drill:restart"
    assert not [p for p in scenarios.plan(cfg, "local") if p.scenario.startswith("drill:")]
    assert smoke_config(config.from_mapping({"drills": {"kinds": ["upgrade"]}}), None, None).drills.kinds == ["upgrade"]


def test_the_smoke_campaign_gives_recovery_five_runs_a_side_and_the_within_round_test_six_pairs():
    from harness.report.paired import signed_rank_p
    from harness.smoke import SMOKE_SWEEP
    cfg = smoke_config(config.load(None), None, None)
    for plat in ("slurm", "k8s"):
        kinds = [p.scenario for p in scenarios.plan(cfg, plat)]
        assert kinds.count("kill_rank") >= 5 and kinds.count("clean") >= 6
    # 6 pairs all one way are the fewest the exact signed-rank test can call a difference at 5 %
    assert signed_rank_p([1.0] * cfg.repetitions) < 0.05 and signed_rank_p([1.0] * (cfg.repetitions - 1)) >= 0.05
    # the sweep stops at 16 MiB (what bought nothing on the local clusters' CPUs); a config's own sweep is kept
    assert cfg.workload.sweep == SMOKE_SWEEP and cfg.workload.sweep_max_bytes == 16 * 1024**2
    own = smoke_config(config.from_mapping({"workload": {"sweep": "1K:1M"}}), None, None)
    assert own.workload.sweep == "1K:1M"
