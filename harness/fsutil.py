"""Writing files so that a reader (or a crash) never sees half of one."""
from __future__ import annotations

import errno
import json
import os
import secrets
from pathlib import Path
from typing import Any


def atomic_write(path: Path, data: str | bytes, mode: int | None = None) -> None:
    """Write data (text as UTF-8, or bytes) to a temporary file beside path, fsync it, then
    rename it over path.

    mode: the file's permissions from its creation on (e.g. 0o600 for a secret), so it is never
    readable by others, not even between create and chmod.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # a fresh name made with O_EXCL: a link planted at a guessable temporary name (a results directory
    # may be shared) makes the create fail rather than redirect the write
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666 if mode is None else mode)
    try:
        with open(fd, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)   # the umask may have taken bits away from what os.open asked for
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def fsync_dir(path: Path) -> None:
    """Make the entries of a directory (a rename, a new or removed file in it) survive a power loss:
    fsync of a file makes its bytes durable, not its name."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_synced(path: Path, data: str | bytes) -> None:
    """Write a new file and fsync it (not atomic: for files inside a directory that is swapped in whole)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    with open(fd, "wb") as fh:
        fh.write(data.encode() if isinstance(data, str) else data)
        fh.flush()
        os.fsync(fh.fileno())


def atomic_write_json(path: Path, obj: Any, *, indent: int | None = 2, sort_keys: bool = False,
                      default=None, mode: int | None = None) -> None:
    """obj as JSON (plus a final newline), written atomically."""
    atomic_write(path, json.dumps(obj, indent=indent, sort_keys=sort_keys, default=default) + "\n", mode=mode)


# errno values that mean "this filesystem will not take the write", not a bug in the harness
NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM}


def disk_error_tip(exc: OSError) -> str | None:
    """What to do about an OSError the filesystem raised, or None when it is not one a user can fix."""
    if exc.errno in NO_SPACE:
        return "free space on that filesystem (or pass --results DIR on another one), then add --resume"
    if exc.errno in READ_ONLY:
        return ("make that path writable (a results directory must be; or pass --results DIR elsewhere), "
                "then add --resume")
    return None


def append_line(path: Path, line: bytes, torn_path: Path) -> str | None:
    """Append one complete line (ending in a newline) to path, fsync'd; the caller holds the file's lock.

    A line is either appended whole or not at all: a short write is continued, and a write that
    cannot finish (disk full) is truncated away before the OSError is raised. A tail without a
    final newline (a crash mid-append) is copied to torn_path and cut off first, so it is never
    glued to this line into one unreadable line in the middle of the file. Returns a note when
    such a tail was set aside."""
    note = None
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            keep = _last_newline(fd, size) + 1
            tail = os.pread(fd, size - keep, keep)
            append_line(torn_path, tail + b"\n", torn_path.with_name(torn_path.name + ".torn"))
            os.ftruncate(fd, keep)
            note = f"{path}: a torn last line ({len(tail)} bytes, a crash mid-write) was moved to {torn_path}"
            size = keep
        try:
            view = memoryview(line)
            while view:
                n = os.write(fd, view)
                if n <= 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
                view = view[n:]
            os.fsync(fd)
            if size == 0:
                fsync_dir(path.parent)   # a new file's name is durable only once its directory is
        except OSError:
            try:
                os.ftruncate(fd, size)   # take the partial line back; if even that fails, readers skip it
                os.fsync(fd)
            except OSError:
                pass
            raise
    finally:
        os.close(fd)
    return note


def _last_newline(fd: int, size: int, chunk: int = 1 << 16) -> int:
    """Offset of the last b"\\n" before size, or -1."""
    end = size
    while end > 0:
        start = max(0, end - chunk)
        i = os.pread(fd, end - start, start).rfind(b"\n")
        if i >= 0:
            return start + i
        end = start
    return -1
