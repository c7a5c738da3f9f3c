"""Settings changed on a running native cluster: the controllers' client rate limits
(clusters/k8s/rate_limits.py). The new setting is saved, the changed controllers' configuration
rewritten and the controllers stopped; `native_k8s.up` then restarts them as it restarts any dead
controller, with their state kept in the API server."""
from __future__ import annotations

from harness.clusters.k8s import components, host, procs, rate_limits
from harness.clusters.k8s.layout import Layout, load_state, save_state


def apply_rate_limits(L: Layout, limits: dict[str, tuple[int, int]]) -> list[str]:
    """Save `limits` as the cluster's setting; stop the running controllers whose limit changes (their
    next start takes it). The controllers stopped, for the caller to bring the cluster up again."""
    before = rate_limits.load(L)
    rate_limits.save(L, limits)
    state = load_state(L)
    stopped = []
    for name in rate_limits.changed(before, limits):
        entry = (state.get("components") or {}).get(name)
        if not entry:
            continue        # not started yet: it reads the setting when it is
        if name == "kueue":
            components.kueue_config(L)    # the same path its stored argv names
        else:
            entry["argv"] = rate_limits.with_kcm_flags(entry["argv"], L)
        if procs.alive(entry):
            host.stop_pid(entry["pid"], entry.get("exe"), grace=5)
        stopped.append(name)
    save_state(L, state)
    return stopped


def apply_fair_sharing(L: Layout, enable: bool) -> list[str]:
    """Save Kueue's fair sharing setting; stop Kueue when it changes (its next start reads it). The
    controllers stopped, for the caller to bring the cluster up again."""
    if rate_limits.fair_sharing(L) == bool(enable):
        return []
    rate_limits.save_fair_sharing(L, enable)
    components.kueue_config(L)
    entry = (load_state(L).get("components") or {}).get("kueue")
    if entry and procs.alive(entry):
        host.stop_pid(entry["pid"], entry.get("exe"), grace=5)
        return ["kueue"]
    return []
