"""What harness/serve/slurm.py reads from Slurm's commands and the server's event files (pure;
recorded outputs in tests/fixtures/serve/slurm/)."""
from __future__ import annotations

import ipaddress
import re

from .. import events as evmod

# every event file of every serving job, each after a header line naming it (serve/events/<job id>/)
_EVENT_FILES = ('for f in "$1"/events/*/*.jsonl; do [ -f "$f" ] || continue; '
                'printf "\\n@@poc-file %s\\n" "$f"; cat "$f"; done; true')


def parse_jobs(text: str) -> dict[str, dict]:
    """``squeue -h -o %i|%T|%N|%r`` -> {job id: {"state", "node", "reason"}}."""
    out = {}
    for line in (text or "").splitlines():
        parts = line.strip().split("|")
        if len(parts) == 4 and parts[0].isdigit():
            out[parts[0]] = {"state": parts[1], "node": parts[2] or None, "reason": parts[3]}
    return out


def current_step(text: str, job_id: str) -> str | None:
    """``squeue -h -s -j ID -o %i`` -> the newest numbered step ("ID.N"), which is the running server's."""
    words = [line.split("|")[0].strip() for line in (text or "").splitlines()]   # -o %i, or %i|... (evidence)
    steps = [int(m.group(1)) for m in (re.fullmatch(rf"{re.escape(job_id)}\.(\d+)", w) for w in words) if m]
    return f"{job_id}.{max(steps)}" if steps else None


def node_addr(text: str) -> str | None:
    """NodeAddr of ``scontrol show node -o NODE``."""
    m = re.search(r"(?:^|\s)NodeAddr=(\S+)", text or "")
    return m.group(1) if m else None


def first_ipv4(text: str) -> str | None:
    """The first address of ``getent ahostsv4 NAME``."""
    for line in (text or "").splitlines():
        word = line.split()[0] if line.split() else ""
        try:
            return str(ipaddress.IPv4Address(word))
        except ValueError:
            continue
    return None


def is_ip(word: str) -> bool:
    try:
        ipaddress.ip_address(word)
        return True
    except ValueError:
        return False


def event_files(text: str) -> dict[str, list[dict]]:
    """The event-files command's output -> {job id (the directory's name): events}."""
    out: dict[str, list[dict]] = {}
    for part in (text or "").split("\n@@poc-file ")[1:]:
        path, _, body = part.partition("\n")
        job = path.rsplit("/", 2)[-2] if path.count("/") >= 2 else ""
        out.setdefault(job, []).extend(evmod.parse_lines(body.splitlines()))
    return out


def listening(events: list[dict], node: str | None) -> dict | None:
    """The newest serve_listening event from `node` (short names compared): where the server listens now."""
    if not node:
        return None
    short = node.split(".")[0]
    found = [e for e in events if e.get("kind") == "serve_listening" and str(e.get("host", "")).split(".")[0] == short
             and isinstance(e.get("port"), int)]
    return max(found, key=lambda e: e.get("ts_ns") or 0) if found else None
