"""What a run may delete in a shared namespace: only objects it made. A campaign's name repeats across
users (the default `smoke-poc`) and run ids repeat across campaigns (`k8s-clean-01`), so neither a name
nor those labels license a delete. Every object a campaign makes carries its public owner id as the
label `poc/owner` (harness/owner.py: a digest of the campaign's secret key, unguessable to anyone who
has not seen the campaign's objects), and an object found by name is the run's only when that label is
the campaign's owner id and `poc/run-id` is the run's. Every delete of such an object carries the uid
of the object that passed that check as a precondition (the API server refuses it, 409, when the name
has since been taken by someone else's object).

An object without `poc/owner` (made by an older harness, or by hand) is never deleted by a campaign
with an owner id; outside a campaign (no owner id: a backend used as a library, a test) only objects
without the label whose `poc/campaign` and `poc/run-id` name the run are, so neither side ever
touches the other's.
"""
from __future__ import annotations

from datetime import datetime

from ...errors import BackendError, SubmitError
from ...render.jobset import OWNER_ID, OWNER_LABEL
from .api import CONFLICT

CAMPAIGN_LABEL, RUN_LABEL = "poc/campaign", "poc/run-id"


def check_owner(owner: str) -> str:
    """owner, when it is an owner id (or empty); BackendError otherwise (a damaged or edited record)."""
    if owner and not OWNER_ID.match(owner):
        raise BackendError(f"owner id {owner[:80]!r} is not an owner id (hex digits): refusing to select or "
                           "delete objects by it", tip="the in-flight record was damaged or edited; nothing was "
                                                        "touched")
    return owner


def labels_of(obj) -> dict:
    meta = (obj or {}).get("metadata") if isinstance(obj, dict) else getattr(obj, "metadata", None)
    if isinstance(meta, dict):
        return dict(meta.get("labels") or {})
    return dict(getattr(meta, "labels", None) or {})


def uid_of(obj) -> str | None:
    meta = (obj or {}).get("metadata") if isinstance(obj, dict) else getattr(obj, "metadata", None)
    return (meta.get("uid") if isinstance(meta, dict) else getattr(meta, "uid", None)) if meta else None


def owner_labels(owner: str) -> dict[str, str]:
    """The label every object of a campaign with an owner id carries ({} outside a campaign)."""
    return {OWNER_LABEL: check_owner(owner)} if owner else {}


def selector(owner: str, campaign: str = "", **more: str) -> str:
    """A label selector for the campaign's own objects: its owner id, or outside a campaign the campaign's
    name and no owner label; `more` adds exact labels (e.g. the JobSet's name)."""
    parts = [f"{k}={v}" for k, v in more.items()]
    if owner:
        parts.append(f"{OWNER_LABEL}={check_owner(owner)}")
    else:
        parts.append(f"!{OWNER_LABEL}")
        if campaign:
            parts.append(f"{CAMPAIGN_LABEL}={campaign}")
    return ",".join(parts)


def is_ours(obj, owner: str, campaign: str, run_id: str) -> bool:
    """The object carries this run's labels and the campaign's owner id (a leftover of an earlier attempt,
    or the object the run made). Without an owner id: no owner label, and the campaign's name."""
    lab = labels_of(obj)
    if obj is None or lab.get(RUN_LABEL) != run_id:
        return False
    if owner:
        return lab.get(OWNER_LABEL) == check_owner(owner)
    return OWNER_LABEL not in lab and bool(campaign) and lab.get(CAMPAIGN_LABEL) == campaign


def own_uid(obj, owner: str, campaign: str, run_id: str) -> str | None:
    """The object's uid when it is this campaign's run's (found by name after a crash), else None."""
    return uid_of(obj) if obj is not None and is_ours(obj, owner, campaign, run_id) else None


def whose(obj) -> str:
    lab = labels_of(obj)
    if OWNER_LABEL in lab:
        return f"owner id {lab[OWNER_LABEL]}" + (f", campaign {lab[CAMPAIGN_LABEL]!r}" if CAMPAIGN_LABEL in lab else "")
    if CAMPAIGN_LABEL in lab:
        return f"campaign {lab[CAMPAIGN_LABEL]!r} with no {OWNER_LABEL} label (an older harness, or by hand)"
    return f"no {OWNER_LABEL} label"


