"""A kind cluster with JobSet and Kueue, for users whose Docker can pull from a registry.

Not exercised in this project's CI (no registry is reachable there); the offline provider is
``native_k8s``. Versions are the same pins as the native cluster's (``k8s/builds.py``).

    usable()                    # for `up --provider auto`: kind installed and its node image local or pullable
    exists()                    # for `status`/`down --provider auto`: cheap, never pulls
    up(nodes=3) -> KindInfo; down(); status(); is_up(); import_image(ref)
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness import data
from harness.clusters.base import ComponentStatus, Say
from harness.clusters.k8s import builds
from harness.errors import ClusterError, CommandError
from harness.paths import KIND_CLUSTER, cluster_state_dir

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


# kind labels its node containers with their cluster's name
NODE_LABEL = f"io.x-k8s.kind.cluster={CLUSTER_NAME}"
PULL_TIMEOUT_S = 900


@dataclass(frozen=True)
class KindInfo:
    kubeconfig: Path
    cluster: str
    nodes: tuple[str, ...]
    node_image: str


def _run(argv: list[str], timeout: float = 600) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise CommandError(argv, proc.returncode, proc.stdout, proc.stderr)
    return proc.stdout


def kubeconfig_path() -> Path:
    return cluster_state_dir(KIND_CLUSTER) / "kubeconfig"


def _installed() -> bool:
    return bool(shutil.which("kind") and shutil.which("docker"))


def usable() -> bool:
    """What `up --provider auto` asks: kind is installed and its node image is local or can be
    pulled (this may pull for up to 15 minutes; `status` and `down` never ask it)."""
    if not _installed():
        return False
    if subprocess.run(["docker", "image", "inspect", NODE_IMAGE], capture_output=True, check=False).returncode == 0:
        return True
    return subprocess.run(["docker", "pull", NODE_IMAGE], capture_output=True, timeout=PULL_TIMEOUT_S,
                          check=False).returncode == 0


def exists() -> bool:
    """A kind cluster was brought up here (its kubeconfig is kept until `down`): no command runs."""
    return _installed() and kubeconfig_path().exists()


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


def up(nodes: int = 3, say: Say | None = None) -> KindInfo:
    if not shutil.which("kind"):
        raise ClusterError("kind is not installed", tip="install kind, or use `--provider native`")
    kc = kubeconfig_path()
    kc.parent.mkdir(parents=True, exist_ok=True)
    config = _config(nodes)
    clusters = _run(["kind", "get", "clusters"]).split()
    if CLUSTER_NAME not in clusters:
        if say:
            say(f"[kind] creating cluster {CLUSTER_NAME} ({nodes} workers, image {NODE_IMAGE})")
        _run(["kind", "create", "cluster", "--name", CLUSTER_NAME, "--config", str(config),
              "--image", NODE_IMAGE, "--kubeconfig", str(kc), "--wait", "180s"], timeout=900)
    else:
        kc.write_text(_run(["kind", "get", "kubeconfig", "--name", CLUSTER_NAME]))
    kubectl = ["kubectl", "--kubeconfig", str(kc)]
    _run([*kubectl, "apply", "--server-side", "-f", JOBSET_MANIFEST])
    _run([*kubectl, "apply", "--server-side", "-f", KUEUE_MANIFEST])
    for ns, deploy in (("jobset-system", "jobset-controller-manager"), ("kueue-system", "kueue-controller-manager")):
        _run([*kubectl, "-n", ns, "rollout", "status", f"deployment/{deploy}", "--timeout=300s"], timeout=330)
    return KindInfo(kubeconfig=kc, cluster=CLUSTER_NAME, nodes=tuple(s.name for s in status()), node_image=NODE_IMAGE)


def down() -> dict:
    deleted = False
    if shutil.which("kind") and CLUSTER_NAME in _run(["kind", "get", "clusters"]).split():
        _run(["kind", "delete", "cluster", "--name", CLUSTER_NAME])
        deleted = True
    kubeconfig_path().unlink(missing_ok=True)
    return {"deleted": [CLUSTER_NAME] if deleted else []}


def status() -> list[ComponentStatus]:
    """The kind node containers and their states (one `docker ps`); empty when there are none."""
    if not shutil.which("docker"):
        return []
    out = _run(["docker", "ps", "-a", "--filter", f"label={NODE_LABEL}", "--format", "{{.Names}}\t{{.State}}"],
               timeout=60)
    rows = [line.split("\t", 1) for line in out.splitlines() if "\t" in line]
    return [ComponentStatus(name=n, pid=None, alive=st == "running", state=st) for n, st in sorted(rows)]


def is_up() -> bool:
    st = status()
    return bool(st) and all(s.alive for s in st) and kubeconfig_path().exists()


def import_image(image_ref: str) -> None:
    _run(["kind", "load", "docker-image", image_ref, "--name", CLUSTER_NAME], timeout=1800)


class Kind:
    """The kind cluster behind the LocalCluster interface (``harness.clusters.base``)."""

    name = KIND_CLUSTER

    def __init__(self, nodes: int = 3, say: Say | None = None):
        self.nodes, self.say = nodes, say

    def up(self) -> KindInfo:
        return up(self.nodes, self.say)

    def down(self) -> dict:
        return down()

    def status(self) -> list[ComponentStatus]:
        return status()

    def is_up(self) -> bool:
        return is_up()
