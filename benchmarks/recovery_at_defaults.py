#!/usr/bin/env python3
"""Recovery measured at each platform's defaults, against the report's projection from runs at the lab's settings.

The report projects each platform's recovery to its defaults from the phases measured at the cluster's own
settings (harness/report/defaults.py). The local clusters are tuned for a quick smoke: Slurm runs with
`AuthInfo=cred_expire=10`, `SchedulerParameters=bf_interval=5,sched_interval=5` and `SlurmdTimeout=30`, the
harness gives Kubernetes pods 30 s tolerations of a lost node and every JobSet a failurePolicy of 3 restarts.
This script measures the four cases at the defaults, one campaign each:

  slurm-kill_rank   slurm.conf without the AuthInfo and SchedulerParameters lines (cred_expire 120, sched_interval
                    60, bf_interval 30), `scontrol reconfigure`, kill_rank runs
  slurm-lose_node   the same and without SlurmdTimeout (300 s), lose_node runs
  k8s-lose_node     the pods' lost-node tolerations at the default 300 s (kubernetes.toleration_seconds: 300; the
                    node-monitor grace period stays the native cluster's 20 s, and the projection is made to it)
  k8s-kill_rank     the JobSet's failurePolicy at JobSet's default: no restarts (kubernetes.max_restarts: 0). The
                    expected finding: the job fails and nothing restarts it

and puts slurm.conf back as it was (and reconfigures) whatever happened. Each measured run is compared with the
projection of the site runs (`--site-from`, the committed smoke campaign by default) to the settings the measured
run recorded: within [lowest, highest] of the site runs' projected bounds, or not. It writes summary.json and
summary.md into --results.

    flock /tmp/poc-cluster.lock .venv/bin/python benchmarks/recovery_at_defaults.py \\
        --results /tmp/recovery-defaults --case slurm-kill_rank --runs 2

Exit status: 0 every run within its projection (and the k8s-kill_rank run not restarted), 1 one outside, 2 it
could not run. Needs the local clusters (`poc cluster up --slurm --k8s --provider native`); no CI test runs it
(slurm-lose_node takes about 10 minutes a run).
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
from harness.clusters import slurm_docker
from harness.report import defaults
from harness.smoke import smoke_config
from harness.store import read_runs, runs_files

CONF = "/etc/slurm/slurm.conf"
CASES = {
    # case: (platform, fault, slurm.conf lines dropped, config changes, the settings the runs must have recorded)
    "slurm-kill_rank": ("slurm", "kill_rank", ("AuthInfo=cred_expire=", "SchedulerParameters="), {}, None),
    "slurm-lose_node": ("slurm", "lose_node", ("AuthInfo=cred_expire=", "SchedulerParameters=", "SlurmdTimeout="),
                        {}, None),
    "k8s-lose_node": ("k8s", "lose_node", (), {"kubernetes": {"toleration_seconds": 300}}, None),
    "k8s-kill_rank": ("k8s", "kill_rank", (), {"kubernetes": {"max_restarts": 0}}, None),
}
SITE = Path(__file__).resolve().parents[1] / "results" / "smoke-2026-12-05"


def poc(*args: str) -> int:
    print("$ poc " + " ".join(args), flush=True)
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], check=False).returncode


def docker(*argv: str, stdin: str | None = None) -> str:
    res = subprocess.run(["docker", *argv], input=stdin, capture_output=True, text=True, timeout=120, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"docker {' '.join(argv)}: {res.stderr.strip()[:300]}")
    return res.stdout


def slurm_containers() -> list[str]:
    """The containers of the Slurm image (every one reads /etc/slurm/slurm.conf); not MariaDB."""
    return [n for n, state in slurm_docker.status().items() if state == "running" and "mariadb" not in n]


def reconfigure(expect_tuned: bool, timeout: float = 240) -> None:
    """scontrol reconfigure, then wait until slurmctld shows the expected settings and every node is idle."""
    docker("exec", slurm_docker.CTLD_CONTAINER, "scontrol", "reconfigure")
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        time.sleep(2)
        try:
            conf = docker("exec", slurm_docker.CTLD_CONTAINER, "scontrol", "show", "config")
            states = docker("exec", slurm_docker.CTLD_CONTAINER, "sinfo", "-h", "-o", "%t").split()
        except RuntimeError:
            continue   # slurmctld is restarting
        if ("cred_expire=10" in conf) == expect_tuned and states and all(s == "idle" for s in states):
            return
    raise RuntimeError(f"slurmctld did not come back with {'tuned' if expect_tuned else 'default'} settings "
                       f"and idle nodes within {timeout:.0f} s")


def campaign(results: Path, name: str, platform: str, fault: str, runs: int, changes: dict) -> int:
    cfg = smoke_config(config.load(None), [platform], 0)
    data = cfg.model_dump(mode="json")
    data.update(campaign=name, faults=[{"kind": fault, "at_step": 15, "rank": 1}] * runs, contention=None,
                order="blocked", allow_destructive_faults=True)
    data["timeouts"]["run_s"] = 1800
    data["ux"]["mistakes"] = []
    data["drills"]["kinds"] = []
    data["serve"]["enabled"] = False
    for section, values in changes.items():
        data[section].update(values)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "poc.json"
        path.write_text(json.dumps(data))
        return poc("run", "--config", str(path), "--results", str(results))


def records(cdir: Path, fault: str) -> list[dict]:
    return [r for f in runs_files(cdir) for r in read_runs(f) if r.get("scenario") == fault]


def targets(rec: dict) -> dict[str, float] | None:
    """The settings a measured run recorded, as the projection's names: what the site runs are projected to."""
    env = rec.get("environment") or {}
    if rec.get("platform") == "slurm":
        return defaults.slurm_site(env)
    return defaults.k8s_site(env)


