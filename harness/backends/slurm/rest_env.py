"""The environment a job submitted through slurmrestd starts with (the ``job.environment`` it is sent).

sbatch on a login node sends the submitting shell's environment (``--export=ALL``): the site's PATH,
with Slurm's own commands on it wherever the site installed them (/opt/slurm/bin is common).
slurmrestd sends only what the request names. So that a run submitted through slurmrestd is the same
job as one submitted with sbatch over ssh, its environment comes from, in order:

* ``config``: ``slurm.rest.job_environment``, exactly as given (validated in harness/config/slurm.py);
* ``login shell``: with an ssh shell beside slurmrestd (``slurm.rest.files: ssh``), a login shell
  there (``bash -l``) is asked once, at preflight, for ``LOGIN_NAMES`` only: never the whole
  environment, which may hold tokens;
* neither: the run is refused (BackendError with a TIP naming ``slurm.rest.job_environment``). A fixed PATH of
  the harness's own (Debian's) would start the job where the site's srun and scontrol may not be, so that the
  REST job is no longer the job sbatch would run; the site's environment must be said.

``JobEnvironment.describe()`` names the source, the names and the values (redacted as stored evidence
is); preflight stores it with every run, in the transport's description.
"""
from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from ... import redact
from ...errors import BackendError, CommandError, TransportError

# what a batch script needs from the site: where its commands and libraries are, and the locale
LOGIN_NAMES = ("PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH")
# prints the nonce, then NAME=VALUE for each name given that is set, every field NUL-terminated: a value
# may hold any byte but NUL, and whatever /etc/profile prints before the nonce is skipped
_PRINT = 'printf "%s\\0" "$0"; for n in "$@"; do if [ -n "${!n+x}" ]; then printf "%s=%s\\0" "$n" "${!n}"; fi; done'
CONFIG_TIP = "set slurm.rest.job_environment to the site's (at least PATH, with the directory holding srun)"


@dataclass(frozen=True)
class JobEnvironment:
    source: str                    # config | login shell
    entries: tuple[str, ...]       # NAME=VALUE, as job.environment takes them
    note: str = ""                 # what was left out

    def describe(self) -> dict:
        out = {"source": self.source, "names": [e.split("=", 1)[0] for e in self.entries],
               "environment": redact.scrub(list(self.entries)).data}
        return {**out, "note": self.note} if self.note else out


def configured(env: Mapping[str, str]) -> JobEnvironment:
    return JobEnvironment("config", tuple(f"{k}={v}" for k, v in env.items()))


def refusal(why: str) -> BackendError:
    """No environment of the site's to send: the job is not sent with a made-up one."""
    return BackendError(f"slurmrestd: the job's environment is unknown: {why}, and slurmrestd sends a job only the "
                        "environment it is given (no PATH of the site's: srun and scontrol may not be found)",
                        tip=CONFIG_TIP)


def login_shell_argv(nonce: str) -> list[str]:
    return ["bash", "-lc", _PRINT, nonce, *LOGIN_NAMES]


def parse_login_shell(stdout: str, nonce: str) -> JobEnvironment:
    """What ``login_shell_argv(nonce)`` printed -> the login shell's environment; refused (BackendError) when
    it holds no PATH (or no nonce: the command never ran as written)."""
    _, found, tail = stdout.partition(nonce + "\0")
    if not found:
        raise refusal("the login shell's answer did not hold its marker")
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
        raise refusal("the login shell has no PATH")
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
        raise refusal(f"a login shell on the login node could not be read ({why})") from None
    return parse_login_shell(res.stdout, nonce)


def known(env: Mapping[str, str] | None) -> JobEnvironment | None:
    """The environment when it needs no command (configured); None: ask a login shell."""
    return configured(env) if env else None


def read(shell) -> JobEnvironment:
    """A login shell's, over ``shell``; refused where there is no shell to ask."""
    if shell is None:
        raise refusal("slurm.rest.files is mount, so there is no login shell to read the site's environment from")
    return read_login_shell(shell)
