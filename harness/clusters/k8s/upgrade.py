"""Restart or upgrade the native cluster's components one at a time, for the upgrade drills.

A restart stops one component (SIGTERM, then SIGKILL after a grace period) and starts it again with
the command line `up` recorded in the state file (the same argv, environment and cgroup that
``procs.spawn`` was given), so no command line is written twice. An upgrade does the same with the
binary swapped for the next release's (``builds.UPGRADES``, cached by version like the pinned ones);
etcd and the cluster's state stay. The newer JobSet/Kueue CRDs and webhook configurations are applied
around their controller's restart (``components``: url + caBundle, Kueue's conversion webhooks too).

Going back is a new cluster (``restore``): the API server and Kueue may have written objects in
their newer form, and neither project supports a downgrade of stored state.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import yaml

from harness.clusters.k8s import builds, components, host, pki, procs
from harness.clusters.k8s.layout import Layout, load_state, save_state

# state-file component -> the build it comes from (kubelets: "kubelet-<node>")
KUBE_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
NEXT = {b.component: b for b in builds.UPGRADES}
PINNED = {b.component: b for b in builds.ALL}
STOP_GRACE_S = 10


def build_of(name: str) -> str:
    """The build (kubernetes, jobset, kueue) a state-file component's binary comes from."""
    if name in KUBE_COMPONENTS or name.startswith("kubelet-"):
        return "kubernetes"
    if name in ("jobset", "kueue"):
        return name
    raise KeyError(f"{name} is not restarted by the drills")


def version_of(argv0: str) -> str:
    """The version a component runs, from its binary's cache directory (bin/<build>-<version>/<binary>)."""
    parent = Path(argv0).parent.name
    return parent.rsplit("-", 1)[1] if "-v" in parent else ""


def swapped(argv: list[str], build: builds.Build) -> list[str]:
    """The same command line with the binary taken from another build of the same component."""
    return [str(build.path(Path(argv[0]).name)), *argv[1:]]


def prepare(say=None) -> dict:
    """Build the next releases (cached: a no-op when they are there). {component: seconds built}."""
    times = builds.ensure_built(builds=builds.UPGRADES, say=say)
    return {"built_s": times, "binaries": {b.component: str(b.bin_dir) for b in builds.UPGRADES}}


def stop(entry: dict, grace: float = STOP_GRACE_S) -> None:
    host.stop_pid(entry["pid"], entry.get("exe"), grace=grace)
    try:
        os.waitpid(entry["pid"], os.WNOHANG)   # reap it when this process started it (an earlier drill step)
    except ChildProcessError:
        pass


def restart(L: Layout, name: str, argv: list[str] | None = None, grace: float = STOP_GRACE_S) -> dict:
    """Stop `name` and start it again, on `argv` when given (an upgrade), else on its recorded one."""
    state = load_state(L)
    entry = state["components"].get(name)
    if entry is None:
        raise KeyError(f"the native cluster has no component {name}")
    t0 = time.monotonic()
    stop(entry, grace)
    stopped = time.monotonic()
    new_argv = argv or entry["argv"]
    pid = procs.spawn(L, state, name, new_argv, extra_env=entry.get("extra_env") or None,
                      cgroup=entry.get("cgroup", name))
    return {"pid_before": entry["pid"], "pid_after": pid, "stop_s": round(stopped - t0, 2), "argv0": new_argv[0],
            "version_before": version_of(entry["argv"][0]), "version_after": version_of(new_argv[0])}


def upgraded_argv(L: Layout, name: str) -> list[str]:
    """`name`'s recorded command line on the next release's binary."""
    entry = load_state(L)["components"][name]
    return swapped(entry["argv"], NEXT[build_of(name)])


def allow_cgroup_v1(L: Layout, node: str) -> bool:
    """kubelet 1.35 refuses cgroup v1 unless told (`failCgroupV1: false`); this host is cgroup v1.
    Older kubelets (1.31+) know the field, so it stays when the cluster goes back. True if changed."""
    path = L.node(node) / "kubelet-config.yaml"
    cfg = yaml.safe_load(path.read_text())
    if cfg.get("failCgroupV1") is False:
        return False
    cfg["failCgroupV1"] = False
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return True


def running_versions(L: Layout) -> dict[str, str]:
    """component (state-file name) -> the version its binary comes from."""
    return {n: version_of(e["argv"][0]) for n, e in load_state(L)["components"].items()}


def addon_versions(L: Layout) -> dict[str, str]:
    """The JobSet and Kueue versions running now (their CRDs and webhooks follow the controller)."""
    v = running_versions(L)
    return {"jobset": v.get("jobset") or builds.JOBSET_VERSION, "kueue": v.get("kueue") or builds.KUEUE_VERSION}


def apply_crds(L: Layout, versions: dict[str, str]) -> None:
    """The CRDs of these JobSet/Kueue versions (server-side apply: a newer schema replaces the older)."""
    path = components.crd_manifests(L, versions["jobset"], versions["kueue"])
    procs.kubectl(L, "apply", "--server-side", "--force-conflicts", "-f", str(path), timeout=120)
    procs.kubectl(L, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all", timeout=90)


def apply_webhooks(L: Layout, versions: dict[str, str]) -> None:
    certs = pki.ensure_cluster_certs(L, len(load_state(L).get("nodes", [])))
    path = components.webhook_manifests(L, certs, versions["jobset"], versions["kueue"])
    procs.kubectl(L, "apply", "--server-side", "--force-conflicts", "-f", str(path), timeout=60)


def mark_upgraded(L: Layout, name: str, version: str) -> None:
    """Record in the state file that `name` runs a release other than the pinned one (restore reads it)."""
    state = load_state(L)
    state.setdefault("upgraded", {})[name] = version
    save_state(L, state)


def at_pinned_versions(L: Layout) -> bool:
    """Whether every restartable component runs its pinned release."""
    for name, v in running_versions(L).items():
        try:
            want = PINNED[build_of(name)].version
        except KeyError:
            continue
        if v != want:
            return False
    return not load_state(L).get("upgraded")
