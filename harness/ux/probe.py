"""One user mistake, made on purpose on one platform: how long until the platform says what is wrong.

The probe submits the job with the mistake in it (harness/ux/mistakes.py) as a user would, then
looks at what a user can read (the backend's user_view: squeue's reason, Kueue's conditions, pod
events, the job's output) every poll until a message names the problem (harness/ux/clear.py) or the
deadline passes. It always cancels what it submitted, keeps every message it saw with when, and
stores a run record like any other: scenario "mistake:<kind>" as the run plan names it (records of
campaigns run before it was stored so say "mistake"), metric time_to_error_s:<kind>.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from .. import footprint, hostload, redact, run_record
from ..afterrun import audit_run, cleanup_run
from ..backends.base import Backend, Handle
from ..config import Config
from ..errors import PocError
from ..spec import Planned, build
from . import clear, mistakes

BackendFor = Callable[[str, Config], Backend]    # platform, config -> a backend (factory.make_backend)
MAX_MESSAGES = 200      # a looping container error repeats: the first sightings are what count
MAX_TEXT = 2000


def probe_spec(m: mistakes.Mistake, run_id: str):
    """The probe's job: the campaign's job from the config with the mistake in it, under the probe's id."""
    return dataclasses.replace(build(m.cfg, m.platform, run_id, None, "mistake"), entrypoint=m.entrypoint)


class _Seen:
    """The messages in the order a user would have seen them, each once, with when (s after submit)."""

    def __init__(self) -> None:
        self.items: list[dict] = []
        self._keys: set[tuple[str, str]] = set()

    def add(self, at_s: float, resolution_s: float, source: str, text: str) -> None:
        text = str(text).strip()[:MAX_TEXT]
        key = (source, text)
        if not text or key in self._keys or len(self.items) >= MAX_MESSAGES:
            return
        self._keys.add(key)
        self.items.append({"at_s": round(at_s, 3), "resolution_s": round(resolution_s, 3), "source": source,
                           "text": text})


def run(cfg: Config, platform: str, run_id: str, kind: str, store, make_backend: BackendFor, *,
        host_sampler: Callable[[], hostload.Sampler] = hostload.Sampler, **kw) -> dict:
    """Probe one mistake; return its record as stored (already appended to the store). host_sampler: what
    looks at the host's load around the probe, as around every training run (harness/hostload.py); kw: _probe's."""
    host = host_sampler().start()
    try:
        return _probe(cfg, platform, run_id, kind, store, make_backend, host, **kw)
    finally:
        host.close()


