"""A results directory someone else wrote, read by the commands that read one: a gzip bomb, JSON nested
100,000 deep, links planted where the report writes or where `poc logs` reads, escape sequences in a
log, HTML in a record. Each is ERROR/TIP or a WARNING and a skipped line, never a traceback, never a
write or a read through a link, never markup or terminal control that came from the directory.

The campaign is two runs of a committed one (results/smoke-2026-12-03), copied and then spoiled."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import tracemalloc
import zlib
from pathlib import Path

import pytest
from support.paths import RESULTS

from harness.cli import main
from harness.store import bounded, load_events, load_raw

SOURCE = RESULTS / "smoke-2026-12-03" / "smoke-poc"
RUNS = ("slurm-clean-01", "k8s-clean-01")
DEEP = 100_000


@pytest.fixture
def cdir(tmp_path) -> Path:
    """A campaign dir: campaign.json, the two runs' last records, their run dirs."""
    out = tmp_path / "results" / "smoke-poc"
    (out / "runs").mkdir(parents=True)
    shutil.copy(SOURCE / "campaign.json", out / "campaign.json")
    last = {}
    for line in (SOURCE / "runs.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["run_id"] in RUNS:
            last[rec["run_id"]] = line
    (out / "runs.jsonl").write_text("".join(last[r] + "\n" for r in RUNS))
    for r in RUNS:
        shutil.copytree(SOURCE / "runs" / r, out / "runs" / r)
    return out


def _deep(n: int = DEEP) -> str:
    return '{"a":' * n + "1" + "}" * n


def _gzip_stream(path: Path, head: bytes, fill: bytes, count: int, tail: bytes) -> None:
    """A gzip file of head + fill*count + tail, written without holding the whole in memory."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)   # 31: the gzip container
    with open(path, "wb") as fh:
        fh.write(z.compress(head))
        for _ in range(count):
            fh.write(z.compress(fill))
        fh.write(z.compress(tail) + z.flush())


def _run(argv, capsys):
    rc = main(argv)   # an exception out of main is the traceback a user would see: the test fails on it
    out = capsys.readouterr()
    return rc, out.out, out.err


# ------------------------------------------------------------------ decompressed size

def test_a_gzip_bomb_in_raw_evidence_is_refused_before_it_is_inflated(cdir, capsys):
    raw = cdir / "runs" / RUNS[0] / "raw.json.gz"
    # valid JSON of 512 MiB in about 500 KB: read whole, it would be parsed (and held) in full
    _gzip_stream(raw, b'{"x":"', b"a" * 2**20, 512, b'"}')
    assert raw.stat().st_size < 2**20
    tracemalloc.start()
    try:
        with pytest.raises(Exception) as ei:
            load_raw(raw.parent)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert f"more than {bounded.MAX_FILE_BYTES:,} bytes decompressed" in str(ei.value)
    assert peak < bounded.MAX_FILE_BYTES + 64 * 2**20, f"{peak / 2**20:.0f} MiB held while refusing"
    rc, out, err = _run(["rederive", str(cdir)], capsys)
    assert rc == 1 and "Traceback" not in err
    assert "more than 134,217,728 bytes decompressed" in out + err


def test_a_gzip_bomb_in_the_events_or_a_log_is_refused(cdir, capsys):
    run = cdir / "runs" / RUNS[0]
    _gzip_stream(run / "events.jsonl.gz", b"", b"x" * 2**20, 130, b"")   # one line of 130 MiB
    with pytest.raises(Exception, match="bytes decompressed; not read"):
        load_events(run)
    _gzip_stream(run / "events.jsonl.gz", b"", b"\n" * 2**20, 3, b"")   # 3 million empty lines
    with pytest.raises(Exception, match="lines decompressed; not read"):
        load_events(run)
    for log in (run / "logs").iterdir():
        _gzip_stream(log, b"", b"x" * 2**20, 130, b"")
    rc, _out, err = _run(["logs", RUNS[0], "--results", str(cdir.parent)], capsys)
    assert rc == 1 and "ERROR" in err and "bytes decompressed; not read" in err and "TIP" in err


# ------------------------------------------------------------------ JSON depth

@pytest.mark.parametrize("command", ["report", "rederive", "list", "status"])
def test_a_runs_line_nested_100000_deep_is_skipped_and_said(cdir, capsys, tmp_path, command):
    with open(cdir / "runs.jsonl", "a") as fh:
        fh.write('{"schema":1,"run_id":"x","platform":"k8s","metrics":' + _deep() + "}\n")
    argv = {"report": ["report", str(cdir), "--out", str(tmp_path / "out")],
            "rederive": ["rederive", str(cdir)],
            "list": ["list", "--results", str(cdir.parent)],
            "status": ["status", "--results", str(cdir)]}[command]
    rc, out, err = _run(argv, capsys)
    assert "Traceback" not in err
    assert f"line 3 is JSON nested more than {bounded.MAX_JSON_DEPTH} levels deep" in out + err
    assert rc == 0


def test_json_nested_deeper_than_the_limit_but_within_the_parsers_is_refused_too(cdir, capsys):
    # 500 levels parse (json's own limit is near 1,000) and then break whatever walks them recursively
    with open(cdir / "runs.jsonl", "a") as fh:
        fh.write('{"schema":1,"run_id":"x","platform":"k8s","mistake":' + _deep(500) + "}\n")
    rc, _, err = _run(["list", "--results", str(cdir.parent)], capsys)
    assert rc == 0 and f"line 3 is JSON nested more than {bounded.MAX_JSON_DEPTH} levels deep" in err


@pytest.mark.parametrize("depth", [DEEP, 500])   # 500: within json's own limit, past the reading limit
def test_raw_evidence_nested_too_deep_is_a_finding_not_a_crash(cdir, capsys, depth):
    raw = cdir / "runs" / RUNS[0] / "raw.json.gz"
    raw.write_bytes(gzip.compress(_deep(depth).encode()))
    with pytest.raises(Exception, match=f"JSON nested more than {bounded.MAX_JSON_DEPTH} levels deep; not read"):
        load_raw(raw.parent)
    rc, out, err = _run(["rederive", str(cdir)], capsys)
    assert rc == 1 and "Traceback" not in err and f"nested more than {bounded.MAX_JSON_DEPTH} levels deep" in out


def test_an_event_nested_too_deep_is_not_an_event(cdir):
    run = cdir / "runs" / RUNS[0]
    kept = load_events(run)
    line = json.dumps({**kept[0], "extra": json.loads(_deep(bounded.MAX_JSON_DEPTH + 50))}).encode()
    deeper = b"POC_EVENT " + line + b"\n" + b"POC_EVENT " + _deep(DEEP).encode() + b"\n"
    (run / "events.jsonl.gz").write_bytes(gzip.compress(gzip.decompress((run / "events.jsonl.gz").read_bytes())
                                                        + deeper))
    assert load_events(run) == kept


def test_a_campaign_json_nested_too_deep_is_said_and_the_runs_still_listed(cdir, capsys):
    (cdir / "campaign.json").write_text('{"config":' + _deep() + "}")
    rc, out, err = _run(["list", "--results", str(cdir.parent)], capsys)
    assert rc == 0 and f"campaign.json: JSON nested more than {bounded.MAX_JSON_DEPTH} levels deep" in err
    assert "smoke-poc" in out


def test_a_hundred_thousand_bad_lines_are_said_in_a_few_warnings(cdir, capsys):
    with open(cdir / "runs.jsonl", "a") as fh:
        fh.write("x\n" * 100_000)
    rc, _out, err = _run(["list", "--results", str(cdir.parent)], capsys)
    assert rc == 0 and err.count("WARNING") == bounded.MAX_SKIP_NOTES + 1
    assert "99,980 more lines skipped" in err


def test_a_line_longer_than_the_limit_is_skipped_without_being_held(tmp_path):
    p = tmp_path / "runs.jsonl"
    with open(p, "wb") as fh:
        fh.write(b'{"a":1}\n' + b"x" * (bounded.MAX_LINE_BYTES + 5) + b'\n{"b":2}\n')
    got = list(bounded.iter_lines(p, total=None))
    assert got[0] == b'{"a":1}\n' and got[2] == b'{"b":2}\n'
    assert isinstance(got[1], bounded.LineTooLong) and got[1].length == bounded.MAX_LINE_BYTES + 6


# ------------------------------------------------------------------ links where the report writes

def _victim(tmp_path) -> Path:
    v = tmp_path / "victim"
    v.mkdir()
    (v / "bashrc").write_text("the victim's own file\n")
    return v


@pytest.mark.parametrize("plant", ["report_dir", "charts_dir", "chart_file", "temp_name", "report_md"])
def test_a_link_planted_in_report_never_redirects_a_write(cdir, capsys, tmp_path, plant):
    victim = _victim(tmp_path)
    report = cdir / "report"
    if plant == "report_dir":
        report.symlink_to(victim, target_is_directory=True)
    else:
        (report / "charts").mkdir(parents=True)
        link = {"charts_dir": report / "charts", "chart_file": report / "charts" / "metrics.png",
                "temp_name": report / f".report.md.tmp-{os.getpid()}", "report_md": report / "report.md"}[plant]
        if plant == "charts_dir":
            link.rmdir()
            link.symlink_to(victim, target_is_directory=True)
        else:
            link.symlink_to(victim / "bashrc")
    rc, _out, err = _run(["report", str(cdir)], capsys)
    assert "Traceback" not in err
    assert (victim / "bashrc").read_text() == "the victim's own file\n"
    assert sorted(p.name for p in victim.iterdir()) == ["bashrc"], "nothing was written into the victim's dir"
    if plant in ("report_dir", "charts_dir"):
        assert rc == 1 and "symbolic link" in err and "TIP" in err
    else:
        assert rc == 0 and (report / "report.md").is_file() and not (report / "report.md").is_symlink()
        assert not (report / "charts" / "metrics.png").is_symlink()


# ------------------------------------------------------------------ poc logs

def test_logs_strip_terminal_escapes(cdir, capsys):
    logs = cdir / "runs" / RUNS[0] / "logs"
    (logs / "evil.log").write_bytes(b"step 1\x1b]0;pwned title\x07\n\x1b[2J\x1b[31mred\x1b[0m\r\nbell\x07 nul\x00 "
                                    b"c1\xc2\x9b31m done\tok\n")
    rc, out, _err = _run(["logs", RUNS[0], "--results", str(cdir.parent)], capsys)
    assert rc == 0
    assert "\x1b" not in out and "\x07" not in out and "\x00" not in out and "\x9b" not in out and "\r" not in out
    assert "step 1\nred\nbell nul c131m done\tok\n" in out


def test_logs_never_print_a_file_through_a_link(cdir, capsys, tmp_path):
    victim = _victim(tmp_path)
    logs = cdir / "runs" / RUNS[0] / "logs"
    (logs / "id_rsa.log").symlink_to(victim / "bashrc")
    rc, out, err = _run(["logs", RUNS[0], "--results", str(cdir.parent)], capsys)
    assert rc == 0 and "victim's own file" not in out and "id_rsa.log: a symbolic link" in err
    shutil.rmtree(logs)
    logs.symlink_to(victim, target_is_directory=True)
    rc, out, err = _run(["logs", RUNS[0], "--results", str(cdir.parent)], capsys)
    assert "victim's own file" not in out + err and "logs: a symbolic link" in err


def test_an_error_quoting_a_results_dir_name_has_no_escapes(tmp_path, capsys):
    bad = tmp_path / "results\x1b]0;owned\x07"
    bad.mkdir()
    rc, _out, err = _run(["report", str(bad)], capsys)
    assert rc != 0 and "ERROR" in err and "\x1b" not in err and "\x07" not in err


# ------------------------------------------------------------------ HTML from a record

def test_html_in_a_record_lands_in_report_md_as_text(cdir, capsys, tmp_path):
    evil = '<img src=x onerror="alert(1)"> <script>alert(2)</script> [click](javascript:alert(3)) `a``<b>`'
    lines = (cdir / "runs.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    rec.update(status="failed", error={"stage": "run", "type": "PlatformError", "message": evil, "origin": "platform"})
    rec["campaign"] = "smoke-poc <iframe src=//evil>"
    (cdir / "runs.jsonl").write_text("\n".join([json.dumps(rec), *lines[1:]]) + "\n")
    rc, _out, err = _run(["report", str(cdir), "--out", str(tmp_path / "out")], capsys)
    assert rc == 0, err
    md = (tmp_path / "out" / "report.md").read_text()
    assert "&lt;img src=x" in md or "alert(1)" not in md
    for tag in ("<img", "<script", "<iframe", "](javascript:"):
        assert tag not in md


# ------------------------------------------------------------------ the campaign's own store, reopened
def test_reopening_a_campaign_sets_a_deep_runs_line_aside_instead_of_crashing(tmp_path):
    from harness.store import Store
    s = Store(tmp_path, "camp")
    s.open("h", {}, resume=False)
    s.close()
    with open(tmp_path / "camp" / "runs.jsonl", "a") as fh:
        fh.write('{"schema":1,"run_id":"x","platform":"k8s","metrics":' + _deep() + "}\n")
    again = Store(tmp_path, "camp")
    again.open("h", {}, resume=True)   # a RecursionError here was the traceback of --resume and cleanup
    again.close()
    assert "levels deep" not in (tmp_path / "camp" / "runs.jsonl").read_text()
    assert (tmp_path / "camp" / "runs.jsonl.torn").stat().st_size > DEEP
    assert any("not a JSON record" in n for n in again.notes)


def test_a_deep_campaign_json_or_journal_entry_is_damaged_not_a_traceback(tmp_path):
    from harness.errors import StoreError
    from harness.store import Store
    s = Store(tmp_path, "camp")
    s.open("h", {}, resume=False)
    s.close()
    journal = tmp_path / "camp" / "inflight"
    journal.mkdir()
    (journal / "r1.json").write_text('{"run_id":"r1","platform":"k8s","x":' + _deep() + "}")
    assert Store(tmp_path, "camp").inflight() == []
    assert (journal / "r1.json.corrupt").exists()
    (tmp_path / "camp" / "campaign.json").write_text('{"schema":1,"config":' + _deep() + "}")
    with pytest.raises(StoreError, match="not readable JSON"):
        Store(tmp_path, "camp").open("h", {}, resume=True)
