"""`poc cluster ...`: the local clusters (harness/clusters), which print their own results."""
from __future__ import annotations

import contextlib
import io
import json

from .output import Out, emit


def cmd_cluster(args) -> int:
    from ..clusters import dispatch

    out = Out(args.quiet, args.output in ("json", "yaml"))
    if args.output != "yaml":
        return dispatch(args, say=out.info)
    # the clusters print JSON or text themselves; YAML is their JSON, converted here
    args.json = True
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = dispatch(args, say=out.info)
    text = buf.getvalue()
    emit(args, json.loads(text) if text.strip() else {})
    return rc
