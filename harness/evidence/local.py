"""The local baseline's raw evidence -> time-stamps (pure).

Two runtimes share the platform name "local" (harness/backends/local.py: torchrun processes on the
host; harness/backends/container.py: one container of the clusters' image per node). Neither has a
scheduler, so every edge comes from the harness's own clock or from dockerd's, which is the same
host clock (dockerd stamps its records with Go's time.Now(), printed in RFC 3339 with nanoseconds).

raw (what the backends keep in Collected.raw):
  {"runtime": "container" | "host",
   "submit": {"before", "after", "scheduler_record", "calls": [{"name"|"pid", "before", "after"}]},
   "containers": [docker inspect of each container, Env reduced to names],      # container
   "processes": [{"pid", "spawn_before", "spawn_after", "exited_at", "exit_code"}],  # host
   "image": {"ref", "id", "source"}}

Edges:
  submitted  the harness's bracket around all the docker run / spawn calls; for containers narrowed
             by dockerd's Created of the first container (its record of the job), when inside it
  allocated  host: the bracket around the last agent's spawn; container: the latest State.StartedAt
  ended      host: the latest agent exit seen by the harness's waiting thread; container: the latest
             State.FinishedAt
  released   = ended: an exited process or container holds no CPU or memory any more
"""
from __future__ import annotations

from ..timing import Stamp, docker_time

DOCKER_RES_S = 1e-9
# A thread blocked in waitpid() wakes within this of the child's exit on an unloaded machine; the
# exit instant is taken to lie in [seen - WAIT_WAKE_S, seen].
WAIT_WAKE_S = 0.005
def _check(checks: list, what: str, ok: bool, detail: str) -> None:
    checks.append({"what": what, "ok": bool(ok), "detail": detail})


def _submitted(sub: dict) -> Stamp | None:
    if sub.get("before") is None or sub.get("after") is None:
        return None
    return Stamp.between(float(sub["before"]), float(sub["after"]), "harness clock around the launch calls")


def _container_stamps(raw: dict, submitted: Stamp | None, checks: list) -> dict:
    containers = raw.get("containers") or []
    names = [str(c.get("Name", "")).lstrip("/") for c in containers]
    calls = {c.get("name"): c for c in (raw.get("submit") or {}).get("calls") or []}
    created = [t for t in (docker_time(c.get("Created")) for c in containers) if t is not None]
    if submitted is not None and created:
        rec = Stamp(min(created), min(created), min(created) + DOCKER_RES_S,
                    "dockerd Created (first container, ns)", DOCKER_RES_S)
        narrowed = submitted.narrowed(rec)
        _check(checks, "dockerd Created of the first container lies inside the harness's docker run bracket",
               narrowed is not None, f"created={rec.t:.6f} bracket=[{submitted.lo:.6f}, {submitted.hi:.6f}]")
        submitted = narrowed or submitted
    starts, ends, all_exited = [], [], bool(containers)
    for name, c in zip(names, containers, strict=True):
        st = c.get("State") or {}
        start, end = docker_time(st.get("StartedAt")), docker_time(st.get("FinishedAt"))
        if start is not None:
            starts.append(start)
            call = calls.get(name)
            if call is not None:
                _check(checks, f"{name}: StartedAt inside its docker run call",
                       float(call["before"]) <= start <= float(call["after"]),
                       f"started={start:.6f} call=[{call['before']:.6f}, {call['after']:.6f}]")
        if st.get("Status") in ("exited", "dead") and end is not None:
            ends.append(end)
        else:
            all_exited = False
        _check(checks, f"{name}: not restarted by dockerd", int(c.get("RestartCount") or 0) == 0,
               f"RestartCount={c.get('RestartCount')}")
    allocated = None
    if containers and len(starts) == len(containers):
        t = max(starts)
        allocated = Stamp(t, t, t + DOCKER_RES_S,
                          f"dockerd State.StartedAt (latest of {len(starts)} containers, ns)", DOCKER_RES_S)
    ended = None
    if all_exited and ends:
        t = max(ends)
        ended = Stamp(t, t, t + DOCKER_RES_S,
                      f"dockerd State.FinishedAt (latest of {len(ends)} containers, ns)", DOCKER_RES_S)
    if allocated is not None and ended is not None:
        _check(checks, "containers finished after they all started", ended.lo >= allocated.lo,
               f"allocated={allocated.t:.6f} ended={ended.t:.6f}")
    return {"submitted": submitted, "allocated": allocated, "ended": ended, "nodes": names}


def _host_stamps(raw: dict, checks: list) -> dict:
    procs = raw.get("processes") or []
    allocated = ended = None
    if procs and all(p.get("spawn_before") is not None for p in procs):
        last = max(procs, key=lambda p: float(p["spawn_after"]))
        allocated = Stamp.between(float(last["spawn_before"]), float(last["spawn_after"]),
                                  f"harness clock around the last of {len(procs)} agent spawns (Popen)")
    exits = [p.get("exited_at") for p in procs]
    if procs and all(x is not None for x in exits):
        t = max(float(x) for x in exits)
        ended = Stamp(t, t - WAIT_WAKE_S, t, "harness waitpid() return (latest agent exit)", 1e-6)
        if allocated is not None:
            _check(checks, "agents exited after they were all spawned", ended.hi >= allocated.lo,
                   f"allocated={allocated.t:.6f} ended={ended.t:.6f}")
    return {"allocated": allocated, "ended": ended, "nodes": [str(p.get("pid")) for p in procs]}


def stamps(raw: dict) -> dict:
    raw = raw or {}
    checks: list[dict] = []
    sub = raw.get("submit") or {}
    submitted = _submitted(sub)
    if raw.get("runtime") == "container":
        got = _container_stamps(raw, submitted, checks)
        submitted = got["submitted"]
    else:
        got = _host_stamps(raw, checks)
    allocated, ended = got["allocated"], got["ended"]
    if submitted is not None and allocated is not None:
        _check(checks, "allocated is not before submitted", allocated.hi >= submitted.lo,
               f"submitted={submitted.t:.6f} allocated={allocated.t:.6f}")
    attempts = []
    if allocated is not None or ended is not None:
        # no scheduler: one attempt; torchrun's restarts inside it are the workload's, seen in its events
        attempts.append({"attempt": 0, "allocated": allocated, "detected": None, "ended": ended,
                         "released": ended, "nodes": got["nodes"]})
    return {"submitted": submitted, "admitted": None, "allocated": allocated, "ended": ended,
            "released": ended, "attempts": attempts, "checks": checks}
