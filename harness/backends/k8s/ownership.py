"""What a run may delete in a shared namespace: only objects it made. A JobSet is named by its run id, and
run ids repeat across campaigns and users (`k8s-clean-01`), so a name alone never licenses a delete:
a leftover is removed only when its labels name this campaign and run, and every delete of an object the
run made carries that object's uid as a precondition (the API server refuses it, 409, when the name has
since been taken by someone else's object)."""
from __future__ import annotations

from datetime import datetime

from ...errors import SubmitError

CAMPAIGN_LABEL, RUN_LABEL = "poc/campaign", "poc/run-id"


def labels_of(obj) -> dict:
    meta = (obj or {}).get("metadata") if isinstance(obj, dict) else getattr(obj, "metadata", None)
    if isinstance(meta, dict):
        return dict(meta.get("labels") or {})
    return dict(getattr(meta, "labels", None) or {})


def uid_of(obj) -> str | None:
    meta = (obj or {}).get("metadata") if isinstance(obj, dict) else getattr(obj, "metadata", None)
    return (meta.get("uid") if isinstance(meta, dict) else getattr(meta, "uid", None)) if meta else None


def is_ours(obj, campaign: str, run_id: str) -> bool:
    """The object carries this campaign's and this run's labels (a leftover of an earlier attempt)."""
    lab = labels_of(obj)
    return bool(campaign) and lab.get(CAMPAIGN_LABEL) == campaign and lab.get(RUN_LABEL) == run_id


def own_uid(obj, campaign: str, run_id: str) -> str | None:
    """The object's uid when it is this campaign's run's (found by name after a crash), else None."""
    return uid_of(obj) if obj is not None and is_ours(obj, campaign, run_id) else None


def not_ours(kind: str, name: str, ns: str, obj, campaign: str) -> SubmitError:
    lab = labels_of(obj)
    meta = obj.get("metadata", {}) if isinstance(obj, dict) else {}
    made = meta.get("creationTimestamp") or ""
    if isinstance(made, datetime):
        made = made.isoformat()
    whose = f"campaign {lab[CAMPAIGN_LABEL]!r}" if CAMPAIGN_LABEL in lab else "no poc campaign label"
    return SubmitError(
        f"a {kind} named {name!r} already exists in namespace {ns!r} ({whose}"
        + (f", created {made}" if made else "") + "): it is not this campaign's, and the harness deletes only "
        "what it made",
        tip=f"run this campaign under another name (campaign: …) or in another namespace (kubernetes.namespace); "
            f"if that {kind} is a leftover of yours: kubectl delete {kind.lower()} -n {ns} {name}")


def delete_options(uid: str | None, propagation: str | None = None):
    """V1DeleteOptions with the uid precondition when the uid is known."""
    from kubernetes import client as k
    pre = k.V1Preconditions(uid=uid) if uid else None
    return k.V1DeleteOptions(propagation_policy=propagation, preconditions=pre)
