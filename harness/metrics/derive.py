"""All metrics of one run, from its workload events and its scheduler evidence (Stamps)."""
from __future__ import annotations

import statistics

from .. import events as ev
from .bandwidth import allreduce
from .calibration import allocation_check, calibration
from .checkpoint import checkpoint
from .common import _metric, normalise
from .cost import COST_RULE, cost, recovery_cost
from .goodput import goodput
from .image import image_pull_metrics
from .recovery import recovery, step_times
from .straggler import straggler
from .throughput import throughput
from .timing import first_log, handover, queue, startup


def derive(events: list[dict], stamps: dict, *, world: int, nodes: int, gpus_per_node: int, steps: int,
           price: dict, faults: list[dict], contention: dict | None = None,
           cost_rule: int = COST_RULE) -> tuple[dict, dict]:
    """All metrics of one run, and its phase timeline (name -> epoch seconds, each instant's best value).

    stamps: the evidence dict of harness.evidence.stamps (Stamps or their JSON): submitted, admitted,
    allocated, ended, released, attempts[], checks[]. The old flat times (name -> epoch seconds) are
    still accepted, each taken as exact. cost_rule: what cost bills (metrics/cost.py COST_RULES), the
    run's own for a stored run (its derive_inputs; rule 1 before there were rules).
    """
    events = sorted(events, key=lambda e: e["ts_ns"])
    st = normalise(stamps)
    m: dict = dict(queue(st))
    if contention:
        m["handover_s"] = handover(st, contention)
    sm, inst = startup(events, st, world)
    m.update(sm)
    m.update(image_pull_metrics(st))   # Kubernetes: the kubelet's Pulled events (inside launch_s)
    m["first_log_s"] = first_log(events, st)
    bw = allreduce(events, world)   # one metric record, or several by name (nccl-tests' average too)
    m.update({"allreduce_busbw_gbps": bw} if "value" in bw else bw)
    m.update(calibration(events))   # nothing for a run without the calibration phase
    m.update(allocation_check(events))   # nor without the step before training
    st_samples = step_times(events)
    med = statistics.median(st_samples) if st_samples else None
    m["step_time_s"] = _metric("step_time_s", med, {}, n=len(st_samples), samples=[round(x, 6) for x in st_samples],
                               grouped_by="attempt, rank (first step of each dropped)")
    m.update(throughput(events, world, med))   # samples_per_s (MLP) or tokens_per_s and mfu (transformer)
    m.update(straggler(events))
    m.update(checkpoint(events))   # nothing for a run that saved and loaded none
    rec_inst: dict = {}
    for f in faults:  # one fault per run today; a second would overwrite the first's metrics
        rm, rec_inst = recovery(events, f, world, st)
        m.update(rm)
        if rec_inst:
            m["recovery_cost_usd"] = recovery_cost(rec_inst, price, nodes, gpus_per_node)
    m["goodput"] = goodput(events, st)
    m.update(cost(events, st, price, nodes, gpus_per_node, steps, med, rule=cost_rule))
    return m, _timeline(events, st, inst, faults, rec_inst, contention)


def _timeline(events, st, inst, faults, rec_inst, contention) -> dict:
    def t(s):
        return None if s is None else s.t
    timeline = {"submitted": t(st.get("submitted")), "admitted": t(st.get("admitted")),
                "allocated": t(st.get("allocated")), "launched": t(inst["launched"]),
                "rendezvous": t(inst["rendezvous"]), "calibrated": t(inst.get("calibrated")),
                "sweep_done": t(inst["sweep_done"]),
                "first_step": t(inst["first_step"])}
    for f in faults:
        timeline["fault"] = float(f["injected_at"])
    # the recovery's instants, named apart from the first attempt's (rendezvous -> re_rendezvous)
    for name, key in (("detected", "detected"), ("rendezvous", "re_rendezvous"), ("loaded", "re_loaded"),
                      ("resumed", "resumed"), ("caught_up", "caught_up")):
        if rec_inst.get(name) is not None:
            timeline[key] = rec_inst[name].t
    if contention and contention.get("released"):
        timeline["blocker_released"] = contention["released"]
    done = [e["ts_ns"] / 1e9 for e in ev.of_kind(events, "done")]
    timeline["done"] = max(done) if done else t(st.get("ended"))
    timeline["released"] = t(st.get("released"))
    return {k: v for k, v in timeline.items() if v is not None}
