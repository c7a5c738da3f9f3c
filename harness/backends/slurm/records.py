"""The raw Slurm evidence a run keeps (``Collected.raw``), gathered here so backend.py stays the flow.

Everything is kept as the commands printed it (text), with the command and the harness clock at
which it was read, so ``harness.evidence.slurm.stamps`` can re-derive every time-stamp from the
stored file alone. Layout of ``raw`` (all JSON-able; no keys, passwords or tokens are read)::

    {"format": "slurm-raw/1", "job_id": "123",
     "sacct_json":     {"argv", "rc", "at", "text"},   # sacct -D --json -j ID: every attempt
     "sacct_parsable": {"argv", "env", "rc", "at", "text"},  # sacct -D -X -P (epoch seconds)
     "squeue":         {"at", "doc"} | None,           # the last squeue --json entry seen for the job
     "alloc_evidence": {"path", "rc", "at", "text"},   # the batch script's own clock lines
     "nodes":          [{"node", "when", "at", "argv", "rc", "text"}],  # around a lost node
     "submit":         {"before", "after", "scheduler_record"},
     "image":          {"ref", "id", "source"}}

With ``slurm.transport: rest`` (rest.py) the same keys hold what slurmrestd answered: ``sacct_json``
is ``GET /slurmdb/<v>/job/<id>`` (the slurmdbd records ``sacct --json`` prints, one per attempt),
with ``"request"`` and ``"source"`` in place of ``argv`` and ``rc`` the HTTP status; there is no
``sacct_parsable``; ``squeue`` is the ``GET /slurm/<v>/job/<id>`` document (``squeue --json``'s
shape); ``nodes`` entries hold ``GET /slurm/<v>/node/<name>``. harness/evidence/slurm.py reads both.
"""
from __future__ import annotations

import json
import time

from ...config import Slurm
from ...render.sbatch import CLOCK_FILE
from ...transports import Transport

FORMAT = "slurm-raw/1"
TIME_ENV = {"SLURM_TIME_FORMAT": "%s"}


def command(t: Transport, argv: list[str], env: dict | None = None, timeout: int = 60) -> dict:
    """Run one read-only command and keep what it printed; never raises (the record says what failed)."""
    at = time.time()
    try:
        res = t.run(argv, env=env, timeout=timeout, check=False)
        rec = {"argv": list(argv), "rc": res.returncode, "at": at, "text": res.stdout}
        if res.returncode != 0:
            rec["stderr"] = res.stderr[-2000:]
    except Exception as exc:  # noqa: BLE001 - evidence is best effort; the run's outcome does not depend on it
        rec = {"argv": list(argv), "rc": None, "at": at, "text": "", "error": str(exc)[:500]}
    if env:
        rec["env"] = dict(env)
    return rec


def squeue_entries(text: str, job_ids: list[str], at: float) -> dict[str, dict]:
    """``squeue --json`` text -> {job_id: {"at", "doc"}} holding only that job's entry (22.05 lists
    every job whatever --jobs says, and one poll asks for several runs' jobs at once)."""
    try:
        doc, _ = json.JSONDecoder().raw_decode(text or "", max(0, (text or "").find("{")))
    except (ValueError, RecursionError):
        return {}
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list):
        return {}
    meta = {k: v for k, v in doc.items() if k != "jobs"}
    out = {}
    for j in jobs:
        jid = str(j.get("job_id")) if isinstance(j, dict) else ""
        if jid in job_ids:
            out[jid] = {"at": at, "doc": {**meta, "jobs": [j]}}
    return out


def node_record(t: Transport, node: str, when: str) -> dict:
    """``scontrol show node -o NODE`` (epoch times) at one moment of a lost-node fault."""
    rec = command(t, ["scontrol", "show", "node", "-o", node], env=TIME_ENV, timeout=30)
    return {"node": node, "when": when, **rec}


def image(cfg: Slurm, docker: dict | None, docker_run) -> dict:
    """Which image the ranks ran in, as far as the harness can know it."""
    nodes = sorted(((docker or {}).get("nodes") or {}).values())
    if nodes and cfg.container == "none":
        argv = ["docker", "inspect", "--format", "{{.Config.Image}}|{{.Image}}", nodes[0]]
        try:
            p = docker_run(argv, capture_output=True, text=True, timeout=30)
            ref, _, iid = p.stdout.strip().partition("|")
            if p.returncode == 0 and iid:
                return {"ref": ref, "id": iid, "source": f"docker inspect {nodes[0]} (local cluster's compute node)"}
        except Exception:  # noqa: BLE001,S110 - falls through to what the config says
            pass
    if cfg.container != "none":
        return {"ref": cfg.container_image, "id": None,
                "source": f"slurm.container_image ({cfg.container}; digest not resolved on the cluster)"}
    return {"ref": "host python", "id": None, "source": f"slurm.python={cfg.python} on the compute nodes"}


def gather(t: Transport, sched, handle, acct: dict, first_submit: int | None, squeue: dict | None,
           img: dict) -> dict:
    """Collect time: read what is left to read (the batch clock file through the files transport
    ``t``, a still-lost node and the accounting JSON through the scheduler ``sched``) and assemble
    ``raw`` with what observe/inject/submit kept. ``acct`` is the raw record of the attempts collect
    already parsed (scheduler.py: ``attempts``)."""
    job_id, rdir = str(handle.data["job_id"]), handle.data["run_dir"]
    clock = f"{rdir}/{CLOCK_FILE}"
    alloc = command(t, ["sh", "-c", 'cat "$1"', "sh", clock])
    nodes = handle.data.setdefault("node_records", [])
    for host in handle.data.get("lost_nodes") or []:   # still down: how slurmctld marked it
        nodes.append(sched.node_record(host, "collect"))
    return {
        "format": FORMAT, "job_id": job_id,
        "sacct_json": acct["sacct_json"] if "sacct_json" in acct else sched.accounting_record(job_id),
        **({"sacct_parsable": acct["sacct_parsable"]} if "sacct_parsable" in acct else {}),
        "squeue": squeue,
        "alloc_evidence": {"path": clock, **alloc},
        # the same list as handle.data["node_records"]: cancel() appends the record taken once the
        # node is back, so a raw file written after cancel holds it too
        "nodes": nodes,
        "submit": {"before": handle.submitted_at, "after": handle.data.get("submit_returned_at"),
                   "scheduler_record": first_submit},
        "image": dict(img)}