def _probe(cfg: Config, platform: str, run_id: str, kind: str, store, make_backend: BackendFor,
           host: hostload.Sampler, *, worker_image: str | None = None, poll_s: float = 1.0,
           clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
           progress: Callable[[str, str, str, float], None] = lambda *_a: None) -> dict:
    m = mistakes.make(cfg, platform, kind, worker_image)
    deadline_s = cfg.ux.deadline_s
    record = run_record.start(cfg, platform, run_id, f"mistake:{kind}", clock())
    seen = _Seen()
    files: dict[str, str] = {}
    handle: Handle | None = None
    backend: Backend | None = None
    collected = None
    interrupted = False
    calls: dict[str, dict[str, int]] = {}
    harness_note = None
    t0 = clock()
    try:
        backend = make_backend(platform, m.cfg)
        spec = dataclasses.replace(probe_spec(m, run_id), owner=getattr(store, "owner_id", ""),
                                   owner_key=getattr(store, "owner_key", None))
        rendered = backend.render(spec)
        files.update({f"rendered/{k}": v for k, v in rendered.files.items()})
        c0 = backend.call_counts()
        t0 = clock()
        try:
            handle = backend.submit(spec, rendered)
        except PocError as exc:   # refused at submit: the user reads this at once
            # the platform's own words (sbatch's stderr, the API server's answer), not what the
            # harness adds to them (what the nodes have), which a user of the platform would not see
            own = exc.__cause__ if isinstance(exc.__cause__, PocError) else exc
            # seen the moment the call returned: the time is the call's own, exact to the clock
            seen.add(clock() - t0, 0.0, "at submit: " + type(exc).__name__, own.message)
            if own is not exc:
                harness_note = exc.message
        footprint.add(calls, "submit", footprint.diff(c0, backend.call_counts()))
        if handle is not None:
            store.mark_inflight(handle.to_json())
            # a message the first look shows may have appeared any time since the submit call began
            t0 = last = handle.submitted_at
            c1 = backend.call_counts()
            while True:
                view = backend.user_view(handle)
                now = clock()
                for msg in view:
                    seen.add(now - t0, now - last, str(msg.get("source") or "?"), msg.get("text") or "")
                last = now
                progress(platform, run_id, f"mistake {kind}: {len(seen.items)} message(s) so far", now - t0)
                if clear.verdict(seen.items, kind, m.wrong)["clear"] or now - t0 > deadline_s:
                    break
                sleep(poll_s)
            try:   # one look as the training pipeline takes them: the job's objects as they stand now go
                backend.observe([handle])   # into the raw evidence before the cancel removes them
            except PocError:
                pass
            footprint.add(calls, "watch", footprint.diff(c1, backend.call_counts()))
        record.status = "ok"
    except (KeyboardInterrupt, Exception) as exc:  # noqa: BLE001 - who failed is in the record (run_record.fail)
        interrupted = run_record.fail(record, "probe", exc)
    finally:
        if backend is not None and handle is not None:
            footprint.add(calls, "cancel", run_record.cancel(backend, store, [handle], record))
    raw: dict = {}
    if backend is not None and handle is not None:
        try:
            collected = backend.collect(handle)
            raw = redact.scrub(collected.raw).data
        except Exception as exc:  # noqa: BLE001 - a job that never ran may have little to collect
            record.collect_error = str(exc)[:500]
        record.cleanup = cleanup_run(backend, handle, record, cfg.keep_run_files)
        audit_run(backend, handle, raw, record)
        record.job_ids = handle.ids
    if backend is not None:
        backend.close()
    v = clear.verdict(seen.items, kind, m.wrong)
    record.mistake = {**m.to_json(), "deadline_s": deadline_s, "poll_s": poll_s, **v, "messages": seen.items,
                         **({"harness_note": harness_note} if harness_note else {})}
    if v["time_to_error_s"] is not None:
        record.metrics = {f"time_to_error_s:{kind}": _metric(v)}
    record.ux = {"calls": calls}
    record.host_load = host.stop()
    record.finished_at = clock()
    if collected is not None:
        files.update({f"logs/{k}": val for k, val in collected.logs.items()})
    stored = run_record.write(store, record, {**raw, "user_view": seen.items}, files)
    if interrupted:
        raise KeyboardInterrupt
    return stored


def _metric(v: dict) -> dict:
    """submit -> the look that first showed the clear message; it appeared after the previous look."""
    hi = float(v["time_to_error_s"])
    lo = max(0.0, hi - float(v.get("resolution_s") or 0.0))
    return {"value": hi, "unit": "s", "lo": round(lo, 3), "hi": hi, "uncertainty": round((hi - lo) / 2, 3),
            "sources": {}, "stamps": {}, "detail": {"source": v["source"], "at_submit": v["at_submit"]}}


class MistakeProbe:
    """The user-experience probes as a scenario that makes its own record: one run per configured
    mistake (scenario "mistake:<kind>"), run by ``run`` instead of the pipeline's stages."""
    kind = "mistake"

    @staticmethod
    def planned(cfg: Config, platform: str) -> list[Planned]:
        return [Planned(f"{platform}-mistake-{kind.replace('_', '-')}", None, f"mistake:{kind}")
                for kind in cfg.mistakes_for(platform)]

    run = staticmethod(run)
