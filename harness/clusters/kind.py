"""A kind cluster with JobSet and Kueue, for users whose Docker can pull from a registry.

Not exercised in this project's CI (no registry is reachable there); the offline provider is
``native_k8s``. Versions are the same pins as the native cluster's (``k8s/builds.py``).

    choose_provider()           # "kind" when kind can get its node image, else "native"
    up(); down()
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import yaml

from harness import data
from harness.clusters.k8s import builds
from harness.errors import ClusterError, CommandError

CLUSTER_NAME = "k8s-slurm-poc"
CONFIG = data.path("kind-cluster.yaml")   # a copy for people to read: manifests/kind-cluster.yaml
# The 1.34 node image listed in kind v0.33.0's release notes (kind supports an image only with the
# release that built it; pin by digest). Same minor as the native cluster (v1.34.4), a later patch;
# no kind image is published for v1.34.4 by that release. Not pulled here (no registry).
# Override with POC_KIND_NODE_IMAGE for another kind release.
NODE_IMAGE = os.environ.get(
    "POC_KIND_NODE_IMAGE",
    "kindest/node:v1.34.11@sha256:44e222ee2132dab25ff87301682f89eb82c7880ea3a1bf543bfe9708fd08d67d")
JOBSET_MANIFEST = f"https://github.com/kubernetes-sigs/jobset/releases/download/{builds.JOBSET_VERSION}/manifests.yaml"
KUEUE_MANIFEST = f"https://github.com/kubernetes-sigs/kueue/releases/download/{builds.KUEUE_VERSION}/manifests.yaml"


def _run(argv: list[str], timeout: float = 600) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise CommandError(argv, proc.returncode, proc.stdout, proc.stderr)
    return proc.stdout


def kubeconfig_path() -> Path:
    base = os.environ.get("POC_STATE_DIR") or Path.home() / ".local" / "state" / "k8s-slurm-poc"
    return Path(base) / "kind" / "kubeconfig"


def can_use_kind(try_pull: bool = True) -> bool:
    """kind is installed and its node image is local or can be pulled."""
    if not (shutil.which("kind") and shutil.which("docker")):
        return False
    if subprocess.run(["docker", "image", "inspect", NODE_IMAGE], capture_output=True).returncode == 0:
        return True
    if not try_pull:
        return False
    return subprocess.run(["docker", "pull", NODE_IMAGE], capture_output=True, timeout=900).returncode == 0


def choose_provider(try_pull: bool = True) -> str:
    return "kind" if can_use_kind(try_pull) else "native"


def usable() -> bool:
    """What `--provider auto` asks: may pull kind's node image (only when kind is installed)."""
    return can_use_kind(try_pull=True)


def _config(nodes: int) -> Path:
    """harness/data/kind-cluster.yaml with `nodes` workers (default 3: two for the job, one spare)."""
    doc = yaml.safe_load(CONFIG.read_text())
    workers = [n for n in doc["nodes"] if n["role"] == "worker"]
    template = workers[0] if workers else {"role": "worker"}
    doc["nodes"] = [n for n in doc["nodes"] if n["role"] != "worker"]
    for i in range(1, nodes + 1):
        w = dict(template)
        w["labels"] = {"poc.k8s-slurm/node-index": str(i)}
        doc["nodes"].append(w)
    out = kubeconfig_path().parent / "kind-cluster.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def up(nodes: int = 3) -> Path:
    if not shutil.which("kind"):
        raise ClusterError("kind is not installed", tip="install kind, or use `--provider native`")
    kc = kubeconfig_path()
    kc.parent.mkdir(parents=True, exist_ok=True)
    config = _config(nodes)
    clusters = _run(["kind", "get", "clusters"]).split()
    if CLUSTER_NAME not in clusters:
        _run(["kind", "create", "cluster", "--name", CLUSTER_NAME, "--config", str(config),
              "--image", NODE_IMAGE, "--kubeconfig", str(kc), "--wait", "180s"], timeout=900)
    else:
        kc.write_text(_run(["kind", "get", "kubeconfig", "--name", CLUSTER_NAME]))
    kubectl = ["kubectl", "--kubeconfig", str(kc)]
    _run([*kubectl, "apply", "--server-side", "-f", JOBSET_MANIFEST])
    _run([*kubectl, "apply", "--server-side", "-f", KUEUE_MANIFEST])
    for ns, deploy in (("jobset-system", "jobset-controller-manager"), ("kueue-system", "kueue-controller-manager")):
        _run([*kubectl, "-n", ns, "rollout", "status", f"deployment/{deploy}", "--timeout=300s"], timeout=330)
    return kc


def down() -> None:
    if shutil.which("kind"):
        _run(["kind", "delete", "cluster", "--name", CLUSTER_NAME])
    kubeconfig_path().unlink(missing_ok=True)


def status() -> list[str]:
    """The kind node containers (`docker ps` names), empty when the cluster does not exist."""
    if not shutil.which("kind"):
        return []
    return _run(["kind", "get", "nodes", "--name", CLUSTER_NAME]).split()


def import_image(image_ref: str) -> None:
    _run(["kind", "load", "docker-image", image_ref, "--name", CLUSTER_NAME], timeout=1800)
