"""`poc check` for Slurm: the login node reachable over ssh, its host key known, the scheduler
answering, the partition there, the campaign's own job accepted by ``sbatch --test-only``, and
accounting (sacct / slurmdbd) readable. Nothing is submitted and nothing on the cluster changes.

The checks get what they talk to passed in (a transport, a Scheduler, a socket connector, a host-key
fetcher), so they run against recorded answers in tests and the real cluster in `poc check`.
"""
from __future__ import annotations

import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import TransportError
from .report import Failed, Note, Runner

CONNECT_TIMEOUT_S = 5.0
SYSTEM_KNOWN_HOSTS = "~/.ssh/known_hosts"
ACCOUNTING_TIP = ("the harness reads queue times and recovery evidence (every attempt of a requeued job) from "
                  "sacct: ask the cluster admins for accounting (AccountingStorageType=accounting_storage/slurmdbd, "
                  "slurmdbd reachable from the login node)")
# sbatch --test-only's verdict (on stderr): "sbatch: Job 37 to start at 2026-12-04T18:48:20 using 2
# processors on nodes c[1-2] in partition debug"
_TEST_ONLY = re.compile(r"Job (?P<job>\d+) to start at (?P<at>\S+) using (?P<procs>\d+) processors on nodes "
                        r"(?P<nodes>\S+) in partition (?P<part>\S+)")


@dataclass(frozen=True)
class SlurmTarget:
    """What the Slurm checks talk to. shell: where Slurm's commands run (None: a rest transport whose
    files channel is a mount); ssh: the ssh transport to the login node, when there is one."""
    sched: object                  # backends.slurm.scheduler.Scheduler
    shell: object | None           # transports.Transport
    ssh: object | None             # transports.SshTransport
    script: str                    # the campaign's first job, rendered as it would be submitted
    partition: str | None
    accept_unknown_host: bool = False
    # (what it is, its script): the campaign's largest job where it asks for more nodes than the first
    # (a scale curve's largest size), tried with sbatch --test-only as well
    largest: tuple[str, str] | None = None


def ssh_of(t) -> object | None:
    """The SshTransport under a (counting) transport, or None."""
    from ..transports import SshTransport

    while t is not None and not isinstance(t, SshTransport):
        t = vars(t).get("inner") if hasattr(t, "__dict__") else None   # a CountingTransport's inner
    return t


# ---------------------------------------------------------------- ssh
def reachable(host: str, port: int, connect=socket.create_connection, timeout: float = CONNECT_TIMEOUT_S) -> str:
    try:
        connect((host, port), timeout=timeout).close()
    except OSError as exc:
        raise Failed(f"cannot reach {host}:{port}: {exc.strerror or exc}",
                     tip=f"check slurm.host and slurm.port (HostName and Port in ssh_config), that the login node "
                         f"is up and that no firewall is in the way: nc -vz {host} {port}") from None
    return f"{host}:{port} accepts TCP connections"


def server_key(host: str, port: int, known_types: list[str], timeout: float = CONNECT_TIMEOUT_S):
    """The host key the ssh server offers, asking first for a type known_hosts already holds (as
    ssh and paramiko's SSHClient do), so a host known by its ed25519 key is not offered its RSA key."""
    import paramiko

    sock = socket.create_connection((host, port), timeout=timeout)
    t = paramiko.Transport(sock)
    try:
        t.banner_timeout = timeout
        if known_types:
            opts = t.get_security_options()
            opts.key_types = known_types + [k for k in opts.key_types if k not in known_types]
        t.start_client(timeout=timeout)
        return t.get_remote_server_key()
    finally:
        t.close()


def lookup_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


def host_key(host: str, port: int, known_hosts: str | None, accept_unknown: bool,
             fetch: Callable = server_key) -> str:
    import paramiko

    path = Path(known_hosts or SYSTEM_KNOWN_HOSTS).expanduser()
    keys = paramiko.HostKeys()
    if path.is_file():
        try:
            keys.load(str(path))
        except (OSError, paramiko.SSHException) as exc:
            raise Failed(f"cannot read known_hosts {path}: {exc}", tip="fix or replace the file") from None
    name = lookup_name(host, port)
    known = keys.lookup(name) or {}
    try:
        offered = fetch(host, port, list(known))
    except (OSError, EOFError, paramiko.SSHException) as exc:
        raise Failed(f"no ssh handshake with {host}:{port}: {exc}",
                     tip="is an ssh server listening there? check slurm.host and slurm.port") from None
    fp = f"{offered.get_name()} {offered.fingerprint}"
    mine = known.get(offered.get_name())
    if mine is not None and mine == offered:
        return f"{name} is in {path} ({fp})"
    scan = (f"ssh-keyscan{' -p ' + str(port) if port != 22 else ''} {host} >> {path} (compare the fingerprint "
            f"with the admins' first)")
    if mine is not None:
        raise Failed(f"{name} offers {fp}, which does not match {path}",
                     tip=f"the host's key changed, or this is not the host: ask the admins; if the new key is "
                         f"right, remove the old one (ssh-keygen -R '{name}' -f {path}) and run {scan}")
    if accept_unknown:
        raise Note(f"{name} is not in {path}; slurm.accept_unknown_host: true accepts its key ({fp})")
    raise Failed(f"{name} is not in {path}: the server offers {fp}",
                 tip=f"add it: {scan}; or set slurm.known_hosts to a file that has it "
                     "(slurm.accept_unknown_host: true trusts any key)")


