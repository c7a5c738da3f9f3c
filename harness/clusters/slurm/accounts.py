"""Slurm accounting for the local cluster's users: what a site's admin sets up for each user."""
from __future__ import annotations

from collections.abc import Callable

from harness.errors import ClusterError


def ensure_association(sacctmgr: Callable, user: str, look: str) -> None:
    """The user's account in slurmdbd, as a site's admin makes one for every user: sacct then shows
    the account, and slurmdbd gives the user their own jobs' batch scripts (it gives nothing to a
    user without an association). Idempotent: an existing one is kept.

    sacctmgr(argv, timeout=...) runs a command as the admin where slurmdbd is reachable; look: the
    command a reader can run to see the associations, for the TIP."""
    def accounts() -> list[str]:
        res = sacctmgr(["sacctmgr", "-n", "-P", "show", "assoc", f"user={user}", "format=account"], timeout=60)
        return res.stdout.split() if res.returncode == 0 else []

    if user in accounts():
        return
    sacctmgr(["sacctmgr", "-i", "add", "account", user, f"Description={user} team", "Organization=poc"], timeout=60)
    res = sacctmgr(["sacctmgr", "-i", "add", "user", user, f"Account={user}"], timeout=60)
    if user not in accounts():
        raise ClusterError(f"could not give {user} an account in slurmdbd: "
                           f"{(res.stderr or res.stdout).strip()[:300]}", tip=look)
