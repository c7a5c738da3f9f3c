"""After a run ended and was cancelled: its files on the cluster, the platform's own records of it,
and the calls it took per user action. Shared by the training pipeline and the mistake probes."""
from __future__ import annotations

from . import footprint, redact
from .backends.base import Backend, Handle
from .store import RunRecord


def audit_run(backend: Backend, handle: Handle, raw: dict, record: RunRecord) -> None:
    """The platform's own records of the run (after cancel: who deleted it is in them too) into the
    raw evidence, and the answers they give into the record; a failure is noted, never fatal."""
    from . import audit  # its readers need only the raw evidence; imported where used
    if (backend.platform or handle.platform) not in audit.PLATFORMS:
        return   # no scheduler, no records of its own to audit (the local baseline)
    try:
        raw["audit"] = redact.scrub(backend.audit_evidence(handle)).data
        record.audit = audit.answers(backend.platform or handle.platform, raw)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - the run's record is written whatever the audit reader raised
        record.audit_error = f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}"[:500]


def calls_by_phase(stages: list[dict], cancel: dict[str, int]) -> dict[str, dict[str, int]]:
    """Calls per user action: submit, watch (queue and run), logs (collect), cancel."""
    out: dict[str, dict[str, int]] = {}
    for st in stages:
        phase = footprint.CALL_PHASES.get(st["name"].split(":", 1)[0])
        if phase and st.get("calls"):
            footprint.add(out, phase, st["calls"])
    if cancel:
        footprint.add(out, "cancel", cancel)
    return out


def cleanup_run(backend: Backend, h: Handle, record: RunRecord, keep: str) -> dict:
    """backend.cleanup for a finished run; a failure is a warning in the record, not a failed run."""
    if record.cancel_error is not None:   # the job may still be running in its directory
        return {"removed": [], "kept": ["all"], "reason": "cancel failed: the job may still be running"}
    try:
        return backend.cleanup(h, record.status == "ok", keep)
    except Exception as exc:  # noqa: BLE001 - the files stay; the record says why
        return {"removed": [], "warning": f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}"[:500]}
