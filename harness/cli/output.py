"""What the commands print: human lines on stderr (a status line on a terminal), data on stdout as JSON, YAML or a
table."""
from __future__ import annotations

import json
import re
import shutil
import sys
import time
from collections.abc import Callable

FORMATS = ("json", "yaml", "table")

# What a terminal would act on rather than show: escape sequences (CSI such as colours and cursor moves,
# OSC such as window titles and hyperlinks, DCS/SOS/PM/APC strings, the two-byte ones), then any other C0
# or C1 control but newline and tab. Text from a results directory (a log, a record's message, a file
# name) may hold them: printed as they are, they could rewrite the screen, hide lines or set the title.
# Unicode's bidirectional marks, embeddings, overrides and isolates are no controls to a terminal, but they
# reorder what a reader sees ("Trojan Source", CVE-2021-42574): a job name could show as another's.
_ESCAPES = re.compile(r"""
      \x1b\[ [0-?]* [ -/]* [@-~]?               # CSI: parameters, intermediates, final byte
    | \x1b[\]PX^_] [^\x07\x1b\n]* (?:\x07|\x1b\\)?  # OSC, DCS, SOS, PM, APC: to BEL or ST (or the line's end)
    | \x1b [ -/]* [0-~]?                        # any other escape sequence
    | [\x00-\x08\x0b-\x1f\x7f-\x9f]                # every other C0 and C1 control, and DEL
    | [\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]   # bidirectional controls (see above)
""", re.VERBOSE)


def terminal_safe(text: str) -> str:
    """text as a terminal shows it literally: escape sequences and control characters removed (a
    CR LF is a newline), newlines and tabs kept."""
    return _ESCAPES.sub("", text.replace("\r\n", "\n"))


class StatusLine:
    """One line rewritten in place on a terminal (carriage return, then erase to the end of the line),
    cut to the terminal's width so it never wraps; other output clears it first and it is drawn again
    after. The ANSI erase (CSI K) is what every terminal emulator in use understands."""

    def __init__(self, stream):
        self.stream, self.text = stream, ""

    def show(self, text: str) -> None:
        self.text = text
        width = shutil.get_terminal_size((100, 20)).columns
        self.stream.write("\r\x1b[K" + text[:max(10, width - 1)])
        self.stream.flush()

    def clear(self) -> None:
        if self.text:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def stop(self) -> None:
        self.clear()
        self.text = ""


class Out:
    """Where human output goes: a status line rewritten in place on a terminal, plain lines every few
    seconds otherwise, nothing with --quiet."""

    def __init__(self, quiet: bool, as_json: bool, stream=None):
        self.quiet = quiet
        self.as_json = as_json
        self.stream = stream or sys.stderr
        self._last_plain = 0.0
        self.counter: RunCounter | None = None
        self.status = StatusLine(self.stream) if not quiet and not as_json and self.stream.isatty() else None

    def info(self, msg: str) -> None:
        if self.quiet:
            return
        msg = terminal_safe(msg)
        if self.status and self.status.text:
            self.status.clear()
            print(msg, file=self.stream, flush=True)
            self.status.show(self.status.text)
        else:
            print(msg, file=self.stream, flush=True)

    def progress(self, platform: str, run_id: str, phase: str, elapsed: float) -> None:
        if self.quiet:
            return
        where = self.counter.where() if self.counter is not None else ""
        line = f"[{platform}] {where}{run_id}: {phase} ({elapsed:5.1f}s)"
        if self.counter is not None and (eta := self.counter.eta(elapsed)) is not None:
            line += f"  ETA {_duration(eta)}"
        if self.status:
            self.status.show(line)
        elif time.time() - self._last_plain > 5:  # not a terminal: a line every few seconds is enough for logs
            self._last_plain = time.time()
            print(line, file=self.stream, flush=True)

    def stop(self) -> None:
        if self.status:
            self.status.stop()


class RunCounter:
    """Run N of M and an ETA for the progress line. M is the plan's size less what a resume skips;
    the pipeline reports phases, not counts, so the count is kept here from the records it emits."""

    def __init__(self, planned: dict[str, int]):
        self.left = dict(planned)         # platform -> runs not yet recorded
        self.finished = 0
        self.durations: list[float] = []

    @property
    def total(self) -> int:
        return self.finished + sum(self.left.values())

    def record(self, rec: dict) -> None:
        plat = rec.get("platform")
        if rec.get("scenario") == "preflight":    # nothing more of that platform runs
            self.left[plat] = 0
            return
        if self.left.get(plat, 0) > 0:
            self.left[plat] -= 1
        self.finished += 1
        start, end = rec.get("started_at"), rec.get("finished_at")
        if isinstance(start, (int, float)) and isinstance(end, (int, float)) and end >= start:
            self.durations.append(end - start)

    def where(self) -> str:
        return f"run {min(self.finished + 1, self.total)}/{self.total} " if self.total else ""

    def eta(self, elapsed: float) -> float | None:
        """Seconds left: the mean duration of the runs finished so far times the runs left, less the
        current run's elapsed time; None before any run has finished (no mean to go by)."""
        if not self.durations:
            return None
        mean = sum(self.durations) / len(self.durations)
        return max(0.0, mean * (self.total - self.finished) - elapsed)


