"""How a drill's refused seconds split between what the platform needs and what the harness adds, from
the stored probes and steps (raw["drill"]); the report computes it, no metric record holds it.

Each outage (harness/metrics/drill.py outages: the first refused try → the next accepted one, the
same span upgrade_*_refused_s sums) is cut against each component's step:

  stopping   [started, started + stop_s]: the harness sent SIGTERM and waited for the process to exit,
             SIGKILL after its own grace (clusters/k8s/upgrade.py STOP_GRACE_S). A stop_s at the grace
             means the component had not finished its own shutdown and the harness's wait set the
             length; a site restarting it its own way, or running more than one replica, would not
             see that part. Recorded where the drill knows the stop apart (the native Kubernetes
             cluster's processes); a step without stop_s (Slurm's `docker restart`) has none.
  starting   [started + stop_s, back]: the new process came up until its health check passed: what
             the platform needs to start again.
  after      refused after the component's health check passed, or between steps: e.g. a webhook
             of a controller restarted later that the submission path calls.
"""
from __future__ import annotations

import re

GRACE = re.compile(r"SIGKILL after (\d+(?:\.\d+)?)\s*s")   # the step's own words (drills/k8s.py)


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def _num(v) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def spans(probes: list[dict], what: str) -> list[tuple[float, float]]:
    """The outages as [first refused try asked, next accepted try asked] (the last refused try's answer
    where none was accepted again), as upgrade_*_refused_s measures them."""
    from ..metrics.drill import outages

    ok = [p for p in probes if isinstance(p, dict) and _num(p.get("t0")) is not None and p.get("what") == what]
    out = []
    for o in outages(ok, what):
        end = o["next_ok"]["t0"] if o["next_ok"] else o["last"]["t1"]
        out.append((float(o["first"]["t0"]), float(end)))
    return out


def split(evidence: dict, what: str = "submit") -> dict | None:
    """{total, stopping, starting, after, by_component: {name: {stopping, starting}}, grace_hits: [names]};
    None without probes."""
    probes = evidence.get("probes")
    if not isinstance(probes, list) or not probes:
        return None
    outs = spans(probes, what)
    total = sum(b - a for a, b in outs)
    stopping = starting = 0.0
    by: dict[str, dict[str, float]] = {}
    grace_hits = []
    for s in evidence.get("steps") or []:
        t0, back = _num(s.get("started")), _num(s.get("back"))
        if t0 is None or back is None:
            continue
        extra = s.get("extra") if isinstance(s.get("extra"), dict) else {}
        # only the stop the harness timed itself: a Slurm step's `stopped` stamp comes after an install too
        stop_s = _num(extra.get("stop_s")) or 0.0
        stopped = min(t0 + stop_s, back)
        st = sum(_overlap(a, b, t0, stopped) for a, b in outs)
        up = sum(_overlap(a, b, stopped, back) for a, b in outs)
        if st or up:
            by[str(s.get("component"))] = {"stopping": st, "starting": up, "stop_s": stop_s}
        stopping, starting = stopping + st, starting + up
        g = GRACE.search(str(s.get("how") or ""))
        if g and stop_s >= float(g.group(1)) and st:   # still shutting down when the harness's wait ran out
            grace_hits.append(f"{s.get('component')} ({g.group(1)} s)")
    return {"total": total, "stopping": stopping, "starting": starting,
            "after": max(0.0, total - stopping - starting), "by_component": by, "grace_hits": grace_hits}


def text(sp: dict | None, fmt) -> str:
    if sp is None:
        return "– (no probes stored)"
    if sp["total"] <= 0:
        return "none refused"
    parts = [f"{fmt(sp['stopping'])} s while the harness stopped a component (its SIGTERM → SIGKILL wait)",
             f"{fmt(sp['starting'])} s while it started again until healthy"]
    if sp["after"] >= 0.01:   # below the probes' own resolution: the tries' edges, not an outage
        parts.append(f"{fmt(sp['after'])} s after or between components")
    who = [f"`{k}` stop {fmt(v['stopping'])} s + start {fmt(v['starting'])} s" for k, v in sp["by_component"].items()]
    tail = f" ({'; '.join(who)})" if who else ""
    if sp["grace_hits"]:
        tail += ("; killed at the end of the harness's grace, not exited: " + ", ".join(f"`{h}`" for h in
                                                                                    sp["grace_hits"]))
    return f"{fmt(sp['total'])} s = " + " + ".join(parts) + tail
