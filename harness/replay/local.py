"""A replay on this machine's clusters: the native Kubernetes cluster's emulated nodes (KWOK) and the
emulated Slurm cluster, as `poc cluster up --k8s --slurm --provider native --emulated N` leaves them.
Checks that the trace fits the nodes before anything is submitted, and leaves nothing of the replay
behind, interrupted or not."""
from __future__ import annotations

import os
import uuid
from collections.abc import Callable

from ..backends.k8s.api import K8sClient, qty
from ..clusters import images
from ..clusters import native_k8s as nk
from ..clusters.k8s import kwok, rate_limits
from ..clusters.k8s.layout import Layout, load_state
from ..clusters.slurm import emulated
from ..errors import ClusterError, ConfigError
from ..render import replay_k8s as rr
from ..render import replay_policy as rpol
from ..render import replay_priority as rp
from ..render import replay_slurm as rsl
from ..scale import load
from ..scale.trace import Trace
from . import hostcpu
from .k8s import K8sReplay
from .slurm import SlurmReplay
from .slurm_tenancy import emulated_slurm_nodes, make_accounts, make_qos, remove_accounts, remove_qos, slurm_shell

# the native cluster's processes a replay's CPU record names one by one (the rest of its daemons are "other")
K8S_COMPONENTS = ("kube-apiserver", "etcd", "kube-scheduler", "kube-controller-manager", "kueue", "jobset", "kwok")
SLURM_DAEMONS = {"slurmctld": "slurmctld", "slurmd": "slurmd (all)", "slurmstepd": "slurmstepd (all)",
                 "slurmdbd": "slurmdbd + mariadbd", "mariadbd": "slurmdbd + mariadbd"}


def lab_groups() -> Callable[[], dict[str, list[int]]]:
    """The host CPU record's groups (replay/hostcpu.py): each native-cluster control-plane process, the
    emulated Slurm container by daemon (its cgroup listed at every sample), Docker's daemons, the harness."""
    k8s: dict[str, list[int]] = {}
    if nk.is_up():
        for name, entry in (load_state(Layout(nk.info().state_dir)).get("components") or {}).items():
            if name in K8S_COMPONENTS and entry.get("pid"):
                k8s[name] = [int(entry["pid"])]
    docker = hostcpu.by_name(("dockerd", "containerd"))
    try:
        res = images.run(["docker", "inspect", "-f", "{{.State.Pid}}", emulated.CONTAINER], check=False,
                         what="docker inspect", timeout=60)
        init = int(res.stdout.strip()) if res.returncode == 0 and res.stdout.strip().isdigit() else 0
    except ClusterError:      # no Docker here: no emulated Slurm container to name
        init = 0
    names: dict[int, str] = {}

    def groups() -> dict[str, list[int]]:
        out = {**k8s, "docker (dockerd, containerd)": docker, "harness": [os.getpid()]}
        for pid in hostcpu.cgroup_pids(init) if init else []:
            if pid not in names:
                names[pid] = hostcpu.comm(pid) or "?"
            out.setdefault(SLURM_DAEMONS.get(names[pid], "slurm container, other"), []).append(pid)
        return out
    return groups


def sample_cpu(groups: Callable[[], dict[str, list[int]]] | None):
    """A started host CPU sampler over `groups` (lab_groups by default); None when /proc cannot be read."""
    try:
        return hostcpu.HostCpu(groups or lab_groups()).start()
    except OSError:
        return None


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
               priorities: dict[str, int] | None = None, policy: str = rpol.DEFAULT,
               cpu_groups: Callable[[], dict[str, list[int]]] | None = None) -> tuple[dict, int]:
    """Replay `trace` on the local emulated nodes: (the replay's result, the cluster's GPUs). topology:
    Kueue TAS for every gang (render/replay_k8s.py TOPOLOGY_MODES), preferred by default as Slurm's
    topology/tree is on the other side. preemption, priorities: render/replay_priority.py. policy: the
    queue policy pair (render/replay_policy.py), whose Kueue side this replay's ClusterQueues get."""
    pair = _policy(policy)
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
                           node_labels={kwok.TYPE_LABEL[0]: kwok.TYPE_LABEL[1]}, tolerations=(kwok.TOLERATION,),
                           queueing=pair.kueue.queueing,
                           one_queue=pair.kueue.one_queue)
    except ValueError as e:
        raise ConfigError(str(e), tip="name the trace's QOS classes so they differ in letters and digits") from None
    client = K8sClient(str(info.kubeconfig), timeout_s=60)
    rep = K8sReplay(client, target)
    if timeout_s is None:
        timeout_s = default_timeout(trace)
    say(f"[k8s] replaying {len(trace.jobs)} jobs on {nodes} emulated nodes × {gpus} GPUs "
        f"(namespace {target.namespace}; watching at most {timeout_s:g} s)")
    cpu = sample_cpu(cpu_groups)
    try:
        result = rep.run(trace, rr.equal_quotas(trace, nodes * gpus), timeout_s=timeout_s)
    finally:
        result_cpu = cpu.stop() if cpu else None
        gone = rep.delete(wait_s=600)
        client.close()
    result["host_cpu"] = result_cpu
    result["offered"] = load.offered(trace)
    result["settings"] = {"nodes": nodes, "gpus_per_node": gpus, "namespace": target.namespace,
                          "queue_policy": pair.name, "queue_policy_text": pair.text(),
                          "queueing_strategy": target.queueing,
                          "cluster_queues": ("one ClusterQueue for every tenant" if target.one_queue else
                                             "a ClusterQueue per tenant, one cohort (idle quota lent and borrowed)"),
                          "quotas": "equal_quotas: each tenant an equal share of the GPUs, borrowing the rest",
                          "limit_grace_s": target.limit_grace_s,
                          "limit_grace": "30 s, not scaled by the compression: Kueue does not plan with limits, "
                                         "and the grace covers the pod pipeline's seconds, which do not compress",
                          "poll_s": rep.poll_s, "workers": rep.workers,
                          "pods": "KWOK: Running at once, Succeeded about 1 s after the annotated run time",
                          "topology": rr.topology_text(target),
                          "preemption": rp.settings_text(preemption, classes),
                          "client_rate_limits_qps_burst": rate_limits.describe(Layout(info.state_dir)),
                          "cleaned_up": gone}
    return result, nodes * gpus


