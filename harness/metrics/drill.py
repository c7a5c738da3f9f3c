"""An upgrade drill's figures, from what the drill kept (raw["drill"]) and the training job's events.

Pure: `poc rederive` runs this again on the stored evidence. Every figure is named upgrade_* (the
report keeps each drill kind apart: "upgrade_submit_refused_s:drill:restart").

Refused seconds come from the probes: a run of refused tries is an outage that began after the last
accepted try was asked and before the first refused one was answered, and ended after the last
refused one was asked and before the next accepted one was answered. The value is what a user saw
(first refusal asked -> first acceptance asked again); [lo, hi] bounds the true outage.
"""
from __future__ import annotations

import itertools
import statistics

from .. import events as ev
from ..timing import Stamp, stamp_of
from .common import WORKLOAD_CLOCK, _metric, _record, _span_metric, at, span

PROBE_CLOCK = "harness clock around each probe (time.time)"


def outages(probes: list[dict], what: str) -> list[dict]:
    """Maximal runs of refused tries of one kind: {first, last, prev_ok, next_ok} (probe dicts or None)."""
    tries = sorted((p for p in probes if p["what"] == what), key=lambda p: p["t0"])
    out: list[dict] = []
    cur: dict | None = None
    prev_ok = None
    for p in tries:
        if p.get("error") is None:
            if cur is not None:
                cur["next_ok"] = p
                out.append(cur)
                cur = None
            prev_ok = p
        elif cur is None:
            cur = {"first": p, "last": p, "prev_ok": prev_ok, "next_ok": None}
        else:
            cur["last"] = p
    if cur is not None:
        out.append(cur)
    return out


def refused(probes: list[dict], what: str, name: str) -> dict:
    outs = outages(probes, what)
    value = lo = hi = 0.0
    unbounded = False
    for o in outs:
        first, last, prev_ok, next_ok = o["first"], o["last"], o["prev_ok"], o["next_ok"]
        end = next_ok["t0"] if next_ok else last["t1"]
        value += end - first["t0"]
        lo += max(0.0, last["t0"] - first["t1"])
        if next_ok is None:
            unbounded = True   # never accepted again while the drill watched: the outage is open-ended
        hi += (next_ok["t1"] if next_ok else last["t1"]) - (prev_ok["t0"] if prev_ok else first["t0"])
    n = sum(1 for p in probes if p["what"] == what)
    detail = {"tries": n, "refused_tries": sum(1 for p in probes if p["what"] == what and p.get("error")),
              "outages": len(outs), "open_ended": unbounded,
              "errors": sorted({o["first"]["error"] for o in outs})[:5]}
    if n == 0:
        return _record(name, None, None, None, {}, {}, detail)
    return _record(name, round(value, 6), round(lo, 6), None if unbounded else round(hi, 6),
                   {"probes": PROBE_CLOCK}, {}, detail)


def slowest(probes: list[dict], what: str, name: str) -> dict:
    """The longest a single try took (a Slurm client retries while slurmctld is away: a wait, not a refusal)."""
    times = [p["t1"] - p["t0"] for p in probes if p["what"] == what]
    return _metric(name, round(max(times), 6) if times else None, {"probes": PROBE_CLOCK}, tries=len(times))


def _rank0_steps(events: list[dict]) -> list[dict]:
    return sorted((e for e in events if e["kind"] == "step" and e.get("rank") == 0), key=lambda e: e["ts_ns"])


def steps_lost(events: list[dict]) -> dict:
    """Steps rank 0 ran more than once (a restart resumes from the last checkpoint)."""
    steps = _rank0_steps(events)
    distinct = {e["step"] for e in steps}
    return _metric("upgrade_steps_lost", len(steps) - len(distinct), {"events": WORKLOAD_CLOCK},
                   step_events=len(steps), distinct_steps=len(distinct))


def longest_stall(events: list[dict], window: dict | None) -> dict:
    """The longest gap between rank 0's steps while the drill ran, beside the median step."""
    steps = _rank0_steps(events)
    gaps = [(b["ts_ns"] - a["ts_ns"]) / 1e9 for a, b in itertools.pairwise(steps)]
    med = statistics.median(gaps) if gaps else None
    if not window or window.get("start") is None:
        return _metric("upgrade_max_step_gap_s", None, {}, median_step_s=med)
    w0, w1 = window["start"], window.get("end") or window["start"]
    inside = [(b["ts_ns"] - a["ts_ns"]) / 1e9 for a, b in itertools.pairwise(steps)
              if b["ts_ns"] / 1e9 >= w0 and a["ts_ns"] / 1e9 <= w1]
    return _metric("upgrade_max_step_gap_s", round(max(inside), 6) if inside else None, {"events": WORKLOAD_CLOCK},
                   median_step_s=None if med is None else round(med, 6), gaps_in_window=len(inside))


def _released(events: list[dict], world: int) -> Stamp | None:
    """The drilled job's last rank done (a workload event): when the queued job could have started."""
    done: dict[int, float] = {}
    for e in events:
        if e["kind"] == "done":
            done[e["rank"]] = max(done.get(e["rank"], 0.0), e["ts_ns"] / 1e9)
    return at(max(done.values()), "drilled job's last rank done (" + WORKLOAD_CLOCK + ")") \
        if len(done) >= world else None


def queued_delay(events: list[dict], world: int, queued_stamps: dict | None, queued: dict) -> dict:
    rel = _released(events, world)
    alloc = stamp_of((queued_stamps or {}).get("allocated"))
    return _span_metric("upgrade_queued_delay_s", span(rel, alloc), {"released": rel, "allocated": alloc},
                        queued_run_id=queued.get("run_id"), waited_before_drill=queued.get("waiting_before"))


