"""Images on the nodes: the pause image, a tiny busybox test image, and importing any local
docker image into every node's containerd (only where it is missing).
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from harness.clusters.k8s import builds, host
from harness.clusters.k8s.layout import PAUSE_IMAGE, Layout, load_state, state_root
from harness.errors import ClusterError, CommandError
from harness.fsutil import atomic_write_json
from harness.paths import cache_dir

# ------------------------------------------------------------------ pause image

PAUSE_GO = """package main

// pause: the pod sandbox process. Waits for a signal, reaps children, exits 0 on INT/TERM.

import (
\t"os"
\t"os/signal"
\t"syscall"
)

func main() {
\tc := make(chan os.Signal, 8)
\tsignal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
\tfor s := range c {
\t\tif s != syscall.SIGCHLD {
\t\t\tos.Exit(0)
\t\t}
\t\tfor {
\t\t\tvar ws syscall.WaitStatus
\t\t\tpid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
\t\t\tif pid <= 0 || err != nil {
\t\t\t\tbreak
\t\t\t}
\t\t}
\t}
}
"""


def ensure_pause_image() -> None:
    """A tiny static pause program in a FROM scratch image, built locally with docker."""
    if host.run(["docker", "image", "inspect", PAUSE_IMAGE], check=False).returncode == 0:
        return
    src = cache_dir() / "src" / "pause"
    src.mkdir(parents=True, exist_ok=True)
    (src / "go.mod").write_text("module poc.local/pause\n\ngo 1.24\n")
    (src / "main.go").write_text(PAUSE_GO)
    (src / "Dockerfile").write_text('FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n')
    env = builds.go_env()
    proc = subprocess.run([builds.go_binary(), "build", "-trimpath", "-ldflags", "-s -w", "-o", "pause", "."],
                          cwd=src, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise CommandError(["go", "build", "pause"], proc.returncode, proc.stdout, proc.stderr)
    host.run(["docker", "build", "-q", "-t", PAUSE_IMAGE, str(src)], timeout=300)


BUSYBOX_IMAGE = "poc.local/busybox:1.35"


def ensure_busybox_image() -> str:
    """A 2 MB test image (Debian's busybox-static in a FROM scratch image): sh, nslookup, sleep, nc."""
    if host.run(["docker", "image", "inspect", BUSYBOX_IMAGE], check=False).returncode == 0:
        return BUSYBOX_IMAGE
    busybox = Path("/bin/busybox")
    if not busybox.exists():
        raise ClusterError("/bin/busybox is missing", tip="apt-get install busybox-static")
    ctx = cache_dir() / "src" / "busybox-image"
    if ctx.exists():
        shutil.rmtree(ctx)
    (ctx / "bin").mkdir(parents=True)
    shutil.copy2(busybox, ctx / "bin" / "busybox")
    applets = host.run([str(busybox), "--list"]).stdout.decode().split()
    for a in applets:
        if a != "busybox":
            (ctx / "bin" / a).symlink_to("busybox")
    (ctx / "Dockerfile").write_text('FROM scratch\nCOPY bin /bin\nENV PATH=/bin\nCMD ["/bin/sh"]\n')
    host.run(["docker", "build", "-q", "-t", BUSYBOX_IMAGE, str(ctx)], timeout=300)
    return BUSYBOX_IMAGE


# ------------------------------------------------------------------ images into containerd

def normalize_ref(ref: str) -> str:
    """The name containerd's CRI (and `ctr import`) gives a docker reference."""
    name, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "latest")
    first = name.split("/", 1)[0]
    if "/" not in name:
        name = f"docker.io/library/{name}"
    elif "." not in first and ":" not in first and first != "localhost":
        name = f"docker.io/{name}"
    return f"{name}:{tag}"


def ctr(L: Layout, node: str, *args: str, input: bytes | None = None, check: bool = True, timeout: float = 600):
    return host.run(["ctr", "--address", str(L.containerd_sock(node)), "--namespace", "k8s.io", *args],
                    check=check, input=input, timeout=timeout)


def import_image(image_ref: str, state_dir: str | Path | None = None, nodes: list[str] | None = None) -> dict[str, str]:
    """Import a local docker image into every node's containerd where it is missing (or stale).

    Returns {node: "imported" | "present"}. Pods must use imagePullPolicy Never/IfNotPresent.
    """
    L = Layout(state_root(state_dir))
    state = load_state(L)
    nodes = nodes or state.get("nodes") or []
    inspect = host.run(["docker", "image", "inspect", "-f", "{{.Id}}", image_ref], check=False)
    if inspect.returncode != 0:
        raise ClusterError(f"image {image_ref} is not in the local docker engine",
                           tip="build it first (harness.clusters.images.ensure_worker_image)")
    image_id = inspect.stdout.decode().strip()
    name = normalize_ref(image_ref)
    todo, result = [], {}
    for node in nodes:
        record = L.node(node) / "images.json"
        known = json.loads(record.read_text()) if record.exists() else {}
        present = name in ctr(L, node, "images", "ls", "-q").stdout.decode().split()
        if present and known.get(name) == image_id:
            result[node] = "present"
        else:
            todo.append(node)
    if not todo:
        return result
    tar_dir = cache_dir() / "images"
    tar_dir.mkdir(parents=True, exist_ok=True)
    tar = tar_dir / f"{image_id.replace(':', '-')[:32]}.tar"
    if not tar.exists():
        tmp = tar.with_suffix(".partial")
        host.run(["docker", "save", "-o", str(tmp), image_ref], timeout=1800)
        tmp.replace(tar)
    procs = {}
    for node in todo:
        argv = ["ctr", "--address", str(L.containerd_sock(node)), "--namespace", "k8s.io",
                "images", "import", "--snapshotter", "overlayfs", str(tar)]
        procs[node] = (argv, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    for node, (argv, p) in procs.items():
        out, err = p.communicate(timeout=1800)
        if p.returncode != 0:
            raise CommandError(argv, p.returncode, out.decode(errors="replace"), err.decode(errors="replace"))
        record = L.node(node) / "images.json"
        known = json.loads(record.read_text()) if record.exists() else {}
        known[name] = image_id
        atomic_write_json(record, known)
        result[node] = "imported"
    tar.unlink(missing_ok=True)   # a multi-GB copy; every node now holds the image
    return result


def prune_images(keep: list[str], state_dir: str | Path | None = None) -> dict[str, list[str]]:
    """Remove from every node's containerd each image not in `keep` (plus the pause and busybox
    images). Kubelet image GC is off (threshold 100%), so content-hashed worker tags pile up:
    about 1.2 GB a node each. Running containers keep their snapshots. Returns {node: removed}.
    """
    L = Layout(state_root(state_dir))
    kept = {normalize_ref(r) for r in (*keep, PAUSE_IMAGE, BUSYBOX_IMAGE)}
    removed: dict[str, list[str]] = {}
    for node in load_state(L).get("nodes", []):
        names = ctr(L, node, "images", "ls", "-q").stdout.decode().split()
        record = L.node(node) / "images.json"
        known = json.loads(record.read_text()) if record.exists() else {}
        # `ctr import` also names each image by its id (sha256:...): keep those of kept images
        kept_ids = {known[k] for k in kept if k in known}
        drop = [n for n in names if n not in kept and n not in kept_ids]
        if drop:
            ctr(L, node, "images", "rm", *drop, check=False)
        atomic_write_json(record, {k: v for k, v in known.items() if k in kept})
        removed[node] = drop
    return removed
