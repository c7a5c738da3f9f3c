"""A replay on this machine's clusters: the native Kubernetes cluster's emulated nodes (KWOK) and the
emulated Slurm cluster, as `poc cluster up --k8s --slurm --provider native --emulated N` leaves them.
Checks that the trace fits the nodes before anything is submitted, and leaves nothing of the replay
behind, interrupted or not."""
from __future__ import annotations

import uuid
from collections.abc import Callable

from ..backends.k8s.api import K8sClient, qty
from ..clusters import native_k8s as nk
from ..clusters.k8s import kwok, rate_limits
from ..clusters.k8s.layout import Layout
from ..clusters.slurm import emulated
from ..errors import ConfigError
from ..render import replay_k8s as rr
from ..render import replay_priority as rp
from ..render import replay_slurm as rsl
from ..scale.trace import Trace
from .k8s import K8sReplay
from .slurm import SlurmReplay
from .slurm_tenancy import emulated_slurm_nodes, make_accounts, make_qos, remove_accounts, remove_qos, slurm_shell


def classes_of(trace: Trace, priorities: dict[str, int] | None) -> list[rp.ClassPriority]:
    """The trace's QOS classes with their priorities (render/replay_priority.py's defaults unless given)."""
    return rp.class_priorities([j.qos for j in trace.jobs], rp.DEFAULT_PRIORITIES if priorities is None
                               else priorities)


def emulated_gpus(core) -> tuple[int, int]:
    """(Ready emulated nodes, GPUs per node, the fewest any has)."""
    nodes = [n for n in core.list_node(label_selector=kwok.SELECTOR).items
             if any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))]
    gpus = [int(qty((n.status.allocatable or {}).get(kwok.GPU_RESOURCE, 0))) for n in nodes]
    return len(nodes), min(gpus, default=0)


def check_fits(trace: Trace, nodes: int, gpus: int, flag: str = "--k8s --provider native") -> None:
    want_nodes = max([j.nodes for j in trace.jobs] + [trace.shape.nodes if trace.shape else 0])
    want_gpus = max([j.gpus_per_node for j in trace.jobs] + [trace.shape.gpus_per_node if trace.shape else 0])
    if nodes < want_nodes or gpus < want_gpus:
        raise ConfigError(f"the trace is for {want_nodes} nodes × {want_gpus} GPUs and the cluster has {nodes} "
                          f"emulated nodes × {gpus} GPUs",
                          tip=f"poc cluster up {flag} --emulated {want_nodes} "
                              f"--gpus-per-node {want_gpus}")


def replay_k8s(trace: Trace, name: str, timeout_s: float | None = None,
               say: Callable[[str], None] = print, topology: str = "preferred", preemption: str = "off",
               priorities: dict[str, int] | None = None) -> tuple[dict, int]:
    """Replay `trace` on the local emulated nodes: (the replay's result, the cluster's GPUs). topology:
    Kueue TAS for every gang (render/replay_k8s.py TOPOLOGY_MODES), preferred by default as Slurm's
    topology/tree is on the other side. preemption, priorities: render/replay_priority.py."""
    if not trace.jobs:
        raise ConfigError("the trace has no jobs", tip="poc scale show TRACE says what it holds")
    if preemption not in rp.PREEMPTION_MODES:
        raise ConfigError(f"preemption {preemption!r}", tip=f"one of {', '.join(rp.PREEMPTION_MODES)}")
    if not nk.is_up():
        raise ConfigError("the native Kubernetes cluster is not up",
                          tip="poc cluster up --k8s --provider native --emulated N")
    info = nk.info()
    core = kwok.core_api(info.kubeconfig)
    nodes, gpus = emulated_gpus(core)
    check_fits(trace, nodes, gpus)
    label = f"{name[:40].strip('-')}-{uuid.uuid4().hex[:6]}"
    classes = classes_of(trace, priorities)
    try:
        target = rr.Target(namespace=rr.k8s_name(f"poc-replay-{label}"), replay=rr.k8s_name(label),
                           topology=topology, preemption=preemption, classes=tuple(classes),
                           node_labels={kwok.TYPE_LABEL[0]: kwok.TYPE_LABEL[1]}, tolerations=(kwok.TOLERATION,))
    except ValueError as e:
        raise ConfigError(str(e), tip="name the trace's QOS classes so they differ in letters and digits") from None
    client = K8sClient(str(info.kubeconfig), timeout_s=60)
    rep = K8sReplay(client, target)
    if timeout_s is None:
        timeout_s = default_timeout(trace)
    say(f"[k8s] replaying {len(trace.jobs)} jobs on {nodes} emulated nodes × {gpus} GPUs "
        f"(namespace {target.namespace}; watching at most {timeout_s:g} s)")
    try:
        result = rep.run(trace, rr.equal_quotas(trace, nodes * gpus), timeout_s=timeout_s)
    finally:
        gone = rep.delete(wait_s=600)
        client.close()
    result["settings"] = {"nodes": nodes, "gpus_per_node": gpus, "namespace": target.namespace,
                          "quotas": "equal_quotas: each tenant an equal share of the GPUs, borrowing the rest",
                          "limit_grace_s": target.limit_grace_s, "poll_s": rep.poll_s, "workers": rep.workers,
                          "pods": "KWOK: Running at once, Succeeded about 1 s after the annotated run time",
                          "topology": rr.topology_text(target),
                          "preemption": rp.settings_text(preemption, classes),
                          "client_rate_limits_qps_burst": rate_limits.describe(Layout(info.state_dir)),
                          "cleaned_up": gone}
    return result, nodes * gpus


