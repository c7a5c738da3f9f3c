"""A replay's results directory: repeats stored beside each other, in order, of one trace only."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.replay import store as rs
from harness.scale import trace as tr

FIXTURE = Path(__file__).parents[2] / "fixtures" / "replay" / "k8s_records.json"


def test_repeats_are_numbered_and_loaded_in_order_and_another_trace_is_refused(tmp_path):
    rec = json.loads(FIXTURE.read_text())
    trace = tr.loads(rec["trace"])
    body = {"raw": rec["raw"], "ended": True}
    for _ in range(3):
        rs.save(tmp_path, trace, "k8s", body, 128, index=rs.next_index(tmp_path, "k8s"))
    _, stored = rs.load(tmp_path)
    assert list(stored) == ["k8s", "k8s-2", "k8s-3"] and rs.next_index(tmp_path, "k8s") == 4
    assert len(rs.runs_of(stored, "k8s")) == 3 and rs.runs_of(stored, "slurm") == []
    assert [rs.platform_of(r) for r in stored] == ["k8s"] * 3
    with pytest.raises(ConfigError, match="holds replays of another trace"):
        rs.save(tmp_path, tr.compress(trace, 2), "slurm", body, 128)
    assert rs.rederive(tmp_path) == []


def test_a_gzipped_run_file_reads_and_counts_as_the_plain_one(tmp_path):
    import gzip
    rec = json.loads(FIXTURE.read_text())
    trace = tr.loads(rec["trace"])
    rs.save(tmp_path, trace, "k8s", {"raw": rec["raw"], "ended": True}, 128)
    plain = tmp_path / "k8s.json"
    (tmp_path / "k8s.json.gz").write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    _, stored = rs.load(tmp_path)
    assert list(stored) == ["k8s"] and rs.next_index(tmp_path, "k8s") == 2 and rs.rederive(tmp_path) == []
