"""Which node taints keep a pod off a node, as kube-scheduler's TaintToleration filter decides it.

Pure: nodes and tolerations are the API's dicts. Only NoSchedule and NoExecute taints keep a pod
off a node (PreferNoSchedule only steers it). The taints Kubernetes itself sets from a node's
conditions (``node.kubernetes.io/not-ready``, ``unreachable``, ``unschedulable`` after a cordon,
``memory-pressure`` …) come and go with the node's state: they say nothing about whether the job
can *ever* run there, so ``lasting`` leaves them out and preflight never fails on them.
"""
from __future__ import annotations

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
CONDITION_PREFIX = "node.kubernetes.io/"


def tolerates(toleration: dict, taint: dict) -> bool:
    """Kubernetes' ToleratesTaint: an empty effect matches every effect; Exists with no key matches
    every taint; Equal (the default operator) needs the same key and value ("" when absent)."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    if (toleration.get("operator") or "Equal") == "Exists":
        return True
    return bool(key) and (toleration.get("value") or "") == (taint.get("value") or "")


def lasting(taint: dict) -> bool:
    """A taint put there on purpose (by an admin, a node pool, an operator), not from a node condition."""
    return not str(taint.get("key", "")).startswith(CONDITION_PREFIX)


def untolerated(node: dict, tolerations: list[dict]) -> list[dict]:
    """The node's lasting taints that keep a pod with these tolerations off it."""
    taints = (node.get("spec") or {}).get("taints") or []
    return [t for t in taints if t.get("effect") in BLOCKING_EFFECTS and lasting(t)
            and not any(tolerates(tol, t) for tol in tolerations)]


def text(taint: dict) -> str:
    """As kubectl prints a taint: key=value:Effect (key:Effect without a value)."""
    value = taint.get("value")
    return f"{taint.get('key')}{'=' + str(value) if value else ''}:{taint.get('effect')}"


def toleration_for(taint: dict) -> str:
    """The toleration a user would write for it, in the config's YAML flow style."""
    return f"{{key: {taint.get('key')}, operator: Exists, effect: {taint.get('effect')}}}"
