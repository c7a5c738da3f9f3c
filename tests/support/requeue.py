"""A hand-built Slurm-like requeue of a 2-rank job, as workload events and scheduler stamps, with
the helpers that build such events: shared by the recovery tests and the metric-interval tests."""
from __future__ import annotations

from harness.timing import Stamp

T = Stamp.truncated


def event(kind, t, rank, attempt=(0, 0, 0), host=None, pid=None, **kw):
    return {"kind": kind, "ts_ns": round(t * 1e9), "rank": rank, "attempt": list(attempt),
            "host": host or f"h{rank}", "pid": pid or 100 + rank, **kw}


def attempt_events(att, t0, first_step, last_step, resumed_from=0, ckpt_at=()):
    """Events of one attempt of a 2-rank job: rank 1 finishes each step 0.3 s after rank 0."""
    out = []
    for r in (0, 1):
        out += [event("process_start", t0, r, att), event("rendezvous_done", t0 + 1, r, att),
                event("checkpoint_loaded", t0 + 2, r, att, step=resumed_from),
                event("train_start", t0 + 2, r, att, start_step=resumed_from)]
        for i, s in enumerate(range(first_step, last_step + 1)):
            out.append(event("step", t0 + 3 + i + 0.3 * r, r, att, step=s, dur_s=0.9))
    out += [event("checkpoint_saved", t0 + 3 + (s - first_step) + 0.5, 0, att, step=s) for s in ckpt_at]
    return out


# A Slurm-like requeue: attempt 0 runs steps 1..12 from t=105 (rank 0 at 104+s, rank 1 at 104.3+s) and is
# killed at 116.2, when rank 0 had finished step 12 and rank 1 only step 11 (the fault lands mid-step;
# rank 1 still finishes step 12 at 116.3). Attempt 1 resumes from the step-10 checkpoint at t=126.
FAULT = {"kind": "kill_rank", "injected_at": 116.2, "target": {"rank": 1, "step": 11, "attempt": [0, 0, 0]}}
EVENTS = (attempt_events((0, 0, 0), 102, 1, 12, ckpt_at=(10,))
          + attempt_events((0, 1, 0), 126, 11, 20, resumed_from=10)
          + [event("done", 139.5, r, (0, 1, 0)) for r in (0, 1)])
STAMPS = {
    "submitted": Stamp.between(99.9, 100.1, "harness clock around sbatch"),
    "allocated": T(101, "slurmctld Start"), "ended": T(139, "slurmctld End"), "released": T(140, "slurmctld End"),
    "attempts": [
        {"attempt": 0, "allocated": T(101, "Start"), "detected": T(120, "batch script saw srun fail"),
         "ended": T(121, "End"), "released": T(121, "End"), "nodes": ["c1", "c2"]},
        {"attempt": 1, "allocated": T(125, "Start"), "detected": None, "ended": T(139, "End"),
         "released": T(140, "End"), "nodes": ["c1", "c2"]},
    ],
    "checks": [],
}
