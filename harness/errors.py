"""The error tree. The CLI is the one place that turns these into `ERROR ...` / `TIP ...`.

Anything raised that is not a PocError is a bug and is allowed to show a traceback.
"""
from __future__ import annotations


class PocError(Exception):
    """An expected failure with a message for the user and a tip on what to do."""

    exit_code = 1

    def __init__(self, message: str, tip: str | None = None):
        super().__init__(message)
        self.message = message
        self.tip = tip


class ConfigError(PocError):
    """The configuration file or a command-line option is invalid."""

    exit_code = 2


class ClusterError(PocError):
    """A local cluster (Slurm in Docker, native Kubernetes, kind) could not be built, started or stopped."""


class BackendError(PocError):
    """A scheduler backend failed: preflight, submit, observe or cancel."""


class SubmitError(BackendError):
    """The scheduler refused the job."""


class RunTimeout(BackendError):
    """A run did not reach the expected state within its time-out."""


class TransportError(BackendError):
    """A command could not be delivered to the scheduler (SSH down, CLI missing)."""


class CommandError(TransportError):
    """A command ran and failed; carries what it ran and what it printed."""

    def __init__(self, argv: list[str], returncode: int, stdout: str, stderr: str, tip: str | None = None):
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        shown = " ".join(argv)
        msg = f"command failed (exit {returncode}): {shown}"
        if stderr.strip():
            msg += f"\n--- stderr ---\n{stderr.strip()[-2000:]}"
        if stdout.strip():
            msg += f"\n--- stdout ---\n{stdout.strip()[-2000:]}"
        super().__init__(msg, tip)


class StoreError(PocError):
    """The results store is unreadable or of an incompatible schema."""
