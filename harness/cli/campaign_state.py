"""A campaign's state read from its store without taking the campaign's lock, so it can be read while
a campaign runs in another process: the records (runs.jsonl), the in-flight journal, the lock's holder."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .. import redact_machine
from ..errors import StoreError
from ..store import bounded, read_runs

PROC_LOCKS = Path("/proc/locks")

# the states `poc status` shows, in the order its counts are listed
STATES = ("ok", "failed", "harness_error", "interrupted", "in_flight", "to_run")


@dataclass
class CampaignView:
    root: Path
    meta: dict | None                       # campaign.json, None when absent or unreadable
    records: dict[str, dict]                # run_id -> its last record
    inflight: dict[str, dict]               # run_id -> its handle
    notes: list[str] = field(default_factory=list)

    def state(self, run_id: str) -> str:
        if run_id in self.inflight:         # a record with a handle left: its cancel failed, still out there
            return "in_flight"
        rec = self.records.get(run_id)
        if rec is None:
            return "to_run"
        status = rec.get("status")
        return status if status in STATES else "failed"


def is_campaign(d: Path) -> bool:
    return (d / "campaign.json").exists() or (d / "runs.jsonl").exists()


def campaigns_under(results: Path) -> list[Path]:
    """Campaign directories of a results dir (or the dir itself when it is one)."""
    if is_campaign(results):
        return [results]
    return sorted(d for d in results.iterdir() if d.is_dir() and is_campaign(d)) if results.is_dir() else []


def read(root: Path) -> CampaignView:
    notes: list[str] = []
    meta = None
    try:
        meta = bounded.load_json(root / "campaign.json", bounded.MAX_META_BYTES)
    except FileNotFoundError:
        pass
    except StoreError as exc:   # not JSON, past the reading limits, a link: the runs are still listed
        notes.append(f"{exc.message}: not read")
    if isinstance(meta, dict) and isinstance(meta.get("config"), dict):
        # stored with this machine's paths as placeholders ($STATE_DIR/...): the platforms are reached with real ones
        meta["config"] = redact_machine.here(root.parent).restore_all(meta["config"])
    records: dict[str, dict] = {}
    for rec in read_runs(root / "runs.jsonl", notes.append):
        records[str(rec.get("run_id"))] = rec
    return CampaignView(root, meta if isinstance(meta, dict) else None, records, read_inflight(root, notes), notes)


def read_inflight(root: Path, notes: list[str]) -> dict[str, dict]:
    """The in-flight journal, read only: Store.inflight() renames a damaged handle, which is the
    campaign owner's to do, not a reader's."""
    out: dict[str, dict] = {}
    d = root / "inflight"
    for p in sorted(d.glob("*.json")) if d.is_dir() else []:
        try:
            h = bounded.load_json(p, bounded.MAX_META_BYTES)
        except (OSError, StoreError):   # gone (cancelled), half-written, past the limits, a link: skipped
            h = None
        if isinstance(h, dict) and isinstance(h.get("run_id"), str):
            out[h["run_id"]] = h
        elif p.exists():
            notes.append(f"{p}: in-flight record is not readable")
    return out


def lock_holder(root: Path) -> int | bool | None:
    """The pid of the process holding the campaign's lock; False when no process holds it; None when
    this system cannot tell (no /proc/locks). Read from /proc/locks, so the lock is never taken: a
    campaign starting at that moment must not find it held by a reader."""
    lock = root / ".lock"
    try:
        st = lock.stat()
        text = PROC_LOCKS.read_text()
    except FileNotFoundError:
        return False if not lock.exists() else None
    except OSError:
        return None
    for line in text.splitlines():
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 11191 fe:00:10807684 0 EOF"; blocked waiters are listed with "->"
        if len(parts) < 6 or parts[1] != "FLOCK":
            continue
        try:
            pid, inode = int(parts[4]), int(parts[5].rsplit(":", 1)[1])
        except (ValueError, IndexError):
            continue
        if inode == st.st_ino and holds_open(pid, lock):
            return pid
    return False


def holds_open(pid: int, path: Path) -> bool:
    """Whether process pid has path open: confirms an inode match (inode numbers repeat across filesystems)."""
    fds = Path(f"/proc/{pid}/fd")
    target = os.path.realpath(path)
    try:
        return any(os.path.realpath(fd) == target for fd in fds.iterdir())
    except OSError:
        return False
