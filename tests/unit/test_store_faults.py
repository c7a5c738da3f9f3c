"""The results store under a crash, a full disk or a read-only filesystem: what was written stays
readable, what is damaged is kept aside and said, and the user gets ERROR/TIP, never a traceback."""
import errno
import os

import pytest
from support.fakes import record

from harness.cli import main
from harness.errors import StoreError
from harness.report.records import read_files
from harness.store import Store, read_runs


def _store(tmp_path):
    s = Store(tmp_path, "c1")
    s.open("h", {}, resume=False)
    return s


def test_a_short_write_on_a_full_disk_is_taken_back_and_said(tmp_path, monkeypatch):
    s = _store(tmp_path)
    s.append(record("r1"))
    real_write = os.write
    calls = []

    def half_then_full(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(StoreError, match="No space left") as ei:
        s.append(record("r2"))
    assert "free space" in ei.value.tip and "--resume" in ei.value.tip
    assert len(calls) == 2, "the rest of a short write is tried before giving up"
    monkeypatch.setattr(os, "write", real_write)
    assert s.runs_path.read_bytes().endswith(b'"stages":[]}\n'), "the half line was taken back"
    s.append(record("r3"))
    assert [r["run_id"] for r in s.runs()] == ["r1", "r3"] and s.notes == []
    s.close()


def test_a_torn_tail_is_set_aside_before_the_next_append_not_glued_to_it(tmp_path):
    s = _store(tmp_path)
    s.append(record("r1"))
    with open(s.runs_path, "a") as fh:
        fh.write('{"schema": 1, "run_id": "r2", "sta')  # a crash mid-write, before this version
    s.append(record("r3"))
    assert [r["run_id"] for r in read_runs(s.runs_path)] == ["r1", "r3"]
    assert (tmp_path / "c1" / "runs.jsonl.torn").read_text() == '{"schema": 1, "run_id": "r2", "sta\n'
    assert len(s.notes) == 1 and "runs.jsonl.torn" in s.notes[0]
    s.close()


def test_resume_reads_past_a_torn_line_in_the_middle_and_reports_it(tmp_path):
    s = _store(tmp_path)
    s.append(record("r1"))
    s.close()
    with open(tmp_path / "c1" / "runs.jsonl", "a") as fh:
        fh.write('{"schema":1,"run_id":"r2","sta{"schema":1,"run_id":"r3","status":"ok"}\n'
                 '{"schema":1,"run_id":"r4","platform":"local","status":"ok"}\n')
    s = Store(tmp_path, "c1")
    assert [r["run_id"] for r in s.open("h", {}, resume=True)] == ["r1", "r4"]
    assert len(s.notes) == 1 and "line 2 is not a JSON record" in s.notes[0]
    s.close()
    torn = (tmp_path / "c1" / "runs.jsonl.torn").read_text()
    assert torn == '{"schema":1,"run_id":"r2","sta{"schema":1,"run_id":"r3","status":"ok"}\n', "kept, not deleted"
    # every reader of the campaign now sees whole records only: the report's too
    assert [r.run_id for r in read_files([tmp_path / "c1" / "runs.jsonl"])] == ["r1", "r4"]


def test_a_damaged_campaign_json_is_error_and_tip(tmp_path):
    _store(tmp_path).close()
    (tmp_path / "c1" / "campaign.json").write_text('{"schema": 1, "camp')
    with pytest.raises(StoreError, match="not readable JSON") as ei:
        Store(tmp_path, "c1").open("h", {}, resume=True)
    assert "untouched" in ei.value.tip


@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe", b"[1, 2]", b'{"run_id": "r1"}'])
def test_a_damaged_inflight_record_is_kept_aside_and_reported_never_deleted(tmp_path, content):
    s = _store(tmp_path)
    s.mark_inflight({"run_id": "r0", "platform": "slurm", "ids": ["7"]})
    bad = tmp_path / "c1" / "inflight" / "r1.json"
    bad.write_bytes(content)
    (tmp_path / "c1" / "inflight" / "r1.json.corrupt").write_bytes(b"an earlier one")
    assert [h["run_id"] for h in s.inflight()] == ["r0"]
    assert not bad.exists()
    assert (bad.parent / "r1.json.corrupt").read_bytes() == b"an earlier one"
    assert (bad.parent / "r1.json.corrupt.1").read_bytes() == content
    assert len(s.notes) == 1 and "r1.json.corrupt.1" in s.notes[0] and "by hand" in s.notes[0]
    s.close()


def test_cleanup_says_what_it_kept_aside(tmp_path, capsys):
    s = _store(tmp_path)
    s.close()
    (tmp_path / "c1" / "inflight").mkdir()
    (tmp_path / "c1" / "inflight" / "r1.json").write_text("{torn")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("campaign: c1\nplatforms: [local]\n")
    assert main(["cleanup", "--config", str(cfg), "--results", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "WARNING" in err and "r1.json.corrupt" in err


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES, errno.ENOSPC])
def test_an_unwritable_results_dir_is_error_and_tip_not_a_traceback(tmp_path, monkeypatch, capsys, code):
    real_open = os.open

    def refusing_open(path, flags, *a, **kw):
        if str(path).startswith(str(tmp_path)) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(code, os.strerror(code), str(path))
        return real_open(path, flags, *a, **kw)

    monkeypatch.setattr(os, "open", refusing_open)
    rc = main(["run", "--results", str(tmp_path), "--platform", "local"])
    err = capsys.readouterr().err
    assert rc != 0 and "Traceback" not in err
    assert f"ERROR cannot write {tmp_path}" in err and os.strerror(code) in err
    assert "TIP " in err


def test_a_report_into_a_read_only_dir_is_error_and_tip(tmp_path, monkeypatch, capsys):
    s = _store(tmp_path)
    s.append(record("local-clean-01", "failed", campaign="c1"))
    s.close()
    real_open = os.open

    def refusing_open(path, flags, *a, **kw):
        # the report writes relative to its folder's descriptor (report/files.py): dir_fd names a path there
        inside = str(path).startswith(str(tmp_path / "out")) or kw.get("dir_fd") is not None
        if inside and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *a, **kw)

    monkeypatch.setattr(os, "open", refusing_open)
    rc = main(["report", str(tmp_path / "c1"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err and "Read-only file system" in err and "TIP " in err


def test_a_skipped_line_is_said_once_however_often_it_is_read(tmp_path, capsys):
    s = _store(tmp_path)
    s.append(record("r1"))
    s.close()
    with open(tmp_path / "c1" / "runs.jsonl", "a") as fh:
        fh.write('{"schema":1,"run_\n')
    s = Store(tmp_path, "c1")
    s.open("h", {}, resume=True)
    s.runs()
    s.runs()
    assert len(s.notes) == 1
    s.close()


def test_journal_entries_and_run_files_are_durable_before_they_count(tmp_path, monkeypatch):
    """An fsync'd file is not enough: its name lives in the directory, which is fsync'd too."""
    import stat

    synced = []
    real_fsync = os.fsync

    def recording_fsync(fd):
        st = os.fstat(fd)
        synced.append(("dir" if stat.S_ISDIR(st.st_mode) else "file", st.st_ino))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    s = _store(tmp_path)
    inflight = tmp_path / "c1" / "inflight"
    s.mark_inflight({"run_id": "r1", "platform": "slurm", "ids": ["7"]})
    assert ("dir", inflight.stat().st_ino) in synced
    synced.clear()
    d = s.write_artifacts("r1", {"events.jsonl": "x\n", "logs/a.log": "y\n"})
    assert ("file", (d / "logs" / "a.log").stat().st_ino) in synced
    assert ("dir", (d / "logs").stat().st_ino) in synced and ("dir", d.parent.stat().st_ino) in synced
    synced.clear()
    s.append(record("r1"))
    assert ("dir", (tmp_path / "c1").stat().st_ino) in synced, "runs.jsonl was created: its name is synced"
    synced.clear()
    s.clear_inflight("r1")
    assert ("dir", inflight.stat().st_ino) in synced
    s.close()
