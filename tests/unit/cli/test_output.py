"""The human output: a status line rewritten in place on a terminal, plain lines every few seconds into a
file or pipe, and other messages printed above the status line, which is then drawn again."""
from __future__ import annotations

import io

from harness.cli.output import Out


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_progress_is_one_line_rewritten_in_place():
    tty = Tty()
    out = Out(False, False, stream=tty)
    out.progress("slurm", "slurm-clean-01", "queued (PENDING)", 0.2)
    out.progress("slurm", "slurm-clean-01", "running step 3", 5.4)
    out.info("slurm-clean-01: ok  queue 0.37s")
    out.stop()
    text = tty.getvalue()
    assert "\n" not in text.split("slurm-clean-01: ok")[0]         # no line was added by the progress
    assert text.count("\r\x1b[K[slurm] slurm-clean-01: running step 3 (  5.4s)") == 2   # redrawn after the info
    assert "\r\x1b[Kslurm-clean-01: ok  queue 0.37s\n" in text.replace("\r\x1b[K\r\x1b[K", "\r\x1b[K")
    assert text.endswith("\r\x1b[K")                               # stop leaves a clean line


def test_into_a_file_the_progress_is_a_plain_line_now_and_then():
    f = io.StringIO()
    out = Out(False, False, stream=f)
    out.progress("k8s", "k8s-clean-01", "running", 1.0)
    out.progress("k8s", "k8s-clean-01", "running", 2.0)      # within 5 s of the last: not printed
    out.info("done")
    assert f.getvalue() == "[k8s] k8s-clean-01: running (  1.0s)\ndone\n"


def test_quiet_and_data_output_print_no_progress():
    for quiet, as_json in ((True, False), (False, True)):
        tty = Tty()
        out = Out(quiet, as_json, stream=tty)
        out.progress("slurm", "r", "running", 1.0)
        assert "\x1b[K" not in tty.getvalue()