def site_bounds(site_dir: Path, platform: str, fault: str, to: dict[str, float]) -> dict | None:
    ps = [p for r in records(site_dir, fault) if r.get("platform") == platform
          for p in [defaults.project(r, to)] if p is not None]
    if not ps:
        return None
    return {"runs": [p.run_id for p in ps], "lo": min(p.lo for p in ps), "hi": max(p.hi for p in ps),
            "centre": sorted((p.lo + p.hi) / 2 for p in ps)[len(ps) // 2],
            "site_measured": [round(p.measured, 3) for p in ps]}


def judge(case: str, cdir: Path, site_dir: Path) -> dict:
    platform, fault, _, _, _ = CASES[case]
    out: dict = {"case": case, "platform": platform, "fault": fault, "runs": []}
    for r in records(cdir, fault):
        entry = {"run_id": r["run_id"], "status": r.get("status")}
        if platform == "k8s" and fault == "kill_rank":
            fp = ((r.get("scheduler") or {}).get("info") or {}).get("failure_policy") or \
                (r.get("environment") or {}).get("failure_policy") or {}
            err = ((r.get("error") or {}).get("message") or "").splitlines()[0] if r.get("error") else ""
            restarted = (r.get("metrics") or {}).get("recovery_s", {}).get("value") is not None
            entry.update(max_restarts=fp.get("maxRestarts"), restarted=restarted, error=err[:300],
                         within=not restarted and r.get("status") != "ok")
            out["runs"].append(entry)
            continue
        p = defaults.project(r, targets(r))
        if p is None:
            entry["error"] = ((r.get("error") or {}).get("message") or "not projectable")[:300]
            entry["within"] = False
            out["runs"].append(entry)
            continue
        to = {t.setting: t.site for t in p.terms}
        bounds = site_bounds(site_dir, platform, fault, targets(r) or {})
        entry.update(measured=round(p.measured, 3), settings=to, stretches={t.stretch: t.measured for t in p.terms},
                     projection=bounds, within=bool(bounds and bounds["lo"] <= p.measured <= bounds["hi"]))
        out["runs"].append(entry)
    return out


def markdown(results: list[dict]) -> str:
    lines = ["# Recovery at each platform's defaults, measured against the projection", "",
             "| case | run | status | settings recorded | measured (s) | projected from the site runs (s) | within |",
             "|---|---|---|---|---|---|---|"]
    for res in results:
        for e in res["runs"]:
            if "measured" in e:
                proj = e["projection"]
                bound = f"{proj['centre']:.0f} [{proj['lo']:.0f}–{proj['hi']:.0f}] from {len(proj['runs'])} run(s)" \
                    if proj else "–"
                settings = ", ".join(f"{k} {v:g} s" for k, v in e["settings"].items())
                lines.append(f"| {res['case']} | `{e['run_id']}` | {e['status']} | {settings} | {e['measured']:.1f} | "
                             f"{bound} | {'yes' if e['within'] else '**no**'} |")
            elif res["case"] == "k8s-kill_rank":
                lines.append(f"| {res['case']} | `{e['run_id']}` | {e['status']} | JobSet failurePolicy maxRestarts "
                             f"{e.get('max_restarts')} | not restarted: {e.get('error') or '–'} | – (no restart at "
                             f"JobSet's default) | {'yes' if e['within'] else '**no**'} |")
            else:
                lines.append(f"| {res['case']} | `{e['run_id']}` | {e['status']} | – | – | {e.get('error')} | **no** |")
    return "\n".join(lines) + "\n"


def campaign_name(case: str) -> str:
    return "defaults-" + case.replace("_", "-")


def run_case(case: str, results: Path, runs: int) -> int:
    platform, fault, dropped, changes, _ = CASES[case]
    originals = {c: docker("exec", c, "cat", CONF) for c in slurm_containers()} if dropped else {}
    try:
        if dropped:
            for c, text in originals.items():
                kept = "".join(line for line in text.splitlines(keepends=True) if not line.startswith(dropped))
                docker("exec", "-i", c, "sh", "-c", f"cat > {CONF}", stdin=kept)
            reconfigure(expect_tuned=False)
        return campaign(results, campaign_name(case), platform, fault, runs, changes)
    finally:
        if originals:
            for c, text in originals.items():
                docker("exec", "-i", c, "sh", "-c", f"cat > {CONF}", stdin=text)
            reconfigure(expect_tuned=True)
            print("slurm.conf restored on " + ", ".join(originals), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", required=True, help="results dir the cases' campaigns are stored in")
    ap.add_argument("--case", choices=[*CASES, "all"], default="all")
    ap.add_argument("--runs", type=int, default=1, help="fault runs per case (default 1)")
    ap.add_argument("--site-from", default=str(SITE), help="the campaign whose runs are projected (default: the "
                                                           "committed smoke campaign of 2026-12-05)")
    ap.add_argument("--report-only", action="store_true", help="judge the campaigns already under --results")
    args = ap.parse_args()
    results, site = Path(args.results), Path(args.site_from)
    cases = list(CASES) if args.case == "all" else [args.case]
    t0 = time.monotonic()
    if not args.report_only:
        for case in cases:
            rc = run_case(case, results, args.runs)
            print(f"{case}: poc run exit {rc} ({time.monotonic() - t0:.0f} s so far)", flush=True)
    done = [c for c in CASES if (results / campaign_name(c) / "runs.jsonl").exists()]
    judged = [judge(c, results / campaign_name(c), site) for c in done]
    (results / "summary.json").write_text(json.dumps(judged, indent=2) + "\n")
    (results / "summary.md").write_text(markdown(judged))
    print(markdown(judged))
    runs = [e for j in judged for e in j["runs"]]
    if not runs:
        return 2
    return 0 if all(e["within"] for e in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
