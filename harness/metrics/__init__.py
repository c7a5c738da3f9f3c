"""Metrics, defined once for every platform, from workload events and scheduler evidence.

Every instant is a `timing.Stamp` (value, [lo, hi], source, resolution) and every metric record is
  {"value", "unit", "lo", "hi", "uncertainty" ((hi - lo) / 2), "sources" {name: epoch s},
   "stamps" {name: stamp JSON}, "detail"}
so a reader can recompute it and see how far a whole-second record can move it. The interval covers
timestamp resolution only (run-to-run spread is the report's statistics). Scheduler instants come
from harness.evidence (the most precise source each platform offers), workload instants from the
events' time_ns; on this project's clusters both read the same host clock, so they are compared directly.

Definitions (all platforms):
- queue_s: submitted (harness bracket around the submit call) -> allocated (all resources held).
  queue_admission_s: submitted -> Kueue admission.
- startup_s = launch_s + rendezvous_s + first_step_s, from allocated to the first step done by every
  rank, less the all-reduce sweep (sweep_s, which the harness adds and a real job would not run):
    launch_s: allocated -> every rank's process started;
    rendezvous_s: -> every rank past init_process_group (includes importing torch);
    first_step_s: end of sweep -> every rank's first step done (model, DDP, checkpoint load, one step).
  image_pull_s (Kubernetes): the slowest first-attempt pod's wait for its image, from the kubelet's Pulled
  events (0 where already present); inside launch_s, not added to it. See image.py.
- allreduce_busbw_gbps: see bandwidth.py (nccl-tests: busbw = algbw * 2(n-1)/n, GB = 1e9 B).
- first_log_s: submitted -> the first workload line the harness read (what a user reading the job's
  output would see first); its interval runs from when the line was written to when it was read.
- handover_s (contention runs): the blocking job's last rank done -> the waiting job allocated.
- step_time_s: median step duration, grouped by (attempt, rank), first step of each dropped.
- recovery_s and its phases recovery_{detection,teardown,rescheduling,restart,checkpoint_load,recompute}_s,
  resume_s, lost_steps: see recovery.py. recovery_cost_usd: see cost.py.
- goodput: useful training time / wall time held (ETTR), see goodput.py.
- cost_run_usd, cost_per_step_usd, cost_per_step_steady_usd: billed until released, see cost.py.
- checkpoint_save_s, checkpoint_load_s: the workload's own save and load timings, see checkpoint.py
  (a restart's load lies inside recovery_checkpoint_load_s).
- samples_per_s (the MLP), tokens_per_s and mfu (the transformer): from the median step time, see throughput.py.
- straggler_ratio: the slowest rank's median step time / the ranks' median, see straggler.py.
"""
from __future__ import annotations

from .bandwidth import allreduce, busbw, busbw_factor
from .common import HEADLINE, UNITS
from .cost import cost, rate, recovery_cost
from .derive import derive
from .goodput import goodput
from .recovery import recovery, step_times
from .timing import handover, queue, startup

__all__ = ["HEADLINE", "UNITS", "allreduce", "busbw", "busbw_factor", "cost", "derive", "goodput", "handover",
           "queue", "rate", "recovery", "recovery_cost", "startup", "step_times"]
