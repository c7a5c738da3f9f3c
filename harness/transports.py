"""How Slurm commands reach a login node: ``local`` (subprocess), ``ssh`` (paramiko), ``pyslurm``.

Every transport runs an argv list (never a shell string it was handed): the ssh transport quotes
each word with shlex.quote before the remote shell sees it. Results carry the command, exit code
and output; ``check=True`` raises ``CommandError`` with all of them.

* ``LocalTransport(prefix=[])``: runs on this machine, e.g. when the harness runs on a login node.
  ``prefix`` lets the same transport run inside the local Docker cluster's login container
  (``docker exec -i -u poc poc-slurm-login``).
* ``SshTransport``: paramiko to a login node. The host key is verified against known_hosts and an
  unknown host is rejected unless ``accept_unknown_host=True``; keepalive is on; a dropped or
  refused connection is retried with exponential back-off before ``TransportError``.
* ``pyslurm``: not provided. PyPI's pyslurm (25.11.x) must match the cluster's Slurm release and no
  Debian release ships Slurm 25.11, so it cannot be exercised here; ``make_transport`` says so.
"""
from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .errors import CommandError, TransportError


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
        try:
            # Output is whatever the remote side prints: bytes that are not UTF-8 become U+FFFD, as over ssh.
            p = subprocess.run(full, input=input, capture_output=True, encoding="utf-8", errors="replace",
                               timeout=timeout, check=False)
        except FileNotFoundError as exc:
            raise TransportError(f"{full[0]} not found on this machine ({exc})",
                                 tip="install the Slurm client here, or use slurm.transport: ssh") from exc
        except subprocess.TimeoutExpired as exc:
            raise TransportError(f"command timed out after {timeout:g}s: {shlex.join(full)}") from exc
        return _checked(Result(tuple(argv), p.returncode, p.stdout, p.stderr), check)

    def describe(self) -> dict:
        return {"transport": "local", "prefix": self.prefix}

    def close(self) -> None:
        pass


class SshTransport:
    name = "ssh"

    def __init__(self, host: str, port: int = 22, user: str | None = None, key_file: str | None = None,
                 known_hosts: str | None = None, accept_unknown_host: bool = False,
                 connect_timeout: float = 10, retries: int = 4, backoff_s: float = 1.0,
                 keepalive_s: int = 15):
        self.host, self.port, self.user = host, int(port), user
        self.key_file, self.known_hosts = key_file, known_hosts
        self.accept_unknown_host = accept_unknown_host
        self.connect_timeout, self.retries, self.backoff_s = connect_timeout, retries, backoff_s
        self.keepalive_s = keepalive_s
        self._client = None

    def describe(self) -> dict:
        return {"transport": "ssh", "host": self.host, "port": self.port, "user": self.user,
                "known_hosts": self.known_hosts, "accept_unknown_host": self.accept_unknown_host}

    def _connect(self):
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
            client.connect(self.host, port=self.port, username=self.user, key_filename=self.key_file,
                           look_for_keys=self.key_file is None, allow_agent=self.key_file is None,
                           timeout=self.connect_timeout, banner_timeout=self.connect_timeout,
                           auth_timeout=self.connect_timeout)
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise TransportError(f"host key of {self.host}:{self.port} does not match known_hosts: {exc}",
                                 tip="the login node's key changed; check it, then update known_hosts") from exc
        except paramiko.AuthenticationException as exc:
            client.close()
            raise TransportError(f"ssh authentication to {self.user}@{self.host}:{self.port} failed: {exc}",
                                 tip="check slurm.user and slurm.key_file") from exc
        except paramiko.SSHException as exc:
            client.close()
            if "not found in known_hosts" in str(exc):
                known = self.known_hosts or "~/.ssh/known_hosts"
                raise TransportError(f"{self.host}:{self.port} is not in known_hosts ({known})",
                                     tip="add its key to known_hosts, or set slurm.accept_unknown_host: true "
                                         "if you trust the network") from exc
            raise
        t = client.get_transport()
        if t is not None:
            t.set_keepalive(self.keepalive_s)
        return client

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
                return _checked(Result(tuple(argv), rc, out, err), check)
            except TimeoutError as exc:
                raise TransportError(f"ssh command timed out after {timeout:g}s: {cmd}") from exc
            except (paramiko.SSHException, EOFError, OSError) as exc:
                self.close()
                if attempt == 1:
                    raise TransportError(f"ssh connection to {self.host}:{self.port} dropped: {exc}") from exc
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            finally:
                self._client = None


def make_transport(kind: str, **kw) -> Transport:
    if kind == "local":
        return LocalTransport(kw.get("prefix", ()))
    if kind == "ssh":
        return SshTransport(**{k: v for k, v in kw.items() if k != "prefix"})
    if kind == "pyslurm":
        raise TransportError(
            "the pyslurm transport is not available in this build",
            tip="pyslurm must match the cluster's Slurm release exactly (PyPI has 25.11 only, and no "
                "Debian release ships Slurm 25.11); use slurm.transport: ssh or local")
    raise TransportError(f"unknown transport {kind!r}", tip="use local, ssh or pyslurm")
