"""What a user writes and calls for one job (pure): from the rendered files and the backend's call counts.

Roles: "job" is what the user writes and submits for this job (the JobSet manifest, the sbatch
script); "workload" the training script both platforms ship alike (on Kubernetes wrapped in a
ConfigMap); "admin" what a cluster admin sets up once for a team (Kueue queues, RBAC).
"""
from __future__ import annotations

from collections.abc import Mapping

import yaml

ROLES = {"jobset.yaml": "job", "job.sbatch": "job", "workload-configmap.yaml": "workload",
         "kueue.yaml": "admin", "rbac.yaml": "admin"}
# the run's stages -> what the user does at that point
CALL_PHASES = {"submit": "submit", "queue": "watch", "run": "watch", "collect": "logs", "cancel": "cancel"}


def _objects(name: str, text: str) -> int:
    if not name.endswith((".yaml", ".yml")):
        return 1      # one script
    try:
        return sum(1 for d in yaml.safe_load_all(text) if isinstance(d, dict) and d.get("kind"))
    except yaml.YAMLError:
        return 0


def _code_lines(text: str) -> int:
    """Lines that say something: not blank, not only a comment (#SBATCH lines count: they are options)."""
    return sum(1 for ln in text.splitlines()
               if ln.strip() and (not ln.lstrip().startswith("#") or ln.lstrip().startswith("#SBATCH")))


def written(files: Mapping[str, str]) -> dict:
    """files: rendered file name -> text (render's output). Per file its role, lines and objects,
    and the totals of what the user writes for the job itself."""
    per = {}
    for name, text in sorted(files.items()):
        base = name.rsplit("/", 1)[-1]
        per[base] = {"role": ROLES.get(base, "job"), "lines": len(text.splitlines()),
                     "code_lines": _code_lines(text), "objects": _objects(base, text)}
    job = [v for v in per.values() if v["role"] == "job"]
    return {"files": per, "job_files": len(job), "job_lines": sum(v["lines"] for v in job),
            "job_code_lines": sum(v["code_lines"] for v in job), "job_objects": sum(v["objects"] for v in job)}


def diff(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    return {k: after.get(k, 0) - before.get(k, 0) for k in sorted(after) if after.get(k, 0) - before.get(k, 0) > 0}


def add(into: dict[str, dict[str, int]], phase: str, calls: Mapping[str, int]) -> None:
    slot = into.setdefault(phase, {})
    for k, n in calls.items():
        slot[k] = slot.get(k, 0) + n
