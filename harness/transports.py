"""How Slurm commands reach a login node: ``local`` (subprocess) or ``ssh`` (paramiko).

Every transport runs an argv list (never a shell string it was handed): the ssh transport quotes
each word with shlex.quote before the remote shell sees it. Results carry the command, exit code
and output; ``check=True`` raises ``CommandError`` with all of them.

* ``LocalTransport(prefix=[])``: runs on this machine, e.g. when the harness runs on a login node.
  ``prefix`` lets the same transport run inside the local Docker cluster's login container
  (``docker exec -i -u poc poc-slurm-login``).
* ``SshTransport``: paramiko to a login node. The host key is verified against known_hosts and an
  unknown host is rejected unless ``accept_unknown_host=True``; keepalive is on; a dropped or
  refused connection is retried with exponential back-off before ``TransportError``. An ssh_config
  file (``Host`` alias -> HostName, User, Port, IdentityFile, ProxyJump) is read as ssh reads it,
  with explicit arguments winning; ``proxy_jump`` ("[user@]host[:port]", a comma-separated chain as
  ``ssh -J``) reaches the login node through ``direct-tcpip`` channels, each hop's host key checked
  by the same rules.

``slurm.transport: rest`` (slurmrestd) is backends/slurm/rest.py. ``pyslurm`` is refused when the config is
validated (config.slurm.PYSLURM_REFUSED says why).
"""
from __future__ import annotations

import logging
import shlex
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .errors import CommandError, TransportError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Result:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class Transport(Protocol):
    name: str

    def run(self, argv: Sequence[str], *, input: str | None = None, env: dict[str, str] | None = None,
            timeout: float = 60, check: bool = True) -> Result: ...

    def describe(self) -> dict: ...

    def close(self) -> None: ...


def _env_argv(env: dict[str, str] | None) -> list[str]:
    if not env:
        return []
    for k in env:
        if not k.replace("_", "").isalnum():
            raise ValueError(f"bad environment variable name {k!r}")
    return ["env", *[f"{k}={v}" for k, v in env.items()]]


def _logged(where: str, res: Result, env: dict[str, str] | None, started: float) -> Result:
    """`poc -vv` shows every command the harness ran, where, its exit code and how long it took; the
    environment by its names only (a token may be among its values)."""
    if log.isEnabledFor(logging.DEBUG):
        names = f" (env {', '.join(env)})" if env else ""
        log.debug("%s: %s%s -> exit %d in %.2f s", where, shlex.join(map(str, res.argv)), names, res.returncode,
                  time.monotonic() - started)
    return res


def _checked(res: Result, check: bool) -> Result:
    if check and res.returncode != 0:
        raise CommandError(list(res.argv), res.returncode, res.stdout, res.stderr)
    return res


class LocalTransport:
    name = "local"

    def __init__(self, prefix: Sequence[str] = ()):
        self.prefix = list(prefix)

    def run(self, argv, *, input=None, env=None, timeout=60, check=True) -> Result:
        full = self.prefix + _env_argv(env) + [str(a) for a in argv]
        started = time.monotonic()
        try:
            # Output is whatever the remote side prints: bytes that are not UTF-8 become U+FFFD, as over ssh.
            p = subprocess.run(full, input=input, capture_output=True, encoding="utf-8", errors="replace",
                               timeout=timeout, check=False)
        except FileNotFoundError as exc:
            raise TransportError(f"{full[0]} not found on this machine ({exc})",
                                 tip="install the Slurm client here, or use slurm.transport: ssh") from exc
        except subprocess.TimeoutExpired as exc:
            raise TransportError(f"command timed out after {timeout:g}s: {shlex.join(full)}") from exc
        res = Result(tuple(argv), p.returncode, p.stdout, p.stderr)
        return _checked(_logged(f"local{' ' + shlex.join(self.prefix) if self.prefix else ''}", res, env, started),
                        check)

    def describe(self) -> dict:
        return {"transport": "local", "prefix": self.prefix}

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class Hop:
    """One ssh connection: where, as whom, with which key (None: the agent and ~/.ssh keys)."""
    host: str
    port: int
    user: str | None
    key_file: str | None

    def label(self) -> str:
        return f"{self.user + '@' if self.user else ''}{self.host}:{self.port}"


def _ssh_config(path: str | None):
    """paramiko's SSHConfig of path, or None when no path or no file (ssh_config is optional)."""
    import paramiko

    if not path:
        return None
    p = Path(path).expanduser()
    if not p.is_file():
        return None
    tip = "point slurm.ssh_config at an OpenSSH client config (~/.ssh/config), or set it to null"
    try:
        return paramiko.SSHConfig.from_path(str(p))
    except OSError as exc:
        raise TransportError(f"cannot read ssh config {p}: {exc.strerror or type(exc).__name__}", tip=tip) from None
    except (ValueError, paramiko.SSHException):
        # paramiko's message quotes the line: a mistyped path (say, a password file) must not be echoed
        raise TransportError(f"{p} is not an ssh config: {_first_unparsable(p)}", tip=tip) from None


