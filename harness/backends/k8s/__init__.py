"""The Kubernetes backend, one module per concern:

api.py        the API client (lazy kubeconfig), error mapping, webhook retry, resource coordinates
watch.py      watch caches (list + watch per kind and namespace)
state.py      a run's state and times from its JobSet, Workload and Pods (pure)
logs.py       incremental pod-log reading (pure)
preflight.py  is the cluster usable (as cluster-admin or as a namespace's user); the facts stored with each run
dryrun.py     the API server's verdict on the rendered objects (dryRun=All), for `poc validate --server-dry-run`
faults.py     kill_rank, delete_pod, lose_node, and undoing them
backend.py    KubernetesBackend: render, submit, observe, collect, cancel
"""
from .backend import KubernetesBackend
from .state import STATE_TABLE

__all__ = ["STATE_TABLE", "KubernetesBackend"]
