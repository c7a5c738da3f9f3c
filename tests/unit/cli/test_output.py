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


def test_terminal_safe_removes_what_a_terminal_would_act_on_and_keeps_the_text():
    from harness.cli.output import terminal_safe
    cases = {
        "a\x1b[31mred\x1b[0m b": "ared b",                       # colours (CSI)
        "x\x1b]0;title\x07y": "xy",                               # window title (OSC, BEL-terminated)
        "x\x1b]8;;http://e\x1b\\link\x1b]8;;\x1b\\y": "xlinky",   # hyperlink (OSC, ST-terminated)
        "z\x1bPq\x1b\\w": "zw",                                   # DCS
        "a\r\nb\rc\td\x00e\x7f\x9b31mf": "a\nbc\tde31mf",         # CR, NUL, DEL, C1 CSI; tab and newline kept
        "trailing escape\x1b": "trailing escape",
        "é ✓ plain": "é ✓ plain",
        "job-\u202egpj.exe\u202c ok": "job-gpj.exe ok",          # a right-to-left override and its pop
        "a\u2066b\u2069\u200fc\u061cd": "abcd",                  # isolates, marks
        "שלום abc": "שלום abc",                                    # right-to-left text itself is kept
    }
    for given, shown in cases.items():
        assert terminal_safe(given) == shown
