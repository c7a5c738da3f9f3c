"""Host plumbing for the native cluster: cgroups, processes, mounts, network devices, iptables.

Everything the cluster starts is placed in cgroups under ``/<CGROUP_PARENT>`` in every cgroup
hierarchy, so `down` can find (and kill, by pid) every process it started, including container
processes and containerd shims that outlive their parent.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from harness.errors import CommandError

CGROUP_FS = Path("/sys/fs/cgroup")


def run(argv: list[str], check: bool = True, input: bytes | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, input=input, capture_output=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise CommandError(argv, proc.returncode, proc.stdout.decode(errors="replace"),
                           proc.stderr.decode(errors="replace"))
    return proc


# ---------------------------------------------------------------- cgroups

def hierarchies() -> list[Path]:
    """Mounted cgroup hierarchies (v1 controllers, named ones and the hybrid unified one)."""
    out = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        parts = line.split()
        if parts[2] in ("cgroup", "cgroup2") and parts[1].startswith(str(CGROUP_FS)):
            out.append(Path(parts[1]))
    return out


def make_cgroup(rel: str) -> None:
    """mkdir -p the cgroup in every hierarchy; cpuset ones get cpus/mems from their parent."""
    for h in hierarchies():
        path = h
        for part in Path(rel.strip("/")).parts:
            parent, path = path, path / part
            if not path.exists():
                path.mkdir()
            for f in ("cpuset.cpus", "cpuset.mems"):
                if (path / f).exists() and not (path / f).read_text().strip():
                    (path / f).write_text((parent / f).read_text())


def join_cgroup(rel: str, pid: int | None = None) -> None:
    """Move pid (default: this process) into the cgroup in every hierarchy."""
    pid_s = str(pid or os.getpid())
    for h in hierarchies():
        procs = h / rel.strip("/") / "cgroup.procs"
        if procs.exists():
            try:
                procs.write_text(pid_s)
            except OSError:
                pass


def cgroup_pids(rel: str) -> set[int]:
    pids: set[int] = set()
    for h in hierarchies():
        root = h / rel.strip("/")
        if not root.exists():
            continue
        for procs in root.rglob("cgroup.procs"):
            try:
                pids.update(int(p) for p in procs.read_text().split())
            except OSError:
                pass
    return pids


def kill_cgroup_tree(rel: str, timeout: float = 20) -> set[int]:
    """SIGKILL every process in the cgroup subtree until it is empty. Returns the pids seen."""
    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    while True:
        pids = cgroup_pids(rel)
        if not pids:
            return seen
        seen |= pids
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            return seen
        time.sleep(0.2)


def remove_cgroup_tree(rel: str) -> None:
    for h in hierarchies():
        root = h / rel.strip("/")
        if not root.exists():
            continue
        dirs = sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
        for d in [*dirs, root]:
            try:
                d.rmdir()
            except OSError:
                pass


# ---------------------------------------------------------------- processes

def pid_alive(pid: int, exe_name: str | None = None) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
        if exe_name:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            return Path(cmd).name == exe_name
    except OSError:
        return False
    return True


def stop_pid(pid: int, exe_name: str | None, grace: float = 10) -> None:
    """SIGTERM, wait up to grace seconds, then SIGKILL. Only if the pid still runs exe_name."""
    if not pid_alive(pid, exe_name):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not pid_alive(pid, exe_name):
            _reap(pid)
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _reap(pid)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


# ---------------------------------------------------------------- mounts

def mounts_under(prefixes: list[Path]) -> list[str]:
    """Mount points under any of prefixes, deepest first."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mp = line.split()[4].encode().decode("unicode_escape")
        if any(mp == str(p) or mp.startswith(str(p).rstrip("/") + "/") for p in prefixes):
            found.append(mp)
    return sorted(set(found), key=lambda m: m.count("/"), reverse=True)


def unmount_under(prefixes: list[Path]) -> list[str]:
    left = []
    for _ in range(3):
        for mp in mounts_under(prefixes):
            run(["umount", "-l", mp], check=False)
        left = mounts_under(prefixes)
        if not left:
            break
    return left


def netns_with_addresses_in(prefix: str) -> list[str]:
    """Named network namespaces (/run/netns) that hold an IPv4 address starting with prefix."""
    found = []
    nsdir = Path("/run/netns")
    if not nsdir.is_dir():
        return found
    for ns in nsdir.iterdir():
        out = run(["ip", "-n", ns.name, "-4", "-o", "addr"], check=False)
        if f" {prefix}" in out.stdout.decode(errors="replace"):
            found.append(ns.name)
    return found


def remove_netns(name: str) -> None:
    path = Path("/run/netns") / name
    run(["umount", "-l", str(path)], check=False)
    try:
        path.unlink()
    except OSError:
        pass


# ---------------------------------------------------------------- network devices

def link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def links_with_prefix(prefix: str) -> list[str]:
    return sorted(p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith(prefix))


def ensure_bridge(name: str, cidr: str) -> None:
    if not link_exists(name):
        run(["ip", "link", "add", name, "type", "bridge"])
    addrs = run(["ip", "-4", "-o", "addr", "show", "dev", name]).stdout.decode()
    if cidr not in addrs:
        run(["ip", "addr", "add", cidr, "dev", name])
    run(["ip", "link", "set", name, "up"])


