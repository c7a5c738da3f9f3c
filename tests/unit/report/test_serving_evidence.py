"""Serving figures the report computes from the stored requests (harness/report/serving_evidence.py):
time-weighted availability, who answered each request, the harness proxy's own time."""
from __future__ import annotations

import pytest
from support.paths import FIXTURES, RESULTS
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


def test_the_report_heads_a_fault_with_figures_no_harness_constant_enters(tmp_path):
    """Seconds degraded, failed requests, the fault to the first success, availability over the fixed window from
    the fault: then the phase's availability, whose length (the settle time) weighs in it, labelled so."""
    md = build(str(FIXTURE), str(tmp_path))["report.md"].read_text()
    sec = _section(md, "Online inference (serving)")
    labels = [x.split(" | ")[0].lstrip("| ") for x in sec.splitlines() if x.startswith("| its node lost")]
    assert labels[:7] == ["its node lost: seconds degraded [bounds]", "its node lost: failed requests",
                          "its node lost: fault → first success after the last failure [bounds]",
                          "its node lost: availability over the 120 s from the fault [bounds]",
                          "its node lost: availability over the phase, time-weighted",
                          "its node lost: availability over the phase, request-weighted",
                          "its node lost: answered by (replica: share of requests)"]
    for cell in _row(sec, "its node lost: availability over the phase, time-weighted")[1:]:
        assert cell.endswith("the phase's length, set by its settle time, weighs in it)")
        assert 0 < float(cell.split()[0]) < 1


def test_what_in_the_stored_requests_says_a_figure_is_not_the_services():
    """2026-12-05's serve runs, made before the 404s were traced off the machine and before the two-replica phase
    waited for the platform's routing: the report says both, from the requests themselves."""
    from harness.report import serving as servemod

    by = {s.platform: s for s in servemod.load(str(RESULTS / "smoke-2026-12-05"))}
    k8s, slurm = by["k8s"], by["slurm"]
    [lost] = sev.caveats(k8s.phase("node_loss"), "k8s")
    assert lost.startswith("1136 HTTP 404 answer(s) carried no replica's header: not from the service")
    [two] = sev.caveats(k8s.phase("two_replicas"), "k8s")
    assert two.startswith("one replica answered every request of the two-replica phase")
    assert sev.caveats(slurm.phase("node_loss"), "slurm") == []      # the harness balancer's own 503s
    assert sev.caveats(slurm.phase("two_replicas"), "slurm") == []   # two replicas answered
    assert "caveat — node lost: 1136 HTTP 404" in servemod.decision_text(k8s)