def login(shell) -> str:
    res = shell.run(["id", "-un"], timeout=30)
    d = shell.describe()
    return f"logged in as {res.stdout.strip()} on {d.get('host')}:{d.get('port')}"


# ---------------------------------------------------------------- scheduler
def scheduler(sched) -> tuple[str, list[str]]:
    """(a message, the partitions): the scheduler answers `sinfo --version` and `sinfo` (or slurmrestd's
    ping and partitions)."""
    ver = sched.version()
    parts = sched.partitions()
    return f"Slurm {ver or '(version not given)'}; partitions: {', '.join(parts) or 'none'}", parts


def partition(wanted: str | None, parts: list[str]) -> str:
    if wanted is None:
        return f"slurm.partition not set: the cluster's default partition is used (partitions: {', '.join(parts)})"
    if wanted not in parts:
        raise Failed(f"partition {wanted!r} does not exist; the partitions are: {', '.join(parts) or 'none'}",
                     tip="set slurm.partition to one of them, or to null for the cluster's default")
    return f"partition {wanted} exists"


TEST_ONLY_TIP = ("compare resources, slurm.partition, account, qos, constraint and time_limit with what "
                 "`sinfo` and `sacctmgr show assoc user=$USER` show; `poc render --platform slurm` prints the job")


def test_only(shell, script: str, what: str = "the campaign's job", tip: str = TEST_ONLY_TIP) -> str:
    """`sbatch --test-only` of the rendered job, on stdin: slurmctld says when and where it would start
    the job and submits nothing."""
    if shell is None:
        raise Note("not checked: slurm.rest.files is a mount, so there is no shell on a login node to run "
                   "sbatch --test-only")
    res = shell.run(["sbatch", "--test-only"], input=script, timeout=60, check=False)
    text = (res.stderr + "\n" + res.stdout).strip()
    m = _TEST_ONLY.search(text)
    if res.returncode != 0 or m is None:
        why = "; ".join(ln.strip() for ln in text.splitlines() if ln.strip()) or f"exit code {res.returncode}"
        raise Failed(f"sbatch --test-only refused {what}: {why}", tip=tip)
    return (f"Slurm would start the job at {m['at']} on {m['nodes']} in partition {m['part']} "
            f"({m['procs']} processors); nothing was submitted")


def accounting(sched, shell) -> str:
    """sacct answers (the harness's queue and recovery evidence); with slurmrestd, its slurmdb jobs."""
    rest = getattr(sched, "name", "") == "rest"
    try:
        if rest:   # what sacct -S now-1hours asks, as an ordinary user may (slurmdb's diag needs an admin)
            _, _, doc = sched.c.request("GET", sched.c.path("slurmdb", "jobs/"), params={"start_time": "now-1hours"},
                                        ok=(200,))
            n = len((doc or {}).get("jobs") or [])
            return f"slurmrestd's slurmdb answers ({n} job(s) of the last hour visible)"
        res = shell.run(["sacct", "-X", "-n", "-P", "-o", "JobID", "-S", "now-1hours"], timeout=60, check=False)
    except TransportError as exc:
        raise Failed(f"no accounting: {exc.message}", tip=ACCOUNTING_TIP) from None
    if res.returncode != 0:
        why = "; ".join(ln.strip() for ln in (res.stderr or res.stdout).splitlines() if ln.strip())
        raise Failed(f"no accounting: sacct failed (exit code {res.returncode}): {why or 'no message'}",
                     tip=ACCOUNTING_TIP)
    n = len([ln for ln in res.stdout.splitlines() if ln.strip()])
    return f"sacct answers ({n} job(s) of the last hour visible)"


# ---------------------------------------------------------------- all of them
def run_all(target: SlurmTarget, runner: Runner, *, connect=socket.create_connection, fetch=server_key) -> None:
    ssh = target.ssh
    if ssh is not None:
        first = ssh.route[0]
        via = f" (first hop of {len(ssh.route)})" if len(ssh.route) > 1 else ""
        runner.run("ssh reachable", lambda: reachable(first.host, first.port, connect) + via, gate=True)
        runner.run("ssh host key", lambda: host_key(first.host, first.port, ssh.known_hosts,
                                                    target.accept_unknown_host, fetch) + via, gate=True)
        runner.run("ssh login", lambda: login(target.shell), gate=True)
    parts: list[str] = []

    def sinfo() -> str:
        msg, found = scheduler(target.sched)
        parts.extend(found)
        return msg
    runner.run("sinfo", sinfo, gate=True)
    runner.run("partition", lambda: partition(target.partition, parts))
    runner.run("sbatch --test-only", lambda: test_only(target.shell, target.script))
    if target.largest is not None:
        what, script = target.largest
        runner.run("sbatch --test-only, largest job", lambda: test_only(
            target.shell, script, what,
            f"{what} may ask for more nodes than the partition has: compare scale.nodes with `sinfo -N"
            f"{' -p ' + target.partition if target.partition else ''}` and lower its largest size"))
    runner.run("accounting", lambda: accounting(target.sched, target.shell))
