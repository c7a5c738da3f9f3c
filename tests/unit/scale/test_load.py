"""Offered load against a ceiling: the busiest 10 s of a trace, and the compression that keeps it under a share
of the lower ceiling."""
from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.scale import load
from harness.scale.trace import NodeShape, Trace, TraceJob, compress


def trace(submits: list[int], duration: int | None = None) -> Trace:
    jobs = tuple(TraceJob(id=f"j{i}", submit_s=s, tenant="a", nodes=1, gpus_per_node=8, limit_s=600, runtime_s=60)
                 for i, s in enumerate(submits))
    return Trace(name="t", source="unit", shape=NodeShape(nodes=8, gpus_per_node=8),
                 duration_s=duration or max(submits) + 1, jobs=jobs)


def test_the_busiest_window_counts_whole_seconds_inside_ten_of_them():
    # 5 jobs in seconds 0..9, the 6th at 10 starts a new window: at most 5 in any 10 s
    t = trace([0, 3, 3, 9, 9, 10, 30])
    assert load.busiest_rate(t) == 0.5
    assert load.busiest_rate(t, window_s=11) == 6 / 11
    assert load.mean_rate(t) == pytest.approx(7 / 31)
    o = load.offered(t)
    assert o["busiest_jobs_per_s"] == 0.5 and o["jobs"] == 7 and o["compression"] == 1.0


def test_compression_is_the_highest_that_keeps_the_busiest_window_under_the_share():
    # one job every 20 s for an hour: compressed c-fold, a 10 s window holds ceil(10c/20) jobs
    t = trace(list(range(0, 3600, 20)))
    c = load.compression_for(t, ceiling_jobs_per_s=2.0, share=0.7)
    assert load.busiest_rate(compress(t, c)) <= 1.4
    assert load.busiest_rate(compress(t, c + 1)) > 1.4     # one more and it is over the bound
    # the bound is the lower ceiling's share: half the ceiling, half as much compression or so
    assert load.compression_for(t, 1.0, 0.7) < c


def test_a_trace_too_busy_even_uncompressed_is_refused():
    t = trace([0] * 30)
    with pytest.raises(ConfigError, match="over 70% of the ceiling"):
        load.compression_for(t, 2.0)
    with pytest.raises(ConfigError, match="must be positive"):
        load.compression_for(t, 0)
