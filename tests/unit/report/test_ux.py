"""The report's user-experience section (harness/report/ux.py): user-mistake probes kept out of the
training tables, and the user-experience tables. The audit table is tests/unit/report/test_audit.py."""
import json
import re

from support.report_ux_audit_fixture import FIXTURE, STORED, campaign

from harness.report import sections, ux
from harness.report.document import build
from harness.report.table import from_records

STAMP = re.compile(r"generated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


def _section(md: str, title: str) -> str:
    start = md.index(f"## {title}")
    return md[start:md.index("\n## ", start + 1)]


def test_mistake_probes_leave_every_training_figure_as_it_was(tmp_path):
    mine = build(str(campaign(tmp_path, ux=False, audit=False, first_log_s=False)), str(tmp_path / "rep"))
    for name in ("summary.csv", "comparisons.csv"):
        assert mine[name].read_text() == (STORED / "report" / name).read_text(), name
    md, committed = mine["report.md"].read_text(), (STORED / "report" / "report.md").read_text()
    for title in ("Headline", "What the numbers say", "Cost and goodput", "Caveats"):
        assert _section(md, title) == _section(committed, title), title
    assert "runs: local (baseline) 11 ok / 0 not ok, Slurm 13 ok / 0 not ok, Kubernetes 13 ok / 0 not ok · " \
           "10 user-mistake probe(s), not training runs" in md
    assert "## Runs that did not succeed" not in md
    assert "mistake" not in _section(md, "Charts") and "mistake" not in _section(md, "Headline")


def test_a_probe_that_did_not_complete_is_listed_but_counts_as_no_training_run(tmp_path):
    md = build(str(campaign(tmp_path, probe_status="failed")), str(tmp_path / "rep"))["report.md"].read_text()
    assert "Kubernetes 13 ok / 0 not ok" in md
    failed = _section(md, "Runs that did not succeed")
    assert failed.count("`k8s-mistake-") == 5 and "slurm-mistake" not in failed
    assert "probe did not complete (failed)" not in _section(md, "User experience")   # its clear message still shows
    assert ("| `wrong_queue` | Kubernetes | `kubernetes.local_queue: poc-queue-typo` | 1.08 s (appeared after 0.08 s) |"
            in md)


def test_time_to_a_clear_error_table(tmp_path):
    t = from_records([{**r, "schema": 1} for r in _probe_records()])
    header, rows = ux.error_table(t)
    assert header[3] == "time to a clear error"
    by = {(r[0], r[1]): r for r in rows}
    assert [r[0] for r in rows][:2] == ["`impossible_resources`"] * 2   # the configured mistakes' order
    slurm_wq = by[("`wrong_queue`", "Slurm")]
    assert slurm_wq[3:6] == ["not clear within 150 s", "–", "unclear: `sbatch: error: Batch job submission failed: "
                                                            "Invalid partition name specified`"]
    assert by[("`impossible_resources`", "Slurm")][3:5] == ["0.3 s", "at submit"]
    k8s = by[("`entrypoint_typo`", "Kubernetes")]
    assert k8s[5].startswith("`python: can't open file") and "| exit 2" in k8s[5]
    # a | in a platform's message cannot split the Markdown row
    line = sections.md_table(header, [k8s]).splitlines()[2]
    assert len(re.split(r"(?<!\\)\|", line)) == len(header) + 2


def test_a_long_message_is_trimmed_to_one_line_of_code():
    text = "first line\n  second `quoted` " + "x" * 300
    out = ux.code(text)
    assert out.startswith("`first line second 'quoted' x") and out.endswith("…`") and len(out) == ux.MESSAGE_CHARS + 2


def test_a_retried_probe_counts_by_its_last_record():
    first, *_ = _probe_records()
    again = json.loads(json.dumps(first))
    first["status"], first["mistake"]["clear"] = "failed", False
    t = from_records([{**r, "schema": 1} for r in (first, again)])
    assert len(t) == 1 and t.probe.tolist() == [True] and t.ok.tolist() == [False]
    assert ux.probes(t)[0].clear and ux.probes(t)[0].seconds == 0.3


def _probe_records() -> list[dict]:
    return [json.loads(json.dumps(p)) for p in FIXTURE["mistakes"]]
