"""A fault's instant as evidence: bracketed by the harness clock around the injector's call (asked,
returned), the best estimate at the return, so the injector's own start-up (srun --overlap, pods/exec,
docker exec) is in the interval and not in the platform's detection."""
import pytest

from harness import metrics
from harness.backends.base import FaultRecord
from harness.timing import Stamp

T = Stamp.truncated


def _e(kind, t, rank, attempt, **kw):
    return {"kind": kind, "ts_ns": round(t * 1e9), "rank": rank, "attempt": list(attempt), "host": f"h{rank}",
            "pid": 100 + rank, **kw}


def _events():
    """Two ranks; attempt 0 does steps 1..12 at t = 104 + step and dies; attempt 1 resumes from 10 at 126."""
    out = []
    for r in (0, 1):
        for s in range(1, 13):
            out.append(_e("step", 104 + s, r, (0, 0, 0), step=s, dur_s=0.9))
        out += [_e("process_start", 126, r, (0, 1, 0)), _e("rendezvous_done", 127, r, (0, 1, 0)),
                _e("checkpoint_loaded", 128, r, (0, 1, 0), step=10), _e("train_start", 128, r, (0, 1, 0),
                                                                      start_step=10)]
        for i, s in enumerate(range(11, 21)):
            out.append(_e("step", 129 + i, r, (0, 1, 0), step=s, dur_s=0.9))
    return out


STAMPS = {
    "submitted": Stamp.between(99.9, 100.1, "harness clock around sbatch"),
    "allocated": T(101, "Start"), "ended": T(139, "End"), "released": T(140, "End"),
    "attempts": [
        {"attempt": 0, "allocated": T(101, "Start"), "detected": Stamp.exact(117.0, "batch script saw srun fail"),
         "ended": T(118, "End"), "released": T(118, "End"), "nodes": ["c1", "c2"]},
        {"attempt": 1, "allocated": T(125, "Start"), "detected": None, "ended": T(139, "End"),
         "released": T(140, "End"), "nodes": ["c1", "c2"]},
    ],
    "checks": [],
}
TARGET = {"rank": 1, "step": 12, "attempt": [0, 0, 0]}


def _derive(fault: dict):
    return metrics.derive(_events(), STAMPS, world=2, nodes=2, gpus_per_node=0, steps=20,
                          price={"usd_per_hour": 3.6, "unit": "node"}, faults=[fault])[0]


def test_the_record_of_a_fault_keeps_the_bracket_and_estimates_the_instant_at_its_return():
    f = FaultRecord("kill_rank", 116.2, TARGET, {"via": "srun --overlap"}, acted_at=116.6).to_json()
    assert f["injected_at"] == 116.2 and f["acted_at"] == 116.6
    st = Stamp.from_json(f["stamp"])
    assert (st.lo, st.t, st.hi) == (116.2, 116.6, 116.6)
    # a record made without the return (before the bracket existed) is as it was
    assert "stamp" not in FaultRecord("kill_rank", 116.2, TARGET).to_json()


def test_detection_starts_at_the_return_and_its_interval_holds_the_injectors_latency():
    bracketed = _derive(FaultRecord("kill_rank", 116.2, TARGET, acted_at=116.6).to_json())
    det = bracketed["recovery_detection_s"]
    # detected at 117.0 (exact): 0.4 s after the return, up to 0.8 s after the ask
    assert (det["value"], det["lo"], det["hi"]) == pytest.approx((0.4, 0.4, 0.8), abs=2e-6)
    # a fault stored without the bracket counts the injector's start-up as detection
    plain = _derive(FaultRecord("kill_rank", 116.2, TARGET).to_json())
    assert plain["recovery_detection_s"]["value"] == pytest.approx(0.8, abs=2e-6)
    assert bracketed["recovery_s"]["value"] == pytest.approx(plain["recovery_s"]["value"] - 0.4, abs=2e-6)