def default_timeout(trace: Trace) -> float:
    return max(j.submit_s + j.limit_s for j in trace.jobs) + 120


SLURM_SETTINGS = ("SchedulerType", "SchedulerParameters", "SelectType", "PriorityType", "PriorityWeightFairShare",
                  "PriorityWeightAge", "PriorityWeightJobSize", "PriorityWeightQOS", "PriorityDecayHalfLife",
                  "PriorityMaxAge", "PriorityCalcPeriod", "PriorityFlags", "AccountingStorageEnforce",
                  "PreemptType", "PreemptMode", "AuthInfo")


def replay_slurm(trace: Trace, name: str, timeout_s: float | None = None,
                 say: Callable[[str], None] = print, shell=slurm_shell, preemption: str = "off",
                 priorities: dict[str, int] | None = None) -> tuple[dict, int]:
    """Replay `trace` on the emulated Slurm cluster: (the replay's result, the cluster's GPUs).

    Each tenant is an account for the replay's length, with the shares of Kubernetes' equal quotas
    (render/replay_slurm.py has the mapping); with preemption, each QOS class a QOS
    (render/replay_priority.py). What it made is removed afterwards, interrupted or not (a QOS it only
    set, ``normal``, is set back), and what `sshare` showed at the end is kept."""
    if preemption not in rp.PREEMPTION_MODES:
        raise ConfigError(f"preemption {preemption!r}", tip=f"one of {', '.join(rp.PREEMPTION_MODES)}")
    if not trace.jobs:
        raise ConfigError("the trace has no jobs", tip="poc scale show TRACE says what it holds")
    nodes, gpus = emulated_slurm_nodes(shell)
    if nodes == 0:
        raise ConfigError(f"the emulated Slurm cluster ({emulated.CONTAINER}) is not up",
                          tip="poc cluster up --slurm --emulated N")
    check_fits(trace, nodes, gpus, flag="--slurm")
    conf = shell(["scontrol", "show", "config"], timeout=60).stdout
    sched = {k.strip(): v.strip() for k, _, v in (ln.partition("=") for ln in conf.splitlines())
             if k.strip() in SLURM_SETTINGS}
    if preemption != "off" and sched.get("PreemptType") != "preempt/qos":
        # a cluster started before preemption was configured would queue where Kubernetes preempts
        raise ConfigError(f"the emulated Slurm cluster runs PreemptType={sched.get('PreemptType')}, and "
                          "--preemption needs preempt/qos", tip="poc cluster down --slurm --emulated, then up again")
    classes = classes_of(trace, priorities)
    with_qos = preemption != "off"
    target = rsl.SlurmTarget(replay=rsl.slurm_name(f"{name[:40]}-{uuid.uuid4().hex[:6]}"), with_qos=with_qos)
    rep = SlurmReplay(shell, target)
    timeout_s = timeout_s if timeout_s is not None else default_timeout(trace)
    shares = rsl.account_shares(rr.equal_quotas(trace, nodes * gpus))
    say(f"[slurm] replaying {len(trace.jobs)} jobs on {nodes} emulated nodes × {gpus} GPUs "
        f"(job name {target.replay}; accounts {', '.join(f'{a.account}={a.fairshare}' for a in shares)}; "
        f"watching at most {timeout_s:g} s)")
    qos_made, qos_set = make_qos(classes, shell) if with_qos else ([], [])
    try:
        made = make_accounts(shares, shell, qos=[rsl.slurm_qos(c.qos) for c in classes] if with_qos else [])
        try:
            result = rep.run(trace, timeout_s)
            share = shell(["sshare", "-a", "-P", "-o",
                           "Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare"],
                          timeout=60).stdout.splitlines()
            qos_table = shell(["sacctmgr", "-n", "-P", "list", "qos", "format=name,priority,preempt,preemptmode"],
                              timeout=60).stdout.splitlines()
        finally:
            left = remove_accounts(made, shell)
    finally:    # after the accounts: an association names the QOSes it may use
        qos_left = remove_qos(qos_made, qos_set, shell)
    result["settings"] = {"nodes": nodes, "gpus_per_node": gpus, "job_name": target.replay, **sched,
                          "tenants": "each tenant an account in slurmdbd (associations enforced); equal_quotas as "
                                     "fair-share weights: shares = nominal GPUs, no GPU cap (borrowing unlimited); "
                                     "the fair-share factor is 0 until slurmctld's first PriorityCalcPeriod "
                                     "pass after the accounts are made",
                          "accounts": [{"account": a.account, "tenant": a.tenant, "fairshare": a.fairshare,
                                        "max_gpus": a.max_gpus, "made_for_replay": a.account in made}
                                       for a in shares],
                          "sshare_at_end": share, "accounts_removed": not left, "accounts_removal_error": left,
                          "preemption": rp.settings_text(preemption, classes),
                          "qos_during_replay": qos_table, "qos_made": qos_made, "qos_set_and_reset": qos_set,
                          "qos_removal_error": qos_left,
                          "limit_grace_s": target.limit_grace_s, "time_resolution": "whole minutes (--time)",
                          "poll_s": rep.poll_s}
    return result, nodes * gpus
