"""Writing files so that a reader (or a crash) never sees half of one."""
from __future__ import annotations

import json
import os
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
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666 if mode is None else mode)
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


def atomic_write_json(path: Path, obj: Any, *, indent: int | None = 2, sort_keys: bool = False,
                      default=None, mode: int | None = None) -> None:
    """obj as JSON (plus a final newline), written atomically."""
    atomic_write(path, json.dumps(obj, indent=indent, sort_keys=sort_keys, default=default) + "\n", mode=mode)
