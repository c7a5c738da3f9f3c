"""What `poc check` prints and returns for the checks it ran (harness/check/report.py): each check's
lines, the summary and the exit code."""
from __future__ import annotations

from harness.check.report import Check, Failed, Runner, as_data, exit_code, lines, summary


def test_report_lines_summary_and_exit_code():
    ticks = iter([0.0, 0.25, 1.0, 3.5])
    r = Runner("k8s", clock=lambda: next(ticks))
    r.run("api server", lambda: "up", gate=True)

    def refused() -> str:
        raise Failed("no", "add")
    r.run("rbac", refused)
    assert [c.seconds for c in r.checks] == [0.25, 2.5]
    assert lines(r.checks[0]) == (["[k8s] ok    api server (0.25 s): up"], False)
    assert lines(r.checks[1]) == (["ERROR [k8s] rbac (2.50 s): no", "TIP add"], True)
    assert summary(r.checks) == "1 of 2 checks failed (2.75 s): k8s rbac"
    assert exit_code(r.checks) == 1 and as_data(r.checks)["ok"] is False
    assert exit_code([Check("k8s", "quota", "note", "not readable", None, 0.0)]) == 0
