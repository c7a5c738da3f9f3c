"""Metrics, defined once for every platform, from workload events and scheduler timestamps.

Every metric carries the timestamps it was computed from (`sources`, epoch
seconds), so a reader can recompute it. Scheduler timestamps come from the
scheduler's own clock (Slurm, Kubernetes), workload timestamps from the
nodes' clocks; on one host these are the same clock.

Definitions (all platforms):
- queue_s: submitted -> allocated (all resources held: Slurm Start, last pod
  PodScheduled, local spawn). queue_admission_s: submitted -> Kueue admission.
- startup_s = launch_s + rendezvous_s + first_step_s, from allocated to the
  first step done by every rank, less the all-reduce sweep (sweep_s, which the
  harness adds and a real job would not run):
    launch_s: allocated -> every rank's process started;
    rendezvous_s: -> every rank past init_process_group (includes importing torch);
    first_step_s: end of sweep -> every rank's first step done (model, DDP, checkpoint load, one step).
- allreduce_busbw_gbps: peak busbw of the sweep (nccl-tests: busbw = algbw * 2(n-1)/n, GB = 1e9 B).
- handover_s (contention runs): the blocking job done (its last rank's `done` event) -> the
  waiting job allocated; queue_s of those runs is kept apart as queue_s:contention.
- recovery_s: fault injected -> first step done by every rank after the restart;
  lost_steps: steps done before the fault that had to be done again.
- cost_per_step_usd: effective = price x units x (done - submitted) / steps;
  cost_per_step_steady_usd = price x units x median step time.
"""
from __future__ import annotations

from .bandwidth import allreduce, busbw, busbw_factor
from .common import HEADLINE, UNITS
from .cost import cost
from .derive import derive
from .recovery import recovery, step_times
from .timing import startup

__all__ = ["HEADLINE", "UNITS", "allreduce", "busbw", "busbw_factor", "cost", "derive", "recovery", "startup",
           "step_times"]
