"""Build the native cluster's Go components from the Go module proxy into a cache outside the repo.

Layout under ``$POC_CACHE_DIR`` (default ``~/.cache/k8s-slurm-poc``)::

    go/mod, go/build            GOMODCACHE and GOCACHE, so a rebuild is quick
    src/<component>-<version>/  the wrapper module each build runs in
    bin/<component>-<version>/  the binaries; a build is skipped when they are all there

kubernetes/etcd cannot be ``go install``-ed (their go.mod has replace directives), so each is
built from a small wrapper module that requires the upstream module (and, for kubernetes,
replaces every ``k8s.io/*`` staging module with its ``v0.Y.Z`` release).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from harness.clusters.base import Say
from harness.clusters.progress import timed_build
from harness.errors import ClusterError, CommandError
from harness.paths import cache_dir

# Pinned versions. JobSet v0.10.1 and Kueue v0.14.5 both build against k8s.io/* v0.34.x;
# k8s 1.34 requires etcd 3.6.4 in its own go.mod.
KUBERNETES_VERSION = "v1.34.4"
ETCD_VERSION = "v3.6.4"
JOBSET_VERSION = "v0.10.1"
KUEUE_VERSION = "v0.14.5"
COREDNS_VERSION = "v1.12.1"
# Emulated nodes for scale replays. v0.8.0 needs Go 1.26 (fetched by GOTOOLCHAIN=auto) and its own
# k8s.io/* v0.36 (a separate binary, so it does not have to match the cluster's v0.34 modules).
KWOK_VERSION = "v0.8.0"
# The upgrade drill's next releases: one minor of each. Kubernetes 1.35 (staging v0.35.4);
# Kueue v0.15.2 (v0.15.3 is not served by the module proxy); JobSet v0.11.1 (k8s.io/* v0.35). All three
# need Go 1.25, which the machine's Go covers.
KUBERNETES_UPGRADE_VERSION = "v1.35.4"
JOBSET_UPGRADE_VERSION = "v0.11.1"
KUEUE_UPGRADE_VERSION = "v0.15.2"

KUBE_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl")


@dataclass(frozen=True)
class Build:
    """One component: what to build, where its binaries go, how long the build took."""

    component: str
    version: str
    binaries: tuple[str, ...]

    @property
    def bin_dir(self) -> Path:
        return cache_dir() / "bin" / f"{self.component}-{self.version}"

    @property
    def src_dir(self) -> Path:
        return cache_dir() / "src" / f"{self.component}-{self.version}"

    def path(self, binary: str) -> Path:
        return self.bin_dir / binary

    def is_built(self) -> bool:
        return all((self.bin_dir / b).is_file() for b in self.binaries)


KUBERNETES = Build("kubernetes", KUBERNETES_VERSION, KUBE_COMMANDS)
ETCD = Build("etcd", ETCD_VERSION, ("etcd",))
JOBSET = Build("jobset", JOBSET_VERSION, ("jobset-manager",))
KUEUE = Build("kueue", KUEUE_VERSION, ("kueue-manager",))
COREDNS = Build("coredns", COREDNS_VERSION, ("coredns",))
# A Build of its own (same version, same wrapper recipe) rather than one more KUBE_COMMANDS entry:
# a cache that already holds the other Kubernetes binaries builds only this one.
KUBE_PROXY = Build("kube-proxy", KUBERNETES_VERSION, ("kube-proxy",))
ALL = (ETCD, KUBERNETES, JOBSET, KUEUE, COREDNS, KUBE_PROXY)
# Not in ALL: only a cluster with emulated nodes needs it, so a plain `cluster up` never waits for it.
KWOK = Build("kwok", KWOK_VERSION, ("kwok",))
UPGRADES = (Build("kubernetes", KUBERNETES_UPGRADE_VERSION, KUBE_COMMANDS),
            Build("jobset", JOBSET_UPGRADE_VERSION, ("jobset-manager",)),
            Build("kueue", KUEUE_UPGRADE_VERSION, ("kueue-manager",)))


def go_binary() -> str:
    found = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if not found:
        raise ClusterError("Go is not installed",
                           tip="install Go >= 1.21 (it fetches 1.25 from the module proxy) or put it on PATH")
    return found


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env["GOMODCACHE"] = str(cache_dir() / "go" / "mod")
    env["GOCACHE"] = str(cache_dir() / "go" / "build")
    env["GOFLAGS"] = "-buildvcs=false -mod=mod"
    env["CGO_ENABLED"] = "0"
    # GOTOOLCHAIN is left as the user has it: with the default (auto) a Go older than a module's
    # `go` line (Kueue v0.14.5 needs 1.25) fetches that toolchain from the module proxy.
    return env


def _run(argv: list[str], cwd: Path, log) -> None:
    log.write(f"$ {' '.join(argv)}  (in {cwd})\n")
    log.flush()
    # nice: the build shares a small machine with other work.
    proc = subprocess.run(["nice", "-n", "10", *argv], cwd=cwd, env=go_env(), stdout=log, stderr=subprocess.STDOUT,
                          check=False)
    if proc.returncode != 0:
        raise CommandError(argv, proc.returncode, "", f"see build log {log.name}")


def _download(module: str, version: str) -> dict:
    """`go mod download -json module@version` (honours GOPROXY): where its go.mod and source are."""
    out = subprocess.run([go_binary(), "mod", "download", "-json", f"{module}@{version}"],
                         env=go_env(), capture_output=True, text=True, cwd=cache_dir(), check=False)
    if out.returncode != 0:
        raise CommandError(["go", "mod", "download", f"{module}@{version}"], out.returncode, out.stdout, out.stderr)
    return json.loads(out.stdout)


def _fetch_mod(module: str, version: str) -> str:
    """The go.mod of module@version."""
    return Path(_download(module, version)["GoMod"]).read_text()


def _kube_ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate=1970-01-01T00:00:00Z",
        ]
    return " ".join(flags)


def _write_wrapper(build: Build, requires: list[tuple[str, str]], replaces: list[tuple[str, str, str]]) -> None:
    build.src_dir.mkdir(parents=True, exist_ok=True)
    lines = [f"module poc.local/build/{build.component}", "", "go 1.24", ""]
    lines += [f"require {m} {v}" for m, v in requires]
    lines += [""] + [f"replace {m} => {to} {v}" for m, to, v in replaces]
    (build.src_dir / "go.mod").write_text("\n".join(lines) + "\n")
    # A non-main file so `go get` / `go build pkg` have a module to work in.
    (build.src_dir / "doc.go").write_text("// Package build only anchors this wrapper module.\npackage build\n")


def _build(build: Build, packages: dict[str, str], requires, replaces=(), ldflags: str = "-s -w", log=None) -> float:
    """Write the wrapper, resolve, and `go build -o` each package to its binary name. Returns seconds."""
    t0 = time.monotonic()
    _write_wrapper(build, list(requires), list(replaces))
    go = go_binary()
    version = requires[0][1]
    _run([go, "get", *[f"{pkg}@{version}" for pkg in packages]], build.src_dir, log)
    tmp = build.bin_dir.with_name(build.bin_dir.name + ".partial")
    tmp.mkdir(parents=True, exist_ok=True)
    for pkg, name in packages.items():
        _run([go, "build", "-trimpath", "-ldflags", ldflags, "-o", str(tmp / name), pkg], build.src_dir, log)
    if build.bin_dir.exists():
        shutil.rmtree(build.bin_dir)
    tmp.rename(build.bin_dir)
    return time.monotonic() - t0


def build_kubernetes(log, build: Build = KUBERNETES) -> float:
    mod = _fetch_mod("k8s.io/kubernetes", build.version)
    staging = sorted(set(re.findall(r"^\s*(k8s\.io/[\w.-]+) => \./staging/", mod, re.M)))
    staging_version = "v0." + ".".join(build.version.lstrip("v").split(".")[1:])
    # Only modules kubernetes actually requires (some sample-* modules are not published).
    required = set(re.findall(r"^\s*(k8s\.io/[\w.-]+) v0\.0\.0", mod, re.M))
    replaces = [(m, m, staging_version) for m in staging if m in required]
    packages = {f"k8s.io/kubernetes/cmd/{c}": c for c in build.binaries}
    return _build(build, packages, [("k8s.io/kubernetes", build.version)], replaces,
                  _kube_ldflags(build.version), log)


def build_etcd(log, build: Build = ETCD) -> float:
    ldflags = "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=poc"
    return _build(ETCD, {"go.etcd.io/etcd/server/v3": "etcd"}, [("go.etcd.io/etcd/server/v3", ETCD_VERSION)],
                  ldflags=ldflags, log=log)


def build_jobset(log, build: Build = JOBSET) -> float:
    return _build(build, {"sigs.k8s.io/jobset": "jobset-manager"}, [("sigs.k8s.io/jobset", build.version)], log=log)


def build_kueue(log, build: Build = KUEUE) -> float:
    return _build(build, {"sigs.k8s.io/kueue/cmd/kueue": "kueue-manager"}, [("sigs.k8s.io/kueue", build.version)],
                  log=log)


def build_coredns(log, build: Build = COREDNS) -> float:
    return _build(COREDNS, {"github.com/coredns/coredns": "coredns"}, [("github.com/coredns/coredns", COREDNS_VERSION)],
                  log=log)


def build_kwok(log, build: Build = KWOK) -> float:
    return _build(build, {"sigs.k8s.io/kwok/cmd/kwok": "kwok"}, [("sigs.k8s.io/kwok", build.version)], log=log)


BUILDERS = {
    "etcd": build_etcd,
    "kubernetes": build_kubernetes,
    "jobset": build_jobset,
    "kueue": build_kueue,
    "coredns": build_coredns,
    "kube-proxy": build_kubernetes,     # the same wrapper recipe, only cmd/kube-proxy
    "kwok": build_kwok,
}


def module_dir(module: str, version: str) -> Path:
    """Where the module cache holds module@version's source (for CRDs and webhook configs under config/)."""
    return Path(_download(module, version)["Dir"])


def ensure_built(components=None, log_path: Path | None = None, force: bool = False,
                 say: Say | None = None, builds: tuple[Build, ...] = ALL) -> dict[str, float]:
    """Build what is missing, one component at a time. Returns {component: seconds} for what was built.

    While a component builds, `say` gets a progress line every ~20 s (default: stderr); timings
    are appended to ``$POC_CACHE_DIR/build-times.jsonl`` (the next build's estimate).
    """
    cache_dir().mkdir(parents=True, exist_ok=True)
    log_path = log_path or cache_dir() / "build.log"
    times: dict[str, float] = {}
    wanted = [b for b in builds if components is None or b.component in components]
    with open(log_path, "a") as log:
        for b in wanted:
            if b.is_built() and not force:
                continue
            log.write(f"=== {b.component} {b.version} {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
            times[b.component] = timed_build(
                say, "k8s", b.component, b.version, f"{b.component} {b.version}",
                lambda b=b: BUILDERS[b.component](log, b), log=log_path)
    return times
