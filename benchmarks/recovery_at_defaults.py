#!/usr/bin/env python3
"""Slurm's kill_rank recovery measured at Slurm's defaults, against the report's projection.

The report projects each platform's recovery to its default settings from the phases measured at
the cluster's own (harness/report/defaults.py). The local Slurm cluster runs with
`AuthInfo=cred_expire=10` and `SchedulerParameters=bf_interval=5,sched_interval=5` so that a smoke
campaign is quick; at Slurm's defaults (120 s, 60 s, 30 s) a requeued job is held about two minutes.
This script:

  1. runs N kill_rank runs on the local Slurm cluster as it is (campaign `site`),
  2. removes those two lines from every Slurm container's slurm.conf and `scontrol reconfigure`s
     (slurmctld and every slurmd restart in place and read the defaults),
  3. runs N kill_rank runs again (campaign `defaults`), whose records show the defaults in force,
  4. puts slurm.conf back as it was and reconfigures again, whatever happened before,

then prints each run's recovery, its requeue hold and scheduling wait, the projection of step 1's
runs, and whether every run of step 3 lies within the projection's bounds. Kubernetes' kill_rank has
no cluster setting in its path (JobSet recreates the pods at once), so there is nothing to project.

    .venv/bin/python benchmarks/recovery_at_defaults.py --results /tmp/recovery-defaults --runs 2

Exit status: 0 every run at the defaults within the projection, 1 one outside it, 2 it could not run.
Needs the local Slurm cluster (`poc cluster up --slurm`); no CI test runs it (about 10 minutes).
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

# the tuned lines, as harness/data/images/slurm/slurm.conf has them
TUNED = ("AuthInfo=cred_expire=", "SchedulerParameters=")
CONF = "/etc/slurm/slurm.conf"


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


def reconfigure(expect_defaults: bool, timeout: float = 180) -> None:
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
        tuned = "cred_expire=10" in conf
        if tuned != expect_defaults and states and all(s == "idle" for s in states):
            return
    raise RuntimeError(f"slurmctld did not come back with {'default' if expect_defaults else 'tuned'} settings "
                       f"and idle nodes within {timeout:.0f} s")


def campaign(results: Path, name: str, runs: int) -> int:
    cfg = smoke_config(config.load(None), ["slurm"], 0)
    data = cfg.model_dump(mode="json")
    data.update(campaign=name, faults=[{"kind": "kill_rank", "at_step": 15, "rank": 1}] * runs,
                contention=None, order="blocked")
    data["ux"]["mistakes"] = []
    data["drills"]["kinds"] = []
    data["serve"]["enabled"] = False
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "poc.json"
        path.write_text(json.dumps(data))
        return poc("run", "--config", str(path), "--results", str(results))


def run_lines(cdir: Path) -> list[dict]:
    out = []
    for line in (cdir / "runs.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("scenario") != "kill_rank":
            continue
        p = defaults.project(rec)
        if p is None:
            print(f"{rec['run_id']}: {rec.get('status')}, not projectable "
                  f"({(rec.get('error') or {}).get('message', 'no recovery measured')[:200]})")
            continue
        hold, wait = (p.terms + (None, None))[:2]
        print(f"{p.run_id}: recovery {p.measured:.1f} s; requeue hold {hold.measured:.0f} s at cred_expire "
              f"{hold.site:.0f}; scheduling wait {wait.measured:.0f} s at pass interval {wait.site:.0f} s; "
              f"projected to the defaults {p.lo:.1f}–{p.hi:.1f} s" if hold else
              f"{p.run_id}: recovery {p.measured:.1f} s, restarted inside its allocation (no requeue)")
        out.append({"projection": p, "record": rec})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", required=True, help="results dir the two campaigns are stored in")
    ap.add_argument("--runs", type=int, default=2, help="kill_rank runs per campaign (default 2)")
    args = ap.parse_args()
    results = Path(args.results)
    t0 = time.monotonic()
    if poc("cluster", "up", "--slurm") != 0:
        return 2
    if campaign(results, "site", args.runs) != 0:
        print("ERROR the runs at the cluster's own settings failed; see above", file=sys.stderr)
        return 2
    originals = {c: docker("exec", c, "cat", CONF) for c in slurm_containers()}
    try:
        for c, text in originals.items():
            kept = "".join(line for line in text.splitlines(keepends=True) if not line.startswith(TUNED))
            docker("exec", "-i", c, "sh", "-c", f"cat > {CONF}", stdin=kept)
        reconfigure(expect_defaults=True)
        rc = campaign(results, "defaults", args.runs)
    finally:
        for c, text in originals.items():
            docker("exec", "-i", c, "sh", "-c", f"cat > {CONF}", stdin=text)
        reconfigure(expect_defaults=False)
        print("slurm.conf restored on " + ", ".join(originals), flush=True)
    print(f"\n== kill_rank recovery on Slurm, at the cluster's settings and at Slurm's defaults "
          f"({time.monotonic() - t0:.0f} s in all) ==")
    print("-- at the cluster's settings (cred_expire 10, sched_interval 5, bf_interval 5):")
    site = run_lines(results / "site")
    print("-- at Slurm's defaults (cred_expire 120, sched_interval 60, bf_interval 30):")
    measured = run_lines(results / "defaults")
    if not site or not measured or rc != 0:
        print("ERROR too few runs to compare; see above", file=sys.stderr)
        return 2
    if not all(m["projection"].at_defaults for m in measured):
        print("ERROR the runs at the defaults did not record the default settings", file=sys.stderr)
        return 2
    [s] = defaults.summarize(x["projection"] for x in site)
    print(f"\nprojection from {s.n} run(s) at the cluster's settings: {s.projected:.1f} s [{s.lo:.1f}–{s.hi:.1f}]")
    inside = [s.lo <= m["projection"].measured <= s.hi for m in measured]
    for m, ok in zip(measured, inside, strict=True):
        print(f"  {m['projection'].run_id}: measured {m['projection'].measured:.1f} s -> "
              f"{'within' if ok else 'OUTSIDE'} the projection")
    return 0 if all(inside) else 1


if __name__ == "__main__":
    sys.exit(main())
