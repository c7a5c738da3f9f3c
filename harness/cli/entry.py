"""`poc`'s entry: parse, set up logging, run the command; the one place where known errors become
`ERROR ...` / `TIP ...` and an exit code (the codes are listed in parser.EXIT_CODES).

What is printed here and every log line the harness writes (stderr, --log-file) passes through
harness/redact.py first: an error may quote a platform's answer or a user's value, and either may hold a
credential. Paths are left as they are: they are the user's own, shown to the user."""
from __future__ import annotations

import logging
import os
import signal
import sys

from .. import __version__, redact
from ..errors import PocError
from ..fsutil import disk_error_tip
from .output import terminal_safe
from .parser import build_parser
from .run import EXIT_INTERRUPTED

log = logging.getLogger("harness.cli")


def _say(kind: str, text: str) -> None:
    """One ERROR or TIP line on stderr, credentials replaced; a message may quote a results dir's text: shown,
    never acted on by the terminal."""
    print(f"{kind} {terminal_safe(_clean(text))}", file=sys.stderr)


def _clean(text: str) -> str:
    return redact.scrub_text(str(text), redact.NOWHERE).data


class _CleanFormatter(logging.Formatter):
    """Log lines with credentials replaced (a message may quote a command line or a platform's answer)."""

    def format(self, record: logging.LogRecord) -> str:
        return _clean(super().format(record))


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt  # same path as Ctrl-C: cancel what was submitted, keep what was measured


def setup_logging(verbose: int, log_file: str | None) -> None:
    """-v info, -vv debug, on stderr; --log-file gets debug unless -v asks for less. Without either, only
    warnings reach stderr, as before the harness logged at all."""
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    root = logging.getLogger("harness")
    for h in list(root.handlers):   # main() may run many times in one process (tests): no duplicate lines
        if getattr(h, "_poc", False):
            root.removeHandler(h)
            h.close()
    fmt = _CleanFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    err = logging.StreamHandler(sys.stderr)
    err.setLevel(level)
    err.setFormatter(fmt)
    handlers: list[logging.Handler] = [err]
    if log_file:
        fh = logging.FileHandler(log_file, encoding="utf-8")
        fh.setLevel(level if verbose > 0 else logging.DEBUG)
        fh.setFormatter(fmt)
        handlers.append(fh)
    for h in handlers:
        h._poc = True   # type: ignore[attr-defined]
        root.addHandler(h)
    # without -v or --log-file the level is left to whoever embeds the harness (a test's caplog, say)
    root.setLevel(min(h.level for h in handlers) if verbose > 0 or log_file else logging.NOTSET)


def main(argv: list[str] | None = None, *, campaign_fn=None, env=None, backend_fn=None) -> int:
    """campaign_fn: stands in for harness.pipeline.campaign (tests pass one; None runs the real one).
    env: the environment the POC_* overrides are read from (None: os.environ).
    backend_fn: stands in for harness.backends.factory.make_backend(platform, cfg) in cleanup and cancel."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.campaign_fn = campaign_fn
    args.backend_fn = backend_fn
    args.env = env
    args.json = getattr(args, "output", None) == "json"
    if not hasattr(args, "output"):
        args.output = None
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        setup_logging(getattr(args, "verbose", 0), getattr(args, "log_file", None))
    except OSError as exc:
        _say("ERROR", f"--log-file {exc.filename}: {exc.strerror}")
        _say("TIP", "give a path in a directory that exists and is writable")
        return 2
    log.info("poc %s (harness %s)", " ".join(sys.argv[1:] if argv is None else argv), __version__)
    try:
        return args.func(args)
    except PocError as exc:
        _say("ERROR", exc.message)
        if exc.tip:
            _say("TIP", exc.tip)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        left = getattr(exc, "left", None) or []
        if left:
            jobs = "; ".join(f"{h.get('platform')} {h.get('run_id')} ({' '.join(map(str, h.get('ids') or []))})"
                             for h in left)
            _say("ERROR", f"interrupted: {len(left)} submitted job(s) may still be running: {jobs}; "
                 "finished runs are kept")
            _say("TIP", "the same command plus --resume cancels them first, then continues")
        else:
            _say("ERROR", "interrupted: submitted jobs were cancelled and finished runs are kept")
            _say("TIP", "continue with the same command plus --resume")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:   # a full or read-only filesystem is the user's to fix, not a bug
        tip = disk_error_tip(exc)
        if tip is None:
            raise
        _say("ERROR", f"{exc.filename or 'a file'}: {exc.strerror}")
        _say("TIP", tip)
        return 1
