"""`poc cleanup`: undo what an interrupted campaign left behind, without resuming it.

A campaign that was interrupted (Ctrl-C with a failed cancel, a crash, SIGKILL) keeps each submitted,
unfinished run's handle in RESULTS/<campaign>/inflight/. A destructive fault writes there what it is
about to change before changing it (a node powered off, cordoned, set DOWN). `poc run --resume`
cancels those handles and then continues the campaign; this cancels them only: the job is
cancelled, its objects deleted, and every node a lose_node fault took is brought back. A handle
whose cancel fails stays, so the next `poc cleanup` (or `--resume`) tries again.
"""
from __future__ import annotations

import fcntl
from collections.abc import Callable

from .backends.base import Backend, Handle
from .backends.identity import refuse_other_cluster
from .errors import PocError, StoreError
from .store import Store


def undo_inflight(store: Store, make_backend: Callable[[str], Backend]) -> tuple[list[dict], list[dict]]:
    """(handles undone, handles whose cancel failed, each with its "error"). Holds the campaign's
    lock (as Store.open does), so a campaign still running is never touched."""
    if not (store.root / "campaign.json").exists():
        raise StoreError(f"no campaign at {store.root}", tip="pass the --results and --campaign of the campaign")
    with open(store.root / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreError(f"campaign {store.root} is in use by another poc process",
                             tip="it cancels its own runs when it ends; wait for it") from None
        by_platform: dict[str, list[dict]] = {}
        for h in store.inflight():
            by_platform.setdefault(h["platform"], []).append(h)
        done, failed = [], []
        for plat, handles in by_platform.items():
            try:
                backend = make_backend(plat)
            except PocError as exc:
                failed += [{**h, "error": exc.message} for h in handles]
                continue
            try:
                for h in handles:
                    try:
                        refuse_other_cluster(h, backend.cluster_identity())
                        backend.cancel(Handle.from_json(h))
                    except Exception as exc:  # noqa: BLE001 - the handle stays for the next try; say why
                        failed.append({**h, "error": getattr(exc, "message", None) or str(exc),
                                       **({"tip": exc.tip} if getattr(exc, "tip", None) else {})})
                        continue
                    store.clear_inflight(h["run_id"])
                    done.append(h)
            finally:
                backend.close()
    return done, failed