def identity(snap: dict) -> dict[str, object]:
    """What must not change about the jobs while the platform restarts or upgrades, flattened to
    "path": value. Slurm (sacct -D and scontrol show job): every record and step row with its id, name,
    user, account and submit time, and for what was running, its start and nodes. Kubernetes (the
    runs' JobSets, Jobs, pods, Workloads): every object's uid, a running pod's node, an admitted
    Workload's ClusterQueue. States, end times and resourceVersions may change: the job goes on."""
    if "identity" in snap:
        return dict(snap["identity"])
    out: dict[str, object] = {}
    if "sacct" in snap:
        for r in (snap.get("sacct") or {}).get("rows") or []:
            k = f"sacct/{r.get('JobID')}"
            for f in ("JobName", "User", "Account", "Submit"):
                out[f"{k}/{f}"] = r.get(f)
            if r.get("State", "").split()[0:1] == ["RUNNING"]:
                out[f"{k}/Start"], out[f"{k}/NodeList"] = r.get("Start"), r.get("NodeList")
        for jid, j in (snap.get("scontrol") or {}).items():
            f = j.get("fields") or {}
            if j.get("rc") == 0:
                out[f"scontrol/{jid}/SubmitTime"] = f.get("SubmitTime")
                if f.get("JobState") == "RUNNING":
                    out[f"scontrol/{jid}/StartTime"], out[f"scontrol/{jid}/NodeList"] = f.get("StartTime"), \
                        f.get("NodeList")
        return out
    for run_id, objs in snap.items():
        if not isinstance(objs, dict) or run_id == "versions" or "error" in objs:
            continue
        if objs.get("jobset"):
            out[f"{run_id}/jobset/{objs['jobset']['name']}"] = objs["jobset"]["uid"]
        for kind in ("jobs", "pods", "workloads"):
            for o in objs.get(kind) or []:
                out[f"{run_id}/{kind}/{o['name']}"] = o["uid"]
                if kind == "pods" and o.get("phase") == "Running":
                    out[f"{run_id}/pods/{o['name']}/node"] = o.get("node")
                if kind == "workloads" and o.get("clusterQueue"):
                    out[f"{run_id}/workloads/{o['name']}/clusterQueue"] = o["clusterQueue"]
    return out


def intact(before: dict | None, after: dict | None) -> dict:
    """Whether what the platform kept about the jobs before the drill (identity()) is still there, and
    unchanged, after it."""
    if not before or not after or "error" in before or "error" in after:
        return _metric("upgrade_records_intact", None, {}, why="no snapshot to compare")
    b, a = identity(before), identity(after)
    if not b:
        return _metric("upgrade_records_intact", None, {}, why="the snapshot before the drill named nothing")
    missing = sorted(k for k in b if k not in a)
    changed = sorted(k for k in b if k in a and a[k] != b[k])
    return _metric("upgrade_records_intact", 0.0 if missing or changed else 1.0, {},
                   compared=len(b), missing=missing[:20], changed=changed[:20])


def derive_drill(events: list[dict], drill: dict, world: int, queued_stamps: dict | None) -> dict:
    """Every upgrade_* figure of one drill run. queued_stamps: harness.evidence.stamps of the queued
    job's raw records (raw["drill"]["queued"]["raw"])."""
    events = sorted(events, key=lambda e: e["ts_ns"])
    probes, steps = drill.get("probes") or [], drill.get("steps") or []
    atts = ev.attempts(events)
    finished = drill.get("job_state") == "succeeded"
    m = {
        "upgrade_job_survived": _metric("upgrade_job_survived", 1.0 if finished and len(atts) <= 1 else 0.0, {},
                                        job_state=drill.get("job_state"), attempts=len(atts)),
        "upgrade_job_restarts": _metric("upgrade_job_restarts", max(0, len(atts) - 1), {"events": WORKLOAD_CLOCK}),
        "upgrade_steps_lost": steps_lost(events),
        "upgrade_max_step_gap_s": longest_stall(events, drill.get("window")),
        "upgrade_submit_refused_s": refused(probes, "submit", "upgrade_submit_refused_s"),
        "upgrade_status_refused_s": refused(probes, "status", "upgrade_status_refused_s"),
        "upgrade_submit_slowest_s": slowest(probes, "submit", "upgrade_submit_slowest_s"),
        "upgrade_queued_delay_s": queued_delay(events, world, queued_stamps, drill.get("queued") or {}),
        "upgrade_leftovers": _metric("upgrade_leftovers", len(drill.get("leftovers") or []), {},
                                     what=[x.get("what") for x in (drill.get("leftovers") or [])][:10]),
        "upgrade_records_intact": intact(drill.get("snapshot_before"), drill.get("snapshot_after")),
    }
    started = [s["started"] for s in steps if s.get("started") is not None]
    backs = [s["back"] for s in steps if s.get("back") is not None]
    whole = (max(backs) - min(started)) if started and backs and len(backs) == len(steps) else None
    m["upgrade_drill_s"] = _metric("upgrade_drill_s", None if whole is None else round(whole, 6),
                                   {"steps": "harness clock (time.time)"},
                                   components=len(steps), back=len(backs), failed=[s["component"] for s in steps
                                                                                   if not s.get("ok", True)])
    return m


def from_evidence(stamps_fn, platform: str, events: list[dict], drill: dict, world: int) -> dict:
    """derive_drill with the queued job's time-stamps read from its kept raw records by stamps_fn
    (harness.evidence.stamps): what the pipeline and `poc rederive` both run."""
    q = drill.get("queued") or {}
    qst = stamps_fn(platform, q["raw"]) if q.get("raw") else None
    return derive_drill(events, drill, world, qst)
