"""`poc scale`: traces made, imported and shown; a stored replay re-derived; bad input is ERROR + TIP."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import ConfigError
from harness.replay import local
from harness.replay import store as rs
from harness.scale import trace as tr

FIXTURES = Path(__file__).parents[2] / "fixtures"


def test_synth_writes_the_seeded_trace_and_show_summarises_it(tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    assert main(["scale", "synth", "--nodes", "16", "--hours", "2", "--seed", "3", "--out", str(out)], env={}) == 0
    t = tr.load(out)
    assert t.name == "synthetic-16n-2h-seed3" and t.shape.nodes == 16 and t.jobs
    again = tmp_path / "again.jsonl"
    main(["scale", "synth", "--nodes", "16", "--hours", "2", "--seed", "3", "--out", str(again), "-q"], env={})
    assert again.read_bytes() == out.read_bytes()
    capsys.readouterr()
    assert main(["scale", "show", str(out), "-o", "json"], env={}) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["jobs"] == len(t.jobs) and shown["shape"] == {"nodes": 16, "gpus_per_node": 8}


@pytest.mark.parametrize("name", ["sacct.json", "sacct-P-epoch.txt", "sacct-P.txt"])
def test_import_reads_either_sacct_form(tmp_path, name, capsys):
    src = FIXTURES / "scale" / "sacct" / name
    out = tmp_path / "t.jsonl"
    argv = ["scale", "import", str(src), "--out", str(out)] + (["--tz", "UTC"] if name == "sacct-P.txt" else [])
    assert main(argv, env={}) == 0, capsys.readouterr().err
    assert tr.load(out).jobs


def test_import_reads_alibabas_gpu_trace_by_its_header_and_slices_only_it(tmp_path, capsys):
    src = FIXTURES / "scale" / "alibaba" / "openb_excerpt.csv"
    out = tmp_path / "t.jsonl"
    assert main(["scale", "import", str(src), "--out", str(out), "--start", "12701000", "--end", "12710000",
                 "--cpu-jobs", "drop", "--name", "openb-slice", "-q"], env={}) == 0, capsys.readouterr().err
    t = tr.load(out)
    assert t.name == "openb-slice" and t.params["cpu_jobs"] == "drop" and t.params["start_s"] == 12701000
    assert {j.gpus_per_node for j in t.jobs} == {1} and any(j.recorded_wait_s is not None for j in t.jobs)
    capsys.readouterr()
    assert main(["scale", "import", str(FIXTURES / "scale" / "sacct" / "sacct.json"), "--out", str(out),
                 "--start", "5"], env={}) == 2
    assert "--start/--end slice a history that records its own clock" in capsys.readouterr().err


def test_a_stored_replay_rederives_and_a_changed_figure_is_named(tmp_path, capsys):
    rec = json.loads((FIXTURES / "replay" / "k8s_records.json").read_text())
    trace = tr.loads(rec["trace"])
    where = tmp_path / "replay-x"
    rs.save(where, trace, "k8s", {"raw": rec["raw"], "ended": True}, total_gpus=128)
    assert main(["scale", "rederive", str(where)], env={}) == 0
    body = json.loads((where / "k8s.json").read_text())
    body["figures"]["makespan_s"] = 1.0
    (where / "k8s.json").write_text(json.dumps(body))
    capsys.readouterr()
    assert main(["scale", "rederive", str(where)], env={}) == 1
    assert "k8s: makespan_s stored 1.0" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["scale", "show", "/nonexistent/t.jsonl"], "cannot read"),
    (["scale", "import", "/nonexistent/h.json", "--out", "x.jsonl"], "cannot read"),
    (["scale", "rederive", "/nonexistent"], "not a replay's results directory"),
    (["scale", "synth", "--nodes", "0", "--out", "x.jsonl"], "nodes must be at least 1"),
    (["scale", "synth", "--qos", "high", "--out", "x.jsonl"], "is not NAME=WEIGHT"),
    (["scale", "synth", "--qos", "high=-1", "--out", "x.jsonl"], "qos must be (name, weight) pairs"),
    (["scale", "replay", "t.jsonl", "--preemption", "priority", "--qos-priority", "high=x"], "NAME=PRIORITY"),
])
def test_bad_input_is_an_error_with_a_tip(argv, words, capsys):
    assert main(argv, env={}) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR ") and words in err and "\nTIP " in err and "Traceback" not in err


def test_a_trace_bigger_than_the_emulated_nodes_is_refused_with_the_command_that_fits():
    rec = json.loads((FIXTURES / "replay" / "k8s_records.json").read_text())
    trace = tr.loads(rec["trace"])
    local.check_fits(trace, 16, 8)
    with pytest.raises(ConfigError) as e:
        local.check_fits(trace, 8, 8)
    assert "16 nodes × 8 GPUs" in e.value.message and "--emulated 16 --gpus-per-node 8" in e.value.tip


def _recorded(platform: str):
    """A replay function that answers with the recorded replay of the fixture trace (no cluster)."""
    rec = json.loads((FIXTURES / "replay" / f"{platform}_records.json").read_text())
    calls = []

    def run(trace, name, timeout_s=None, say=print, **kw):
        calls.append(name)
        body = {"raw": rec["raw"], "ended": True, "harness_cpu_s": 0.1, "looks": 3}
        if platform == "slurm":
            body["submitted"] = rec["submitted"]
        return body, 128
    return rec, run, calls


def test_replay_repeats_alternate_the_platforms_and_land_in_the_campaigns_scale_folder(tmp_path, monkeypatch, capsys):
    rec, k8s, k8s_calls = _recorded("k8s")
    _, slurm, slurm_calls = _recorded("slurm")
    monkeypatch.setattr(local, "replay_k8s", k8s)
    monkeypatch.setattr(local, "replay_slurm", slurm)
    trace_file = tmp_path / "t.jsonl"
    trace_file.write_text(rec["trace"])
    argv = ["scale", "replay", str(trace_file), "--results", str(tmp_path / "res"), "--campaign", "smoke",
            "--name", "r", "--repeat", "2", "-q"]
    assert main(argv, env={}) == 0, capsys.readouterr().err
    where = tmp_path / "res" / "smoke" / "scale" / "r"
    assert sorted(f.name for f in where.glob("*.json")) == ["k8s-2.json", "k8s.json", "slurm-2.json", "slurm.json"]
    assert k8s_calls == slurm_calls == ["r", "r"]
    # the same name and trace again: more replays beside the others
    assert main([*argv[:-3], "--repeat", "1", "-q"], env={}) == 0
    _, stored = rs.load(where)
    assert list(stored) == ["k8s", "k8s-2", "k8s-3", "slurm", "slurm-2", "slurm-3"]
    assert main(["scale", "rederive", str(where)], env={}) == 0


def test_replay_into_a_directory_of_another_trace_is_refused(tmp_path, monkeypatch, capsys):
    rec, k8s, calls = _recorded("k8s")
    monkeypatch.setattr(local, "replay_k8s", k8s)
    trace_file = tmp_path / "t.jsonl"
    trace_file.write_text(rec["trace"])
    base = ["scale", "replay", str(trace_file), "--results", str(tmp_path), "--name", "r", "-p", "k8s", "-q"]
    assert main(base, env={}) == 0
    capsys.readouterr()
    assert main([*base, "--compress", "2"], env={}) == 2      # a compressed trace is another trace
    err = capsys.readouterr().err
    assert err.startswith("ERROR ") and "holds no replay of this trace" in err and "\nTIP " in err
    assert calls == ["r"]
    assert main([*base, "--repeat", "0"], env={}) == 2


def test_an_interrupted_replay_is_stored_marked_and_the_repeats_stop(tmp_path, monkeypatch, capsys):
    rec, k8s, k8s_calls = _recorded("k8s")
    _, slurm, slurm_calls = _recorded("slurm")

    def interrupted_slurm(*a, **kw):
        body, gpus = slurm(*a, **kw)
        return {**body, "ended": False, "interrupted": True}, gpus
    monkeypatch.setattr(local, "replay_k8s", k8s)
    monkeypatch.setattr(local, "replay_slurm", interrupted_slurm)
    trace_file = tmp_path / "t.jsonl"
    trace_file.write_text(rec["trace"])
    rc = main(["scale", "replay", str(trace_file), "--results", str(tmp_path), "--name", "r", "--repeat", "3",
               "-o", "json"], env={})
    assert rc == 130
    out = json.loads(capsys.readouterr().out)
    assert out["interrupted"] == "slurm" and k8s_calls == slurm_calls == ["r"]
    _, stored = rs.load(tmp_path / "r")
    assert list(stored) == ["k8s", "slurm"] and stored["slurm"]["interrupted"]


def test_replay_passes_the_preemption_mode_and_the_classes_priorities_to_both(tmp_path, monkeypatch, capsys):
    seen = {}

    def both(platform):
        rec, run, _ = _recorded(platform)

        def spy(trace, name, timeout_s=None, say=print, **kw):
            seen[platform] = kw
            return run(trace, name, timeout_s, say)
        return rec, spy
    rec, k8s = both("k8s")
    monkeypatch.setattr(local, "replay_k8s", k8s)
    monkeypatch.setattr(local, "replay_slurm", both("slurm")[1])
    trace_file = tmp_path / "t.jsonl"
    trace_file.write_text(rec["trace"])
    assert main(["scale", "replay", str(trace_file), "--results", str(tmp_path / "res"), "--name", "r", "-q",
                 "--preemption", "priority", "--qos-priority", "urgent=50000,low=1"], env={}) == 0
    want = {"low": 1, "normal": 1000, "high": 10000, "urgent": 50000}
    assert seen["slurm"] == {"preemption": "priority", "priorities": want, "policy": "site"}
    assert seen["k8s"] == {"preemption": "priority", "priorities": want, "topology": "preferred", "policy": "site"}
    # a named queue policy pair reaches both sides
    assert main(["scale", "replay", str(trace_file), "--results", str(tmp_path / "res"), "--name", "r2", "-q",
                 "--queue-policy", "strict-fifo", "--replay-set", "fifo-16n"], env={}) == 0
    assert seen["slurm"]["policy"] == seen["k8s"]["policy"] == "strict-fifo"
    # and the replay set it joined is kept with each platform's record, for the report to group the traces by
    stored = [json.loads(f.read_text()) for f in (tmp_path / "res" / "r2").glob("*.json") if f.name != "trace.json"]
    assert stored and {b["settings"].get("replay_set") for b in stored} == {"fifo-16n"}


def test_synth_draws_the_qos_classes_by_weight(tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    assert main(["scale", "synth", "--nodes", "16", "--hours", "2", "--seed", "3", "--qos", "high=1,low=3",
                 "--out", str(out), "-q"], env={}) == 0
    classes = [j.qos for j in tr.load(out).jobs]
    assert set(classes) == {"high", "low"} and classes.count("low") > classes.count("high")


def test_a_replay_directory_whose_trace_is_a_link_or_too_big_takes_no_more_replays(tmp_path):
    import argparse

    from harness.cli.scale_cmds import replay_dir
    from harness.scale.synthetic import default_trace

    trace = default_trace(nodes=8, gpus_per_node=1, hours=0.5, seed=1)
    args = argparse.Namespace(name="r", results=str(tmp_path), campaign=None)
    where = tmp_path / "r"
    where.mkdir()
    (tmp_path / "elsewhere.jsonl").write_text(tr.dumps(trace))
    (where / "trace.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")   # the same text, through a link
    with pytest.raises(ConfigError, match="holds no replay of this trace"):
        replay_dir(args, trace)
    (where / "trace.jsonl").unlink()
    (where / "trace.jsonl").write_text(tr.dumps(trace) + "x" * 10)      # read no further than the trace's length
    with pytest.raises(ConfigError, match="holds no replay of this trace"):
        replay_dir(args, trace)
    (where / "trace.jsonl").write_text(tr.dumps(trace))
    assert replay_dir(args, trace) == where