def default_timeout(trace: Trace) -> float:
    return max(j.submit_s + j.limit_s for j in trace.jobs) + 120


SLURM_SETTINGS = ("SchedulerType", "SchedulerParameters", "SelectType", "SelectTypeParameters", "PriorityType",
                  "PriorityWeightFairShare", "PriorityWeightAge", "PriorityWeightJobSize", "PriorityWeightPartition",
                  "PriorityWeightQOS", "PriorityWeightTRES", "PriorityDecayHalfLife", "PriorityMaxAge",
                  "PriorityCalcPeriod", "PriorityUsageResetPeriod", "PriorityFavorSmall", "PriorityFlags",
                  "FairShareDampeningFactor", "AccountingStorageEnforce", "PreemptType", "PreemptMode", "AuthInfo",
                  "TopologyPlugin", "KillWait", "OverTimeLimit")


def _policy(name: str) -> rpol.QueuePolicy:
    try:
        return rpol.policy(name)
    except ValueError as e:
        raise ConfigError(str(e), tip=f"--queue-policy {' | '.join(rpol.POLICIES)}") from None


def replay_slurm(trace: Trace, name: str, timeout_s: float | None = None,
                 say: Callable[[str], None] = print, shell=slurm_shell, preemption: str = "off",
                 priorities: dict[str, int] | None = None, policy: str = rpol.DEFAULT,
                 cpu_groups: Callable[[], dict[str, list[int]]] | None = None) -> tuple[dict, int]:
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
    pair = _policy(policy)
    wrong = rpol.slurm_mismatch(pair, sched)
    if wrong:
        # the Slurm side of a pair is the cluster's configuration: a replay on another would be mislabelled
        raise ConfigError(f"the emulated Slurm cluster does not run the Slurm side of queue policy {pair.name}: "
                          + "; ".join(wrong),
                          tip=f"poc cluster down --slurm --emulated, then poc cluster up --slurm --emulated {nodes} "
                              f"--queue-policy {pair.name}")
    if preemption != "off" and sched.get("PreemptType") != "preempt/qos":
        # a cluster started before preemption was configured would queue where Kubernetes preempts
        raise ConfigError(f"the emulated Slurm cluster runs PreemptType={sched.get('PreemptType')}, and "
                          "--preemption needs preempt/qos", tip="poc cluster down --slurm --emulated, then up again")
    classes = classes_of(trace, priorities)
    with_qos = preemption != "off"
    target = rsl.SlurmTarget(replay=rsl.slurm_name(f"{name[:40]}-{uuid.uuid4().hex[:6]}"), with_qos=with_qos,
                             limit_grace_s=rr.grace_for(trace.compression))
    rep = SlurmReplay(shell, target)
    timeout_s = timeout_s if timeout_s is not None else default_timeout(trace)
    shares = rsl.account_shares(rr.equal_quotas(trace, nodes * gpus))
    say(f"[slurm] replaying {len(trace.jobs)} jobs on {nodes} emulated nodes × {gpus} GPUs "
        f"(job name {target.replay}; accounts {', '.join(f'{a.account}={a.fairshare}' for a in shares)}; "
        f"watching at most {timeout_s:g} s)")
    qos_made, qos_set = make_qos(classes, shell) if with_qos else ([], [])
    try:
        made = make_accounts(shares, shell, qos=[rsl.slurm_qos(c.qos) for c in classes] if with_qos else [])
        cpu = sample_cpu(cpu_groups)
        try:
            try:
                result = rep.run(trace, timeout_s)
            finally:
                result_cpu = cpu.stop() if cpu else None
            share = shell(["sshare", "-a", "-P", "-o",
                           "Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare"],
                          timeout=60).stdout.splitlines()
            qos_table = shell(["sacctmgr", "-n", "-P", "list", "qos", "format=name,priority,preempt,preemptmode"],
                              timeout=60).stdout.splitlines()
        finally:
            left = remove_accounts(made, shell)
    finally:    # after the accounts: an association names the QOSes it may use
        qos_left = remove_qos(qos_made, qos_set, shell)
    result["host_cpu"] = result_cpu
    result["offered"] = load.offered(trace)
    result["settings"] = {"nodes": nodes, "gpus_per_node": gpus, "job_name": target.replay, **sched,
                          "queue_policy": pair.name, "queue_policy_text": pair.text(),
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
                          "limit_grace_s": target.limit_grace_s,
                          "limit_grace": f"30 s scaled by the compression ({trace.compression:g}x), at least 2 s; "
                                         "--time rounds limit + grace up to whole minutes",
                          "time_resolution": "whole minutes (--time)",
                          "poll_s": rep.poll_s}
    return result, nodes * gpus
