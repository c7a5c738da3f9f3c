"""The report's audit table per platform (harness/report/audit.py), from the committed smoke campaign
with the audit answers of tests/fixtures/report/ux_audit.json."""
import json

from support.report_ux_audit_fixture import FIXTURE, stored_records

from harness.report import audit
from harness.report.table import from_records


def test_audit_table_counts_runs_sources_and_users():
    recs = stored_records()
    slurm = [r for r in recs if r["platform"] == "slurm"]
    for r in slurm:
        r["audit"] = FIXTURE["audit"]["slurm"]
    answers = json.loads(json.dumps(FIXTURE["audit"]["slurm"]))
    answers["answers"]["who_submitted"]["value"] = "root"
    answers["answers"]["who_cancelled"] = {"answered": False, "value": None, "source": "slurmctld log",
                                           "note": "log not readable"}
    slurm[0]["audit"] = answers
    t = from_records(slurm)
    (label, (header, rows), (kept_header, kept)), = audit.tables(t)
    assert label == "Slurm" and header[1] == "answered (runs)"
    by = {r[0].split(" (`")[1].rstrip("`)"): r for r in rows}
    assert list(by) == list(audit.questions())
    assert by["who_submitted"][1] == "13 of 13" and by["who_submitted"][3] == "`alice` (12), `root` (1)"
    # how long each record the answers came from is kept, once per record, from harness.audit.SOURCES
    assert kept_header[:2] == ["record", "kept by default"]
    assert "`slurmctld log`" in [k[0] for k in kept] and all(k[1] and k[2] for k in kept)
    assert by["who_cancelled"][1] == "12 of 13"
    assert by["who_cancelled"][2] == "`slurmctld log`; unanswered: slurmctld log: log not readable"
    assert audit.answered_counts(t)["slurm"][:3] == (6, 7, 7)
