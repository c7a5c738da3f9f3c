"""Progress lines while the local clusters' builds run: the formatter, the build-times ledger and
the ticker loop, with the clock and the waiting injected (no sleeping, no timing)."""
from __future__ import annotations

import json

import pytest

from harness.clusters.progress import BuildTimes, Ticker, fmt_duration, progress_line, timed_build


class Clock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_durations_read_like_a_person_would_write_them():
    assert [fmt_duration(s) for s in (0, 9.4, 59.6, 60, 190, 508, 3599, 3600, 3725)] == \
        ["0s", "9s", "1m00s", "1m00s", "3m10s", "8m28s", "59m59s", "1h00m", "1h02m"]


def test_progress_line_names_the_build_its_elapsed_time_and_the_last_builds_duration():
    assert progress_line("k8s", "kueue v0.14.5", 190, 508) == \
        "[k8s] building kueue v0.14.5 … 3m10s elapsed (last build took 8m28s, ~5m18s to go)"
    # slower than last time: no negative estimate
    assert progress_line("k8s", "kueue v0.14.5", 600, 508) == \
        "[k8s] building kueue v0.14.5 … 10m00s elapsed (last build took 8m28s)"
    assert progress_line("images", "image x", 5, None) == \
        "[images] building image x … 5s elapsed (no earlier build recorded)"


def test_build_times_prefer_the_same_version_and_skip_torn_lines(tmp_path):
    path = tmp_path / "build-times.jsonl"
    times = BuildTimes(path)
    assert times.last("kueue") is None
    times.record("kueue", "v0.14.4", 400)
    times.record("kubernetes", "v1.34.4", 1500)
    times.record("kueue", "v0.14.5", 508.04)
    times.record("kueue", "v0.14.4", 420)
    with open(path, "a") as f:
        f.write('{"component": "kueue", "version": "v0.14.5", "sec')   # a build killed mid-write
    assert times.last("kueue", "v0.14.5") == 508.0
    assert times.last("kueue", "v0.15.0") == 420.0      # no build of that version: the latest of any
    assert times.last("kueue") == 420.0
    assert times.last("etcd") is None
    rec = json.loads(path.read_text().splitlines()[2])
    assert rec["component"] == "kueue" and rec["version"] == "v0.14.5" and rec["at"].endswith("Z")


def test_ticker_says_a_line_per_elapsed_interval_until_stopped():
    clock, said = Clock(), []
    ticker = Ticker(said.append, "k8s", "kueue v0.14.5", 508, interval=20, clock=clock)
    waits = iter([False, False, True])       # two intervals pass, then the build ends

    def wait(interval):
        assert interval == 20
        clock.now += 95
        return next(waits)

    ticker.run(wait)
    assert said == ["[k8s] building kueue v0.14.5 … 1m35s elapsed (last build took 8m28s, ~6m53s to go)",
                    "[k8s] building kueue v0.14.5 … 3m10s elapsed (last build took 8m28s, ~5m18s to go)"]


def test_timed_build_announces_records_and_reports_the_build(tmp_path):
    times, said, ran = BuildTimes(tmp_path / "t.jsonl"), [], []
    times.record("image worker trixie", "k8s-slurm-poc/worker:trixie-aaa", 235)
    secs = timed_build(said.append, "images", "image worker trixie", "k8s-slurm-poc/worker:trixie-bbb",
                       "image k8s-slurm-poc/worker:trixie-bbb", lambda: ran.append(1), times=times)
    assert ran == [1]
    assert said[0] == "[images] building image k8s-slurm-poc/worker:trixie-bbb (last build took 3m55s)"
    assert said[-1].startswith("[images] built image k8s-slurm-poc/worker:trixie-bbb in ")
    assert times.last("image worker trixie", "k8s-slurm-poc/worker:trixie-bbb") == round(secs, 1)


def test_a_failed_build_is_not_recorded(tmp_path):
    times = BuildTimes(tmp_path / "t.jsonl")

    def fail():
        raise RuntimeError("go build failed")

    with pytest.raises(RuntimeError, match="go build failed"):
        timed_build(lambda m: None, "k8s", "kueue", "v1", "kueue v1", fail, times=times)
    assert times.last("kueue") is None
