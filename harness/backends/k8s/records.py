"""What a Kubernetes in-flight record may name before `poc cleanup` or `--resume` acts on it.

A record (RESULTS/<campaign>/inflight/<run>.json, mode 0600) names a JobSet, a ConfigMap, serving objects,
nodes a fault took, the lost-node ledger and the run's checkpoint directory, and cancel deletes, restores
and removes what it names. It is a file on disk: written by an older harness, damaged, copied from another
machine or edited. So before anything is touched a record is refused (ERROR/TIP) when it names no cluster
(nothing says where its names are meant), another cluster, an owner id that is not one (it goes into
label selectors), a ledger other than this cluster's, or a checkpoint path other than exactly
<checkpoint root>/<campaign>-<owner id>/<run id> (an rmtree there would reach elsewhere). The objects it
names are then deleted only by their owner label and uid (ownership.py), and the checkpoints only while
the directory holds the run's owner mark (backend.cancel).
"""
from __future__ import annotations

import os

from ...errors import BackendError
from ...spec import campaign_dir
from .. import identity
from ..base import Handle
from . import ownership
from .cleanup import host_path_dir


def check(handle: Handle, current: dict | None, *, checkpoint_root: str, ledger: str, on_volume: bool) -> None:
    """BackendError, touching nothing, unless the record is safe to act on here (see the module's words)."""
    d, run_id = handle.data, handle.run_id
    if not d.get("cluster"):
        raise BackendError(f"run {run_id}'s in-flight record names no cluster (an older harness, or a damaged "
                           "record): not cancelled, so nothing on any cluster or disk is touched",
                           tip=f"delete its objects by hand where it ran (kubectl delete jobset -n "
                               f"{d.get('namespace')} {d.get('name')}, if that JobSet carries this campaign's "
                               f"poc/owner label), then remove the record inflight/{run_id}.json")
    diff = identity.differences(d["cluster"], current)
    if diff:
        raise BackendError(f"run {run_id}'s in-flight record was made on another Kubernetes cluster "
                           f"({'; '.join(diff)}): not cancelled here, nothing touched",
                           tip="point kubernetes.kubeconfig/context at the cluster the campaign ran on, "
                               "then run `poc cleanup` or --resume again")
    owner = ownership.check_owner(d.get("owner") or "")
    if d.get("ledger") and os.path.normpath(str(d["ledger"])) != os.path.normpath(ledger):
        raise BackendError(f"run {run_id}'s in-flight record names the lost-node ledger {d['ledger']!r}, not this "
                           f"cluster's ({ledger}): refused, nothing touched",
                           tip="the record was damaged or edited; remove it from inflight/ after checking the "
                               "cluster's nodes by hand")
    if on_volume:
        try:
            host_path_dir(checkpoint_root, d["checkpoint_path"], campaign_dir(d.get("campaign") or "", owner), run_id)
        except BackendError as exc:
            raise BackendError(f"run {run_id}'s in-flight record: {exc.message}",
                               tip="nothing was cancelled or removed; the record was damaged or edited, or the "
                                   "config's checkpoint root changed since (kubernetes.checkpoint_host_path)"
                               ) from None
