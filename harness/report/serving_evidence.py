"""Serving figures the report computes from each serve run's stored requests (raw["serve"]), not from
its metric records: time-weighted availability, which replica answered, the harness proxy's own time.

Computed here rather than stored as serve_* metrics so that every committed campaign keeps
re-deriving with its records unchanged (`poc rederive` compares the metrics a record holds); the
inputs are the same stored evidence rederive reads, so anyone can recompute them.

Time-weighted availability, over the same window as the request-weighted figure (a fault's: from the
fault's instant to the end of the phase's load; the whole load otherwise): the share of the load
generator's client-time that was spent in requests that succeeded,

    sum(duration of ok requests) / sum(duration of every request + the error pause after each failed one)

over the requests started in the window. The clients are closed-loop, so each one's requests and
pauses tile its time and the denominator is clients x the window's length (less the gaps between
requests). Counting requests instead lets a failure that returns in ~1 ms weigh as much as a success
that takes ~90 ms, so a dead server's many quick refusals drag request-weighted availability below
the share of time it was down. Client-time rather than "a second with any success" so that a phase
where one of two replicas fails reads as half-available, not fully.
"""
from __future__ import annotations

from ..serve.metrics import WINDOW_S, _fault_window, requests, time_to_success, window_availability

NOT_RECORDED = "not recorded (this campaign's load generator did not keep which replica answered)"


def window(phase: dict) -> tuple[float, float] | None:
    """The request-weighted figure's window for this phase (harness/serve/metrics.py)."""
    return _fault_window(phase) if phase.get("fault") else None


def time_weighted(phase: dict) -> dict | None:
    """{value, ok_s, client_s, requests} for one phase; None without a request in its window."""
    load = phase["load"]
    w = window(phase)
    rows = [r for r in requests(load) if w is None or w[0] <= r["start"] < w[1]]
    if not rows:
        return None
    pause = float((load.get("plan") or {}).get("error_pause_s") or 0.0)
    ok_s = sum(r["end"] - r["start"] for r in rows if r["ok"])
    client_s = sum(r["end"] - r["start"] + (0.0 if r["ok"] else pause) for r in rows)
    return {"value": ok_s / client_s if client_s > 0 else None, "ok_s": ok_s, "client_s": client_s,
            "requests": len(rows)}


def fault_figures(phase: dict) -> dict | None:
    """The fault phase's figures no harness constant enters (serve/metrics.py): the time to the first success
    after the fault, and availability over the fixed window from the fault instant; None for no fault phase."""
    t = (phase.get("fault") or {}).get("t")
    if not isinstance(t, int | float):
        return None
    load = phase["load"]
    return {"time_to_success": time_to_success(load, float(t)),
            "window": window_availability(load, float(t), WINDOW_S, window(phase))}


def caveats(phase: dict, platform: str) -> list[str]:
    """What in a phase's stored requests says its figures are not the service's own: failed answers no replica
    sent (where the load kept who answered), and a two-replica phase one replica answered alone."""
    log = phase["load"].get("log") or {}
    named, errors = log.get("replica"), log.get("error") or []
    if not isinstance(named, list) or len(named) != len(errors) or not any(named):
        return []
    out = []
    anonymous: dict[str, int] = {}
    for who, err in zip(named, errors, strict=True):
        # a refused or timed-out connection has no answer at all; Slurm's balancer answers 503 itself while no
        # replica is healthy (the harness's own, named in the section); any other answer without a replica's
        # header came from something that is not the service
        if err and not who and err.startswith("http_") and not (platform == "slurm" and err == "http_503"):
            anonymous[err] = anonymous.get(err, 0) + 1
    if anonymous:
        said = ", ".join(f"{n} {e.replace('_', ' ').upper()}" for e, n in sorted(anonymous.items()))
        out.append(f"{said} answer(s) carried no replica's header: not from the service (an address routed off the "
                   "machine answers so), so this phase's failed requests and availability count them as the "
                   "service's when they were not")
    if phase.get("name") == "two_replicas":
        who = {w for w, e in zip(named, errors, strict=True) if w and not e}
        if len(who) == 1:
            out.append("one replica answered every request of the two-replica phase: its latency ratio compares "
                       "one replica with itself (the phase began before the second was in the platform's routing)")
    return out


def replicas(phase: dict) -> dict[str, dict[str, int]] | None:
    """{replica: {"ok": n, "failed": n}} over the phase's requests (failed answers from a replica, e.g.
    an HTTP 404, count for it; a refusal nobody answered is "no answer"); None where not recorded."""
    log = phase["load"].get("log") or {}
    named = log.get("replica")
    if not isinstance(named, list) or len(named) != len(log.get("error") or []):
        return None
    out: dict[str, dict[str, int]] = {}
    for who, err in zip(named, log["error"], strict=True):
        c = out.setdefault(str(who) if who else "no answer", {"ok": 0, "failed": 0})
        c["ok" if err is None else "failed"] += 1
    return out


def shares_text(counts: dict[str, dict[str, int]] | None) -> str:
    if counts is None:
        return NOT_RECORDED
    total = sum(c["ok"] + c["failed"] for c in counts.values())
    if not total:
        return "no request"
    parts = []
    for who, c in sorted(counts.items(), key=lambda kv: -(kv[1]["ok"] + kv[1]["failed"])):
        n = c["ok"] + c["failed"]
        parts.append(f"`{who}` {100 * n / total:.1f} % ({c['ok']} ok" + (f", {c['failed']} failed)" if c["failed"]
                                                                        else ")"))
    return "; ".join(parts)


def proxy_overhead(evidence: dict) -> dict | None:
    """The harness balancer's own time per forwarded request, where the run recorded it."""
    bal = (evidence.get("platform") or {}).get("balancer")
    ov = bal.get("overhead") if isinstance(bal, dict) else None
    return ov if isinstance(ov, dict) and ov.get("count") else None


def proxy_text(platform: str, evidence: dict) -> str:
    if platform == "k8s":
        return ("no userspace hop: the Service's ClusterIP is forwarded by kube-proxy's rules in the kernel "
                "(iptables/IPVS), inside the latency above")
    bal = (evidence.get("platform") or {}).get("balancer")
    if not isinstance(bal, dict):
        return "–"
    ov = proxy_overhead(evidence)
    if ov is None:
        return ("the harness's userspace proxy (harness/serve/balancer.py) is inside the latency above; its own "
                "time was not recorded in this campaign")
    ms = [f"p{p} {1000 * ov[f'p{p}_s']:.2f} ms" for p in (50, 99) if isinstance(ov.get(f"p{p}_s"), int | float)]
    return (f"{', '.join(ms)} over {ov['count']} forwarded requests (the proxy's handler time less the upstream "
            "round trip: a lower bound), inside the latency above")
