"""The native cluster's API-server audit log: the policy, the kube-apiserver flags, and turning it on
for a cluster that was started without it.

The audit log is the only Kubernetes record of *who* did something (the authenticated user and
groups of every request); Events and object status say what happened but not who asked. It is off
unless the API server is given a policy file, so ``up`` writes one and passes these flags.

What the policy keeps (first matching rule wins):

* nothing for reads (get/list/watch) and for the bulk nobody audits a job by: Events, Leases,
  Endpoints(Slices), node and pod status heartbeats, token and access reviews, health probes;
* the request body (``Request`` level) for JobSet creation, so the exact spec as submitted is kept;
* metadata (user, groups, verb, object, response code, time stamps) for every other write, and for
  Secrets and ConfigMaps never more than metadata (their data must not land in a log).

``RequestReceived`` is omitted: each request is written once, at ``ResponseComplete`` (or ``Panic``).
Rotation: ``--audit-log-maxsize`` MB per file, ``--audit-log-maxbackup`` rotated files,
``--audit-log-maxage`` days; the log backend is blocking by default (a request waits for its line).
"""
from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from harness.clusters.k8s import pki, procs
from harness.clusters.k8s.layout import APISERVER_PORT, Layout, load_state, save_state
from harness.fsutil import atomic_write

MAXSIZE_MB = 100
MAXBACKUP = 5
MAXAGE_DAYS = 7

_NOISE = """\
  - level: None
    verbs: ["get", "list", "watch"]
  - level: None
    resources:
      - group: ""
        resources: ["events", "endpoints", "nodes/status", "pods/status"]
      - group: "events.k8s.io"
        resources: ["events"]
      - group: "coordination.k8s.io"
        resources: ["leases"]
      - group: "discovery.k8s.io"
        resources: ["endpointslices"]
      - group: "authentication.k8s.io"
        resources: ["tokenreviews"]
      - group: "authorization.k8s.io"
        resources: ["subjectaccessreviews", "selfsubjectaccessreviews", "localsubjectaccessreviews"]
  - level: None
    nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/version", "/metrics", "/openapi*", "/api", "/apis"]
"""

POLICY = f"""\
# Written by harness/clusters/k8s/audit.py: what the native cluster's API server records.
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
omitManagedFields: true
rules:
{_NOISE}  - level: Metadata
    resources:
      - group: ""
        resources: ["secrets", "configmaps", "serviceaccounts/token"]
  - level: Request
    verbs: ["create"]
    resources:
      - group: "jobset.x-k8s.io"
        resources: ["jobsets"]
  - level: Metadata
"""


def audit_dir(root: Path) -> Path:
    return Path(root) / "audit"


def log_path(root: Path) -> Path:
    """The audit log of the native cluster whose state directory is root (rotated files lie beside it)."""
    return audit_dir(root) / "audit.log"


def policy_path(root: Path) -> Path:
    return audit_dir(root) / "policy.yaml"


def flags(root: Path) -> list[str]:
    """The kube-apiserver flags that turn the audit log on (pure: the paths only)."""
    return [f"--audit-policy-file={policy_path(root)}", f"--audit-log-path={log_path(root)}",
            f"--audit-log-maxsize={MAXSIZE_MB}", f"--audit-log-maxbackup={MAXBACKUP}",
            f"--audit-log-maxage={MAXAGE_DAYS}"]


def prepare(root: Path) -> list[str]:
    """Write the policy (the API server refuses to start without the file) and return the flags."""
    audit_dir(root).mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write(policy_path(root), POLICY)
    return flags(root)


def with_flags(argv: list[str], root: Path) -> list[str]:
    """argv with the current audit flags in place of any earlier ones."""
    return [a for a in argv if not a.startswith("--audit-")] + flags(root)


def needs_restart(argv: list[str], root: Path) -> bool:
    """Whether a running API server's command line lacks the current audit flags (started before
    they existed, or with another policy path): only a restart gives it them."""
    return with_flags(argv, root) != list(argv) or not policy_path(root).exists()


def ensure(L: Layout) -> dict:
    """Restart a running kube-apiserver whose command line lacks the audit flags, with them.

    ``up`` reuses a running cluster as it is, so without this a cluster started before the audit
    policy existed would never get it. The other components reconnect on their own (client-go
    retries); the restart costs one API-server start. Returns what was done."""
    state = load_state(L)
    entry = (state.get("components") or {}).get("kube-apiserver")
    if not entry or not procs.alive(entry):
        return {"restarted": False, "why": "no running kube-apiserver"}
    prepare(L.root)
    if not needs_restart(entry["argv"], L.root):
        return {"restarted": False, "why": "it already has the audit flags"}
    t0 = time.monotonic()
    with contextlib.suppress(ProcessLookupError):
        os.kill(entry["pid"], signal.SIGTERM)
    deadline = t0 + 60
    while procs.alive(entry) and time.monotonic() < deadline:
        time.sleep(0.2)
    if procs.alive(entry):
        os.kill(entry["pid"], signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(entry["pid"], os.WNOHANG)   # reap it if it was this process's child
    procs.spawn(L, state, "kube-apiserver", with_flags(entry["argv"], L.root),
                extra_env=entry.get("extra_env") or None, cgroup=entry.get("cgroup") or None)
    admin, ca = pki.CertPair(L.pki / "admin.crt", L.pki / "admin.key"), L.pki / "ca.crt"
    procs.wait("kube-apiserver /readyz after turning on its audit log",
               lambda: procs.https_get(f"https://127.0.0.1:{APISERVER_PORT}/readyz", admin, ca)[0] == 200,
               120, L, ("kube-apiserver",))
    took = round(time.monotonic() - t0, 1)
    state = load_state(L)
    state.setdefault("repairs", []).append({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                            "restarted": ["kube-apiserver"], "why": "audit log flags",
                                            "seconds": took})
    save_state(L, state)
    return {"restarted": True, "seconds": took}
