"""Alibaba's GPU trace of 2023 read into a trace: CPU-only pods, GPU sharing, pods never scheduled, the stated
limit model, slices with the pods running at their start, and the waits the site recorded; on a real excerpt
(tests/fixtures/scale/alibaba, PROVENANCE there)."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.scale import alibaba
from harness.scale import trace as tr
from harness.scale.limits import LimitModel

EXCERPT = (Path(__file__).parents[2] / "fixtures" / "scale" / "alibaba" / "openb_excerpt.csv").read_text()


def test_every_case_of_the_excerpt_is_kept_or_dropped_and_counted():
    t = alibaba.parse_openb(EXCERPT)
    ids = [j.id for j in t.jobs]
    assert len(ids) == 10 and "openb-pod-6979" not in ids and "openb-pod-6980" not in ids   # never scheduled
    notes = " | ".join(t.notes)
    assert "2 never scheduled (Pending at the end), dropped" in notes
    assert "2 CPU-only, kept as CPU jobs (0 GPUs)" in notes
    assert "3 GPU-sharing (part of one GPU), given a whole GPU" in notes
    assert "limit model: 2 x the run time" in notes and "one tenant" in notes
    by = {j.id: j for j in t.jobs}
    # pod 6972: created 12700571, scheduled 12700641, deleted 12700721: waited 70 s, ran 80 s; offsets from the
    # trace's own zero
    j = by["openb-pod-6972"]
    assert (j.submit_s, j.recorded_wait_s, j.runtime_s, j.gpus_per_node, j.qos) == (12700571, 70, 80, 1, "LS")
    assert j.limit_s == 900                    # 2 x 80 s, up to the first menu value
    assert by["openb-pod-6974"].gpus_per_node == 0 and by["openb-pod-7041"].gpus_per_node == 2
    assert {j.tenant for j in t.jobs} == {"openb"} and {j.nodes for j in t.jobs} == {1}
    assert t.params["format"] == "alibaba-gpu-2023-openb"


def test_cpu_only_pods_can_be_dropped_with_a_count():
    t = alibaba.parse_openb(EXCERPT, cpu_jobs="drop")
    assert len(t.jobs) == 8 and any(n.startswith("2 CPU-only, dropped") for n in t.notes)


def test_a_slice_keeps_what_ran_at_its_start_and_cuts_runs_at_its_end():
    # 12701000..12710000: 6971, 6973 and 6974 ran at the start: submitted 60 s apart in the order they started
    # (0, 60, 120), so the slice's start is at 180; 6971 (running until 12722250) runs from its submission to the
    # slice's end; 6978 runs past the end and is cut; waits of pods running at the start are not theirs
    t = alibaba.parse_openb(EXCERPT, start_s=12701000, end_s=12710000)
    by = {j.id: j for j in t.jobs}
    assert [by[i].submit_s for i in ("openb-pod-6971", "openb-pod-6973", "openb-pod-6974")] == [0, 60, 120]
    assert by["openb-pod-6971"].runtime_s == 9000 + 180 and by["openb-pod-6971"].recorded_wait_s is None
    assert by["openb-pod-6973"].runtime_s == 12702165 - 12701000 + 180 - 60
    assert by["openb-pod-6976"].submit_s == 180 + 34 and by["openb-pod-6976"].recorded_wait_s == 3
    assert by["openb-pod-6978"].runtime_s == 12710000 - 12701642
    assert "openb-pod-7041" not in by and t.duration_s == 9000 + 180 and t.params["lead_in_s"] == 180
    notes = " | ".join(t.notes)
    assert "3 running at the slice's start" in notes and "ran past the slice's end, cut there" in notes


def test_a_pod_waiting_at_the_slices_start_joins_the_queue_there_and_one_started_after_its_end_keeps_its_run():
    extra = ("openb-pod-w1,1000,1000,1,1000,,LS,Running,12700900,12701500,12701100\n"
             "openb-pod-w2,1000,1000,1,1000,,LS,Running,12709000,12711500,12711000\n")
    t = alibaba.parse_openb(EXCERPT + extra, start_s=12701000, end_s=12710000)
    by = {j.id: j for j in t.jobs}
    # w1 was not running at the start: no lead-in slot (still three), submitted at the start, its own run time
    assert t.params["lead_in_s"] == 180
    w1 = by["openb-pod-w1"]
    assert (w1.submit_s, w1.runtime_s, w1.recorded_wait_s) == (180, 400, None)
    # w2 waited through the slice's end: its whole 500 s run, not a 1 s stub
    assert (by["openb-pod-w2"].submit_s, by["openb-pod-w2"].runtime_s, by["openb-pod-w2"].recorded_wait_s) == (
        180 + 8000, 500, 2000)
    notes = " | ".join(t.notes)
    assert "1 waiting at the slice's start" in notes and "1 scheduled only after the slice's end" in notes


def test_dropped_cpu_pods_take_no_lead_in_slot():
    t = alibaba.parse_openb(EXCERPT, start_s=12701000, end_s=12710000, cpu_jobs="drop")
    assert t.params["lead_in_s"] == 120 and {j.id: j.submit_s for j in t.jobs}["openb-pod-6973"] == 60


def test_the_recorded_wait_travels_through_the_file_and_compresses_like_the_trace():
    t = alibaba.parse_openb(EXCERPT)
    again = tr.loads(tr.dumps(t))
    assert again == t
    c = tr.compress(t, 10)
    assert {j.id: j.recorded_wait_s for j in c.jobs}["openb-pod-6972"] == 7
    # a trace without recorded waits writes no such key: the synthetic fixtures keep their bytes
    assert "recorded_wait_s" not in tr.dumps(c.model_copy(update={"jobs": tuple(
        j.model_copy(update={"recorded_wait_s": None}) for j in c.jobs)}))


def test_a_broken_file_is_named():
    with pytest.raises(ConfigError, match="header lacks"):
        alibaba.parse_openb("a,b\n1,2\n")
    with pytest.raises(ConfigError, match="line 2: num_gpu 'x'"):
        alibaba.parse_openb(EXCERPT.splitlines()[0] + "\np,1,1,x,0,,LS,Running,0,5,0\n")
    with pytest.raises(ConfigError, match="no pod of the trace"):
        alibaba.parse_openb(EXCERPT, end_s=10)


def test_the_limit_model_rounds_twice_the_run_time_up_to_a_round_value():
    m = LimitModel()
    assert m.limit(60) == 900 and m.limit(1000) == 3600 and m.limit(5 * 24 * 3600) == 10 * 24 * 3600
    assert "15 min, 30 min, 1 h" in m.text()
    with pytest.raises(ValueError):
        LimitModel(factor=0.5)
