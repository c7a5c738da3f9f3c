"""This machine out of what is stored: its absolute paths and its host name become named placeholders, so a
results directory says nothing of where it was made and reads the same whoever made it.

    $HARNESS    the harness package (a checkout's harness/, or site-packages/harness)
    $CHECKOUT   the checkout holding it (when it is one: a pyproject.toml beside it)
    $STATE_DIR  running clusters' state (harness/paths.py: $POC_STATE_DIR)
    $CACHE_DIR  builds and images (harness/paths.py: $POC_CACHE_DIR)
    $RESULTS    the results directory a Store writes to (Machine.with_results)
    $HOME       the home directory
    $DOCKER_ROOT  the Docker engine's data directory (/var/lib/docker: `docker inspect` of the local baseline's
                containers names its overlay and log files there)
    $HOST       this machine's host name (socket.gethostname(), and its first label)

A path is replaced only whole (/root/x, "/root", file:///root/x; not /rootfs, /data/root, /root.bak), the
longest root first, so a state directory under the home directory is named $STATE_DIR, not $HOME/...;
a host name only as a word of its own or the end of a compound (default-scheduler-<host>, user@<host>),
never followed by ".<letter>" (vm.max_map_count is a sysctl, not the host "vm"), and with its case.
Host names too generic to tell apart from what schedulers print (localhost, node, debian: "2.6.0+debian"
is a torch build) are left alone. `restore` maps the path placeholders back to this machine's paths,
for a stored config that is used again (`poc cleanup` reaching the campaign's platforms).

Pure but for `here()`, which reads the environment and the host name each time it is called, so a test
that changes $HOME or $POC_STATE_DIR is seen at once.
"""
from __future__ import annotations

import functools
import os
import re
import socket
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from . import paths

PATH_RULE, HOST_RULE = "machine_path", "host_name"
DOCKER_ROOT = "/var/lib/docker"   # the engine's default data-root; the local clusters and baseline run on it
HOST = "$HOST"
# top-level system directories: a root that is one of them ($HOME=/tmp in a container) would rename
# what every container and cluster prints, so it is never a root
_SYSTEM = frozenset({"/", "/tmp", "/var", "/usr", "/opt", "/etc", "/srv", "/mnt", "/run", "/bin", "/sbin", "/lib",
                     "/lib64", "/dev", "/proc", "/sys", "/boot", "/media", "/home", "/var/tmp", "/usr/local"})
GENERIC_HOSTS = frozenset({"localhost", "localhost.localdomain", "host", "node", "server", "master", "worker", "login",
                           "ubuntu", "debian", "linux", "default", "none", "unknown", "container", "docker", "runner",
                           "build", "ci", "main", "test", "local", "controller", "compute", "head", "gpu", "cpu",
                           "kubernetes", "slurm", "jobset", "kueue", "poc", "admin", "root", "user"})


@dataclass(frozen=True)
class Machine:
    roots: tuple[tuple[str, str], ...] = ()   # (absolute path, placeholder)
    hosts: tuple[str, ...] = ()

    def __post_init__(self):
        roots = {(_clean(p), name) for p, name in self.roots if _clean(p) not in _SYSTEM and _clean(p).startswith("/")}
        object.__setattr__(self, "roots", tuple(sorted(roots, key=lambda r: (-len(r[0]), r[0]))))
        hosts = {h for h in self.hosts if distinctive_host(h)}
        object.__setattr__(self, "hosts", tuple(sorted(hosts, key=lambda h: (-len(h), h))))

    def with_results(self, results: str | os.PathLike) -> Machine:
        return Machine((*self.roots, (str(Path(results).expanduser().absolute()), "$RESULTS")), self.hosts)

    def neutral(self, text: str, counts: Counter | None = None) -> str:
        """text with this machine's paths and host name as placeholders, each replacement counted by rule."""
        if not self.roots and not self.hosts:
            return text
        path_re, host_re = _patterns(self.roots, self.hosts)
        names = dict(self.roots)
        n = [0, 0]

        def path(m: re.Match) -> str:
            n[0] += 1
            return names[m.group(0)]

        def host(m: re.Match) -> str:
            n[1] += 1
            return HOST

        if path_re is not None:
            text = path_re.sub(path, text)
        if host_re is not None:
            text = host_re.sub(host, text)
        if counts is not None:
            if n[0]:
                counts[PATH_RULE] += n[0]
            if n[1]:
                counts[HOST_RULE] += n[1]
        return text

    def restore(self, text: str) -> str:
        """The path placeholders back to this machine's paths ($HOST is left: nothing needs it back)."""
        for p, name in self.roots:
            text = re.sub(re.escape(name) + r"(?=/|[^\w]|$)", lambda _m, p=p: p, text)
        return text

    def restore_all(self, value: object) -> object:
        """restore() on every string of a JSON-able value."""
        if isinstance(value, str):
            return self.restore(value)
        if isinstance(value, dict):
            return {k: self.restore_all(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.restore_all(v) for v in value]
        return value


NOWHERE = Machine()


def distinctive_host(name: str) -> bool:
    """Whether a host name can be told apart from what the harness stores: two characters or more, not a
    word schedulers and images print for other reasons."""
    return len(name) >= 2 and name.lower() not in GENERIC_HOSTS and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]*", name) \
        is not None and not name.isdigit()


def host_names() -> tuple[str, ...]:
    name = socket.gethostname()
    return (name, name.split(".", 1)[0]) if name else ()


def package_roots() -> tuple[tuple[str, str], ...]:
    pkg = Path(__file__).resolve().parent
    out = [(str(pkg), "$HARNESS")]
    if (pkg.parent / "pyproject.toml").is_file():
        out.append((str(pkg.parent), "$CHECKOUT"))
    return tuple(out)


def here(results: str | os.PathLike | None = None) -> Machine:
    """This machine as it is now: its package, state, cache and home directories, host name, and `results`."""
    roots = [*package_roots(), (str(paths.state_dir()), "$STATE_DIR"), (str(paths.cache_dir()), "$CACHE_DIR"),
             (str(Path.home()), "$HOME"), (DOCKER_ROOT, "$DOCKER_ROOT")]
    m = Machine(tuple(roots), host_names())
    return m.with_results(results) if results is not None else m


def _clean(p: str) -> str:
    return p.rstrip("/") or "/"


@functools.lru_cache(maxsize=32)
def _patterns(roots: tuple[tuple[str, str], ...],
              hosts: tuple[str, ...]) -> tuple[re.Pattern | None, re.Pattern | None]:
    path_re = host_re = None
    if roots:
        alt = "|".join(re.escape(p) for p, _ in roots)   # longest first: the alternation tries them in order
        path_re = re.compile(r"(?:(?<=://)|(?<![\w.~/$-]))(?:" + alt + r")(?![\w.~-])")
    if hosts:
        alt = "|".join(re.escape(h) for h in hosts)
        host_re = re.compile(r"(?<![A-Za-z0-9.$])(?:" + alt + r")(?![A-Za-z0-9-]|\.[A-Za-z0-9])")
    return path_re, host_re
