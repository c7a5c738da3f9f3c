"""A replay on this machine's clusters: the native Kubernetes cluster's emulated nodes (KWOK) and the
emulated Slurm cluster, as `poc cluster up --k8s --slurm --provider native --emulated N` leaves them.
Checks that the trace fits the nodes before anything is submitted, and leaves nothing of the replay
behind, interrupted or not."""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from ..backends.k8s.api import K8sClient, qty
from ..clusters import images
from ..clusters import native_k8s as nk
from ..clusters.k8s import components, kwok
from ..clusters.slurm import emulated
from ..errors import BackendError, ConfigError
from ..render import replay_k8s as rr
from ..render import replay_slurm as rsl
from ..scale.trace import Trace
from .k8s import K8sReplay
from .slurm import SlurmReplay


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
               say: Callable[[str], None] = print, topology: str = "preferred") -> tuple[dict, int]:
    """Replay `trace` on the local emulated nodes: (the replay's result, the cluster's GPUs). topology:
    Kueue TAS for every gang (render/replay_k8s.py TOPOLOGY_MODES), preferred by default as Slurm's
    topology/tree is on the other side."""
    if not trace.jobs:
        raise ConfigError("the trace has no jobs", tip="poc scale show TRACE says what it holds")
    if not nk.is_up():
        raise ConfigError("the native Kubernetes cluster is not up",
                          tip="poc cluster up --k8s --provider native --emulated N")
    info = nk.info()
    core = kwok.core_api(info.kubeconfig)
    nodes, gpus = emulated_gpus(core)
    check_fits(trace, nodes, gpus)
    label = f"{name[:40].strip('-')}-{uuid.uuid4().hex[:6]}"
    target = rr.Target(namespace=rr.k8s_name(f"poc-replay-{label}"), replay=rr.k8s_name(label), topology=topology,
                       node_labels={kwok.TYPE_LABEL[0]: kwok.TYPE_LABEL[1]}, tolerations=(kwok.TOLERATION,))
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
                          "client_rate_limits_qps_burst": components.CLIENT_RATE_LIMITS,
                          "cleaned_up": gone}
    return result, nodes * gpus


def default_timeout(trace: Trace) -> float:
    return max(j.submit_s + j.limit_s for j in trace.jobs) + 120


def slurm_shell(argv, *, input: bytes | None = None, timeout: float = 300):
    """One argv in the emulated Slurm container, stdin passed through; never raises on an exit code."""
    return images.run(["docker", "exec", "-i", emulated.CONTAINER, *argv], input=input, timeout=timeout,
                      check=False, what=f"docker exec {emulated.CONTAINER}")


def emulated_slurm_nodes(shell=slurm_shell) -> tuple[int, int]:
    """(the emulated Slurm cluster's nodes, GPUs per node, the fewest any has); (0, 0) when it is not up."""
    res = shell(["sinfo", "-h", "-N", "-o", "%N %G"], timeout=60)
    if res.returncode != 0:
        return 0, 0
    gpus = {}
    for line in res.stdout.splitlines():
        name, _, gres = line.partition(" ")
        count = next((int(g.split(":")[-1].split("(")[0]) for g in gres.split(",") if g.startswith("gpu:")), 0)
        gpus[name] = count
    return len(gpus), min(gpus.values(), default=0)


def slurm_accounts(shell=slurm_shell) -> set[str]:
    res = shell(["sacctmgr", "-n", "-P", "list", "account", "format=account"], timeout=60)
    if res.returncode != 0:
        raise BackendError(f"sacctmgr list account failed (exit {res.returncode}): "
                           f"{(res.stderr or res.stdout).strip()[-300:]}",
                           tip="the emulated Slurm cluster needs slurmdbd: `poc cluster down --slurm --emulated`, "
                               "then up again with the current image")
    return {line.strip() for line in res.stdout.splitlines() if line.strip()}


def make_accounts(shares: list[rsl.AccountShare], shell=slurm_shell, wait_s: float = 30,
                  sleep: Callable[[float], None] | None = None) -> list[str]:
    """Add the accounts that do not exist yet (an existing one, `root` included, is used as it is and
    never removed), then wait until slurmctld knows them all, or sbatch could refuse the first jobs.
    Returns the accounts made; on a failure removes them and raises."""
    sleep = sleep or time.sleep
    existing = slurm_accounts(shell)
    new = [a for a in shares if a.account not in existing]
    made: list[str] = []
    try:
        for argv in rsl.account_setup(new):
            res = shell(argv, timeout=60)
            if res.returncode != 0:
                raise BackendError(f"{' '.join(argv[:4])} {argv[4]} failed (exit {res.returncode}): "
                                   f"{(res.stderr or res.stdout).strip()[-300:]}")
            if argv[3] == "account":
                made.append(argv[4])
        want = {a.account for a in shares}
        deadline = time.monotonic() + wait_s
        while True:
            res = shell(["sshare", "-n", "-P", "-o", "Account", "-A", ",".join(sorted(want))], timeout=60)
            if want <= {ln.strip() for ln in res.stdout.splitlines()}:
                return made
            if time.monotonic() >= deadline:
                raise BackendError(f"slurmctld did not learn the accounts {sorted(want)} within {wait_s:g} s",
                                   tip="see /var/log/slurm/slurmdbd.log in the container")
            sleep(0.5)
    except BaseException:
        remove_accounts(made, shell, wait_s=10, sleep=sleep)
        raise


