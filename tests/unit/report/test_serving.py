"""The report's inference part: the section, its two charts and the decision row, built from the
stored fixture campaign tests/fixtures/report/serving/ (the real load generator against a local aiohttp
server, stored with the real Store: tests/support/report_serving_fixture.py regenerates it)."""
from __future__ import annotations

import copy
import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from support.paths import FIXTURES
from support.report_rows import criteria
from support.report_rows import row as _row
from support.report_rows import section as _section

from harness.report import charts_serve, decision
from harness.report import serving as servemod
from harness.report import serving_evidence as sev
from harness.report.document import build
from harness.report.sections import fmt
from harness.report.stats import HIGHER_IS_BETTER, Group, SummaryRow
from harness.report.table import from_records
from harness.serve.load import histogram

FIXTURE = FIXTURES / "report" / "serving"
CAMPAIGN = FIXTURE / "serving-fixture"
DRILLS = FIXTURES / "report" / "drills"
RECORDS = {r["run_id"]: r for r in map(json.loads, (CAMPAIGN / "runs.jsonl").read_text().splitlines())}
PNG = b"\x89PNG\r\n\x1a\n"


def _m(platform: str, name: str) -> dict:
    return RECORDS[f"{platform}-serve"]["metrics"][name]


def _decision_cells(md: str) -> list[str]:
    return ["inference"] + criteria(md)["inference"]   # a line per platform, merged


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("rep")
    paths = build(str(FIXTURE), str(out))
    return paths, paths["report.md"].read_text()


