"""Reading a results directory someone else may have written, within limits stated once.

A results directory is shared, copied and committed: whoever reads one (`poc report`, `rederive`,
`list`, `status`, `logs`) may not have written it. Every file the harness reads back from a store
is opened here: never through a symbolic link (a planted link would make the reader print or parse
a file of the reader's own, ~/.ssh included), never a FIFO or device (a read that never ends), a
compressed file never inflated past MAX_FILE_BYTES, a line never longer than MAX_LINE_BYTES, and
JSON never nested deeper than MAX_JSON_DEPTH. Past a limit the file is refused with ERROR/TIP (or
the line skipped and said), never a traceback or gigabytes of memory. Each limit below says what
real campaigns hold against it (measured on the committed ones under results/).
"""
from __future__ import annotations

import errno
import gzip
import json
import os
import re
import stat
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from ..errors import StoreError

# Any one file, decompressed (raw.json.gz, events, a log, a replay's records, campaign.json). The
# largest committed file is 7.3 MB (a 1,000-node Kubernetes replay's records, decompressed); the events
# of examples/gpu-campaign.yaml's largest job (16 nodes x 8 GPUs x 300 steps, a line per rank and
# step) are about 13 MB. Deflate inflates up to ~1,030 times, so a 1 MB gzip could become ~1 GB: the
# cap is what bounds the memory, and JSON within 128 MiB parses to well under a gigabyte.
MAX_FILE_BYTES = 128 * 1024**2
# Lines of a file read line by line within MAX_FILE_BYTES (events): an event line is about 330 bytes, so
# 128 MiB of real events is under 500,000 lines. A file of empty or one-byte lines would otherwise cost
# seconds per million lines to walk through while staying under the byte cap.
MAX_LINES = 2_000_000
# Skipped lines said one by one per file, then counted: a file of a million bad lines is one message.
MAX_SKIP_NOTES = 20
# campaign.json and an in-flight handle: the largest committed campaign.json is 5.7 KB (the redacted
# config, which is itself refused past 1 MiB: harness/config/loader.py).
MAX_META_BYTES = 16 * 1024**2
# One line of runs.jsonl or events: the longest committed runs.jsonl line is 49 KB. runs.jsonl itself
# is read line by line and has no total cap (100,000 runs are 630 MB, benchmarks/report_generation.py).
MAX_LINE_BYTES = 16 * 1024**2
# Nesting levels of any JSON document or line: committed records nest at most 18 (Kubernetes objects in
# raw evidence), and the store writes raw evidence cut 200 levels below its root (redact.py's MAX_DEPTH),
# which must read back. Code that walks a record recurses about once per level against Python's limit of
# 1,000, and json and msgspec refuse only near that limit: this is far below it.
MAX_JSON_DEPTH = 256

_CHUNK = 1024**2
_TIP_LINK = "a results directory holds plain files and directories; remove the link (or copy the real file in)"
_TIP_BIG = ("the file is far larger than any campaign writes (harness/store/bounded.py says why each limit is "
            "what it is); it was damaged or made by hand: restore it from the campaign's copy, or re-run the run")
_TIP_DAMAGED = "the file is damaged; restore it from the campaign's copy, or re-run the run"


class TooDeep(ValueError):
    """JSON nested deeper than MAX_JSON_DEPTH (a ValueError: not JSON this harness reads)."""


class LineTooLong(ValueError):
    """A line longer than MAX_LINE_BYTES; the reader skipped past its end."""

    def __init__(self, length: int):
        super().__init__(f"a line of more than {MAX_LINE_BYTES} bytes ({length:,} read)")
        self.length = length


