"""Slurm: submit with sbatch, observe in one command per poll, faults through the transport.

One poll of any number of runs is one command on the login node: squeue --json for their jobs (at
most once a second) and the bytes their event files gained since the last poll (eventfiles.py);
sacct -P only for jobs squeue no longer knows. A lose_node fault is written to the run's in-flight
record before the node goes, and cancel() brings back whatever that record names.

Scheduler operations go through ``self.sched`` (scheduler.py): Slurm's commands over the transport
(local, ssh), or slurmrestd with a JWT (``slurm.transport: rest``, rest.py). File operations (the run
directory, event files, outputs, srun for kill_rank) go through ``self.t``, which for rest is the
files channel (files.py: ssh to a login node, or a local mount); its job states are then a request
of their own each second, beside the event-file command.

Where the numbers come from (Slurm's own clocks, epoch seconds):
* queue: ``submitted`` = Submit of the first attempt, ``allocated`` = Start of the first attempt
  (squeue --json while it runs; sacct -D -X -P afterwards). Per-attempt rows (requeues) are in
  ``Collected.attempts``, each with submitted/eligible/allocated/ended.
* startup and recovery come from the workload's events (harness/metrics.py).
* The settings that shape these numbers (``scontrol show config``: SchedulerParameters, AuthInfo
  cred_expire, SlurmctldTimeout, the Slurm version...) are returned by preflight() and stored
  with every run.
* Raw evidence: collect() returns ``Collected.raw`` (records.py: sacct -D JSON and -P text for every
  attempt, the last squeue entry, the batch script's sub-second clock lines, node records around a
  lost node, the submit bracket, the image); harness/evidence/slurm.py derives the time-stamps from it.
"""
from __future__ import annotations

import json
import logging
import subprocess
import time

from ... import events as evmod
from ... import slurm_parse as sp
from ...config import Config, Slurm
from ...errors import BackendError, CommandError, SubmitError, TransportError
from ...render.local import workload_script
from ...render.sbatch import job_name, render_sbatch
from ...spec import JobSpec, campaign_dir
from ...states import JobState
from ...transports import Transport
from .. import identity
from ..base import (
    Backend,
    Collected,
    FaultRecord,
    Handle,
    Journal,
    Observation,
    Rendered,
    keep_reason,
    no_journal,
    require_destructive_allowed,
)
from . import connect, gpus, guard, partition_fit, records
from . import eventfiles as ef
from .scheduler import CliScheduler, Scheduler, counting

log = logging.getLogger(__name__)
_TAIL_OUTPUTS = 'for f in "$1"/slurm-*.out; do [ -f "$f" ] && { echo "==> $f"; tail -c 200000 "$f"; }; done; true'
_RUNNING_OR_AFTER = {JobState.STARTING, JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED,
                     JobState.CANCELLED, JobState.TIMEOUT}


# slurm.conf's settings on when Slurm itself requeues a batch job (scontrol show config)
REQUEUE_SETTINGS = ("JobRequeue", "RequeueExit", "RequeueExitHold", "MaxBatchRequeue")


def recovery_settings(cfg: Slurm, conf: dict[str, str]) -> dict:
    """How a failed run of this harness restarts on Slurm: never inside its allocation (torchrun runs with
    --max_restarts=0); the batch script requeues its own job (scontrol requeue) after a failed srun while
    SLURM_RESTART_COUNT < slurm.max_restarts, and sbatch --requeue lets Slurm requeue it after a node
    failure; with the slurm.conf settings on requeueing as scontrol show config printed them."""
    # slurm.extra_sbatch cannot undo the script's --requeue (its allow-list has no --no-requeue)
    return {"restart": "requeue", "max_restarts": cfg.max_restarts, "torchrun_max_restarts": 0,
            "by": "the batch script's scontrol requeue after a failed srun; sbatch --requeue for a node failure",
            **{k: conf.get(k) for k in REQUEUE_SETTINGS}}


def owner_mark(data: dict) -> str:
    """The owner mark a handle's directories hold: "owner_mark" (spec.owner_mark); a handle journalled
    before marks were keyed has only "owner", which was then the mark itself."""
    return data.get("owner_mark") or data.get("owner") or ""


