"""The emulated Slurm cluster's side of a replay: the shell into its container, its nodes, and the
tenants' accounts and the QOS classes a replay makes in slurmdbd and removes afterwards (sacctmgr argv
lists from render/replay_slurm.py and render/replay_priority.py; never a shell line)."""
from __future__ import annotations

import time
from collections.abc import Callable

from ..clusters import images
from ..clusters.slurm import emulated
from ..errors import BackendError
from ..render import replay_priority as rp
from ..render import replay_slurm as rsl


def slurm_shell(argv, *, input: bytes | None = None, timeout: float = 300):
    """One argv in the emulated Slurm container, stdin passed through; never raises on an exit code."""
    return images.run(["docker", "exec", "-i", emulated.CONTAINER, *argv], input=input, timeout=timeout,
                      check=False, what=f"docker exec {emulated.CONTAINER}")


def emulated_slurm_nodes(shell=slurm_shell) -> tuple[int, int]:
    """(the emulated Slurm cluster's nodes, GPUs per node, the fewest any has); (0, 0) when it is not up."""
    res = shell(["sinfo", "-h", "-N", "-o", "%N %G"], timeout=60)
    if res.returncode != 0:
        return 0, 0
    gpus = {}
    for line in res.stdout.splitlines():
        name, _, gres = line.partition(" ")
        count = next((int(g.split(":")[-1].split("(")[0]) for g in gres.split(",") if g.startswith("gpu:")), 0)
        gpus[name] = count
    return len(gpus), min(gpus.values(), default=0)


def slurm_accounts(shell=slurm_shell) -> set[str]:
    res = shell(["sacctmgr", "-n", "-P", "list", "account", "format=account"], timeout=60)
    if res.returncode != 0:
        raise BackendError(f"sacctmgr list account failed (exit {res.returncode}): "
                           f"{(res.stderr or res.stdout).strip()[-300:]}",
                           tip="the emulated Slurm cluster needs slurmdbd: `poc cluster down --slurm --emulated`, "
                               "then up again with the current image")
    return {line.strip() for line in res.stdout.splitlines() if line.strip()}


def make_accounts(shares: list[rsl.AccountShare], shell=slurm_shell, wait_s: float = 30,
                  sleep: Callable[[float], None] | None = None, qos: list[str] = ()) -> list[str]:
    """Add the accounts that do not exist yet (an existing one, `root` included, is used as it is and
    never removed), then wait until slurmctld knows them all, or sbatch could refuse the first jobs.
    With `qos`, root may submit to those QOSes in each account it makes. Returns the accounts made; on
    a failure removes them and raises."""
    sleep = sleep or time.sleep
    existing = slurm_accounts(shell)
    new = [a for a in shares if a.account not in existing]
    made: list[str] = []
    try:
        for argv in rsl.account_setup(new, qos=list(qos)):
            res = shell(argv, timeout=60)
            if res.returncode != 0:
                raise BackendError(f"{' '.join(argv[:4])} {argv[4]} failed (exit {res.returncode}): "
                                   f"{(res.stderr or res.stdout).strip()[-300:]}")
            if argv[3] == "account":
                made.append(argv[4])
        want = {a.account for a in shares}
        deadline = time.monotonic() + wait_s
        while True:
            res = shell(["sshare", "-n", "-P", "-o", "Account", "-A", ",".join(sorted(want))], timeout=60)
            if want <= {ln.strip() for ln in res.stdout.splitlines()}:
                return made
            if time.monotonic() >= deadline:
                raise BackendError(f"slurmctld did not learn the accounts {sorted(want)} within {wait_s:g} s",
                                   tip="see /var/log/slurm/slurmdbd.log in the container")
            sleep(0.5)
    except BaseException:
        remove_accounts(made, shell, wait_s=10, sleep=sleep)
        raise


def remove_accounts(accounts: list[str], shell=slurm_shell, wait_s: float = 60,
                    sleep: Callable[[float], None] | None = None) -> str:
    """Remove root from the accounts and the accounts. sacctmgr refuses while a job of theirs is still
    on the cluster (a cancelled job completing), so it retries until wait_s: "" or the last error."""
    if not accounts:
        return ""
    sleep = sleep or time.sleep
    deadline, error = time.monotonic() + wait_s, ""
    while True:
        user, account = rsl.account_teardown(accounts)
        shell(user, timeout=60)     # nothing to remove is fine; the account removal below says what matters
        res = shell(account, timeout=60)
        left = set(accounts) & slurm_accounts(shell) if res.returncode == 0 else set(accounts)
        if not left:
            return ""
        error = (res.stderr or res.stdout).strip()[-300:] or f"still there: {sorted(left)}"
        if time.monotonic() >= deadline:
            return error
        sleep(2)


def slurm_qos(shell=slurm_shell) -> set[str]:
    res = shell(["sacctmgr", "-n", "-P", "list", "qos", "format=name"], timeout=60)
    if res.returncode != 0:
        raise BackendError(f"sacctmgr list qos failed (exit {res.returncode}): "
                           f"{(res.stderr or res.stdout).strip()[-300:]}")
    return {line.strip() for line in res.stdout.splitlines() if line.strip()}


def make_qos(classes: list[rp.ClassPriority], shell=slurm_shell) -> tuple[list[str], list[str]]:
    """Make a QOS per class with its priority and the lower classes it preempts; one that exists
    (``normal``) is set instead. Returns (QOSes made, QOSes set), for ``remove_qos``; on a failure puts
    back what it did and raises."""
    names = {c.qos: rsl.slurm_qos(c.qos) for c in classes}
    if len(set(names.values())) < len(names):
        raise BackendError(f"QOS classes {sorted(names)} do not make distinct Slurm QOS names "
                           "(Slurm lowercases them)")
    existing = slurm_qos(shell)
    made, modified = [], []
    try:
        for argv in rp.qos_setup(classes, names, existing):
            res = shell(argv, timeout=60)
            if res.returncode != 0:
                raise BackendError(f"{' '.join(argv[:4])} failed (exit {res.returncode}): "
                                   f"{(res.stderr or res.stdout).strip()[-300:]}")
            if argv[2] == "modify":       # sacctmgr -i modify qos where name=Q set ...
                modified.append(argv[5].removeprefix("name="))
            else:                         # sacctmgr -i add qos Q ...
                made.append(argv[4])
        return made, modified
    except BaseException:
        remove_qos(made, modified, shell)
        raise


def remove_qos(made: list[str], modified: list[str], shell=slurm_shell) -> str:
    """Delete the QOSes a replay made and reset those it set; "" or the last error."""
    error = ""
    for argv in rp.qos_teardown(made, modified):
        res = shell(argv, timeout=60)
        if res.returncode != 0:
            error = (res.stderr or res.stdout).strip()[-300:] or f"exit {res.returncode}"
    return error