def open_file(path: str | os.PathLike) -> IO[bytes]:
    """A regular file opened for reading, its last component never followed if it is a link. A
    missing file raises FileNotFoundError as open() does; a link, FIFO, device or directory is
    refused (StoreError)."""
    p = Path(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StoreError(f"{p}: a symbolic link (to {_target(p)}); not followed", tip=_TIP_LINK) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise StoreError(f"{p}: not a regular file; not read", tip=_TIP_LINK)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _target(p: Path) -> str:
    try:
        return repr(os.readlink(p))
    except OSError:
        return "?"


@contextmanager
def _stream(path: Path) -> Iterator[IO[bytes]]:
    """The file's bytes, a .gz file's decompressed as they are read (closing both)."""
    with open_file(path) as fh:
        if not path.name.endswith(".gz"):
            yield fh
            return
        with gzip.GzipFile(fileobj=fh, mode="rb") as gz:
            yield gz


def read_bytes(path: str | os.PathLike, limit: int = MAX_FILE_BYTES) -> bytes:
    """A whole file's bytes, a .gz file's decompressed, refused (StoreError) past `limit` bytes."""
    p = Path(path)
    gz = " decompressed" if p.name.endswith(".gz") else ""
    with _stream(p) as fh:
        try:
            parts, size = [], 0
            while chunk := fh.read(_CHUNK):
                size += len(chunk)
                if size > limit:
                    raise StoreError(f"{p}: more than {limit:,} bytes{gz}; not read", tip=_TIP_BIG)
                parts.append(chunk)
        except (OSError, EOFError, zlib.error) as exc:
            raise StoreError(f"{p}: not readable{' as gzip' if gz else ''} ({exc})", tip=_TIP_DAMAGED) from None
    return b"".join(parts)


def read_text(path: str | os.PathLike, limit: int = MAX_FILE_BYTES) -> str:
    """read_bytes as UTF-8 text, undecodable bytes replaced."""
    return read_bytes(path, limit).decode("utf-8", errors="replace")


def iter_lines(path: str | os.PathLike, total: int | None = MAX_FILE_BYTES) -> Iterator[bytes | LineTooLong]:
    """A file's lines (a .gz file's decompressed), each at most MAX_LINE_BYTES: a longer one is read
    past, not kept, and yielded as LineTooLong for the caller to skip and say. `total`: the most
    bytes read in all, and then at most MAX_LINES lines (StoreError past either); None for a file
    read line by line whatever its size (runs.jsonl: it is not compressed, so its size on disk is
    what it costs)."""
    p = Path(path)
    gz = " decompressed" if p.name.endswith(".gz") else ""
    size = count = 0
    with _stream(p) as fh:
        try:
            while line := fh.readline(MAX_LINE_BYTES + 1):
                count += 1
                if total is not None and count > MAX_LINES:
                    raise StoreError(f"{p}: more than {MAX_LINES:,} lines{gz}; not read", tip=_TIP_BIG)
                if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                    length = len(line)
                    while (rest := fh.readline(_CHUNK)) and (total is None or size + length <= total):
                        length += len(rest)
                        if rest.endswith(b"\n"):
                            break
                    line = LineTooLong(length)
                size += len(line) if isinstance(line, bytes) else line.length
                if total is not None and size > total:
                    raise StoreError(f"{p}: more than {total:,} bytes{gz}; not read", tip=_TIP_BIG)
                yield line
        except (OSError, EOFError, zlib.error) as exc:
            raise StoreError(f"{p}: not readable{' as gzip' if gz else ''} ({exc})", tip=_TIP_DAMAGED) from None


class SkipNotes:
    """on_skip for the lines a reader skips, MAX_SKIP_NOTES of them said one by one, the rest counted
    and said once at the end (call done())."""

    def __init__(self, on_skip, path):
        self.on_skip, self.path, self.count = on_skip, path, 0

    def __call__(self, note: str) -> None:
        self.count += 1
        if self.on_skip is not None and self.count <= MAX_SKIP_NOTES:
            self.on_skip(note)

    def done(self) -> None:
        if self.on_skip is not None and self.count > MAX_SKIP_NOTES:
            self.on_skip(f"{self.path}: {self.count - MAX_SKIP_NOTES:,} more lines skipped for the same reasons")


def files_under(root: str | os.PathLike) -> tuple[list[Path], list[str]]:
    """The regular files under a directory, walked without following a link, sorted; and a note for
    each link or other non-file met (left out). A root that is itself a link is refused."""
    top = Path(root)
    st = os.lstat(top)
    if stat.S_ISLNK(st.st_mode):
        raise StoreError(f"{top}: a symbolic link (to {_target(top)}); not followed", tip=_TIP_LINK)
    files, notes = [], []
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            mode = os.lstat(p).st_mode
            if stat.S_ISLNK(mode):
                notes.append(f"{p}: a symbolic link (to {_target(p)}); not followed")
            elif stat.S_ISREG(mode):
                files.append(p)
            elif not stat.S_ISDIR(mode):
                notes.append(f"{p}: not a regular file; not read")
    return sorted(files), notes


def check_depth(obj: object, limit: int = MAX_JSON_DEPTH) -> object:
    """obj itself when no list or dict in it is nested deeper than `limit`; else TooDeep. Iterative:
    the check must not itself run out of stack."""
    stack = [(obj, 1)]
    while stack:
        x, level = stack.pop()
        if isinstance(x, dict):
            x = x.values()
        elif not isinstance(x, (list, tuple)):
            continue
        if level > limit:
            raise TooDeep(f"nested more than {limit} levels deep")
        stack.extend((v, level + 1) for v in x if isinstance(v, (dict, list, tuple)))
    return obj


def loads(data: bytes | str) -> object:
    """json.loads within MAX_JSON_DEPTH: ValueError for text that is not JSON, TooDeep (a ValueError)
    for JSON nested too deep, whether the parser or the depth check finds it."""
    try:
        obj = json.loads(data)
    except RecursionError:
        raise TooDeep(f"nested more than {MAX_JSON_DEPTH} levels deep") from None
    if _text_depth(data) > MAX_JSON_DEPTH:
        raise TooDeep(f"nested more than {MAX_JSON_DEPTH} levels deep")
    return obj


def _syntax(t: type) -> tuple:
    """Per text type (bytes, str): its '\\', '"', '[', '{' and the patterns _text_depth uses."""
    c = t if t is str else lambda x: x.encode()
    return (c("\\"), c('"'), c("["), c("{"), re.compile(c(r'[^"\[\]{}]+')), re.compile(c(r'"[^"]*"')),
            re.compile(c(r"\[\]|\{\}")))


_SYNTAX = {bytes: _syntax(bytes), str: _syntax(str)}


def _text_depth(data: bytes | str) -> int:
    """The nesting depth of text json.loads has parsed, counted on the text at C speed (a walk of the
    parsed object costs as much as the parse), up to MAX_JSON_DEPTH + 1: escaped backslashes and quotes
    dropped, then all but quotes and brackets, then the strings (well formed: the text parsed), then the
    innermost bracket pairs, a level per pass."""
    backslash, quote, bracket, brace, others, strings, pairs = _SYNTAX[type(data)]
    if data.count(bracket) + data.count(brace) <= MAX_JSON_DEPTH:
        return 0   # too few brackets to nest that deep: most records
    empty = data[:0]
    s = strings.sub(empty, others.sub(empty, data.replace(backslash * 2, empty).replace(backslash + quote, empty)))
    depth = 0
    while s and depth <= MAX_JSON_DEPTH:
        shorter = pairs.sub(empty, s)
        if len(shorter) == len(s):
            break
        s, depth = shorter, depth + 1
    return depth


def load_json(path: str | os.PathLike, limit: int = MAX_FILE_BYTES) -> object:
    """A whole JSON file (a .gz one decompressed) within the limits; StoreError for one that is not."""
    p = Path(path)
    data = read_bytes(p, limit)
    try:
        return loads(data)
    except TooDeep as exc:
        raise StoreError(f"{p}: JSON {exc}; not read", tip=_TIP_BIG) from None
    except ValueError as exc:
        raise StoreError(f"{p}: not JSON ({exc})", tip=_TIP_DAMAGED) from None