def remove_accounts(accounts: list[str], shell=slurm_shell, wait_s: float = 60,
                    sleep: Callable[[float], None] | None = None) -> str:
    """Remove root from the accounts and the accounts. sacctmgr refuses while a job of theirs is still
    on the cluster (a cancelled job completing), so it retries until wait_s: "" or the last error."""
    if not accounts:
        return ""
    sleep = sleep or time.sleep
    deadline, error = time.monotonic() + wait_s, ""
    while True:
        user, account = rsl.account_teardown(accounts)
        shell(user, timeout=60)     # nothing to remove is fine; the account removal below says what matters
        res = shell(account, timeout=60)
        left = set(accounts) & slurm_accounts(shell) if res.returncode == 0 else set(accounts)
        if not left:
            return ""
        error = (res.stderr or res.stdout).strip()[-300:] or f"still there: {sorted(left)}"
        if time.monotonic() >= deadline:
            return error
        sleep(2)


SLURM_SETTINGS = ("SchedulerType", "SchedulerParameters", "SelectType", "PriorityType", "PriorityWeightFairShare",
                  "PriorityWeightAge", "PriorityWeightJobSize", "PriorityWeightQOS", "PriorityDecayHalfLife",
                  "PriorityMaxAge", "PriorityCalcPeriod", "PriorityFlags", "AccountingStorageEnforce")


def replay_slurm(trace: Trace, name: str, timeout_s: float | None = None,
                 say: Callable[[str], None] = print, shell=slurm_shell) -> tuple[dict, int]:
    """Replay `trace` on the emulated Slurm cluster: (the replay's result, the cluster's GPUs).

    Each tenant is an account for the replay's length, with the shares of Kubernetes' equal quotas
    (render/replay_slurm.py has the mapping); accounts it made are removed afterwards, interrupted or
    not, and what `sshare` showed at the end is kept."""
    if not trace.jobs:
        raise ConfigError("the trace has no jobs", tip="poc scale show TRACE says what it holds")
    nodes, gpus = emulated_slurm_nodes(shell)
    if nodes == 0:
        raise ConfigError(f"the emulated Slurm cluster ({emulated.CONTAINER}) is not up",
                          tip="poc cluster up --slurm --emulated N")
    check_fits(trace, nodes, gpus, flag="--slurm")
    target = rsl.SlurmTarget(replay=rsl.slurm_name(f"{name[:40]}-{uuid.uuid4().hex[:6]}"))
    rep = SlurmReplay(shell, target)
    timeout_s = timeout_s if timeout_s is not None else default_timeout(trace)
    shares = rsl.account_shares(rr.equal_quotas(trace, nodes * gpus))
    say(f"[slurm] replaying {len(trace.jobs)} jobs on {nodes} emulated nodes × {gpus} GPUs "
        f"(job name {target.replay}; accounts {', '.join(f'{a.account}={a.fairshare}' for a in shares)}; "
        f"watching at most {timeout_s:g} s)")
    made = make_accounts(shares, shell)
    try:
        result = rep.run(trace, timeout_s)
        share = shell(["sshare", "-a", "-P", "-o", "Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare"],
                      timeout=60).stdout.splitlines()
    finally:
        left = remove_accounts(made, shell)
    conf = shell(["scontrol", "show", "config"], timeout=60).stdout
    sched = {k.strip(): v.strip() for k, _, v in (ln.partition("=") for ln in conf.splitlines())
             if k.strip() in SLURM_SETTINGS}
    result["settings"] = {"nodes": nodes, "gpus_per_node": gpus, "job_name": target.replay, **sched,
                          "tenants": "each tenant an account in slurmdbd (associations enforced); equal_quotas as "
                                     "fair-share weights: shares = nominal GPUs, no GPU cap (borrowing unlimited); "
                                     "the fair-share factor is 0 until slurmctld's first PriorityCalcPeriod "
                                     "pass after the accounts are made",
                          "accounts": [{"account": a.account, "tenant": a.tenant, "fairshare": a.fairshare,
                                        "max_gpus": a.max_gpus, "made_for_replay": a.account in made}
                                       for a in shares],
                          "sshare_at_end": share, "accounts_removed": not left, "accounts_removal_error": left,
                          "limit_grace_s": target.limit_grace_s, "time_resolution": "whole minutes (--time)",
                          "poll_s": rep.poll_s}
    return result, nodes * gpus
