"""The smoke POC: the local clusters up, the default campaign on every platform, the report.

The campaign is the built-in config widened to all three platforms, with repetitions and the
faults every platform supports, so `poc smoke` answers the product's question on one machine.
"""
from __future__ import annotations

from collections.abc import Callable

from .config import Config, Contention, Fault
from .config.kubernetes import NATIVE_NODE_TOLERATIONS
from .config.ux import MISTAKES

SMOKE_CAMPAIGN = "smoke-poc"  # apart from `poc run`'s default campaign, so both can live in one results dir
SMOKE_PLATFORMS = ["local", "slurm", "k8s"]
# 6 clean runs a platform, interleaved in rounds with the fault and contention runs: the report
# compares Kubernetes and Slurm within rounds with the exact signed-rank test, whose smallest
# two-sided p at n pairs is 2/2^n, and the runs of every scenario in a round give startup, queue and
# bandwidth pairs too. Holm's strictest step over the 7 questions this plan tests asks for 0.05/7, which
# only 9 pairs can reach: so kill_rank, the recovery the smoke compares, gets 9 rounds, and a campaign
# whose rounds all go one way decides it; cost (6 clean rounds) cannot be decided whatever the runs
# show, and `poc smoke` says so before it runs (report/design.py). The sequential design (--design
# sequential --budget 45m) starts from 5 rounds of each and adds rounds for what stays open instead.
SMOKE_REPETITIONS = 6
SMOKE_FAULT_ROUNDS = 9
KILL_RANK, LOSE_NODE = Fault(kind="kill_rank", at_step=15, rank=1), Fault(kind="lose_node", at_step=15, rank=1)
# The local baseline's runs of each scenario beside the schedulers: it answers no question of the family
# (a reference for what a scheduler adds), and its 6 + 5 runs would take the 6 minutes that let 9
# kill_rank rounds fit the 45 of a smoke. A smoke of the baseline alone keeps every round.
SMOKE_BASELINE_ROUNDS = 1
# The all-reduce sweep stops at 16 MiB in the smoke campaign: on the local clusters' CPUs the 32 and
# 64 MiB sizes took ~6 s of every run's ~10 s sweep and measure the same loopback path; bandwidth is
# still compared between platforms at one size (the largest swept). A config that names another
# sweep than the built-in one keeps it.
SMOKE_SWEEP = "1K:16M"
SMOKE_CONTENTION = Contention(runs=1)
SMOKE_DRILLS = ("restart",)
# The sequential design's later stages (harness/cli/sequential.py): Kubernetes and Slurm only (the baseline
# answers no primary question), a handful of rounds each, of the scenarios its open questions need.
STAGE_PLATFORMS = ["slurm", "k8s"]


def smoke_config(cfg: Config, platforms: list[str] | None, repetitions: int | None,
                 tenant: dict | None = None, fault_rounds: int = SMOKE_FAULT_ROUNDS) -> Config:
    """tenant: the native cluster's restricted user (clusters/k8s/tenant.describe), whom the
    user-experience probes run as on Kubernetes, as a team member on a shared cluster would.
    fault_rounds: kill_rank's runs a platform, where the config names no faults of its own."""
    cfg = cfg.model_copy(deep=True)
    # the smoke POC runs on this machine's own clusters: node loss is allowed there
    cfg.allow_destructive_faults = True
    cfg.platforms = platforms or SMOKE_PLATFORMS
    cfg.repetitions = SMOKE_REPETITIONS if repetitions is None else repetitions
    if cfg.local.rounds is None and set(cfg.platforms) - {"local"}:
        cfg.local.rounds = SMOKE_BASELINE_ROUNDS
    # the built-in faults become the smoke's; a config that names its own faults keeps them (told
    # apart by value, as the sweep below: the loaded config marks every field as set)
    if cfg.faults == type(cfg).model_fields["faults"].default_factory():
        cfg.faults = [KILL_RANK.model_copy() for _ in range(fault_rounds)] + [LOSE_NODE.model_copy()]
    # the loaded config marks every field as set, so the built-in default is told apart by value
    if cfg.workload.sweep == type(cfg.workload).model_fields["sweep"].default:
        cfg.workload.sweep = SMOKE_SWEEP
    cfg.contention = cfg.contention or SMOKE_CONTENTION.model_copy()
    # every mistake once per scheduler platform: descriptive (n = 1), what a user meets first
    cfg.ux.mistakes = cfg.ux.mistakes or list(MISTAKES)
    # the control-plane restart drill once per scheduler, on the clusters `poc smoke` made; the
    # version-upgrade drill builds newer releases (minutes to half an hour) and replaces the clusters
    # afterwards: benchmarks/upgrade_drill.py runs it, or drills.kinds in the config
    cfg.drills.kinds = cfg.drills.kinds or list(SMOKE_DRILLS)
    # the inference probe once per scheduler: serve what a short run trained, kill the
    # server, lose its node, scale out
    cfg.serve.enabled = True
    if tenant and cfg.kubernetes.native and not cfg.ux.kubernetes:
        cfg.ux.kubernetes = tenant_probe_settings(tenant)
    return cfg


