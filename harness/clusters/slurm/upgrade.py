"""The newer Slurm release for the version-upgrade drill, fetched and built once, cached
by version, with no registry: Debian's own packages, taken from the suite that carries the release.

Which path (Slurm's upgrade guide, "Compatibility Window"): up to 24.05 a release upgrades in place
from the two major releases before it; from 24.11 on, from the three before it (26.05's release
notes: "supports upgrading directly from 25.11, 25.05, and 24.11"). Debian ships 22.05 (bookworm),
24.11 (trixie, this cluster's default) and 26.05 (sid). 22.05 -> 24.11 skips 23.02, 23.11 and 24.05:
more than 24.11 accepts (it upgrades from 24.05, 23.11, 23.02), so slurmctld would lose its saved
state. 24.11 -> 26.05 is inside 26.05's window: that is the path, trixie -> sid.

What is cached under ``$POC_CACHE_DIR/slurm-upgrade/<major>/``:
* the .debs of the newer release and of the few libraries they need newer than trixie's (apt in a
  throwaway container of the cluster's own Slurm image resolves them against exactly what the nodes
  have installed; about 13 packages, 6 MB), with ``manifest.json`` (version, files, sha256);
* the image ``k8s-slurm-poc/slurm-next:<version>-<hash>``: the cluster's Slurm image plus those
  packages, so slurmdbd and slurmctld restart from it with the same users, uids, entrypoint and
  configuration (their state is in volumes). Its repository name is not the cluster's, so
  ``images.prune_stale_images`` leaves it alone.

The compute nodes are upgraded in place instead (``install_argv``): the same .debs copied into the
running container and installed with dpkg, then slurmd restarted under the entrypoint's loop.
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness.clusters import images
from harness.clusters.slurm import compose, layout
from harness.errors import ClusterError
from harness.fsutil import atomic_write_json
from harness.paths import cache_dir

# Slurm's major releases in order (the 6-month cycle began with 24.05); the window rule needs them.
MAJORS = ("20.11", "21.08", "22.05", "23.02", "23.11", "24.05", "24.11", "25.05", "25.11", "26.05")
PACKAGES = ("slurmctld", "slurmd", "slurmdbd", "slurm-client", "slurm-wlm-basic-plugins", "slurmrestd",
            "slurm-wlm-jwt-plugin", "slurm-wlm-mysql-plugin")
NEXT_REPO = f"{images.PREFIX}/slurm-next"
IN_CONTAINER = "/tmp/poc-slurm-upgrade"


@dataclass(frozen=True)
class Target:
    suite: str      # the Debian suite whose packages carry the release
    major: str      # its Slurm major release


# the cluster's release -> the newer one it upgrades to (see the module's docstring for why)
TARGETS = {"trixie": Target("sid", "26.05")}

# Fetch: add the suite with a low pin (nothing else moves to it), then download only what the Slurm
# packages need from it. The mirror's copy of sid can carry a Release file past its Valid-Until (a
# stored snapshot of the mirror): its signature is still checked, its age is not. Arguments: $1 the
# suite, the rest the packages; the .debs land in /out.
FETCH_SCRIPT = r"""set -eu
suite="$1"; shift
echo "deb http://deb.debian.org/debian $suite main" > /etc/apt/sources.list.d/poc-next.list
printf 'Package: *\nPin: release n=%s\nPin-Priority: 100\n' "$suite" > /etc/apt/preferences.d/poc-next
apt-get -o Acquire::Check-Valid-Until=false update -qq
apt-get install -y -qq --download-only -t "$suite" "$@"
cp /var/cache/apt/archives/*.deb /out/
dpkg-deb -f /var/cache/apt/archives/slurmd_*.deb Version > /out/VERSION
"""

# Install: no service may be started by a maintainer script (there is no init system in these
# containers; the entrypoint's loop restarts slurmd itself), then every .deb of the set at once.
INSTALL_SCRIPT = r"""set -eu
printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
chmod 755 /usr/sbin/policy-rc.d
DEBIAN_FRONTEND=noninteractive dpkg -i --force-confold "$1"/*.deb
rm -f /usr/sbin/policy-rc.d
"""

DOCKERFILE = """# The cluster's Slurm image plus the newer release's packages (harness/clusters/slurm/upgrade.py)
ARG BASE=unset
FROM ${BASE}
COPY debs/ /tmp/poc-slurm-upgrade/
COPY install.sh /tmp/poc-install.sh
# (slurmdbd -V of 26.05 reads slurmdbd.conf, which the entrypoint writes at start: dpkg-query instead)
RUN bash /tmp/poc-install.sh /tmp/poc-slurm-upgrade && rm -rf /tmp/poc-slurm-upgrade /tmp/poc-install.sh \\
 && slurmctld -V && dpkg-query -W slurmdbd slurmd
"""


def major_of(version: str) -> str:
    """'slurm 24.11.5', '24.11.5-4+deb13u1' or '26.05.5' -> '24.11'."""
    m = re.search(r"(\d+)\.(\d+)", version or "")
    if not m:
        raise ClusterError(f"not a Slurm version: {version!r}")
    return f"{int(m.group(1)):02d}.{int(m.group(2)):02d}"


def upgrade_supported(frm: str, to: str) -> tuple[bool, str]:
    """Whether Slurm's upgrade guide allows frm -> to in place (with state carried over), and why."""
    a, b = major_of(frm), major_of(to)
    if a not in MAJORS or b not in MAJORS:
        return False, f"unknown Slurm major release ({a} or {b}); known: {', '.join(MAJORS)}"
    i, j = MAJORS.index(a), MAJORS.index(b)
    if j < i:
        return False, f"{b} is older than {a}: Slurm state cannot be downgraded"
    if j == i:
        return True, f"{a} -> {b}: same major release (a maintenance update)"
    window = 3 if MAJORS.index(b) >= MAJORS.index("24.11") else 2
    accepted = MAJORS[max(0, j - window):j]
    if a in accepted:
        return True, f"{b} upgrades in place from {', '.join(reversed(accepted))}; {a} is among them"
    return False, (f"{b} upgrades in place only from {', '.join(reversed(accepted))}: {a} -> {b} skips "
                   f"{', '.join(MAJORS[i + 1:j])} (the guide allows {window - 1} skipped at most)")


def target_for(release: str) -> Target:
    if release not in TARGETS:
        raise ClusterError(f"no upgrade path from the {release} cluster's Slurm",
                           tip=f"the version-upgrade drill runs on a {'/'.join(TARGETS)} cluster "
                               "(`poc cluster up --slurm`, the default release)")
    return TARGETS[release]


def debs_dir(target: Target) -> Path:
    return cache_dir() / "slurm-upgrade" / target.major


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cached_debs(target: Target) -> dict | None:
    """The manifest of a complete cached set (every file present, hashes matching), or None."""
    d = debs_dir(target)
    try:
        man = json.loads((d / "manifest.json").read_text())
    except (FileNotFoundError, ValueError):
        return None
    for name, digest in man.get("files", {}).items():
        p = d / "debs" / name
        if not p.is_file() or _sha256(p) != digest:
            return None
    return man if man.get("files") else None


def ensure_debs(release: str, base_image: str, run=images.run) -> dict:
    """The newer release's .debs in the cache (fetched once, in a throwaway container of base_image,
    the cluster's own Slurm image); returns the manifest (version, files, dir, seconds, fetched)."""
    target = target_for(release)
    t0 = time.monotonic()
    man = cached_debs(target)
    if man is not None:
        return {**man, "dir": str(debs_dir(target) / "debs"), "seconds": round(time.monotonic() - t0, 2),
                "fetched": False}
    d = debs_dir(target)
    d.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fetch-", dir=d) as tmp:
        run(["docker", "run", "--rm", "-v", f"{tmp}:/out", "--entrypoint", "bash", base_image,
             "-c", FETCH_SCRIPT, "bash", target.suite, *PACKAGES],
            timeout=900, what=f"fetch Slurm {target.major} from Debian {target.suite}")
        version = (Path(tmp) / "VERSION").read_text().strip()
        if major_of(version) != target.major:
            raise ClusterError(f"Debian {target.suite} carries Slurm {version}, not {target.major}",
                               tip="update TARGETS in harness/clusters/slurm/upgrade.py (and check the "
                                   "upgrade guide's window for the new pair)")
        final = d / "debs"
        if final.exists():
            shutil.rmtree(final)
        final.mkdir()
        for p in sorted(Path(tmp).glob("*.deb")):
            shutil.move(str(p), final / p.name)
    files = {p.name: _sha256(p) for p in sorted(final.glob("*.deb"))}
    man = {"version": version, "suite": target.suite, "major": target.major, "files": files}
    atomic_write_json(d / "manifest.json", man, sort_keys=True)
    return {**man, "dir": str(final), "seconds": round(time.monotonic() - t0, 2), "fetched": True}


def next_image_ref(base_image: str, man: dict) -> str:
    h = hashlib.sha256(json.dumps([base_image, man["files"], DOCKERFILE, INSTALL_SCRIPT],
                                  sort_keys=True).encode()).hexdigest()[:12]
    return f"{NEXT_REPO}:{man['version'].split('-')[0]}-{h}"


def ensure_image(base_image: str, man: dict, run=images.run) -> dict:
    """The cluster's Slurm image plus the newer packages (built once per base image and deb set)."""
    ref, t0 = next_image_ref(base_image, man), time.monotonic()
    if images.image_exists(ref):
        return {"image": ref, "built": False, "seconds": round(time.monotonic() - t0, 2)}
    with tempfile.TemporaryDirectory(prefix="slurm-next-") as tmp:
        ctx = Path(tmp)
        shutil.copytree(man["dir"], ctx / "debs")
        (ctx / "install.sh").write_text(INSTALL_SCRIPT)
        (ctx / "Dockerfile").write_text(DOCKERFILE)
        images._docker_build(ref, ctx, {"BASE": base_image}, timeout=900)
    return {"image": ref, "built": True, "seconds": round(time.monotonic() - t0, 2)}


def prepare(release: str, base_image: str, run=images.run) -> dict:
    """Everything the upgrade drill needs before it starts: the .debs and the image."""
    man = ensure_debs(release, base_image, run)
    img = ensure_image(base_image, man, run)
    return {"version": man["version"], "suite": man["suite"], "debs_dir": man["dir"],
            "debs": sorted(man["files"]), "debs_s": man["seconds"], "debs_fetched": man["fetched"],
            "image": img["image"], "image_s": img["seconds"], "image_built": img["built"]}


def copy_argv(debs: str, container: str) -> list[str]:
    """`docker cp` of the cached .debs into a running node (to IN_CONTAINER)."""
    return ["docker", "cp", f"{debs}/.", f"{container}:{IN_CONTAINER}"]


def install_argv(container: str) -> list[str]:
    """Install the copied .debs in a running node; slurmd keeps running until it is restarted."""
    return ["docker", "exec", container, "bash", "-c", INSTALL_SCRIPT, "bash", IN_CONTAINER]


def _compose_doc(state_dir=None) -> dict:
    """The cluster's compose document as `up` last rendered it (compose.env in the state dir)."""
    path = layout.state_dir(state_dir) / "compose.env"
    try:
        env = dict(ln.split("=", 1) for ln in path.read_text().splitlines() if "=" in ln)
    except FileNotFoundError as exc:
        raise ClusterError(f"{path} does not exist", tip="run `poc cluster up --slurm` first") from exc
    return compose.load_compose(env, layout.COMPOSE_FILE)


def service_run_argv(service: str, image: str, state_dir=None) -> list[str]:
    """The `docker run` argv of one of the cluster's services (same name, network alias, volumes,
    secrets, labels) with another image: how slurmdbd and slurmctld come back at the newer release."""
    doc = _compose_doc(state_dir)
    svc = dict(doc["services"][service], image=image)
    return compose.run_argv(service, svc, doc)


def state_volumes() -> list[str]:
    """The volumes holding state the newer release converted (the accounting database, slurmctld's
    StateSaveLocation): what a downgrade must start afresh. The shared file system is kept."""
    import yaml

    vols = (yaml.safe_load(layout.COMPOSE_FILE.read_text()).get("volumes") or {})
    return [vols[k]["name"] for k in ("mysql", "ctld-state")]
