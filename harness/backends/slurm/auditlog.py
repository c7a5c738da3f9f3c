"""Slurm's own records of one run, read after it ended and was cancelled: who submitted it, what,
when, where, what it used, how it ended and who cancelled it (``raw["audit"]``; answered by
``harness.audit.slurm``).

* accounting (slurmdbd), as the job's user reads it: ``sacct -D -P`` with the fields below, for
  the job and its steps, every attempt; read after cancel, so a cancel shows as ``CANCELLED by
  <uid>``. The collect-time ``sacct --json`` is already in ``raw["sacct_json"]`` (records.py) and is
  not read again.
* the batch script as slurmdbd kept it (``sacct --batch-script``; kept only with
  ``AccountingStoreFlags=job_script``), with its sha256 as read (redaction may alter the stored copy);
* ``getent passwd`` for the uids the records name (the canceller is a uid);
* slurmctld's log lines that name the job (``JobId=<id>``: submit, allocation, kill request with the
  requester's uid, completion): on the project's local Slurm-in-Docker cluster read as its admin with
  ``docker exec`` on the controller container; elsewhere from ``slurm.controller_log`` through the
  transport when set and readable; otherwise recorded as not read, with why.

Nothing here raises: a failed read is recorded (``records.command``) and the answer says so.
"""
from __future__ import annotations

import hashlib
import re
import time

from .records import TIME_ENV, command

FORMAT = "slurm-audit/1"
FIELDS = ("JobID", "User", "UID", "Account", "QOS", "Partition", "NodeList", "NNodes", "Elapsed", "ElapsedRaw",
          "State", "ExitCode", "DerivedExitCode", "AllocTRES", "Submit", "Start", "End", "SubmitLine", "WorkDir",
          "JobName")
LOCAL_CTLD_LOG = "/var/log/slurm/slurmctld.log"   # SlurmctldLogFile of the local cluster's slurm.conf
MAX_LOG_LINES = 300
_BY_UID = re.compile(r"\bby (\d+)\b")
_LOG_UID = re.compile(r"\buid[ =](\d+)\b")


def gather(backend, handle) -> dict:
    """raw["audit"] for one Slurm run (backend: a SlurmBackend; handle: the run's Handle)."""
    job_id = str(handle.data["job_id"])
    shell = _shell(backend)
    out: dict = {"format": FORMAT, "job_id": job_id, "read_at": time.time()}
    if shell is None:
        out["note"] = "no command channel to a login node (slurmrestd with a local files mount): sacct not run"
    else:
        out["reader"] = command(shell, ["id", "-un"], timeout=30)   # whose view of the records this is
        out["sacct"] = command(shell, ["sacct", "-D", "-P", "-j", job_id, "-o", ",".join(FIELDS)], env=TIME_ENV)
        out["batch_script"] = _script(command(shell, ["sacct", "-j", job_id, "--batch-script"]))
        controller = (backend.docker or {}).get("controller")
        if not out["batch_script"]["text"].strip() and controller:
            # slurmdbd gives a user its own scripts only when it has a user record (association) for
            # them; where it has none, the local cluster's admin reads it (and the answer says so)
            argv = ["docker", "exec", controller, "sacct", "-j", job_id, "--batch-script"]
            out["batch_script_admin"] = {**_script(_docker_read(backend, argv)),
                                         "source": f"docker exec {controller} (the local cluster's admin)"}
    out["controller_log"] = controller_log(backend, job_id)
    uids = sorted(set(_BY_UID.findall((out.get("sacct") or {}).get("text", "")))
                  | {u for line in out["controller_log"].get("lines") or [] for u in _LOG_UID.findall(line)})
    if uids and shell is not None:
        out["getent"] = command(shell, ["getent", "passwd", *uids], timeout=30)
    return out


def _script(rec: dict) -> dict:
    """The --batch-script record with the script's size and sha256 as read (redaction may alter the stored text)."""
    text = rec.get("text") or ""
    return {**rec, "sha256": hashlib.sha256(text.encode()).hexdigest() if text else None,
            "lines": len(text.splitlines())}


def _shell(backend):
    """The channel that runs Slurm's commands as the run's user: the CLI scheduler's transport, or with
    slurmrestd the files channel when it is a shell on a login node (ssh), else None."""
    sched = backend.sched
    if sched.name == "cli":
        return sched.t
    t = getattr(sched, "shell", None) or backend.t
    return t if getattr(t, "name", "") in ("ssh", "local") else None


def controller_log(backend, job_id: str) -> dict:
    """slurmctld's log lines naming the job, from its latest submission on (a job id recurs when the
    controller's state is reset), or why they were not read."""
    pattern = f"JobId={job_id}([^0-9]|$)"
    configured = getattr(backend.cfg, "controller_log", None)
    docker = backend.docker or {}
    if configured:
        rec = command(backend.t, ["grep", "-E", "--", pattern, configured])
        source = f"slurmctld log {configured} (slurm.controller_log, read through the transport as the run's user)"
    elif docker.get("controller"):
        argv = ["docker", "exec", docker["controller"], "grep", "-E", "--", pattern, LOCAL_CTLD_LOG]
        rec = _docker_read(backend, argv)
        source = (f"slurmctld log {LOCAL_CTLD_LOG} (docker exec {docker['controller']}: the local cluster's "
                  "controller, read as its admin)")
    else:
        return {"readable": False, "source": "slurmctld log",
                "note": "not read: slurm.controller_log is not set and this is not the project's local cluster; "
                        "SlurmctldLogFile is normally readable only by SlurmUser/root on the controller: "
                        "ask the cluster admin"}
    # grep exits 1 when nothing matched (readable, no line), 2 when the file could not be read
    readable = rec.get("rc") in (0, 1)
    out = {"readable": readable, "source": source, **{k: v for k, v in rec.items() if k != "text"}}
    if readable:
        lines = rec["text"].splitlines()
        starts = [i for i, ln in enumerate(lines) if "_slurm_rpc_submit_batch_job" in ln]
        out["lines"] = lines[starts[-1] if starts else 0:][-MAX_LOG_LINES:]
    else:
        why = (rec.get("stderr") or rec.get("error") or "").strip()[:300]
        out["note"] = f"slurmctld's log could not be read: {why}"
    return out


def _docker_read(backend, argv: list[str]) -> dict:
    at = time.time()
    try:
        p = backend._docker_run(argv, capture_output=True, text=True, timeout=60)
        rec = {"argv": argv, "rc": p.returncode, "at": at, "text": p.stdout}
        if p.returncode not in (0, 1):
            rec["stderr"] = p.stderr[-2000:]
        return rec
    except Exception as exc:  # noqa: BLE001 - evidence is best effort; the answer says it was not read
        return {"argv": argv, "rc": None, "at": at, "text": "", "error": str(exc)[:500]}
