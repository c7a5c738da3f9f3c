"""The committed smoke campaign with the user-experience and audit record parts added from
tests/fixtures/report/ux_audit.json: UX counts and audit answers on its runs, first_log_s, and one
user-mistake probe per mistake and platform."""
from __future__ import annotations

import copy
import json
from pathlib import Path

ROOT = Path(__file__).parents[2]
STORED = ROOT / "results" / "smoke-2026-12-03"
FIXTURE = json.loads((ROOT / "tests" / "fixtures" / "report" / "ux_audit.json").read_text())


def stored_records() -> list[dict]:
    return [json.loads(line) for line in (STORED / "smoke-poc" / "runs.jsonl").read_text().splitlines() if line]


def probes(like: dict, status: str = "ok") -> list[dict]:
    """The fixture's probes as stored records, with the campaign's schema and name."""
    out = []
    for p in FIXTURE["mistakes"]:
        r = copy.deepcopy(p)
        r.update(schema=like["schema"], campaign=like["campaign"], status=status if r["platform"] == "k8s" else "ok")
        r["audit"] = FIXTURE["audit"][r["platform"]]
        out.append(r)
    return out


def first_log(rec: dict) -> dict | None:
    """A first-log time for a run that has queue and launch times: after both (the first line follows the launch)."""
    m = rec.get("metrics") or {}
    if "queue_s" not in m or "launch_s" not in m:
        return None
    return {"value": m["queue_s"]["value"] + m["launch_s"]["value"] + 0.25, "unit": "s", "uncertainty": 0.5}


def campaign(tmp: Path, *, ux: bool = True, audit: bool = True, first_log_s: bool = True, mistakes: bool = True,
             probe_status: str = "ok") -> Path:
    """A results dir under tmp with the stored runs, the chosen parts added; returns the dir."""
    recs = stored_records()
    for r in recs:
        if r["platform"] in FIXTURE["ux"] and ux:
            r["ux"] = FIXTURE["ux"][r["platform"]]
        if r["platform"] in FIXTURE["audit"] and audit:
            r["audit"] = FIXTURE["audit"][r["platform"]]
        fl = first_log(r) if first_log_s else None
        if fl is not None:
            r["metrics"]["first_log_s"] = fl
    if mistakes:
        recs += probes(recs[0], probe_status)
    d = tmp / "results" / "ux-audit" / "smoke-poc"
    d.mkdir(parents=True)
    (d / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return d.parent
