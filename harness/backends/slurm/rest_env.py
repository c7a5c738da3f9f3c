"""The environment a job submitted through slurmrestd starts with (the ``job.environment`` it is sent).

sbatch on a login node sends the submitting shell's environment (``--export=ALL``): the site's PATH,
with Slurm's own commands on it wherever the site installed them (/opt/slurm/bin is common).
slurmrestd sends only what the request names. So that a run submitted through slurmrestd is the same
job as one submitted with sbatch over ssh, its environment comes from, in order:

* ``config``: ``slurm.rest.job_environment``, exactly as given (validated in harness/config/slurm.py);
* ``login shell``: with an ssh shell beside slurmrestd (``slurm.rest.files: ssh``), a login shell
  there (``bash -l``) is asked once, at preflight, for ``LOGIN_NAMES`` only: never the whole
  environment, which may hold tokens;
* ``default``: jobdesc.py's ``DEFAULT_ENVIRONMENT`` (Debian's PATH and a locale), with a note saying why.

``JobEnvironment.describe()`` names the source, the names and the values (redacted as stored evidence
is); preflight stores it with every run, in the transport's description.
"""
from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from ... import redact
from ...errors import CommandError, TransportError
from .jobdesc import DEFAULT_ENVIRONMENT as DEFAULT

# what a batch script needs from the site: where its commands and libraries are, and the locale
LOGIN_NAMES = ("PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH")
# prints the nonce, then NAME=VALUE for each name given that is set, every field NUL-terminated: a value
# may hold any byte but NUL, and whatever /etc/profile prints before the nonce is skipped
_PRINT = 'printf "%s\\0" "$0"; for n in "$@"; do if [ -n "${!n+x}" ]; then printf "%s=%s\\0" "$n" "${!n}"; fi; done'
CONFIG_TIP = "set slurm.rest.job_environment to the site's (at least PATH, with the directory holding srun)"


@dataclass(frozen=True)
class JobEnvironment:
    source: str                    # config | login shell | default
    entries: tuple[str, ...]       # NAME=VALUE, as job.environment takes them
    note: str = ""                 # why the default, or what was left out

    def describe(self) -> dict:
        out = {"source": self.source, "names": [e.split("=", 1)[0] for e in self.entries],
               "environment": redact.scrub(list(self.entries)).data}
        return {**out, "note": self.note} if self.note else out


def configured(env: Mapping[str, str]) -> JobEnvironment:
    return JobEnvironment("config", tuple(f"{k}={v}" for k, v in env.items()))


def default(why: str) -> JobEnvironment:
    return JobEnvironment("default", DEFAULT, f"{why}: the job gets the harness's fixed PATH; {CONFIG_TIP}")


def login_shell_argv(nonce: str) -> list[str]:
    return ["bash", "-lc", _PRINT, nonce, *LOGIN_NAMES]


def parse_login_shell(stdout: str, nonce: str) -> JobEnvironment:
    """What ``login_shell_argv(nonce)`` printed -> the login shell's environment, or the default when
    it holds no PATH (or no nonce: the command never ran as written)."""
    _, found, tail = stdout.partition(nonce + "\0")
    if not found:
        return default("the login shell's answer did not hold its marker")
    entries, dropped = [], []
    for field in tail.split("\0")[:-1]:   # the last piece ends without NUL: cut short, not a value
        name, eq, value = field.partition("=")
        if not eq or name not in LOGIN_NAMES or name in (e.split("=", 1)[0] for e in entries):
            continue
        if "\n" in value or "\r" in value:   # refused in slurm.rest.job_environment too
            dropped.append(name)
            continue
        entries.append(field)
    if not any(e.startswith("PATH=") and len(e) > len("PATH=") for e in entries):
        return default("the login shell has no PATH")
    return JobEnvironment("login shell", tuple(entries),
                          f"left out (a value spanning lines): {', '.join(dropped)}" if dropped else "")


def read_login_shell(shell, nonce: str | None = None) -> JobEnvironment:
    """Asks a login shell over ``shell`` (the ssh transport to a login node) once."""
    nonce = nonce or f"poc-env-{secrets.token_hex(8)}"
    try:
        res = shell.run(login_shell_argv(nonce), timeout=30, check=True)
    except (TransportError, CommandError) as exc:
        # a message of its own: a failed command's text may quote what the profile printed
        why = f"exit code {exc.returncode}" if isinstance(exc, CommandError) else exc.message.splitlines()[0][:200]
        return default(f"a login shell on the login node could not be read ({why})")
    return parse_login_shell(res.stdout, nonce)


def known(env: Mapping[str, str] | None, shell) -> JobEnvironment | None:
    """The environment when it needs no command (configured, or no shell to ask); None: ask the shell."""
    if env:
        return configured(env)
    if shell is None:
        return default("slurm.rest.files is mount, so there is no login shell to read the site's environment from")
    return None
