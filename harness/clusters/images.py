"""Build the project's container images locally, only when missing; nothing here needs a registry.

Images (all tags are content hashes of their build inputs, never ``latest``):

* ``k8s-slurm-poc/base:<release>``: Debian. ``docker pull debian:<release>`` where a registry is
  reachable, else ``debootstrap --variant=minbase`` + ``docker import``. The rootfs tarball is cached
  under ``$POC_CACHE_DIR/rootfs`` so a rebuild takes seconds.
* ``k8s-slurm-poc/worker:<release>-<hash>``: Python 3 + Debian's torch (CPU, gloo) + numpy. The same
  image runs as Kubernetes pods and under Slurm.
* ``k8s-slurm-poc/slurm:<release>-<hash>``: FROM the worker image, plus slurmctld, slurmd, slurmdbd,
  slurm-client, munge, openssh-server.
* ``k8s-slurm-poc/mariadb:<release>-<hash>``: Debian's MariaDB for slurmdbd.

Every docker call is an argv list. Failures raise ``ClusterError`` with the command's output.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import data
from harness.clusters.base import Say
from harness.clusters.progress import timed_build
from harness.errors import ClusterError
from harness.paths import cache_dir

IMAGES_DIR = data.path("images")      # one build context per image, shipped with the package
PREFIX = "k8s-slurm-poc"
DEFAULT_RELEASE = "trixie"
SUPPORTED_RELEASES = ("bookworm", "trixie")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# Bump when the way an image is built changes in a way its context files do not show.
RECIPE_VERSION = "1"


def _check_release(release: str) -> str:
    if release not in SUPPORTED_RELEASES:
        raise ClusterError(
            f"unsupported Debian release {release!r}",
            f"use one of: {', '.join(SUPPORTED_RELEASES)}",
        )
    return release


def run(argv: Sequence[str], *, timeout: float | None = None, input: bytes | None = None,
        check: bool = True, what: str | None = None) -> subprocess.CompletedProcess:
    """Run argv (no shell), capture output as text; raise ClusterError with the output on failure."""
    argv = [str(a) for a in argv]
    try:
        proc = subprocess.run(argv, input=input, capture_output=True, timeout=timeout, check=False)
    except FileNotFoundError as exc:
        raise ClusterError(f"{argv[0]} is not installed ({exc})",
                           f"install {argv[0]} (see README: local clusters)") from exc
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace")[-3000:]
        err = (exc.stderr or b"").decode(errors="replace")[-3000:]
        raise ClusterError(f"{what or 'command'} timed out after {timeout:.0f}s: {' '.join(argv)}\n"
                           f"--- stdout ---\n{out}\n--- stderr ---\n{err}") from exc
    res = subprocess.CompletedProcess(argv, proc.returncode,
                                      proc.stdout.decode(errors="replace"),
                                      proc.stderr.decode(errors="replace"))
    if check and res.returncode != 0:
        raise ClusterError(
            f"{what or 'command'} failed (exit {res.returncode}): {' '.join(argv)}\n"
            f"--- stdout ---\n{res.stdout.strip()[-4000:]}\n--- stderr ---\n{res.stderr.strip()[-4000:]}",
            "is the Docker daemon running and reachable (`docker info`)?" if argv[0] == "docker" else None,
        )
    return res


# ---------------------------------------------------------------- image queries

def image_exists(ref: str) -> bool:
    return run(["docker", "image", "inspect", "--format", "{{.Id}}", ref], check=False).returncode == 0


def image_digest(ref: str) -> str:
    """The local image ID (``sha256:...``) of ref; ClusterError when the image is missing."""
    res = run(["docker", "image", "inspect", "--format", "{{.Id}}", ref], check=False)
    if res.returncode != 0:
        raise ClusterError(f"image {ref} does not exist locally", "build it with `poc cluster up`")
    return res.stdout.strip()


def image_size(ref: str) -> int:
    """Size in bytes of the local image ref."""
    return int(run(["docker", "image", "inspect", "--format", "{{.Size}}", ref]).stdout.strip())


def base_ref(release: str = DEFAULT_RELEASE) -> str:
    return f"{PREFIX}/base:{_check_release(release)}"


def context_hash(context: Path, *extra: str) -> str:
    """sha256 over every file (path + mode + bytes) under context, plus extra strings; 12 hex digits."""
    h = hashlib.sha256()
    h.update(f"recipe={RECIPE_VERSION}\n".encode())
    for e in extra:
        h.update(f"extra={e}\n".encode())
    # byte code is no build input: pip compiles the contexts' .py files when it installs a wheel
    for path in sorted(p for p in context.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        rel = path.relative_to(context).as_posix()
        h.update(f"file={rel} mode={path.stat().st_mode & 0o777:o}\n".encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def worker_ref(release: str = DEFAULT_RELEASE) -> str:
    """The content-hashed worker image ref for release (whether or not it is built)."""
    return f"{PREFIX}/worker:{release}-{context_hash(IMAGES_DIR / 'worker', _check_release(release))}"


def slurm_ref(release: str = DEFAULT_RELEASE) -> str:
    """The content-hashed Slurm image ref; its hash covers the worker's ref, so it follows the worker."""
    return f"{PREFIX}/slurm:{release}-{context_hash(IMAGES_DIR / 'slurm', release, worker_ref(release))}"