def ensure_local_address(name: str, cidr: str) -> None:
    """A device that only holds a local address (a port-less bridge: `dummy` is not built into every kernel)."""
    if not link_exists(name):
        run(["ip", "link", "add", name, "type", "bridge"])
    addrs = run(["ip", "-4", "-o", "addr", "show", "dev", name]).stdout.decode()
    if cidr.split("/")[0] not in addrs:
        run(["ip", "addr", "add", cidr, "dev", name])
    run(["ip", "link", "set", name, "up"])


def ensure_local_route(cidr: str, device: str, run=run) -> None:
    """cidr routed to a local device. Service addresses are virtual: kube-proxy rewrites a packet to one
    (DNAT, after the route lookup) into a pod's address; one it has no rule for (a Service just made or
    gone, a rule set being rewritten) would otherwise follow the default route off this machine."""
    run(["ip", "route", "replace", cidr, "dev", device])


def delete_link(name: str) -> None:
    if link_exists(name):
        run(["ip", "link", "del", name], check=False)


def bridge_ports(bridge: str) -> list[str]:
    brif = Path("/sys/class/net", bridge, "brif")
    return sorted(p.name for p in brif.iterdir()) if brif.is_dir() else []


# ---------------------------------------------------------------- iptables

def ensure_forward_accept(chain: str, cidr: str, run=run) -> None:
    """Accept forwarded pod traffic (docker sets the FORWARD policy to DROP), from a jump appended to
    FORWARD: after DOCKER-USER, so the rules an administrator keeps there (docker's place for them) see
    pod traffic first. A jump an earlier version inserted at the top moves to the end: the new one is
    appended before the old one goes, so forwarded pod traffic is never dropped in between."""
    if run(["iptables", "-w", "-n", "-L", chain], check=False).returncode != 0:
        run(["iptables", "-w", "-N", chain])
    run(["iptables", "-w", "-F", chain])
    run(["iptables", "-w", "-A", chain, "-s", cidr, "-j", "ACCEPT"])
    run(["iptables", "-w", "-A", chain, "-d", cidr, "-j", "ACCEPT"])
    rules = run(["iptables", "-w", "-S", "FORWARD"], check=False).stdout.decode(errors="replace").splitlines()
    jumps = [i for i, r in enumerate(rules) if r.split() == ["-A", "FORWARD", "-j", chain]]
    user = max((i for i, r in enumerate(rules) if r.split() == ["-A", "FORWARD", "-j", "DOCKER-USER"]), default=-1)
    if len(jumps) == 1 and jumps[0] > user:
        return
    run(["iptables", "-w", "-A", "FORWARD", "-j", chain])
    for _ in jumps:     # -D takes the first match: the earlier jumps, never the one just appended
        run(["iptables", "-w", "-D", "FORWARD", "-j", chain])


def remove_forward_accept(chain: str) -> None:
    while run(["iptables", "-w", "-C", "FORWARD", "-j", chain], check=False).returncode == 0:
        run(["iptables", "-w", "-D", "FORWARD", "-j", chain], check=False)
    if run(["iptables", "-w", "-n", "-L", chain], check=False).returncode == 0:
        run(["iptables", "-w", "-F", chain], check=False)
        run(["iptables", "-w", "-X", chain], check=False)


def iptables_chain_exists(chain: str, table: str = "filter") -> bool:
    return run(["iptables", "-w", "-t", table, "-n", "-L", chain], check=False).returncode == 0


# Chains every kubelet creates (pkg/kubelet/kubelet_network_linux.go): canaries for firewall
# reloads, a hint for kube-proxy's iptables-mode detection, and KUBE-FIREWALL (drops non-local
# traffic to 127.0.0.0/8) hooked into INPUT and OUTPUT.
KUBELET_CHAINS = ("KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT")


def other_kubelets_running(ours: set[int]) -> bool:
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) not in ours:
            try:
                if proc.joinpath("comm").read_text().strip() == "kubelet" and pid_alive(int(proc.name)):
                    return True
            except OSError:
                pass
    return False


def remove_kubelet_iptables() -> list[str]:
    """Remove the kubelet chains (IPv4 and IPv6, all tables). Returns 'cmd table chain' removed."""
    removed = []
    for cmd in ("iptables", "ip6tables"):
        if not shutil.which(cmd):
            continue
        for table in ("filter", "nat", "mangle"):
            for chain in KUBELET_CHAINS:
                if run([cmd, "-w", "-t", table, "-n", "-L", chain], check=False).returncode != 0:
                    continue
                for hook in ("INPUT", "OUTPUT", "FORWARD", "PREROUTING", "POSTROUTING"):
                    while run([cmd, "-w", "-t", table, "-C", hook, "-j", chain], check=False).returncode == 0:
                        run([cmd, "-w", "-t", table, "-D", hook, "-j", chain], check=False)
                run([cmd, "-w", "-t", table, "-F", chain], check=False)
                if run([cmd, "-w", "-t", table, "-X", chain], check=False).returncode == 0:
                    removed.append(f"{cmd} {table} {chain}")
    return removed