def tenant_probe_settings(tenant: dict) -> dict:
    """ux.kubernetes for the native cluster's restricted user: its kubeconfig, namespace, queue and
    priority class; the locally built image (no registry: never pulled); and the cluster's audit log,
    which its admin (this machine) reads for the user's runs as for every other."""
    from .clusters.images import worker_ref  # a content hash of the recipe: no docker call
    from .clusters.k8s.audit import log_path
    from .paths import NATIVE_K8S_CLUSTER, cluster_state_dir

    return {"kubeconfig": tenant["kubeconfig"], "namespace": tenant["namespace"],
            "audit_log": str(log_path(cluster_state_dir(NATIVE_K8S_CLUSTER))),
            "local_queue": tenant["local_queue"], "image": worker_ref(), "image_pull_policy": "Never",
            # the tenant's kubeconfig is a file, not "native": its pods name the lab's GPU taint themselves
            "pod": {"tolerations": [dict(t) for t in NATIVE_NODE_TOLERATIONS],
                    "priority_class": tenant.get("priority_class")}}


def native_tenant() -> dict | None:
    """The running native cluster's restricted user, or None (no cluster, or made before it had one)."""
    from .clusters import native_k8s

    try:
        return native_k8s.info().restricted if native_k8s.is_up() else None
    except Exception:  # noqa: BLE001 - no tenant is a smaller smoke POC (the probes run as the admin), not an error
        return None


def ensure_clusters(platforms: list[str], say: Callable[[str], None]) -> dict:
    """Start the local clusters the platforms need, reusing running ones (`up` is cheap then).

    say: where progress goes (the CLI's Out.info, silent with --quiet): which cluster is starting,
    and while images or Go components build, a line every ~20 s with the elapsed time and the
    last build's duration."""
    from . import clusters

    out = {}
    for plat in ("slurm", "k8s"):
        if plat not in platforms:
            continue
        # the smoke campaign's Kubernetes backend reads the native cluster's state: no provider choice
        cluster = clusters.get(plat, provider="native", say=say)
        if not cluster.is_up():
            say(f"{plat}: bringing up the {cluster.name} cluster (builds and images are cached)")
        out[plat] = cluster.up()
    return out


def stage_config(cfg: Config, campaign: str, rounds: int, scenarios: list[str]) -> Config:
    """One later stage of a sequential smoke: `rounds` more rounds of each scenario named ("clean", a fault
    kind, "contention"), on Kubernetes and Slurm, nothing else: no probes, drills or serving, whose one run a
    platform the first stage gave. Its own campaign, so the first stage's config and hash stay as they were."""
    cfg = cfg.model_copy(deep=True)
    cfg.campaign = campaign
    cfg.platforms = [p for p in STAGE_PLATFORMS if p in cfg.platforms]
    cfg.repetitions = rounds if "clean" in scenarios else 0
    by_kind = {f.kind: f for f in cfg.faults}
    cfg.faults = [by_kind[k].model_copy() for k in scenarios if k in by_kind for _ in range(rounds)]
    cfg.contention = Contention(runs=rounds) if "contention" in scenarios else None
    cfg.ux.mistakes = []
    cfg.drills.kinds = []
    cfg.serve.enabled = False
    cfg.scale.nodes = []
    return cfg