def mariadb_ref(release: str = DEFAULT_RELEASE) -> str:
    return f"{PREFIX}/mariadb:{release}-{context_hash(IMAGES_DIR / 'mariadb', _check_release(release))}"


def slurm_emulated_ref(release: str = DEFAULT_RELEASE) -> str:
    """The emulated-nodes Slurm image (a multiple-slurmd build); separate from the cluster's Slurm image."""
    return (f"{PREFIX}/slurm-emulated:{release}-"
            f"{context_hash(IMAGES_DIR / 'slurm-emulated', _check_release(release))}")


def image_ref(kind: str, release: str = DEFAULT_RELEASE) -> str:
    """Ref of one of the project's images: kind in base, worker, slurm, mariadb, slurm-emulated."""
    table = {"base": base_ref, "worker": worker_ref, "slurm": slurm_ref, "mariadb": mariadb_ref,
             "slurm-emulated": slurm_emulated_ref}
    if kind not in table:
        raise ClusterError(f"unknown image kind {kind!r}", f"use one of: {', '.join(table)}")
    return table[kind](release)


# ---------------------------------------------------------------- builders

@dataclass(frozen=True)
class BuildRecord:
    ref: str
    built: bool          # False when it already existed
    seconds: float
    how: str             # "present", "pulled", "debootstrap", "cached-rootfs", "docker build"


_log: list[BuildRecord] = []


def build_log() -> list[BuildRecord]:
    """What ensure_* did in this process (for timing notes and reports)."""
    return list(_log)


def _record(ref: str, built: bool, t0: float, how: str) -> str:
    _log.append(BuildRecord(ref, built, round(time.monotonic() - t0, 2), how))
    return ref


def _no_pull() -> bool:
    return os.environ.get("POC_NO_PULL", "").lower() in ("1", "true", "yes")


def ensure_base(release: str = DEFAULT_RELEASE, say: Say | None = None) -> str:
    """Make sure ``k8s-slurm-poc/base:<release>`` exists; returns its ref.

    Order: already present; ``docker pull debian:<release>`` (unless POC_NO_PULL=1); a cached rootfs
    tarball; ``debootstrap --variant=minbase`` (needs root and the debootstrap package).
    """
    ref = base_ref(release)
    t0 = time.monotonic()
    if image_exists(ref):
        return _record(ref, False, t0, "present")
    if not _no_pull():
        pulled = run(["docker", "pull", f"debian:{release}"], check=False, timeout=600)
        if pulled.returncode == 0:
            run(["docker", "tag", f"debian:{release}", ref], what="docker tag")
            return _record(ref, True, t0, "pulled")
    tarball = cache_dir() / "rootfs" / f"debian-{release}-minbase.tar"
    how = "cached-rootfs"
    if not tarball.exists():
        timed_build(say, "images", "debootstrap", release, f"a Debian {release} root file system (debootstrap)",
                    lambda: _debootstrap(release, tarball))
        how = "debootstrap"
    with tarball.open("rb") as fh:
        try:
            proc = subprocess.run(
                ["docker", "import", "--change", 'CMD ["/bin/bash"]',
                 "--change", "ENV LANG=C.UTF-8", "-", ref],
                stdin=fh, capture_output=True, timeout=600, check=False)
        except FileNotFoundError as exc:
            raise ClusterError("docker is not installed", "install docker.io and start dockerd") from exc
    if proc.returncode != 0:
        raise ClusterError(
            f"docker import of {tarball} failed (exit {proc.returncode}):\n"
            f"{proc.stderr.decode(errors='replace')[-3000:]}",
            f"delete {tarball} to bootstrap it again")
    return _record(ref, True, t0, how)


def _debootstrap(release: str, tarball: Path) -> None:
    if shutil.which("debootstrap") is None:
        raise ClusterError(
            f"cannot pull debian:{release} and debootstrap is not installed",
            "apt-get install debootstrap (and run as root), or make a registry reachable")
    if os.geteuid() != 0:
        raise ClusterError("debootstrap needs root", "run `poc cluster up` as root, or pull debian:* images")
    mirror = os.environ.get("POC_DEBIAN_MIRROR", DEFAULT_MIRROR)
    tarball.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"debootstrap-{release}-", dir=tarball.parent) as tmp:
        root = Path(tmp) / "root"
        run(["debootstrap", "--variant=minbase", release, str(root), mirror],
            timeout=1800, what=f"debootstrap {release}")
        # The rootfs's sources.list is what debootstrap used; drop caches to keep the tarball small.
        for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
            d = root / sub
            if d.is_dir():
                for p in d.iterdir():
                    if p.is_file():
                        p.unlink()
        partial = tarball.with_suffix(".tar.partial")
        run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(partial), "."],
            timeout=600, what="tar rootfs")
        os.replace(partial, tarball)


