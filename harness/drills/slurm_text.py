"""What the Slurm drill reads from Slurm's commands (harness/drills/slurm.py): pure, so the unit tests
check it against outputs recorded from the local cluster (tests/fixtures/slurm/drill/)."""
from __future__ import annotations

import re

from ..slurm_parse import show_config as parse_show_config  # noqa: F401 - the project's one parser, re-exported


def parse_kv_line(line: str) -> dict[str, str]:
    """One `scontrol show ... -o` line -> {key: value}; a value runs up to the next ` Key=`."""
    parts = re.split(r"\s+(?=[A-Za-z][A-Za-z0-9_:/]*=)", (line or "").strip())
    return dict(p.split("=", 1) for p in parts if "=" in p)


def parse_nodes(text: str) -> dict[str, dict[str, str]]:
    out = {}
    for line in (text or "").splitlines():
        f = parse_kv_line(line)
        if "NodeName" in f:
            out[f["NodeName"]] = f
    return out


def slurmd_back(f: dict, pid_before: str, pid_now: str, start_before: str, want_version: str = "") -> tuple[bool, str]:
    """Whether a restarted slurmd is back: a new process, registered again (SlurmdStartTime moved),
    the node responding and not down, and (upgrade) reporting the newer version."""
    base, *flags = (f.get("State") or "?").split("+")
    seen = f"pid {pid_before or '?'}->{pid_now or 'none'}, State={f.get('State', '?')}, " \
           f"SlurmdStartTime={f.get('SlurmdStartTime', '?')}, Version={f.get('Version', '?')}"
    ok = (bool(pid_now) and pid_now != pid_before and f.get("SlurmdStartTime", "") not in ("", start_before)
          and base in ("IDLE", "MIXED", "ALLOCATED") and not set(flags) & {"NOT_RESPONDING", "DOWN", "FAIL"}
          and (not want_version or f.get("Version") == want_version))
    return ok, seen


def parse_sacct(text: str) -> list[dict[str, str]]:
    """`sacct -P` with its header line -> one dict per row."""
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    if not lines:
        return []
    head = lines[0].split("|")
    return [dict(zip(head, ln.split("|"), strict=False)) for ln in lines[1:]]


def leftover_steps(text: str, active: set[str]) -> list[dict]:
    """`sacct -P -n -o JobID,State`: steps whose record still says RUNNING while their job has ended
    (slurmdbd never heard they finished)."""
    out = []
    for ln in (text or "").splitlines():
        jid, _, state = ln.partition("|")
        if "." in jid and jid.split(".")[0] not in active and state.startswith(("RUNNING", "PENDING")):
            out.append({"what": "step still running in accounting after its job ended", "step": jid, "state": state})
    return out


def bad_nodes(text: str, busy: bool) -> list[dict]:
    """`sinfo -h -N -o %N|%T`: nodes not back to idle (or held by a job still running), down, drained,
    not responding (*) or still completing."""
    out, seen = [], set()
    for ln in (text or "").splitlines():
        node, _, state = ln.partition("|")
        if not node or node in seen:
            continue
        seen.add(node)
        s = state.strip()
        if s == "idle" or (busy and s in ("mixed", "allocated")):
            continue
        out.append({"what": "node not idle", "node": node, "state": s})
    return out