def _first_unparsable(p: Path) -> str:
    """Where a file stops being an ssh config, by line number only (paramiko's own rule for a line)."""
    import paramiko

    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return "it is not UTF-8 text"
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line and not line.startswith("#") and not paramiko.SSHConfig.SETTINGS_REGEX.match(line):
            return f"line {i} is not 'Keyword value'"
    return "a line is not 'Keyword value'"


def _lookup(conf, name: str) -> dict:
    return conf.lookup(name) if conf is not None else {"hostname": name}


def _first_key(found: dict) -> str | None:
    keys = found.get("identityfile") or []
    return str(Path(keys[0]).expanduser()) if keys else None


def _jump_words(spec: str | None) -> list[str]:
    if not spec or spec.strip().lower() == "none":
        return []
    return [w.strip() for w in spec.split(",") if w.strip()]


def _parse_jump(word: str) -> tuple[str | None, str, int | None]:
    user, _, rest = word.rpartition("@")
    host, port = rest, None
    if rest.count(":") == 1:          # host:port (an IPv6 literal would need [..], which ssh -J also wants)
        host, p = rest.split(":")
        port = int(p)
    elif rest.startswith("[") and "]:" in rest:
        host, p = rest[1:].split("]:")
        port = int(p)
    return user or None, host.strip("[]"), port


def resolve_route(host: str, port: int | None = None, user: str | None = None, key_file: str | None = None,
                  ssh_config: str | None = None, proxy_jump: str | None = None) -> list[Hop]:
    """The hops to the login node, jump hosts first, as ``ssh -J`` with the ssh_config file would go.

    The given values win over ssh_config (port None: not given). Jump hosts are looked up in
    ssh_config too (HostName, User, Port, IdentityFile); a jump host without a user or key of its
    own uses the login node's (one account on both is the common case), not the local user name.
    """
    conf = _ssh_config(ssh_config)
    found = _lookup(conf, host)
    if found.get("proxycommand") and proxy_jump is None and not found.get("proxyjump"):
        # a route ssh would take and this transport would not: better refused than silently direct
        raise TransportError(f"ssh_config gives {host} a ProxyCommand, which the ssh transport does not run",
                             tip="use ProxyJump in ssh_config, or slurm.proxy_jump: [user@]host[:port]")
    target = Hop(host=found.get("hostname", host), port=int(port or found.get("port") or 22),
                 user=user or found.get("user"), key_file=key_file or _first_key(found))
    jumps = []
    for word in _jump_words(proxy_jump if proxy_jump is not None else found.get("proxyjump")):
        j_user, j_host, j_port = _parse_jump(word)
        jf = _lookup(conf, j_host)
        jumps.append(Hop(host=jf.get("hostname", j_host), port=int(j_port or jf.get("port") or 22),
                         user=j_user or jf.get("user") or target.user,
                         key_file=_first_key(jf) or target.key_file))
    return [*jumps, target]


