"""Placement ceilings from a saturation sweep's rows, looked up by platform, size and rate limits, and where a
replay's offered rate stands against them."""
from __future__ import annotations

from harness.scale import ceiling as cl


def row(p, nodes, limits, rate, achieved, repeat=1):
    return {"platform": p, "nodes": nodes, "limits": limits, "repeat": repeat, "offered": rate, "achieved": achieved}


def test_the_ceiling_is_the_highest_rate_every_repeat_kept_up_with():
    lim = cl.DEFAULT_K8S_LIMITS
    rows = [row("k8s", 256, lim, 1, 1.0), row("k8s", 256, lim, 2, 1.95), row("k8s", 256, lim, 4, 2.4),
            row("k8s", 256, lim, 1, 1.0, 2), row("k8s", 256, lim, 2, 1.7, 2),     # repeat 2 fell behind at 2
            row("slurm", 256, "-", 1, 1.0), row("slurm", 256, "-", 8, 7.9)]
    found = {(c.platform, c.nodes): c for c in cl.ceilings(rows)}
    k = found[("k8s", 256)]
    assert k.jobs_per_s == 1 and k.reached and k.repeats == 2 and k.plateau_jobs_per_s == 2.4
    s = found[("slurm", 256)]
    assert s.jobs_per_s == 8 and not s.reached and "lower bound" in s.text()
    assert cl.from_dicts([c.as_dict() for c in found.values()]) == list(found.values())


def test_limits_labels_read_what_a_replay_recorded_and_default_when_it_recorded_nothing():
    described = {"kueue": "200/300 (Configuration clientConnection, set by poc cluster up --client-qps)",
                 "kube-controller-manager": "20/30 (--kube-api-qps/--kube-api-burst, default)"}
    assert cl.limits_label("k8s", described) == "kueue 200/300, kube-controller-manager 20/30"
    assert cl.limits_label("k8s", None) == cl.DEFAULT_K8S_LIMITS
    assert cl.limits_label("slurm", described) == cl.SLURM_LIMITS


def test_a_replay_above_a_ceiling_is_throughput_bound_and_one_without_is_unknown():
    c = cl.Ceiling("k8s", 1000, cl.DEFAULT_K8S_LIMITS, 1.0, True, 1.54, 4, 1, "fell behind at 2 jobs/s")
    assert cl.standing("k8s", 4.4, c).state == "throughput-bound"
    below = cl.standing("k8s", 0.7, c)
    assert below.state == "below" and below.share == 0.7 and "70% of its ceiling 1" in below.text()
    assert cl.standing("k8s", 0.7, None).state == "unknown"
    assert cl.find([c], "k8s", 1000, cl.DEFAULT_K8S_LIMITS) is c and cl.find([c], "k8s", 256, c.limits) is None