class SlurmBackend(Backend):
    platform = "slurm"
    # One poll is one command over the transport: squeue and every run's new event bytes. Over ssh to
    # the local cluster it costs 50-70 ms, nearly all of it the round trip any command pays (a bare
    # `true` takes ~48 ms). Every 0.25 s, a poll starts every ~0.3 s and the observation latency's
    # p95 is ~0.3 s, under the 0.5 s target (benchmarks/observation_latency.py).
    poll_s = 0.25
    squeue_every_s = 1.0   # job states are asked of slurmctld at most this often; event files every poll

    def __init__(self, cfg: Slurm, transport: Transport, docker: dict | None = None,
                 query_budget: int = 5, docker_runner=subprocess.run, clock=time.monotonic, sleep=time.sleep,
                 scheduler: Scheduler | None = None, allow_destructive_faults: bool = False, gpus_per_node: int = 0,
                 most_nodes: int = 0):
        self.cfg = cfg
        self.gpus_per_node = gpus_per_node   # resources.gpus_per_node: preflight checks the nodes can hold it
        self.most_nodes = most_nodes         # the campaign's largest job: preflight checks its partition has them
        self.allow_destructive_faults = allow_destructive_faults   # the config's opt-in, checked again at inject
        self.sched = scheduler or CliScheduler(transport)   # slurmctld/slurmdbd: the CLI, or slurmrestd
        # files: the run directory, event files, outputs (and srun for kill_rank); its commands are
        # counted with the scheduler's, as what the run asked of the cluster
        self.t = counting(transport, self.sched.calls)
        self.docker = docker or None   # the local Docker cluster's container names, for node faults
        self.query_budget = query_budget
        self._failed_queries = 0
        self._docker_run = docker_runner
        self._clock, self._sleep = clock, sleep
        self._files: dict[str, ef.RunFiles] = {}
        self._jobs: dict[str, sp.SlurmJob] = {}     # the last squeue/sacct answer per job id
        self._jobs_at = float("-inf")
        self._first: dict[str, dict] = {}
        self._commands = 0                          # commands sent so far: what a poll costs, with its time
        self._polls: dict[str, dict] = {}           # run_id -> what watching it cost, kept with the run
        self._squeue: dict[str, dict] = {}          # job id -> the last squeue --json entry seen (raw evidence)
        self._image: dict | None = None
        self._identity: dict | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_config(cls, cfg: Config) -> SlurmBackend:
        return connect.build(cls, cfg)

    # ------------------------------------------------------------------ helpers
    def _q(self, argv, *, env=None, timeout=60, input=None):
        """A query that may fail a few times in a row before the run gives up."""
        return self._ask(self.t.run, argv, env=env, timeout=timeout, input=input, check=True)

    def _ask(self, fn, *args, **kw):
        """fn(*args, **kw) as a budgeted query: None when it failed and the budget is not spent."""
        self._commands += 1
        try:
            res = fn(*args, **kw)
        except (TransportError, CommandError) as exc:
            self._failed(exc)
            return None
        self._failed_queries = 0
        return res

    def _failed(self, exc: TransportError) -> None:
        self._failed_queries += 1
        if self._failed_queries > self.query_budget:
            raise exc

    def _put(self, path: str, text: str, mode: str = "644") -> None:
        self.t.run(["sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1" && chmod "$2" "$1"', "sh", path, mode],
                   input=text, timeout=60)

    # ------------------------------------------------------------------ interface
    def render(self, spec: JobSpec) -> Rendered:
        job = render_sbatch(spec, self.cfg)
        files = {"job.sbatch": job.script}
        if self.cfg.transport == "rest":   # what slurmrestd is sent: the script's #SBATCH lines as JSON
            from .jobdesc import job_description

            files["job.rest.json"] = json.dumps(job_description(job.script, job.run_dir), indent=2) + "\n"
        return Rendered("slurm", files, payload=job)

    def preflight(self) -> dict:
        ver = self.sched.version()
        conf = self.sched.settings()
        self._identity = identity.slurm_identity(conf)
        if self.cfg.partition:
            parts = self.sched.partitions()
            if self.cfg.partition not in parts:
                raise BackendError(f"Slurm partition {self.cfg.partition!r} does not exist "
                                   f"(partitions: {', '.join(parts) or 'none'})",
                                   tip="set slurm.partition to one of them, or null for the default")
        nodes = self.sched.nodes()
        node_gpus = gpus.preflight_check(self.t, self.gpus_per_node, self.cfg.gpu_type, self.cfg.partition)
        fit = partition_fit.check(self.t, self.most_nodes, self.cfg.partition)
        version = ".".join(map(str, sp.parse_version(ver))) or ver[:80]
        return {"scheduler": "slurm", "scheduler_version": version,
                "slurm_settings": sp.timing_settings(conf), "transport": self.sched.describe(),
                "nodes": nodes, "torchrun_max_restarts": 0, "slurm_recovery": recovery_settings(self.cfg, conf),
                **({"node_gpus": node_gpus} if node_gpus else {}), **({"partition_nodes": fit} if fit else {})}

    def submit(self, spec: JobSpec, rendered: Rendered) -> Handle:
        job = rendered.payload
        # as preflight read it: asking here would add a command to what a user's submit costs (ux probes
        # count them); a backend that skipped preflight records none, and is then not compared
        cluster = self._identity
        # a resumed campaign re-runs from scratch; a directory another campaign (or user) owns is left alone
        mark = spec.owner_mark
        guard.prepare_run_dir(self.t, job.run_dir, mark)
        ckpt = guard.own_checkpoint_dir(self.cfg.checkpoint_dir, job.ckpt_dir, campaign_dir(spec.campaign, spec.owner),
                                        spec.run_id)
        try:
            if ckpt:
                guard.prepare_checkpoint_dir(self.t, ckpt, mark)
            self._put(job.workload_path, workload_script().read_text())
            self._put(f"{job.run_dir}/job.sbatch", job.script, "755")
        except BackendError:   # a checkpoint root the user cannot write: nothing was submitted, nothing stays
            self._drop_run_dir(job.run_dir, mark)
            raise
        submitted = time.time()
        try:
            job_id = self.sched.submit(job.script, job.run_dir)
        except SubmitError as exc:   # an impossible GPU request: say what the nodes have
            # nothing will run in the run directory: it goes (the rendered files are in the results)
            self._drop_run_dir(job.run_dir, mark)
            raise gpus.explain_refusal(exc, self.t, spec.gpus_per_node, self.cfg.gpu_type, self.cfg.partition) from exc
        returned = time.time()   # with `submitted`, brackets the instant slurmctld took the job
        self._files[spec.run_id] = ef.RunFiles(job.events_dir)   # a resumed run starts over
        self._first.pop(spec.run_id, None)
        return Handle("slurm", spec.run_id, [job_id], submitted,
                      data={"job_id": job_id, "run_dir": job.run_dir, "events_dir": job.events_dir,
                            "campaign": spec.campaign, "owner": spec.owner, "owner_mark": mark, "cluster": cluster,
                            "lost_nodes": [], "submit_returned_at": returned, **({"ckpt_dir": ckpt} if ckpt else {})})

    def _drop_run_dir(self, run_dir: str, mark: str) -> None:
        """The run directory of a submit that failed; the failure stays the error to report, what stayed is logged."""
        try:
            guard.remove_run_dir(self.t, run_dir, mark)
        except BackendError as left:
            log.warning("%s", left.message)

    def cluster_identity(self) -> dict | None:
        """What the handles recorded, asked again when preflight has not run (cleanup, --resume)."""
        if self._identity is None:
            self._identity = identity.slurm_identity(self.sched.settings())
        return self._identity

    def _look(self, job_ids: list[str], runs: list[ef.RunFiles]) -> ef.Look | None:
        """One command: squeue for job_ids (if any) and the new bytes of every run's event files."""
        nonce = ef.new_nonce()
        combined = self.sched.combined_look
        res = self._q(ef.argv(nonce, job_ids if combined else [], runs), timeout=60)
        look = None if res is None else ef.parse(res.stdout, nonce, len(runs))
        if job_ids and not combined:   # slurmrestd: the job states are a request of their own
            asked = self._ask(self.sched.squeue, job_ids)
            look = look or ef.Look()
            look.squeue, look.squeue_stderr = (None, "") if asked is None else ((asked[0], asked[1]), asked[2])
        return look

    def _update_jobs(self, ids: list[str], look: ef.Look) -> None:
        """squeue's answer from the look; sacct -P (all attempts) for the jobs squeue no longer knows."""
        rc, out = look.squeue or (-1, "")
        found = {j.job_id: j for j in sp.squeue_json(out)} if rc == 0 else {}
        if rc == 0:
            self._squeue.update(records.squeue_entries(out, ids, time.time()))
        if rc != 0:
            self._failed(CommandError(["squeue", "--json", "--jobs=" + ",".join(ids)], rc, out, look.squeue_stderr))
        missing = [i for i in ids if i not in found]
        if missing:
            rows = self._ask(self.sched.accounting, missing)
            if rows is not None:
                found.update((j.job_id, j) for j in rows)
        for i in ids:   # a job neither knows any more is unknown, not in its last state
            self._jobs.pop(i, None)
        self._jobs.update(found)
        self._jobs_at = self._clock()

    def _times(self, h: Handle, j: sp.SlurmJob | None) -> dict:
        first = self._first.setdefault(h.run_id, {})
        if j is not None:
            if j.submit and "submitted" not in first:
                first["submitted"] = float(j.submit)
            if j.eligible and "eligible" not in first:
                first["eligible"] = float(j.eligible)
            if j.start and j.state in _RUNNING_OR_AFTER and "allocated" not in first:
                first["allocated"] = float(j.start)
        times = dict(first)
        if j is not None and j.state.terminal and j.end:
            times["ended"] = float(j.end)
        return times

    def observe(self, handles: list[Handle]) -> dict[str, Observation]:
        t0, c0 = time.perf_counter(), self._commands
        out = self._observe(handles)
        t1 = time.perf_counter()
        for h in handles:
            p = self._polls.setdefault(h.run_id, {"count": 0, "seconds": 0.0, "commands": 0, "first": t0})
            p.update(count=p["count"] + 1, seconds=p["seconds"] + t1 - t0, commands=p["commands"] + self._commands - c0,
                     last=t0)
        return out

    def _observe(self, handles: list[Handle]) -> dict[str, Observation]:
        ids = [str(h.data["job_id"]) for h in handles]
        runs = []
        for h in handles:
            rf = self._files.get(h.run_id)
            if rf is None or rf.dir != h.data["events_dir"].rstrip("/"):
                rf = self._files[h.run_id] = ef.RunFiles(h.data["events_dir"])
            runs.append(rf)
        ask = any(i not in self._jobs for i in ids) or self._clock() - self._jobs_at >= self.squeue_every_s
        look = self._look(ids if ask else [], runs)
        new: dict[int, list[dict]] = {}
        if look is not None:
            for c in look.chunks:
                new.setdefault(c.run, []).extend(runs[c.run].take(c))
            if ask and (look.squeue is not None or self.sched.combined_look):   # a failed request was counted
                self._update_jobs(ids, look)
        out = {}
        for i, h in enumerate(handles):
            j = self._jobs.get(ids[i])
            events = new.get(i, [])
            if j is None:
                out[h.run_id] = Observation(JobState.UNKNOWN, events=events, times=self._times(h, None),
                                            native_state="not found", reason="squeue and sacct do not know the job")
                continue
            out[h.run_id] = Observation(j.state, events=events, times=self._times(h, j),
                                        native_state=j.native_state + ("+" + ",".join(j.flags) if j.flags else ""),
                                        reason=j.reason if j.reason not in ("None", "") else "")
        return out

    # ------------------------------------------------------------------ what a user reads, the platform's records
    def user_view(self, handle: Handle) -> list[dict]:
        from .userview import view
        return view(self, handle)

    def audit_evidence(self, handle: Handle) -> dict:
        from .auditlog import gather
        return gather(self, handle)

    def call_counts(self) -> dict[str, int]:
        return dict(self.sched.calls)

    @staticmethod
    def _still_alone(handle: Handle, shell, job_id: str, host: str, journal: Journal) -> float:
        """The node's exclusivity asked again just before it goes (guard.alone_on); when another job
        has landed, the journal forgets the node (nothing was done to it) and the fault is refused.
        Returns when the check was asked."""
        at = time.time()
        try:
            guard.alone_on(shell, job_id, host)
        except BackendError:
            handle.data["lost_nodes"] = [n for n in handle.data.get("lost_nodes", []) if n != host]
            handle.data.get("stopped_containers", {}).pop(host, None)
            journal(handle)
            raise
        return at

    def supported_faults(self) -> set[str]:
        return set(self.sched.faults)   # what the transport allows: capabilities.faults("slurm", shell=...)

    def inject(self, handle: Handle, kind: str, target_event: dict, journal: Journal = no_journal) -> FaultRecord:
        job_id = handle.data["job_id"]
        # the node as Slurm names it: the workload's events carry SLURMD_NODENAME (`node`), which srun --nodelist
        # and scontrol take; the host name the rank saw may be an FQDN or another name altogether. Events written
        # before `node` was added name the host only.
        host = str(target_event.get("node") or target_event.get("host") or "")
        target = {k: target_event.get(k) for k in ("rank", "host", "node", "pid", "attempt", "step")}
        if kind == "kill_rank":
            pid = int(target_event["pid"])
            argv = ["srun", f"--jobid={job_id}", "--overlap", "--nodes=1", "--ntasks=1", f"--nodelist={host}",
                    "kill", "-9", str(pid)]
            t = time.time()
            self.t.run(argv, timeout=60)
            return FaultRecord(kind, t, target, {"signal": "SIGKILL", "via": "srun --overlap", "node": host},
                               acted_at=time.time())
        if kind == "lose_node":
            require_destructive_allowed(kind, self.allow_destructive_faults, "slurm")
            if not host:
                raise BackendError("lose_node: the triggering event names no host")
            # only a node this job holds, and holds alone (guard.py); Slurm's own name for it from here on
            shell = self.t if self.sched.name == "cli" else getattr(self.sched, "shell", None)
            host = guard.held_node(self.sched, shell, str(job_id), host)
            container = (self.docker or {}).get("nodes", {}).get(host)
            # On disk before the node goes: after a crash from here on, cancel() at --resume brings it back.
            lost = handle.data.setdefault("lost_nodes", [])
            if host not in lost:
                lost.append(host)
            if container:
                handle.data.setdefault("stopped_containers", {})[host] = container
            # the node as slurmctld saw it just before it went (raw evidence; collect adds it once down)
            handle.data.setdefault("node_records", []).append(self.sched.node_record(host, "inject"))
            journal(handle)
            checked = self._still_alone(handle, shell, str(job_id), host, journal)
            t = time.time()
            if container:
                self._docker(["docker", "kill", container])
                return FaultRecord(kind, t, target, {"how": "docker kill of the node's container", "node": host,
                                                      "container": container, "alone_checked_at": checked},
                                   acted_at=time.time())
            self.sched.set_node_state(host, "down", guard.lost_node_mark(str(job_id)))
            return FaultRecord(kind, t, target, {"how": f"{self._node_update} state=down (needs operator rights)",
                                                 "node": host, "alone_checked_at": checked}, acted_at=time.time())
        if kind == "requeue":
            t = time.time()
            self.sched.requeue(job_id)
            return FaultRecord(kind, t, target, {"how": "scontrol requeue"}, acted_at=time.time())
        raise BackendError(f"fault {kind!r} is not available on Slurm", tip="use kill_rank, lose_node or requeue")

    @property
    def _node_update(self) -> str:
        return "scontrol update" if self.sched.name == "cli" else "slurmrestd POST node"

    def _docker(self, argv: list[str]) -> None:
        p = self._docker_run(argv, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            raise BackendError(f"{' '.join(argv)} failed: {p.stderr.strip()}")

    def _restore_nodes(self, handle: Handle) -> None:
        from .nodes import restore_lost_nodes
        restore_lost_nodes(self.sched, handle, self.docker, self._docker, self._docker_run, self._clock,
                           self._sleep)

    def _read_events(self, handle: Handle) -> list[dict]:
        """Every event in the run's files, from the start (the job has ended: a last line without its
        newline is taken if it parses)."""
        rf = ef.RunFiles(handle.data["events_dir"])
        nonce = ef.new_nonce()
        res = self._q(ef.argv(nonce, [], [rf]), timeout=120)
        events: list[dict] = []
        for c in ef.parse(res.stdout if res is not None else "", nonce, 1).chunks:
            events += rf.take(c)
            events += rf.unseen(evmod.parse_lines([c.text[c.text.rfind("\n") + 1:]]))
        return events

    def collect(self, handle: Handle) -> Collected:
        job_id = handle.data["job_id"]
        rdir = handle.data["run_dir"]
        events = evmod.dedupe(self._read_events(handle))
        rows, acct = self.sched.attempts(job_id)
        attempts = [{"job_id": r.job_id, "state": r.native_state, "submitted": r.submit, "eligible": r.eligible,
                     "allocated": r.start, "ended": r.end, "nodes": r.nodes, "exit_code": r.exit_code}
                    for r in rows]
        times = dict(self._first.get(handle.run_id, {}))
        if rows:
            times.setdefault("submitted", float(rows[0].submit) if rows[0].submit else None)
            if rows[0].start:
                times.setdefault("allocated", float(rows[0].start))
            if rows[-1].end and rows[-1].state.terminal:
                times["ended"] = float(rows[-1].end)
        times = {k: v for k, v in times.items() if v is not None}
        logs = {}
        out = self.t.run(["sh", "-c", _TAIL_OUTPUTS, "sh", rdir], timeout=60, check=False)
        if out.stdout:
            logs["slurm.out"] = out.stdout
        p = self._polls.get(handle.run_id)
        polls = p and {"count": p["count"], "seconds": round(p["seconds"], 3), "commands": p["commands"],
                       "interval_s": round((p["last"] - p["first"]) / max(1, p["count"] - 1), 3)}
        info = {"job_id": job_id, "run_dir": rdir, "sacct_rows": len(rows), "polls": polls,
                "final_state": rows[-1].native_state if rows else None}
        raw = self._raw(handle, acct, rows)
        return Collected(events=events, times=times, attempts=attempts, logs=logs, info=info, raw=raw)

    def _raw(self, handle: Handle, acct: dict, rows: list[sp.SlurmJob]) -> dict:
        if self._image is None:
            self._image = records.image(self.cfg, self.docker, self._docker_run)
        return records.gather(self.t, self.sched, handle, acct, rows[0].submit if rows else None,
                              self._squeue.get(str(handle.data["job_id"])), self._image)

    def intent(self, spec: JobSpec, rendered: Rendered) -> Handle:
        job = rendered.payload
        return Handle("slurm", spec.run_id, [], time.time(),
                      data={"intent": True, "job_name": job_name(spec.run_id), "run_dir": job.run_dir,
                            "campaign": spec.campaign, "owner": spec.owner, "owner_mark": spec.owner_mark,
                            "cluster": self._identity, "lost_nodes": []})

    def cancel(self, handle: Handle) -> None:
        ids = list(handle.ids)
        if not ids and handle.data.get("intent"):   # the id never reached the journal: find the job
            ids = self.sched.find_jobs(handle.data["job_name"], handle.data["run_dir"])
        if ids:
            self.sched.cancel(ids)
        self._restore_nodes(handle)

    def cleanup(self, handle: Handle, ok: bool, keep: str) -> dict:
        """The run directory (script, workload, event files, outputs, checkpoints) and the run's directory
        under slurm.checkpoint_dir: removed once the run is collected, unless keep_run_files keeps them.
        Only <root>/<campaign>/<run_id> (guard.py), and only while its owner mark is the run's and it is
        this user's (render/owned_dir.py)."""
        d = handle.data
        rdir, ckpt = d.get("run_dir", ""), d.get("ckpt_dir") or ""
        if (why := keep_reason(ok, keep)) is not None:
            return {"removed": [], "kept": [p for p in (rdir, ckpt) if p], "reason": why}
        owner, campaign = d.get("owner", ""), d.get("campaign", "")
        mark = owner_mark(d)
        paths = [guard.run_dir_to_remove(rdir, self.cfg.workdir, campaign_dir(campaign, owner), handle.run_id)]
        if ckpt:
            paths.append(guard.own_checkpoint_dir(self.cfg.checkpoint_dir, ckpt, campaign_dir(campaign, owner),
                                                  handle.run_id))
        removed, kept = [], []
        for path in paths:
            (removed if guard.remove_run_dir(self.t, path, mark) else kept).append(path)
        if kept:
            return {"removed": removed, "kept": kept, "reason": "its owner mark is not this campaign's"}
        return {"removed": removed, "kept": []}
