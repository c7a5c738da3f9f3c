"""Which cluster a run's handle was made on, so `poc cleanup` and `--resume` never act on another one.

A handle names jobs, JobSets and nodes by their names on one cluster. Replayed against another (the
config now points at the staging cluster; a kubeconfig's current context changed), the same names may
be someone else's jobs and nodes. So every handle a backend makes records the cluster's identity, and
the journal's handles are cancelled only where the identity the backend sees now is the same:

* Slurm: ClusterName, and the controller hosts (SlurmctldHost) where `scontrol show config` is
  readable (slurmrestd alone names the cluster only).
* Kubernetes: the API server's URL and the SHA-256 of its CA certificate. The kubeconfig context's name
  is recorded for the message, not compared: one cluster may be reached through several contexts.

A handle without an identity (written before it was recorded) is cancelled as before.
"""
from __future__ import annotations

import base64
import hashlib
from pathlib import Path

from ..errors import BackendError

COMPARED = {"slurm": ("cluster_name", "controllers"), "k8s": ("server", "ca_sha256")}


def slurm_identity(settings: dict[str, str]) -> dict:
    """From `scontrol show config` (or slurmrestd's ping): {"platform", "cluster_name", "controllers"}."""
    ctl = [v.split("(")[0].strip() for k, v in sorted(settings.items()) if k.startswith("SlurmctldHost") and v]
    return {"platform": "slurm", "cluster_name": settings.get("ClusterName") or None, "controllers": ctl or None}


def k8s_identity(configuration, context: str | None) -> dict:
    """From the official client's Configuration: {"platform", "server", "ca_sha256", "context"}."""
    ca = None
    path = getattr(configuration, "ssl_ca_cert", None)
    if path and Path(path).is_file():
        ca = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    elif getattr(configuration, "ca_cert_data", None):
        data = configuration.ca_cert_data
        raw = data.encode() if isinstance(data, str) else data
        try:
            raw = base64.b64decode(raw, validate=True)
        except ValueError:
            pass
        ca = hashlib.sha256(raw).hexdigest()
    return {"platform": "k8s", "server": str(configuration.host or "") or None, "ca_sha256": ca,
            "context": context}


def differences(recorded: dict | None, current: dict | None) -> list[str]:
    """What tells the two clusters apart; [] when they are the same or either is unknown. A field
    either side does not know (no controller from slurmrestd) is not compared."""
    if not recorded or not current or recorded.get("platform") != current.get("platform"):
        return []
    out = []
    for key in COMPARED.get(recorded["platform"], ()):
        a, b = recorded.get(key), current.get(key)
        if a and b and a != b:
            out.append(f"{key} {_short(a)} then, {_short(b)} now")
    return out


def refuse_other_cluster(handle: dict, current: dict | None) -> None:
    """BackendError (ERROR/TIP) when the in-flight handle was made on another cluster than the one the
    backend reaches now: cancelling it here would act on another cluster's jobs and nodes."""
    diff = differences((handle.get("data") or {}).get("cluster"), current)
    if diff:
        raise BackendError(
            f"run {handle.get('run_id')}'s in-flight record was made on another {handle.get('platform')} cluster "
            f"than the one this config reaches ({'; '.join(diff)}): not cancelled here, so nothing on this "
            "cluster is touched",
            tip="point --config (slurm host, kubernetes.kubeconfig/context) at the cluster the campaign ran "
                "on, then run `poc cleanup` or --resume again; the record stays until then")


def _short(v) -> str:
    if isinstance(v, list):
        return ",".join(map(str, v))
    s = str(v)
    return s[:12] if len(s) == 64 and all(c in "0123456789abcdef" for c in s) else s