def not_ours(kind: str, name: str, ns: str, obj, campaign: str = "", *, cls=SubmitError):
    """The ERROR/TIP for a name taken by an object this campaign did not make (nothing was touched)."""
    meta = obj.get("metadata", {}) if isinstance(obj, dict) else {}
    made = meta.get("creationTimestamp") or ""
    if isinstance(made, datetime):
        made = made.isoformat()
    return cls(
        f"a {kind} named {name!r} already exists in namespace {ns!r} ({whose(obj)}"
        + (f", created {made}" if made else "") + "): it is not this campaign's, and the harness deletes only "
        "what it made (its poc/owner label and uid)",
        tip=f"nothing was deleted; run this campaign under another name (campaign: …) or in another namespace "
            f"(kubernetes.namespace); if that {kind} is a leftover of yours: kubectl delete {kind.lower()} -n {ns} "
            f"{name}")


def delete_options(uid: str | None, propagation: str | None = None, grace_s: int | None = None):
    """V1DeleteOptions with the uid precondition when the uid is known."""
    from kubernetes import client as k
    pre = k.V1Preconditions(uid=uid) if uid else None
    return k.V1DeleteOptions(propagation_policy=propagation, preconditions=pre, grace_period_seconds=grace_s)


def delete_if_ours(client, kind: str, read, delete, name: str, ns: str, *, owner: str, campaign: str, run_id: str,
                   uid: str | None = None, propagation: str | None = None, grace_s: int | None = None,
                   strict: bool = False) -> str:
    """Delete the object of that name only when it is the run's (is_ours) and, when a uid was recorded
    (the journal's, the create's answer), that very object; the delete carries its uid as a precondition.
    What happened: "deleted", "absent", "not ours" (left: someone else's, or an older harness's), or
    "conflict" (replaced in between: left). strict: "not ours" raises not_ours (a BackendError) instead."""
    obj = client.call(f"GET {kind}", read, name, ns, missing_ok=True)
    if obj is None:
        return "absent"
    obj = client.to_dict(obj)
    if (uid and uid_of(obj) != uid) or not is_ours(obj, owner, campaign, run_id):
        if strict and not (uid and uid_of(obj) != uid):
            raise not_ours(kind, name, ns, obj, campaign, cls=BackendError)
        return "not ours"
    gone = client.call(f"DELETE {kind}", delete, name, ns, missing_ok=True, conflict_ok=True,
                       body=delete_options(uid_of(obj), propagation, grace_s))
    if gone is CONFLICT:
        return "conflict"
    return "absent" if gone is None else "deleted"


SERVING_KINDS = ("Deployment", "Service", "ConfigMap")


def _serving_calls(client, kind: str):
    core, apps = client.core(), client.apps()
    return {"Deployment": (apps.read_namespaced_deployment, apps.delete_namespaced_deployment, "Background"),
            "Service": (core.read_namespaced_service, core.delete_namespaced_service, None),
            "ConfigMap": (core.read_namespaced_config_map, core.delete_namespaced_config_map, None)}[kind]


def refuse_serving_names_not_ours(client, sv: dict, *, owner: str, campaign: str, run_id: str, cls=SubmitError):
    """Before the serving objects are made: a name among them taken by an object that is not this campaign's
    run's raises not_ours (nothing touched); leftovers of the run's own are for delete_serving_objects."""
    ns = sv["namespace"]
    for kind in SERVING_KINDS:
        name = sv.get(kind.lower())
        obj = client.call(f"GET {kind}", _serving_calls(client, kind)[0], name, ns, missing_ok=True) if name else None
        if obj is not None and not is_ours(client.to_dict(obj), owner, campaign, run_id):
            raise not_ours(kind, name, ns, client.to_dict(obj), campaign, cls=cls)


def delete_serving_objects(client, sv: dict, *, owner: str, campaign: str, run_id: str,
                           grace_s: int | None = None) -> tuple[list[str], list[str]]:
    """The serving scenario's Deployment, Service and ConfigMap a training run's handle names
    (harness/serve/k8s.py records them there, with their uids), each deleted only while it is this
    campaign's run's (delete_if_ours). (what was deleted, what was left and why)."""
    ns, uids = sv["namespace"], sv.get("uids") or {}
    deleted, left = [], []
    for kind in SERVING_KINDS:
        name = sv.get(kind.lower())
        if not name:
            continue
        read, delete, propagation = _serving_calls(client, kind)
        got = delete_if_ours(client, kind, read, delete, name, ns, owner=owner, campaign=campaign, run_id=run_id,
                             uid=uids.get(kind), propagation=propagation, grace_s=grace_s if kind == "Deployment"
                             else None)
        if got == "deleted":
            deleted.append(f"{kind}/{name}")
        elif got in ("not ours", "conflict"):
            left.append(f"{kind} {ns}/{name}: not this campaign's run's (poc/owner, uid): left")
    return deleted, left
