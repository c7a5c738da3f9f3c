"""Serving figures the report computes from the stored requests (harness/report/serving_evidence.py):
time-weighted availability, who answered each request, the harness proxy's own time."""
from __future__ import annotations

import pytest
from support.paths import FIXTURES
from support.report_rows import row as _row
from support.report_rows import section as _section

from harness.report import serving_evidence as sev
from harness.report.document import build

FIXTURE = FIXTURES / "report" / "serving"


def _phase(rows, pause=0.05, fault_t=None, replicas=None):
    """A stored phase from (start, latency, error) rows, times relative to t0 = 1000."""
    log = {"start": [r[0] for r in rows], "latency_s": [r[1] for r in rows], "error": [r[2] for r in rows],
           "status": [200 if r[2] is None else None for r in rows]}
    if replicas is not None:
        log["replica"] = replicas
    end = max(r[0] + r[1] for r in rows)
    load = {"started": 1000.0, "elapsed_s": end, "log": log,
            "plan": {"error_pause_s": pause, "timeout_s": 5.0}}
    return {"name": "kill_server", "load": load, "fault": {"t": 1000.0 + fault_t} if fault_t is not None else None}


def test_time_weighted_availability_weighs_each_request_by_the_client_time_it_took():
    # one client: 1 s of answers, then 20 quick refusals (1 ms + a 49 ms pause each = 1 s), then 1 s of answers
    rows = [(0.1 * i, 0.1, None) for i in range(10)]
    rows += [(1.0 + 0.05 * i, 0.001, "connect") for i in range(20)]
    rows += [(2.0 + 0.1 * i, 0.1, None) for i in range(10)]
    tw = sev.time_weighted(_phase(rows, pause=0.049))
    assert tw["value"] == pytest.approx(2.0 / 3.0)
    assert tw["ok_s"] == pytest.approx(2.0) and tw["client_s"] == pytest.approx(3.0) and tw["requests"] == 40
    # the request count says 20 of 40: the refusals' speed, not the outage's length
    assert sum(r[2] is None for r in rows) / len(rows) == 0.5
    # a fault's window starts at the fault, as the request-weighted figure's does
    late = sev.time_weighted(_phase(rows, pause=0.049, fault_t=1.0))
    assert late["requests"] == 30 and late["value"] == pytest.approx(1.0 / 2.0)


def test_without_a_request_in_the_window_there_is_no_figure():
    assert sev.time_weighted(_phase([(0.0, 0.1, None)], fault_t=5.0)) is None


def test_which_replica_answered_counts_failures_for_whoever_gave_them():
    rows = [(0.1 * i, 0.1, None if i < 6 else "http_404") for i in range(8)] + [(1.0, 0.001, "connect")]
    who = ["a/1", "b/2", "a/1", "b/2", "a/1", "a/1", "b/2", "b/2", None]
    counts = sev.replicas(_phase(rows, replicas=who))
    assert counts == {"a/1": {"ok": 4, "failed": 0}, "b/2": {"ok": 2, "failed": 2},
                      "no answer": {"ok": 0, "failed": 1}}
    assert sev.shares_text(counts).startswith("`a/1` 44.4 % (4 ok); `b/2` 44.4 % (2 ok, 2 failed)")
    # a campaign whose load generator kept no replica column says so instead of guessing
    assert sev.replicas(_phase(rows)) is None and sev.shares_text(None) == sev.NOT_RECORDED


def test_the_proxy_row_gives_the_balancers_own_time_where_recorded():
    ev = {"platform": {"balancer": {"overhead": {"count": 1200, "p50_s": 0.00042, "p99_s": 0.0019}}}}
    assert sev.proxy_text("slurm", ev).startswith("p50 0.42 ms, p99 1.90 ms over 1200 forwarded requests")
    assert "not recorded" in sev.proxy_text("slurm", {"platform": {"balancer": {"log": {}}}})
    assert "kube-proxy" in sev.proxy_text("k8s", {})


def test_the_report_heads_availability_with_the_time_weighted_figure(tmp_path):
    md = build(str(FIXTURE), str(tmp_path))["report.md"].read_text()
    sec = _section(md, "Online inference (serving)")
    labels = [x.split(" | ")[0].lstrip("| ") for x in sec.splitlines() if x.startswith("| its node lost")]
    assert labels[:3] == ["its node lost: availability, time-weighted", "its node lost: availability, request-weighted",
                          "its node lost: answered by (replica: share of requests)"]
    for cell in _row(sec, "its node lost: availability, time-weighted")[1:]:
        assert cell.endswith("client-seconds in successful requests)") and 0 < float(cell.split()[0]) < 1