def _copy(tmp_path: Path, edit=lambda recs: recs) -> Path:
    dest = tmp_path / "results" / "serving-fixture"
    shutil.copytree(CAMPAIGN, dest)
    recs = edit([json.loads(x) for x in (CAMPAIGN / "runs.jsonl").read_text().splitlines()])
    (dest / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return dest.parent


def test_the_fixture_is_what_the_tests_assume():
    # a regenerated fixture must still have faults that cost requests and a scale-out that bought latency
    for p in ("slurm", "k8s"):
        assert _m(p, "serve_failed_requests:kill_server")["value"] > 0
        assert _m(p, "serve_failed_requests:node_loss")["value"] > 0
        assert _m(p, "serve_scaleout_p50_ratio")["value"] < 0.8
        assert _m(p, "serve_degraded_s:node_loss")["lo"] < _m(p, "serve_degraded_s:node_loss")["hi"]


def test_the_section_sits_before_user_experience_and_its_charts_are_in_it(report):
    _, md = report
    titles = [x[3:] for x in md.splitlines() if x.startswith("## ")]
    i = titles.index(servemod.TITLE)
    assert titles[i + 1] in ("User experience", "Auditing", "Charts")
    sec = _section(md, servemod.TITLE)
    assert "(charts/serve_cdf.png)" in sec and "(charts/serve_timeline.png)" in sec
    assert "serve_cdf.png" not in _section(md, "Charts") and "serve_timeline.png" not in _section(md, "Charts")


def test_every_figure_with_its_bounds_and_counts(report):
    _, md = report
    sec = _section(md, servemod.TITLE)
    assert _row(sec, "figure")[1:] == ["Slurm", "Kubernetes"]
    assert _row(sec, "run")[1:] == ["ok", "ok"]
    for i, p in ((1, "slurm"), (2, "k8s")):
        av = _m(p, "serve_availability:kill_server")
        d = av["detail"]
        errs = ", ".join(f"{k} {v}" for k, v in sorted(d["errors"].items(), key=lambda kv: -kv[1]))
        assert _row(sec, "serving process killed: availability over the phase, request-weighted")[i] == \
            f"{av['value']:.4f} ({d['ok']} of {d['requests']} ok) ({errs})"
        # the fault's own figures, no harness constant in them: from the fault instant to the first success after
        # the last failure, and availability over the same fixed window from the fault on both platforms
        ev = sev.fault_figures(servemod.load(str(FIXTURE))[i - 1].phase("node_loss"))
        t, w = ev["time_to_success"], ev["window"]
        assert _row(sec, "its node lost: fault → first success after the last failure [bounds]")[i].startswith(
            f"{fmt(t['value'])}")
        assert _row(sec, "its node lost: availability over the 120 s from the fault [bounds]")[i].startswith(
            f"{w['value']:.3f}") and "of the 120 s from the fault" in \
            _row(sec, "its node lost: availability over the 120 s from the fault [bounds]")[i]
        deg = _m(p, "serve_degraded_s:node_loss")
        assert t["value"] >= deg["value"] - 1e-9 or t["value"] > 0   # counted from the fault, not the first failure
        assert w["degraded_s"] <= deg["value"] + 1e-9 and 0 < w["value"] < 1
        cell = _row(sec, "its node lost: seconds degraded [bounds]")[i]
        assert cell.startswith(f"{fmt(deg['value'])} s [{fmt(deg['lo'])}–{fmt(deg['hi'])}]; "
                               f"{deg['detail']['failed']} failed requests, first error ")
        lat = _m(p, "serve_latency_p50_s")
        assert _row(sec, "latency p50, one replica (histogram bucket)")[i].startswith(
            f"{fmt(lat['value'] * 1000)} ms") and f"; {lat['detail']['count']} ok requests, 4 clients" in \
            _row(sec, "latency p50, one replica (histogram bucket)")[i]
        assert _row(sec, "latency p99, two replicas")[i].startswith(
            fmt(_m(p, "serve_latency_p99_s:two_replicas")["value"] * 1000) + " ms")
        r = _m(p, "serve_scaleout_p50_ratio")
        assert _row(sec, "p50 two replicas / one")[i].startswith(f"{r['value']:.2f} (p50 ")
        c = _m(p, "serve_cost_per_1k_usd")
        assert _row(sec, "cost per 1,000 successful requests")[i].startswith(f"{fmt(c['value'], 'USD')} USD")
        assert f"{c['detail']['ok_requests']} ok requests" in _row(sec, "cost per 1,000 successful requests")[i]
        assert _row(sec, "failed requests, steady load")[i] == "0"
    # every serve_* figure a run stored has a row
    shown = {k for _, k in servemod.ROWS}
    assert {k for r in RECORDS.values() for k in r["metrics"] if k.startswith("serve_")} <= shown


def test_what_serving_needed_beyond_the_platform(report):
    _, md = report
    sec = _section(md, servemod.TITLE)
    beyond = sec[sec.index("### What serving needed beyond the platform"):]
    assert _row(beyond, "load balancing")[1:] == [
        "the harness's own reverse proxy (round-robin, health-checked) on the login side",
        "kube-proxy (iptables) over ready pods"]
    assert _row(beyond, "parts the harness supplied")[2] == "none"
    assert _row(beyond, "written for it (files: lines)")[1].startswith("478 lines: ")
    assert "To serve on Slurm, a site would have to build and run, beside the scheduler, what this harness " \
           "supplied here: a reverse proxy with health checks (balancer.py)" in beyond
    assert "Kubernetes gave endpoint discovery, load balancing, restarts, scaling out from its own objects" in beyond
    assert (f"Cost per 1,000 successful requests over the whole serve run's billed time: Slurm "
            f"{fmt(_m('slurm', 'serve_cost_per_1k_usd')['value'], 'USD')} USD") in beyond
    assert "HdrHistogram of microseconds with 3 significant digits" in sec
    assert "4 concurrent clients" in sec and "with no verdict" in sec


def test_the_decision_row_is_descriptive_one_run_a_side(report):
    _, md = report
    cells = _decision_cells(md)
    s, k = cells[1].split("; Kubernetes: ")
    ready = _m("slurm", "serve_ready_s")
    assert s.startswith(f"Slurm: ready {fmt(ready['value'])} s")
    assert f"p50 {fmt(_m('slurm', 'serve_latency_p50_s')['value'] * 1000)} ms / p99 " in s
    # the figures no harness constant enters lead: seconds degraded, failed requests, the fault to the first
    # success, availability over the fixed window from the fault; the phase's availability (≈ settle / (settle +
    # degraded), the harness's settle time in disguise) is not in the row
    d = _m("slurm", "serve_degraded_s:kill_server")
    assert (f"server killed: {fmt(d['value'])} s [{fmt(d['lo'])}–{fmt(d['hi'])}] degraded, "
            f"{_m('slurm', 'serve_failed_requests:kill_server')['value']:g} failed requests, first success ") in s
    assert " over the 120 s from the fault" in s and "node lost: " in k and " over the 120 s from the fault" in k
    assert "time-weighted" not in s + k and "by requests" not in s + k
    assert f"scale-out to 2 replicas {fmt(_m('k8s', 'serve_scaleout_s')['value'])} s" in k
    assert k.endswith(f"{fmt(_m('k8s', 'serve_cost_per_1k_usd')['value'], 'USD')} USD per 1,000 requests")
    assert cells[2] == "–"   # no interval
    assert cells[3] == "host load: not recorded (these runs predate its sampling): a busy host cannot be ruled out"
    assert cells[4].startswith("descriptive: one serve run per platform; Slurm needed beyond itself, run by the "
                               "harness: a reverse proxy")
    assert cells[4].endswith("Kubernetes: nothing beyond its own objects")


def test_the_charts_are_png_and_drawn_from_the_stored_evidence(report):
    paths, _ = report
    for name in ("serve_cdf", "serve_timeline"):
        png = paths[f"charts/{name}.png"]
        assert png.read_bytes()[:8] == PNG and png.stat().st_size > 20_000
    serves = servemod.load(str(FIXTURE))
    assert [s.run_id for s in serves] == ["slurm-serve", "k8s-serve"]
    for s in serves:
        steady = s.phase("steady")["load"]
        xs, ys = charts_serve.cdf_points(steady)
        assert ys[-1] == 1.0 and xs == sorted(xs)
        # the curve crosses 0.5 at the stored p50's bucket: the chart and the table read the same histogram
        p50 = next(x for x, y in zip(xs, ys, strict=True) if y >= 0.5)
        assert p50 == pytest.approx(s.m("serve_latency_p50_s")["hi"], abs=1e-6)
        assert histogram(steady).get_total_count() == s.detail("serve_latency_p50_s")["count"]
        labels = [label for _, label, _ in charts_serve.marks(s)]
        assert labels == ["serving process killed (node-1)", "its node lost (node-1)", "second replica asked",
                          "second replica answered"]
        assert [p["name"] for p in charts_serve.drawn(s)] == ["steady", "kill_server", "node_loss", "two_replicas"]


def test_a_campaign_without_serve_runs_has_no_section_and_says_not_measured(tmp_path):
    paths = build(str(DRILLS), str(tmp_path / "rep"))
    md = paths["report.md"].read_text()
    assert f"## {servemod.TITLE}" not in md
    assert "charts/serve_cdf.png" not in paths and "charts/serve_timeline.png" not in paths
    assert "| inference | – | not measured | – | not measured |" in md


def test_unreadable_raw_evidence_costs_the_charts_and_the_beyond_table_not_the_report(tmp_path):
    results = _copy(tmp_path)
    runs = results / "serving-fixture" / "runs"
    (runs / "k8s-serve" / "raw.json.gz").write_bytes(b"not gzip")
    (runs / "slurm-serve" / "raw.json.gz").unlink()
    paths = build(str(results), str(tmp_path / "rep"))
    md = paths["report.md"].read_text()
    sec = _section(md, servemod.TITLE)
    run = _row(sec, "run")
    assert run[1] == "ok (no serving evidence stored)" and run[2].startswith("ok (raw evidence unreadable: ")
    assert _row(sec, "serving process killed: failed requests")[2].startswith(
        f"{_m('k8s', 'serve_failed_requests:kill_server')['value']:g} (")   # the record's own figures stand
    assert "### What serving needed beyond the platform" not in sec
    assert "charts/serve_cdf.png" not in paths and "charts/serve_timeline.png" not in paths
    assert _decision_cells(md)[1].startswith("Slurm: ready ")


def test_a_failed_serve_run_and_malformed_evidence_do_not_break_the_report(tmp_path):
    def fail_k8s(recs):
        rec = copy.deepcopy(next(r for r in recs if r["platform"] == "k8s"))
        rec.update(status="failed", metrics={}, error={"stage": "serve", "message": "no ready endpoint in 120 s"})
        return recs + [rec]   # the retried run's last record is the one shown
    results = _copy(tmp_path, fail_k8s)
    raw = results / "serving-fixture" / "runs" / "slurm-serve" / "raw.json.gz"
    ev = json.loads(gzip.decompress(raw.read_bytes()))
    ev["serve"]["phases"][1]["load"]["histogram"]["data"] = "not base64 hdr"
    ev["serve"]["phases"][2]["load"]["timeline"] = [{"t": "x"}]
    raw.write_bytes(gzip.compress(json.dumps(ev).encode()))
    paths = build(str(results), str(tmp_path / "rep"))
    md = paths["report.md"].read_text()
    sec = _section(md, servemod.TITLE)
    assert _row(sec, "run")[2] == "did not complete (failed) at `serve`: no ready endpoint in 120 s"
    assert _row(sec, "submitted → first successful response")[2] == "–"
    assert "charts/serve_cdf.png" in paths   # Slurm's two-replica histogram still draws
    cells = _decision_cells(md)
    assert cells[1].endswith("Kubernetes: did not complete (failed at `serve`)")


def test_enough_serve_runs_a_side_get_the_usual_comparison():
    key = "serve_latency_p50_s:serve"
    gs = {(p, key): Group("s", np.ones(6), np.arange(6), np.zeros(6)) for p in ("k8s", "slurm")}
    summ = [SummaryRow(p, key, "s", 6, 1.0, 0.01, 0.9, 1.1, 0.8, 1.2) for p in ("k8s", "slurm")]
    one = servemod.load(str(FIXTURE))
    serves = [copy.copy(s) for s in one for _ in range(5)]
    t = from_records([{"schema": 1, "run_id": "x", "platform": "local", "status": "failed"}])
    row = {r.criterion: r for r in decision.rows(t, gs, summ, [], serves=serves)}["inference"]
    assert row.measured and row.evidence[0].startswith(f"`{key}` Slurm 1.00 ± 0.01 [0.9–1.10] (6), Kubernetes")
    assert not any("descriptive" in a for a in row.ahead)
    assert any(a.startswith("Slurm needed beyond itself") for a in row.ahead)
    # four runs a side stay descriptive
    row = {r.criterion: r for r in decision.rows(t, gs, summ, [], serves=serves[1:5] + serves[6:])}["inference"]
    assert "descriptive: 4 serve runs per platform, below 5 a side" in row.ahead


def test_throughput_and_availability_count_higher_as_better():
    assert {"serve_throughput_rps", "serve_availability"} <= HIGHER_IS_BETTER


def test_the_timeline_rate_of_a_cut_short_last_second():
    tl = [{"t": 0, "ok": 300, "failed": 0}, {"t": 1, "ok": 100, "failed": 50}, {"t": 2, "ok": 2, "failed": 0}]
    # 2.005 s: the last 5 ms join the second before (402 requests over 1.005 s, not 2 over 5 ms)
    xs, width, ok, bad = charts_serve.rates(tl, 2.005)
    assert width == [1.0, pytest.approx(1.005)] and ok == [300.0, pytest.approx(102 / 1.005)]
    assert bad == [0.0, pytest.approx(50 / 1.005)] and xs == [0.5, pytest.approx(1.5025)]
    # 2.6 s: the last 0.6 s is a bin of its own, its count over the part that ran
    _, width, ok, _ = charts_serve.rates(tl, 2.6)
    assert width == [1.0, 1.0, pytest.approx(0.6)] and ok[2] == pytest.approx(2 / 0.6)


def test_a_slurm_run_that_names_no_part_claims_no_second_platform():
    s = servemod.Serve("slurm-serve", "slurm", "ok", None, {},
                       {"beyond": {"discovery": "a fixed port", "balancing": "none", "harness_parts": []}})
    assert servemod.second_platform([s]) == ["The Slurm run named no part the harness had to supply beyond the "
                                             "platform."]
    assert servemod.needed_text([s]) == "Slurm named nothing it needed beyond itself"
    assert servemod.needed_text([servemod.Serve("k8s-serve", "k8s", "ok", None, {})]) is None