def _duration(s: float) -> str:
    s = round(s)
    h, rest = divmod(s, 3600)
    return f"{h}h{rest // 60:02d}m" if h else f"{rest // 60}m{rest % 60:02d}s"


def record_line(rec: dict) -> str:
    if rec.get("status") != "ok":
        err = rec.get("error") or {}
        first = (err.get("message") or "").splitlines()[0] if err.get("message") else ""
        return f"{rec['run_id']}: {rec.get('status')} at {err.get('stage')}: {first}"
    if rec.get("mistake"):
        mk = rec["mistake"]
        if not mk.get("clear"):
            return f"{rec['run_id']}: ok  no clear error within {mk.get('deadline_s', 0):g} s ({mk.get('change')})"
        first = (mk.get("message") or "").strip().splitlines()[0][:100]
        return (f"{rec['run_id']}: ok  clear error after {mk['time_to_error_s']:.1f} s"
                f"{' (at submit)' if mk.get('at_submit') else ''} from {mk.get('source')}: {first}")
    m = rec.get("metrics", {})

    def v(k, f="{:.2f}"):
        x = (m.get(k) or {}).get("value")
        return "–" if x is None else f.format(x)

    s = (f"{rec['run_id']}: ok  queue {v('queue_s')}s  startup {v('startup_s')}s"
         f"  busbw {v('allreduce_busbw_gbps')} GB/s  step {v('step_time_s', '{:.3f}')}s"
         f"  cost/step ${v('cost_per_step_usd', '{:.2e}')}")
    if "recovery_s" in m:
        s += f"  recovery {v('recovery_s')}s  lost {v('lost_steps', '{:.0f}')} steps"
    if "handover_s" in m:
        s += f"  handover {v('handover_s')}s (behind the blocker)"
    if "serve_ready_s" in m:
        s += (f"  serve: ready {v('serve_ready_s')}s  p50 {v('serve_latency_p50_s', '{:.4f}')}s"
              f"  {v('serve_throughput_rps', '{:.0f}')} req/s")
    if "upgrade_job_survived" in m:
        s += (f"  drill: job {'survived' if m['upgrade_job_survived'].get('value') else 'did not survive'}, "
              f"submissions refused {v('upgrade_submit_refused_s')}s, queued job {v('upgrade_queued_delay_s')}s late")
    return s


def warn(notes: list[str]) -> None:
    """What the store kept aside or skipped (torn lines, damaged in-flight records): said once each,
    whatever --quiet says, since a person may have to act on it."""
    while notes:
        print(f"WARNING {terminal_safe(notes.pop(0))}", file=sys.stderr, flush=True)


def emit(args, data, table: Callable[[], str] | None = None) -> bool:
    """Print `data` in the format -o asked for; True when it did. Without -o, `table` (the human view)
    is printed unless --quiet; a command with no human view of its data prints nothing then."""
    fmt = getattr(args, "output", None)
    if fmt == "json":
        print(json.dumps(data, indent=2, default=str))
    elif fmt == "yaml":
        import yaml

        print(yaml.safe_dump(json.loads(json.dumps(data, default=str)), sort_keys=False), end="")
    elif table is not None and (fmt == "table" or not getattr(args, "quiet", False)):
        text = terminal_safe(table())   # a table shows text read from results (logs, messages, names)
        if text:
            print(text, end="" if text.endswith("\n") else "\n")
    else:
        return False
    return True


def asked_table(args, table: Callable[[], str]) -> Callable[[], str] | None:
    """`table` for a command whose human view is its progress on stderr: its data goes to stdout as a
    table only when -o table asks, so the default output stays what it was."""
    return table if getattr(args, "output", None) == "table" else None


def data_format(args) -> str | None:
    """json or yaml when a machine reads stdout; None for the human view."""
    fmt = getattr(args, "output", None)
    return fmt if fmt in ("json", "yaml") else None


def columns(rows: list[list[str]], header: list[str]) -> str:
    """A plain aligned table (no box drawing: it is read in terminals and in CI logs alike)."""
    rows = [header, *rows]
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(header))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows) + "\n"
