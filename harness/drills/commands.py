"""A drill on a user's own cluster: the components are restarted (or upgraded) by commands the user
gives, one argv each (never a shell string), because only they know how their controllers run
(systemd over SSH, a configuration-management job, a managed control plane's upgrade call).

drills.commands[platform][kind] = [{component, group?, argv, health_argv?, timeout_s?}, ...] in the
order the platform's upgrade guide prescribes. After the argv returns, the component is back when
health_argv exits 0 (polled every poll_s), or, without one, when the platform answers a status
query again (the drill's own probe).
"""
from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

from ..errors import BackendError
from .base import GROUPS, Step

Runner = Callable[..., subprocess.CompletedProcess]


def entries(commands: dict, platform: str, kind: str) -> list[dict]:
    return list(((commands or {}).get(platform) or {}).get(kind) or [])


def plan(commands: dict, platform: str, kind: str) -> list[str]:
    got = entries(commands, platform, kind)
    if not got:
        raise BackendError(f"no {kind} commands for {platform}: on a cluster the harness did not make, the drill "
                           "runs only the commands you give it",
                           tip=f"set drills.commands.{platform}.{kind} to a list of "
                               "{component, argv, health_argv} in your upgrade guide's order")
    return [e["component"] for e in got]


def _run(runner: Runner, argv: list[str], timeout: float) -> tuple[int, str]:
    try:
        p = runner(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout:g} s"
    except OSError as exc:
        return 127, str(exc)
    return p.returncode, (p.stderr or p.stdout or "").strip()[-300:]


def step(commands: dict, platform: str, kind: str, component: str, *, status: Callable[[], str | None],
         timeout_s: float, poll_s: float = 1.0, runner: Runner = subprocess.run,
         clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> Step:
    """Run the component's argv, then wait (bounded) until it is healthy again."""
    e = next(x for x in entries(commands, platform, kind) if x["component"] == component)
    group = e.get("group") if e.get("group") in GROUPS else "control plane"
    limit = float(e.get("timeout_s") or timeout_s)
    started = clock()
    rc, out = _run(runner, list(e["argv"]), limit)
    how = " ".join(e["argv"])
    health = " ".join(e["health_argv"]) + " exits 0" if e.get("health_argv") else "the platform answers a status query"
    if rc != 0:
        return Step(component, group, started, None, how=how, health=health, resolution_s=poll_s, ok=False,
                    error=f"exit {rc}: {out}")
    deadline = started + limit
    while clock() < deadline:
        if e.get("health_argv"):
            ok = _run(runner, list(e["health_argv"]), min(30.0, limit))[0] == 0
        else:
            ok = status() is None
        if ok:
            return Step(component, group, started, clock(), how=how, health=health, resolution_s=poll_s)
        sleep(poll_s)
    return Step(component, group, started, None, how=how, health=health, resolution_s=poll_s, ok=False,
                error=f"not healthy {limit:g} s after the command")
