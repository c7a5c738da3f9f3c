#!/usr/bin/env python3
"""Both upgrade drills on both local clusters, stored as a campaign, with their figures printed.

The control-plane restart drill runs in CI (tests/integration/test_poc_drill_e2e.py) and in `poc
smoke`. The version-upgrade drill does not: it builds the newer releases first (Kubernetes' next
minor, Kueue's and JobSet's, Slurm's next supported release: up to half an hour cold on 2 cores,
cached by version afterwards) and replaces the clusters when it is done, since neither Slurm's
nor Kueue's state can be downgraded. This script runs the campaign the way a user would (`poc
run` with drills.kinds [restart, upgrade] on slurm and k8s, plus one contention run a platform: the
handover a queued job sees without a drill), then `poc report` and `poc rederive`, and prints per
platform and drill: job survived, steps lost, seconds of refused submissions and status queries,
the queued job's delay, what was left behind and each component's seconds to healthy.

    .venv/bin/python benchmarks/upgrade_drill.py --results results/drills-2026-12-03

Prints numbers; asserts nothing. Needs the local clusters (it starts them: `poc cluster up`).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import config
from harness.smoke import native_tenant, smoke_config


def poc(*args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "harness.cli", *args]
    print("$ poc " + " ".join(args), flush=True)
    return subprocess.run(argv, text=True, check=False)


def fmt(m: dict | None, unit: str = "s") -> str:
    if not m or m.get("value") is None:
        return "–"
    v = m["value"]
    if m.get("lo") is not None and m.get("hi") is not None and m["hi"] != m["lo"]:
        return f"{v:.1f} {unit} [{m['lo']:.1f}–{m['hi']:.1f}]"
    return f"{v:g} {unit}".strip()


def summary(cdir: Path) -> str:
    lines = []
    recs = [json.loads(x) for x in (cdir / "runs.jsonl").read_text().splitlines()]
    for r in recs:
        if not r["scenario"].startswith("drill:") and r["scenario"] != "contention":
            continue
        m = r.get("metrics") or {}
        if r["scenario"] == "contention":
            lines.append(f"{r['run_id']}: {r['status']}, handover without a drill {fmt(m.get('handover_s'))}")
            continue
        d = r.get("drill") or {}
        lines.append(f"{r['run_id']}: {r['status']}" + (f" ({r['error']['message'][:200]})" if r.get("error") else ""))
        if not d:
            continue
        lines.append(f"  versions: {d.get('versions_before')} -> {d.get('versions_after')}")
        lines.append(f"  job survived {fmt(m.get('upgrade_job_survived'), '')}, restarts "
                     f"{fmt(m.get('upgrade_job_restarts'), '')}, steps lost {fmt(m.get('upgrade_steps_lost'), '')}, "
                     f"longest step gap {fmt(m.get('upgrade_max_step_gap_s'))}")
        lines.append(f"  submissions refused {fmt(m.get('upgrade_submit_refused_s'))}, slowest submission "
                     f"{fmt(m.get('upgrade_submit_slowest_s'))}, "
                     f"status refused {fmt(m.get('upgrade_status_refused_s'))}")
        lines.append(f"  queued job's delay {fmt(m.get('upgrade_queued_delay_s'))} (queued before: "
                     f"{(d.get('queued') or {}).get('waiting_before')}), records intact "
                     f"{fmt(m.get('upgrade_records_intact'), '')}, leftovers {d.get('leftovers')}")
        lines.append(f"  drill {fmt(m.get('upgrade_drill_s'))}, prepare {d.get('prepare_s')} s, restore "
                     f"{json.dumps(d.get('restore'))[:300]}")
        for s in d.get("steps") or []:
            took = "not back" if s.get("back") is None else f"{s['back'] - s['started']:.1f} s"
            ver = "" if s.get("version_before") == s.get("version_after") else \
                f" {s.get('version_before')} -> {s.get('version_after')}"
            lines.append(f"    {s['component']:<28} {took}{ver}" + (f"  ERROR {s['error']}" if s.get("error") else ""))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", required=True, help="results dir the campaign is stored in")
    ap.add_argument("--campaign", default="drills")
    ap.add_argument("--kinds", default="restart,upgrade")
    ap.add_argument("--platforms", default="slurm,k8s")
    args = ap.parse_args()
    t0 = time.monotonic()
    if poc("cluster", "up", "--slurm", "--k8s", "--provider", "native").returncode != 0:
        return 1
    plats = args.platforms.split(",")
    cfg = smoke_config(config.load(None), plats, 0, tenant=native_tenant())
    data = cfg.model_dump(mode="json")
    data.update(campaign=args.campaign, faults=[], contention={"runs": 1}, order="blocked")
    data["ux"]["mistakes"] = []
    data["drills"]["kinds"] = args.kinds.split(",")
    data["serve"]["enabled"] = False   # smoke_config serves once per scheduler; this benchmark drills only
    data["timeouts"]["run_s"] = max(data["timeouts"]["run_s"], 3600)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "poc.json"
        path.write_text(json.dumps(data))
        rc = poc("run", "--config", str(path), "--results", args.results).returncode
    cdir = Path(args.results) / args.campaign
    poc("report", args.results, "--out", str(Path(args.results) / "report"))
    poc("rederive", args.results)
    print(f"\n== upgrade drills ({time.monotonic() - t0:.0f} s in all; poc run exit {rc}) ==")
    print(summary(cdir))
    return rc


if __name__ == "__main__":
    sys.exit(main())