def _docker_build(ref: str, context: Path, build_args: dict[str, str], timeout: float = 3600) -> None:
    argv = ["docker", "build", "--label", f"{PREFIX}.ref={ref}", "-t", ref]
    for k, v in build_args.items():
        argv += ["--build-arg", f"{k}={v}"]
    argv.append(str(context))
    env = dict(os.environ, DOCKER_BUILDKIT="0")  # BuildKit is not installed here; be explicit
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired as exc:
        raise ClusterError(f"docker build of {ref} timed out after {timeout:.0f}s") from exc
    if proc.returncode != 0:
        out = (proc.stdout + proc.stderr).decode(errors="replace")
        raise ClusterError(f"docker build of {ref} failed (exit {proc.returncode}):\n{out[-6000:]}",
                           "check that containers reach the Debian mirror (apt-get update inside a container)")


def _ensure_built(ref: str, context: Path, build_args: dict[str, str], say: Say | None) -> str:
    t0 = time.monotonic()
    if image_exists(ref):
        return _record(ref, False, t0, "present")
    kind, release = ref.split("/", 1)[1].split(":")[0], ref.rsplit(":", 1)[1].split("-")[0]
    # the estimate: the last build of this kind of image for this release, whatever its hash
    timed_build(say, "images", f"image {kind} {release}", ref, f"image {ref}",
                lambda: _docker_build(ref, context, build_args))
    return _record(ref, True, t0, "docker build")


def ensure_worker_image(release: str = DEFAULT_RELEASE, say: Say | None = None) -> str:
    """Build (when missing) and return the worker image ref: Python 3 + Debian's torch + numpy."""
    base = ensure_base(release, say)
    return _ensure_built(worker_ref(release), IMAGES_DIR / "worker", {"BASE": base}, say)


def ensure_slurm_image(release: str = DEFAULT_RELEASE, say: Say | None = None) -> str:
    """Build (when missing) and return the Slurm image ref (FROM the worker image)."""
    worker = ensure_worker_image(release, say)
    return _ensure_built(slurm_ref(release), IMAGES_DIR / "slurm", {"WORKER": worker}, say)


def ensure_slurm_emulated_image(release: str = DEFAULT_RELEASE, say: Say | None = None) -> str:
    """Build (when missing) and return the emulated-nodes Slurm image: Slurm compiled from source with
    --enable-multiple-slurmd (minutes on 2 cores the first time; skipped when the tag exists)."""
    base = ensure_base(release, say)
    return _ensure_built(slurm_emulated_ref(release), IMAGES_DIR / "slurm-emulated", {"BASE": base}, say)


def ensure_mariadb_image(release: str = DEFAULT_RELEASE, say: Say | None = None) -> str:
    """Build (when missing) and return the MariaDB image ref used by slurmdbd."""
    base = ensure_base(release, say)
    return _ensure_built(mariadb_ref(release), IMAGES_DIR / "mariadb", {"BASE": base}, say)


def save_image(ref: str, dest: Path) -> Path:
    """``docker save`` ref to dest (a tar that ``ctr images import`` accepts); skips when dest exists
    and records the image ID beside it. Used to load the worker image into containerd."""
    dest = Path(dest)
    digest = image_digest(ref)
    stamp = dest.with_suffix(dest.suffix + ".id")
    if dest.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_suffix(dest.suffix + ".partial")
    run(["docker", "save", "-o", str(partial), ref], timeout=1800, what="docker save")
    os.replace(partial, dest)
    stamp.write_text(digest + "\n")
    return dest


def prune_stale_images() -> list[str]:
    """Remove this project's worker/slurm/mariadb/slurm-emulated tags whose hash no longer matches the build inputs
    (left by edits to harness/data/images/). Current refs of every supported release and base images stay."""
    kinds = ("worker", "slurm", "mariadb", "slurm-emulated")
    current = {image_ref(k, r) for k in kinds for r in SUPPORTED_RELEASES}
    res = run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"])
    stale = [ref for ref in res.stdout.split() if ref.split(":")[0] in {f"{PREFIX}/{k}" for k in kinds}
             and ref not in current]
    removed = []
    for ref in stale:
        if run(["docker", "rmi", ref], check=False).returncode == 0:  # in use by a container: kept
            removed.append(ref)
    return removed


ENSURE: dict[str, Callable[..., str]] = {"base": ensure_base, "worker": ensure_worker_image,
                                        "slurm": ensure_slurm_image, "mariadb": ensure_mariadb_image}
