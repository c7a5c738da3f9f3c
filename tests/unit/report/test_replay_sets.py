"""Verdicts on queues at scale from several traces: the stratified test over traces below both ceilings, a
throughput-bound trace left out and named, a set that mixes policies refused a verdict, the records'
resolution respected; and the decision row and opening built from them."""
from __future__ import annotations

import json
from pathlib import Path

from harness.replay import store as rs
from harness.report import bottom_line, decision, replay_sets
from harness.report.table import from_records
from harness.scale import ceiling as cl
from harness.scale import trace as tr

FIXTURES = Path(__file__).parents[2] / "fixtures" / "replay"
CEIL = {p: cl.Ceiling(p, 256, cl.DEFAULT_K8S_LIMITS if p == "k8s" else cl.SLURM_LIMITS, 2.0, True, 2.5, 5, 2, None)
        for p in ("k8s", "slurm")}


def figs(p50, p99, bsld, util):
    return {"queue_s": {"all": {"p50_s": p50, "p99_s": p99}}, "bounded_slowdown": {"classes": {"all": {"mean": bsld}}},
            "arrival_window_utilisation": util}


def trace1(name, k8s, slurm, busiest=1.0, policy="strict-fifo", compression=30.0):
    standing = {p: cl.standing(p, busiest, CEIL[p]) for p in ("k8s", "slurm")}
    return replay_sets.Trace1(Path(name), name, 50, compression, 256, policy, (policy, 256),
                              {"k8s": k8s, "slurm": slurm}, busiest, standing)


def separated(i):
    return trace1(f"seed{i}", [figs(40 + i, 90 + i, 2.0 + i / 10, 0.5), figs(42 + i, 95 + i, 2.1 + i / 10, 0.51)],
                  [figs(10 + i, 30 + i, 1.2, 0.6), figs(11 + i, 31 + i, 1.25, 0.61)])


def test_three_traces_separated_in_every_replay_give_a_verdict_holding_under_the_sets_conditions():
    s = replay_sets.evaluate("fifo-256n", [separated(i) for i in range(3)])
    rows = {r.figure.key: r for r in s.rows}
    q = rows["queue_p50_s:all"]
    assert q.verdict == "ahead" and q.ahead == "slurm" and abs(q.p - 2 / 216) < 1e-12 and q.p_holm < 0.05
    assert rows["arrival_window_utilisation"].ahead == "slurm"      # higher is better
    text = replay_sets.condition_text(s)
    assert "3 traces" in text and "queue policy pair strict-fifo" in text and "at most 50%" in text
    assert "Slurm ahead (stratified rank test over 3 traces" in replay_sets.verdict_text(s, q)


def test_a_throughput_bound_trace_is_left_out_and_two_traces_are_too_few():
    bound = separated(2)
    bound = trace1("seed2", bound.figures["k8s"], bound.figures["slurm"], busiest=4.4)
    s = replay_sets.evaluate("x", [separated(0), separated(1), bound])
    assert s.left_out == [bound] and {r.verdict for r in s.rows} == {"few"}
    assert "2 traces below both ceilings; a verdict needs 3" in replay_sets.verdict_text(s, s.rows[0])
    assert "throughput-bound" in replay_sets.condition_text(s)


def test_a_set_that_mixes_policy_pairs_is_refused_a_verdict():
    ts = [separated(0), separated(1), trace1("seed2", separated(2).figures["k8s"], separated(2).figures["slurm"],
                                              policy="site")]
    s = replay_sets.evaluate("mixed", ts)
    assert s.mixed and {r.verdict for r in s.rows} == {"few"}
    assert "different policies" in replay_sets.verdict_text(s, s.rows[0])


def test_a_consistent_second_is_within_the_records_resolution():
    ts = [trace1(f"s{i}", [figs(3, 5, 1.0, 0.5)] * 2, [figs(2, 4, 1.0, 0.5)] * 2) for i in range(3)]
    rows = {r.figure.key: r for r in replay_sets.evaluate("r", ts).rows}
    assert rows["queue_p50_s:all"].verdict == "resolution"


