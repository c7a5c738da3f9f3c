"""Writing the report into a results directory that others may write to as well.

`poc report DIR` writes DIR/report/ and DIR/report/charts/. A symbolic link planted there (report/
itself, charts/, report.md, a chart's name, or the temporary name a write goes through) must not
redirect a write to a file of the person who runs the report: their ~/.bashrc overwritten with a PNG,
or any file they can read embedded in report.html. So the directories the report owns are opened
without following a link (a link there is refused), a file is written under a fresh random name made
with O_EXCL (a link there makes it fail, never followed) and renamed over its final name (which
replaces a link there rather than writing through it), all relative to the directory's descriptor,
so nothing is resolved again by path between the check and the write.
"""
from __future__ import annotations

import errno
import io
import os
import secrets
import stat
from pathlib import Path

from ..errors import StoreError

_TIP = "remove the link (a report's folders are the report's own), or pass --out DIR to write elsewhere"


def real_dir(path: Path) -> Path:
    """path as a directory the report may write into: made when missing (its parents as mkdir -p), and
    refused when it is a symbolic link or not a directory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)   # above the report's own folder: the caller's path
    try:
        os.mkdir(path)
    except FileExistsError:
        pass
    mode = os.lstat(path).st_mode
    if stat.S_ISLNK(mode):
        raise StoreError(f"{path}: a symbolic link (to {os.readlink(path)!r}); the report does not write through it",
                         tip=_TIP)
    if not stat.S_ISDIR(mode):
        raise StoreError(f"{path}: not a directory; the report cannot write into it", tip=_TIP)
    return path


def write(path: Path, data: str | bytes, levels: int = 1) -> Path:
    """Write data (text as UTF-8) to path atomically, the `levels` directories above it (the report's
    own: report/, or report/charts/) opened without following a link."""
    path = Path(path)
    owned = path.parent.parts[len(path.parent.parts) - levels:] if levels else ()
    fd = os.open(path.parents[len(owned)], os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in owned:
            try:
                sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise StoreError(f"{path}: {name}/ is a symbolic link or not a directory; the report does not "
                                     "write through it", tip=_TIP) from None
                raise
            os.close(fd)
            fd = sub
        _replace_at(fd, path.name, data.encode() if isinstance(data, str) else data)
    finally:
        os.close(fd)
    return path


def _replace_at(dir_fd: int, name: str, data: bytes) -> None:
    tmp = f".{name}.{secrets.token_hex(8)}.tmp"
    out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o666,
                  dir_fd=dir_fd)
    try:
        with open(out, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)   # a link at `name` is replaced, not followed
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        raise


def save_figure(fig, path: Path, levels: int = 2) -> Path:
    """A matplotlib figure as PNG at path, written as write() does (savefig to a path would follow a
    link there); levels 2: report/charts/, the folders a chart of the report is written in. The figure
    is closed."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=110)
    finally:
        plt.close(fig)
    return write(path, buf.getvalue(), levels)