class SshTransport:
    name = "ssh"

    def __init__(self, host: str, port: int | None = 22, user: str | None = None, key_file: str | None = None,
                 known_hosts: str | None = None, accept_unknown_host: bool = False,
                 connect_timeout: float = 10, retries: int = 4, backoff_s: float = 1.0,
                 keepalive_s: int = 15, ssh_config: str | None = None, proxy_jump: str | None = None):
        self.route = resolve_route(host, port, user, key_file, ssh_config, proxy_jump)
        last = self.route[-1]
        self.alias, self.host, self.port, self.user, self.key_file = host, last.host, last.port, last.user, \
            last.key_file
        self.known_hosts = known_hosts
        self.accept_unknown_host = accept_unknown_host
        self.connect_timeout, self.retries, self.backoff_s = connect_timeout, retries, backoff_s
        self.keepalive_s = keepalive_s
        self._client = None
        self._hops: list = []        # the jump hosts' clients, closed after the login node's

    @classmethod
    def from_slurm(cls, s, **kw) -> SshTransport:
        """From the config's slurm section: host, port (only when set in the config, so ssh_config's
        Port can apply), user, key_file, known_hosts, accept_unknown_host, ssh_config, proxy_jump."""
        return cls(s.host, s.port if "port" in s.model_fields_set else None, s.user, s.key_file, s.known_hosts,
                   s.accept_unknown_host, ssh_config=s.ssh_config, proxy_jump=s.proxy_jump, **kw)

    def describe(self) -> dict:
        d = {"transport": "ssh", "host": self.host, "port": self.port, "user": self.user,
             "known_hosts": self.known_hosts, "accept_unknown_host": self.accept_unknown_host}
        if self.alias != self.host:
            d["alias"] = self.alias
        if len(self.route) > 1:
            d["proxy_jump"] = [h.label() for h in self.route[:-1]]
        return d

    def _connect_hop(self, hop: Hop, sock=None):
        import paramiko

        client = paramiko.SSHClient()
        if self.known_hosts:
            if not Path(self.known_hosts).exists():
                raise TransportError(f"known_hosts file {self.known_hosts} does not exist",
                                     tip="run `poc cluster up --slurm`, or point slurm.known_hosts at a file")
            client.load_host_keys(self.known_hosts)
        else:
            client.load_system_host_keys()
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy() if self.accept_unknown_host
                                           else paramiko.RejectPolicy())
        try:
            client.connect(hop.host, port=hop.port, username=hop.user, key_filename=hop.key_file,
                           look_for_keys=hop.key_file is None, allow_agent=hop.key_file is None,
                           timeout=self.connect_timeout, banner_timeout=self.connect_timeout,
                           auth_timeout=self.connect_timeout, sock=sock)
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise TransportError(f"host key of {hop.host}:{hop.port} does not match known_hosts: {exc}",
                                 tip="the host's key changed; check it, then update known_hosts") from exc
        except paramiko.AuthenticationException as exc:
            client.close()
            raise TransportError(f"ssh authentication to {hop.label()} failed: {exc}",
                                 tip="check slurm.user and slurm.key_file (User, IdentityFile in ssh_config)") from exc
        except paramiko.SSHException as exc:
            client.close()
            if "not found in known_hosts" in str(exc):
                known = self.known_hosts or "~/.ssh/known_hosts"
                name = hop.host if hop.port == 22 else f"[{hop.host}]:{hop.port}"
                raise TransportError(f"{hop.host}:{hop.port} is not in known_hosts ({known}; looked up as {name})",
                                     tip="add its key to known_hosts, or set slurm.accept_unknown_host: true "
                                         "if you trust the network") from exc
            if "No authentication methods" in str(exc):
                raise TransportError(f"no key to log in to {hop.label()} with (no key file, none in ~/.ssh, "
                                     "no agent)", tip="set slurm.key_file, or IdentityFile in ssh_config") from exc
            raise
        t = client.get_transport()
        if t is not None:
            t.set_keepalive(self.keepalive_s)
        return client

    def _connect(self):
        import paramiko

        hops, sock = [], None
        try:
            for i, hop in enumerate(self.route):
                client = self._connect_hop(hop, sock)
                hops.append(client)
                if i + 1 < len(self.route):
                    nxt = self.route[i + 1]
                    try:
                        sock = client.get_transport().open_channel(
                            "direct-tcpip", (nxt.host, nxt.port), ("127.0.0.1", 0), timeout=self.connect_timeout)
                    except paramiko.ChannelException as exc:
                        raise TransportError(f"jump host {hop.label()} refused to forward to {nxt.host}:{nxt.port}: "
                                             f"{exc}", tip="the jump host must allow TCP forwarding "
                                                           "(AllowTcpForwarding) to the login node") from exc
        except BaseException:
            for c in reversed(hops):
                c.close()
            raise
        self._hops = hops[:-1]
        return hops[-1]

    def _ensure(self):
        import paramiko

        if self._client is not None:
            t = self._client.get_transport()
            if t is not None and t.is_active():
                return self._client
            self.close()
        delay, last = self.backoff_s, None
        for attempt in range(self.retries + 1):
            try:
                self._client = self._connect()
                return self._client
            except TransportError:
                raise  # host key or authentication problems do not heal by retrying
            except (TimeoutError, OSError, paramiko.SSHException, EOFError) as exc:
                last = exc
                if attempt < self.retries:
                    time.sleep(delay)
                    delay *= 2
        raise TransportError(f"cannot reach {self.host}:{self.port} over ssh after {self.retries + 1} tries: {last}",
                             tip="is the login node up? `poc cluster status --slurm` for the local cluster")

    def run(self, argv, *, input=None, env=None, timeout=60, check=True) -> Result:
        import paramiko

        cmd = shlex.join(_env_argv(env) + [str(a) for a in argv])
        started = time.monotonic()
        for attempt in range(2):  # one reconnect if the connection dropped between commands
            client = self._ensure()
            try:
                stdin, stdout, stderr = client.exec_command(cmd, timeout=timeout)
                if input is not None:
                    stdin.write(input)
                stdin.channel.shutdown_write()
                out = stdout.read().decode(errors="replace")
                err = stderr.read().decode(errors="replace")
                rc = stdout.channel.recv_exit_status()
                res = Result(tuple(argv), rc, out, err)
                return _checked(_logged(f"ssh {self.host}:{self.port}", res, env, started), check)
            except TimeoutError as exc:
                raise TransportError(f"ssh command timed out after {timeout:g}s: {cmd}") from exc
            except (paramiko.SSHException, EOFError, OSError) as exc:
                self.close()
                if attempt == 1:
                    raise TransportError(f"ssh connection to {self.host}:{self.port} dropped: {exc}") from exc
        raise AssertionError("unreachable")

    def close(self) -> None:
        try:
            if self._client is not None:
                self._client.close()
        finally:
            self._client = None
            for c in reversed(self._hops):
                c.close()
            self._hops = []


def make_transport(kind: str, **kw) -> Transport:
    if kind == "local":
        return LocalTransport(kw.get("prefix", ()))
    if kind == "ssh":
        return SshTransport(**{k: v for k, v in kw.items() if k != "prefix"})
    raise TransportError(f"unknown transport {kind!r}", tip="use local or ssh (or slurm.transport: rest)")