def stored_replay(where: Path, nodes: int = 16, replay_set: str | None = None, **settings) -> Path:
    k8s = json.loads((FIXTURES / "k8s_records.json").read_text())
    slurm = json.loads((FIXTURES / "slurm_records.json").read_text())
    trace = tr.loads(k8s["trace"])
    settings = {"nodes": nodes, **({"replay_set": replay_set} if replay_set else {}), **settings}
    rs.save(where, trace, "k8s", {"raw": k8s["raw"], "ended": True, "settings": settings}, 128)
    rs.save(where, trace, "slurm", {"raw": slurm["raw"], "submitted": slurm["submitted"], "ended": True,
                                    "settings": settings}, 128)
    return where


def test_replay_directories_that_joined_one_set_are_judged_together_and_others_alone(tmp_path):
    dirs = [stored_replay(tmp_path / "scale" / n, replay_set=s) for n, s in (("a", "fifo"), ("b", "fifo"), ("c", None))]
    got = {s.name: sorted(t.where.name for t in s.traces) for s in replay_sets.sets(dirs)}
    assert got == {"fifo": ["a", "b"], "c": ["c"]}


def test_the_decision_row_reads_the_campaigns_replays_and_says_why_there_is_no_verdict(tmp_path):
    where = stored_replay(tmp_path / "camp" / "scale" / "r1")
    rows = {r.criterion: r for r in decision.rows(from_records([]), {}, [], [], replays=[where])}
    row = rows[decision.SCALE]
    assert row.measured and len(row.parts) == 4 and not row.tested_apart
    ev, _, ahead = row.parts[0]
    assert ev.startswith("`r1`: 1 trace (") and "on 16 emulated nodes" in ev and "busiest 10 s offered" in ev
    # no ceilings beside it: the trace cannot show it is below them, so none is tested
    assert ahead == ["descriptive: 0 traces below both ceilings; a verdict needs 3 (a trace's repeats do not "
                     "replicate across traces)"]
    assert row.notes_apart and "`r1`" in row.notes_apart[0]
    says, _, _ = bottom_line.paragraphs(list(rows.values()), from_records([]), {}, [])
    assert any(s.startswith("Queue at scale has no verdict from the campaign's replays: `r1`") for s in says), says
    # ceilings beside the replays: the trace is below them, still one trace
    (where.parent / "ceilings.json").write_text(json.dumps({"ceilings": [
        cl.Ceiling("k8s", 16, cl.DEFAULT_K8S_LIMITS, 8.0, True, 9, 5, 2, None).as_dict(),
        cl.Ceiling("slurm", 16, "-", 16.0, False, 16, 5, 2, None).as_dict()]}))
    parts, tested, wins, notes = replay_sets.decision([where])
    assert not tested and not wins and "a verdict needs 3" in notes[0]
    assert "of either platform's measured placement ceiling" in parts[0][0]


def test_a_set_is_mixed_by_rate_limits_or_fair_sharing_not_by_how_off_was_recorded(tmp_path):
    old = {}                                                              # stored before either was recorded
    off = {"kueue": "20/30 (Configuration clientConnection, default)", "kueue fairSharing": "off (Kueue's default)"}
    raised = {**off, "kueue": "200/300 (Configuration clientConnection, set by poc cluster up --client-qps)"}
    fair = {**off, "kueue fairSharing": "enable"}

    def mixed(*recorded):
        dirs = [stored_replay(tmp_path / f"{len(list(tmp_path.iterdir()))}", replay_set="s",
                              client_rate_limits_qps_burst=r) for r in recorded]
        (got,) = replay_sets.sets(dirs)
        return got.mixed
    assert not mixed(old, off)
    assert mixed(off, raised) and mixed(off, fair)


def test_a_replay_stopped_before_its_last_job_is_no_value_and_the_evidence_says_so(tmp_path):
    where = stored_replay(tmp_path / "scale" / "r1")
    body = json.loads((where / "k8s.json").read_text())
    rs.save(where, tr.load(where / "trace.jsonl"), "k8s", {**body, "ended": False}, 128, index=2)
    (s,) = replay_sets.sets([where])
    assert len(s.traces[0].figures["k8s"]) == 1 and s.traces[0].cut == 1
    text = replay_sets.condition_text(s)
    assert "complete replays a side: " in text
    assert "Slurm 1, Kubernetes 1 (1 stopped before their last job left out)" in text


def test_a_campaign_without_replays_has_no_queue_at_scale_line():
    row = {r.criterion: r for r in decision.rows(from_records([]), {}, [], [])}[decision.SCALE]
    assert not row.measured and row.cells()[0][2] == "not measured"
