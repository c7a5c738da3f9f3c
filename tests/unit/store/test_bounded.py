"""store/bounded.py: the one place results are read back, within its limits."""
from __future__ import annotations

import gzip
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.errors import StoreError
from harness.store import bounded


def test_a_link_a_fifo_or_a_directory_is_refused_not_read(tmp_path):
    (tmp_path / "secret").write_text("mine")
    (tmp_path / "link.json").symlink_to(tmp_path / "secret")
    os.mkfifo(tmp_path / "fifo.json")   # a read of it would wait for a writer forever
    (tmp_path / "dir.json").mkdir()
    for name, why in (("link.json", "symbolic link"), ("fifo.json", "not a regular file"),
                      ("dir.json", "not a regular file")):
        with pytest.raises(StoreError, match=why) as ei:
            bounded.read_bytes(tmp_path / name)
        assert "mine" not in ei.value.message and ei.value.tip
    with pytest.raises(FileNotFoundError):
        bounded.read_bytes(tmp_path / "absent")


def test_a_damaged_gzip_is_error_and_tip(tmp_path):
    p = tmp_path / "raw.json.gz"
    p.write_bytes(gzip.compress(b'{"a": 1}')[:-6])
    with pytest.raises(StoreError, match="not readable as gzip") as ei:
        bounded.load_json(p)
    assert "damaged" in ei.value.tip


def test_a_file_at_the_limit_reads_and_one_byte_more_does_not(tmp_path):
    p = tmp_path / "x.json"
    p.write_bytes(b"[" + b" " * 98 + b"]")
    assert bounded.load_json(p, limit=100) == []
    p.write_bytes(b"[" + b" " * 99 + b"]")
    with pytest.raises(StoreError, match="more than 100 bytes; not read"):
        bounded.load_json(p, limit=100)


def test_depth_is_counted_without_recursion_and_the_limit_is_inclusive():
    at = "[" * bounded.MAX_JSON_DEPTH + "]" * bounded.MAX_JSON_DEPTH
    assert bounded.loads(at) is not None
    with pytest.raises(bounded.TooDeep):
        bounded.loads("[" + at + "]")
    with pytest.raises(bounded.TooDeep):
        bounded.loads('{"a":' * 200_000 + "1" + "}" * 200_000)
    deep = []
    for _ in range(50_000):   # built in memory: the check itself must not recurse
        deep = [deep]
    with pytest.raises(bounded.TooDeep):
        bounded.check_depth(deep)
    assert bounded.check_depth({"a": [1, {"b": "x"}], "c": None}, 3)


def test_the_committed_campaigns_are_far_within_every_limit():
    from support.paths import RESULTS
    for p in RESULTS.rglob("*"):
        if p.is_file() and p.name.endswith((".json", ".json.gz", ".jsonl", ".jsonl.gz")):
            data = bounded.read_bytes(p)
            assert len(data) < bounded.MAX_FILE_BYTES / 10, p
            for line in data.splitlines() if ".jsonl" in p.name else [data]:
                if line.strip():
                    bounded.check_depth(bounded.loads(line), bounded.MAX_JSON_DEPTH // 3)


def test_files_under_lists_regular_files_and_says_which_links_it_left_out(tmp_path):
    (tmp_path / "logs" / "sub").mkdir(parents=True)
    (tmp_path / "logs" / "a.log").write_text("a")
    (tmp_path / "logs" / "sub" / "b.log").write_text("b")
    (tmp_path / "logs" / "c.log").symlink_to("/etc/hostname")
    (tmp_path / "logs" / "d").symlink_to("/etc", target_is_directory=True)
    files, notes = bounded.files_under(tmp_path / "logs")
    assert [p.relative_to(tmp_path).as_posix() for p in files] == ["logs/a.log", "logs/sub/b.log"]
    assert len(notes) == 2 and all("symbolic link" in n for n in notes)
    (tmp_path / "link").symlink_to(tmp_path / "logs", target_is_directory=True)
    with pytest.raises(StoreError, match="symbolic link"):
        bounded.files_under(tmp_path / "link")


def test_whatever_the_store_writes_reads_back(tmp_path):
    """The store cuts raw evidence at redact.MAX_DEPTH: the reading limit must not be below it."""
    from harness import redact
    from harness.store import Store, load_raw
    assert bounded.MAX_JSON_DEPTH > redact.MAX_DEPTH
    deep: object = "leaf"
    for _ in range(5000):
        deep = {"k": [deep]}
    s = Store(tmp_path, "c")
    s.write_raw("r1", {"sacct": deep})   # cut where redact.py cuts it
    assert load_raw(s.run_dir("r1"))["sacct"]["k"][0]["k"]


LEAVES = ['a"[{\\', "]]}}", "x\\\\", 1, None, '\\"[', "é[{", "[" * 300]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 400), st.randoms(use_true_random=False))
def test_the_depth_counted_on_the_text_agrees_with_the_parsed_objects(depth, rnd):
    """loads counts depth on the text (a walk costs as much as the parse); brackets and escapes inside
    strings must not fool it either way."""
    o: object = rnd.choice(LEAVES)
    for _ in range(depth):
        sib = [rnd.choice(LEAVES) for _ in range(rnd.randint(0, 2))]
        o = [o, *sib] if rnd.random() < 0.5 else {"k[": o, **{f"s{j}": x for j, x in enumerate(sib)}}
    try:
        bounded.check_depth(o)
        deep = False
    except bounded.TooDeep:
        deep = True
    for text in (json.dumps(o), json.dumps(o).encode(), json.dumps(o, ensure_ascii=False)):
        if deep:
            with pytest.raises(bounded.TooDeep):
                bounded.loads(text)
        else:
            assert bounded.loads(text) == o
