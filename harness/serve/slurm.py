"""Serving on Slurm the way a Slurm user would: PlatformServe (harness/serve/base.py).

* Hosting: one batch job per replica (harness/render/serving_sbatch.py): one node, ``--requeue``,
  the server under ``srun`` in the script's own restart loop, reading the training run's checkpoint
  directory. The scripts are shipped into ``<training run dir>/serve/`` like the workload is.
* Discovery: the job's node from ``squeue``, the node's address from ``scontrol show node``
  (NodeAddr; a name is resolved on the login node with ``getent``, as a user there would), the port
  from the server's ``serve_listening`` event in ``serve/events/<job id>/``. Asked every second by
  the harness's balancer (harness/serve/balancer.py), which clients post to.
* Faults: kill_server sends SIGKILL to the server's current srun step (``scancel --signal=KILL
  <job>.<step>``, the step found with ``squeue --steps``): the python process dies, srun exits 137
  and the loop starts a new step. lose_node is the backend's node-loss fault on the replica's node
  (only a node the job holds alone); restore brings it back as the backend does after such a run.

Every command runs over the backend's files transport as the cluster's user. The balancer's
discovery thread and the session's thread both use it, so every use here holds ``self._lock``.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .. import data
from ..backends.base import Handle
from ..backends.slurm import guard
from ..backends.slurm.records import TIME_ENV, command
from ..errors import BackendError, CommandError, TransportError
from ..render import serving_sbatch as rs
from ..render.sbatch import ckpt_dir as train_ckpt_dir
from ..spec import JobSpec
from .balancer import Balancer
from .slurm_text import (
    _EVENT_FILES,
    current_step,
    event_files,
    first_ipv4,
    is_ip,
    listening,
    node_addr,
    parse_jobs,
)

_TAILS = 'cd "$1" && tail -c 100000 clock-*.txt slurm-*.out; true'
SACCT_FIELDS = "JobID,JobName,State,Submit,Start,End,NodeList,ExitCode,Restarts"


# ---------------------------------------------------------------- the platform's side
class SlurmServe:
    platform = "slurm"

    def __init__(self, backend, serve, *, refresh_s: float = 1.0, max_restarts: int = 20):
        self.b, self.serve = backend, serve
        self.refresh_s, self.max_restarts = refresh_s, max_restarts
        self._lock = threading.RLock()
        self.train: Handle | None = None
        self.spec: JobSpec | None = None
        self.jobs: list[dict] = []            # {"replica", "job_id", "script", "submitted", "submitted_after"}
        self._found: dict[str, dict] = {}     # job id -> the last discovery of it
        self._addr: dict[str, str] = {}       # node -> IPv4 address (dropped at restore: a node may come back new)
        self._changes: list[dict] = []        # discovery's history: each change of a job's endpoint
        self._faults: list[dict] = []
        self._lost: list[Handle] = []
        self.balancer: Balancer | None = None

    # -------------------------------------------------------------- plumbing
    @property
    def _shell(self):
        shell = self.b.t if self.b.sched.name == "cli" else getattr(self.b.sched, "shell", None)
        if shell is None:
            raise BackendError("serving on Slurm needs a shell on a login node (squeue --steps, scancel --signal)",
                               tip="use slurm.transport ssh or local, or slurm.rest.files: ssh")
        return shell

    def _run(self, argv: list[str], *, check: bool = True, env: dict | None = None, input: str | None = None):
        with self._lock:
            return self._shell.run(argv, check=check, env=env, input=input, timeout=60)

    @property
    def sdir(self) -> str:
        if self.train is None:
            raise BackendError("the serving job was not deployed", tip="report this as a harness bug")
        return rs.serve_dir(self.train.data["run_dir"])

    # -------------------------------------------------------------- deploy, scale
    def deploy(self, train: Handle, spec: JobSpec) -> dict:
        self.train, self.spec = train, spec
        put = 'mkdir -p "$(dirname "$1")" && cat > "$1" && chmod "$2" "$1"'
        self._run(["sh", "-c", put, "sh", f"{self.sdir}/{rs.SERVER_SCRIPT}", "644"],
                  input=data.text("serve", rs.SERVER_SCRIPT))
        job = self._submit(0)
        return {"submitted": job["submitted"], "submitted_after": job["submitted_after"],
                "how": [f"wrote {job['script']} (a --requeue batch job: srun of {rs.SERVER_SCRIPT} in a restart loop)",
                        f"sbatch --parsable {job['script']} -> job {job['job_id']}"],
                "objects": [f"job {job['job_id']}"], "job_id": job["job_id"],
                "ckpt_dir": self._ckpt_dir(), "serve_dir": self.sdir}

    def _ckpt_dir(self) -> str:
        return train_ckpt_dir(self.spec, self.b.cfg, self.train.data["run_dir"])

    def _submit(self, replica: int) -> dict:
        text = rs.render(self.spec, self.b.cfg, self.train.data["run_dir"], self._ckpt_dir(), replica,
                         max_restarts=self.max_restarts)
        path = rs.script_path(self.train.data["run_dir"], replica)
        with self._lock:
            self._run(["sh", "-c", 'cat > "$1" && chmod 755 "$1"', "sh", path], input=text)
            t0 = time.time()
            try:
                res = self._run(["sbatch", "--parsable", path])
            except CommandError as exc:
                raise BackendError(f"sbatch refused the serving job: {(exc.stderr or exc.stdout).strip()[:500]}",
                                   tip="check partition, account, qos and resources against `sinfo`") from None
            t1 = time.time()
            job_id = res.stdout.strip().split(";")[0]
            if not job_id.isdigit():
                raise BackendError(f"sbatch printed no job id for the serving job: {res.stdout!r}")
            job = {"replica": replica, "job_id": job_id, "script": path, "script_text": text,
                   "submitted": t0, "submitted_after": t1}
            self.jobs.append(job)
            # in the training run's handle too: whatever cancels that handle (a --resume after a crash,
            # once the pipeline journals it) scancels the serving jobs with it
            if job_id not in self.train.ids:
                self.train.ids.append(job_id)
        return job

    def scale(self, n: int) -> dict:
        asked, how = time.time(), []
        while len(self.jobs) < n:
            job = self._submit(len(self.jobs))
            how.append(f"sbatch --parsable {job['script']} -> job {job['job_id']} (another serving job; the "
                       "harness's balancer adds it once /readyz answers)")
        return {"asked": asked, "how": how or [f"{n} replicas already"], "jobs": [j["job_id"] for j in self.jobs]}

    # -------------------------------------------------------------- discovery
    def discover(self) -> dict[str, dict]:
        """One round, as a user would: squeue for the jobs' nodes, their addresses, the ports from the events."""
        with self._lock:
            ids = [j["job_id"] for j in self.jobs]
            if not ids:
                return {}
            try:
                q = self._run(["squeue", "-h", "-j", ",".join(ids), "-o", "%i|%T|%N|%r"], check=False)
                # every job ended and left slurmctld's memory: squeue says so with an error
                if q.returncode != 0 and "Invalid job id" not in q.stderr:
                    raise BackendError(f"squeue failed: {q.stderr.strip()[:300]}")
                jobs = parse_jobs(q.stdout)
                evs = event_files(self._run(["sh", "-c", _EVENT_FILES, "sh", self.sdir], check=False).stdout)
            except (BackendError, TransportError) as exc:
                # slurmctld busy with a lost node times out (seen: "slurm_load_jobs error: Socket timed out
                # on send/recv operation"): what a user sees too; keep the last answer and note it
                self._changes.append({"t": round(time.time(), 3), "error": str(exc)[:300]})
                return dict(self._found)
            found = {}
            for j in self.jobs:
                jid = j["job_id"]
                st = jobs.get(jid, {"state": "GONE", "node": None, "reason": ""})
                node = st["node"] if st["state"] == "RUNNING" else None
                ev = listening(evs.get(jid, []), node)
                addr = self._address(node) if ev else None
                found[jid] = {"replica": j["replica"], "job_id": jid, **st, "addr": addr,
                              "port": ev["port"] if ev else None, "pid": ev.get("pid") if ev else None,
                              "endpoint": f"{addr}:{ev['port']}" if ev and addr else None,
                              "listening_at": ev["ts_ns"] / 1e9 if ev and ev.get("ts_ns") else None}
                old = self._found.get(jid, {})
                if (old.get("endpoint"), old.get("state"), old.get("node")) != (found[jid]["endpoint"], st["state"],
                                                                                 st["node"]):
                    self._changes.append({"t": round(time.time(), 3), **found[jid]})
            self._found = found
            return found

    def _address(self, node: str) -> str | None:
        if node not in self._addr:
            addr = node_addr(self._run(["scontrol", "show", "node", "-o", node], check=False).stdout) or node
            if not is_ip(addr):   # NodeAddr is a name: resolve it where a user is, on the login node
                addr = first_ipv4(self._run(["getent", "ahostsv4", addr], check=False).stdout) or ""
            if not addr:
                return None
            self._addr[node] = addr
        return self._addr[node]

    def _endpoints(self) -> list[str]:
        return [f["endpoint"] for f in self.discover().values() if f["endpoint"]]

    def url(self, timeout_s: float) -> str:
        if self.balancer is None:
            self.balancer = Balancer(self._endpoints, refresh_s=self.refresh_s,
                                     request_timeout_s=float(getattr(self.serve, "request_timeout_s", 5)) + 5)
            self.balancer.start()
        end = time.monotonic() + timeout_s
        while not any(b["endpoint"] for b in self.balancer.backends()):
            if time.monotonic() > end:
                states = {j: f"{f['state']} {f['node'] or f['reason']}" for j, f in self._found.items()}
                raise BackendError(f"no serving job said where it listens within {timeout_s:g} s ({states})",
                                   tip=f"look at {self.sdir}/slurm-<job id>.out on the cluster")
            time.sleep(0.2)
        return self.balancer.url

    def networks(self) -> list[str]:
        nets = ["127.0.0.0/8"]   # the balancer
        docker = self.b.docker or {}
        for container in sorted(set((docker.get("nodes") or {}).values()))[:1]:
            p = self.b._docker_run(["docker", "inspect", container, "-f",
                                    "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}"],
                                   capture_output=True, text=True, timeout=30)
            for net in p.stdout.split() if p.returncode == 0 else []:
                q = self.b._docker_run(["docker", "network", "inspect", net, "-f",
                                        "{{range .IPAM.Config}}{{.Subnet}} {{end}}"], capture_output=True, text=True,
                                       timeout=30)
                nets += [s for s in q.stdout.split() if q.returncode == 0 and "." in s]
        with self._lock:   # a real cluster: the nodes' own addresses only
            nets += [f"{a}/32" for a in self._addr.values() if not docker]
        return list(dict.fromkeys(nets))

    def replicas(self) -> list[dict]:
        found = self.discover()
        health = {b["endpoint"]: b for b in (self.balancer.backends() if self.balancer else [])}
        out = []
        for f in found.values():
            h = health.get(f["endpoint"] or "")
            out.append({"name": f"job {f['job_id']}", "node": f["node"], "endpoint": f["endpoint"],
                        "ready": bool(h and h["healthy"]), "since": h["since"] if h and h["healthy"] else None,
                        "in_service": bool(h and h["healthy"]), "state": f["state"]})
        return out

    # -------------------------------------------------------------- faults
    def _target(self) -> dict:
        found = self.discover()
        for j in self.jobs:
            f = found.get(j["job_id"])
            if f and f["state"] == "RUNNING" and f["node"]:
                return f
        raise BackendError("no serving job is running to aim the fault at", tip="look at `squeue` on the cluster")

    def kill_server(self) -> dict:
        f = self._target()
        with self._lock:
            step = current_step(self._run(["squeue", "-h", "-s", "-j", f["job_id"], "-o", "%i"]).stdout, f["job_id"])
            if step is None:
                raise BackendError(f"serving job {f['job_id']} has no running srun step to kill",
                                   tip="the server is between restarts; try again")
            argv = ["scancel", "--signal=KILL", step]
            t = time.time()
            self._run(argv)
        rec = {"t": t, "replica": f"job {f['job_id']}", "node": f["node"], "step": step, "pid": f.get("pid"),
               "endpoint": f["endpoint"], "argv": argv,
               "how": f"scancel --signal=KILL {step} (the newest step in squeue --steps): SIGKILL to the server's "
                      "process; srun exits 137 and the batch script's loop starts a new step"}
        self._faults.append({"kind": "kill_server", **rec})
        return rec

    def lose_node(self, journal: Callable[[], None]) -> dict:
        f = self._target()
        h = Handle("slurm", f"{self.spec.run_id}-serve-{f['replica']}", [f["job_id"]], time.time(),
                   data={"job_id": f["job_id"], "lost_nodes": []})
        # the training run's handle names the node and the serving job's mark first, and is journalled
        # (as inject does for its own handle): whatever cancels that handle after a crash brings the node
        # back (backend.cancel -> _restore_nodes), and only while that mark is still the node's reason
        lost = self.train.data.setdefault("lost_nodes", [])
        container = (self.b.docker or {}).get("nodes", {}).get(f["node"])
        added = f["node"] not in lost
        if added:
            lost.append(f["node"])
            self.train.data.setdefault("lost_marks", {})[f["node"]] = guard.lost_node_mark(str(f["job_id"]))
            if container:
                self.train.data.setdefault("stopped_containers", {})[f["node"]] = container
        try:
            journal()
        except Exception:
            if added:
                self._forget(f["node"])
            raise
        with self._lock:
            try:
                fr = self.b.inject(h, "lose_node", {"host": f["node"]})
            except Exception:
                if added:
                    self._forget(f["node"])
                raise
            self._lost.append(h)
        rec = {"t": fr.injected_at, "node": f["node"], "replica": f"job {f['job_id']}", "endpoint": f["endpoint"],
               "how": fr.detail.get("how", ""), "detail": fr.detail}
        self._faults.append({"kind": "lose_node", **rec})
        return rec

    def restore(self) -> dict:
        restored = []
        with self._lock:
            for h in list(self._lost):
                nodes = list(h.data.get("lost_nodes") or [])
                self.b._restore_nodes(h)
                for n in nodes:
                    self._forget(n)
                restored += nodes
                self._lost.remove(h)
                self._faults.append({"kind": "restore", "t": time.time(), "nodes": nodes,
                                     "node_records": h.data.get("node_records", [])})
            self._addr.clear()   # a restarted container may have a new address
        return {"restored": restored}

    def _forget(self, node: str) -> None:
        """The node is back (or was never lost): the training run's handle stops naming it."""
        lost = self.train.data.get("lost_nodes") or []
        if node in lost:
            lost.remove(node)
        (self.train.data.get("stopped_containers") or {}).pop(node, None)
        (self.train.data.get("lost_marks") or {}).pop(node, None)

    # -------------------------------------------------------------- records
    def evidence(self) -> dict:
        with self._lock:
            ids = [j["job_id"] for j in self.jobs]
            rec: dict = {"jobs": [{k: v for k, v in j.items()} for j in self.jobs],
                         "discovery": list(self._changes), "faults": list(self._faults)}
            if ids:
                shell = self._shell
                rec["squeue"] = command(shell, ["squeue", "-h", "-j", ",".join(ids), "-o", "%i|%T|%N|%r|%S"])
                rec["squeue_steps"] = command(shell, ["squeue", "-h", "-s", "-j", ",".join(ids), "-o", "%i|%N|%S"])
                rec["scontrol"] = {i: command(shell, ["scontrol", "show", "job", "-o", i], env=TIME_ENV) for i in ids}
                rec["sacct"] = command(shell, ["sacct", "-D", "-P", "-j", ",".join(ids), "-o", SACCT_FIELDS],
                                       env=TIME_ENV)
                rec["event_files"] = command(shell, ["sh", "-c", _EVENT_FILES, "sh", self.sdir])
                rec["clock_and_output"] = command(shell, ["sh", "-c", _TAILS, "sh", self.sdir])
        if self.balancer is not None:
            rec["balancer"] = {"url": self.balancer.url if self.balancer.port else None,
                               "backends": self.balancer.backends(), "log": self.balancer.log(),
                               "overhead": self.balancer.overhead()}
        return rec

    def beyond(self) -> dict:
        # one batch script per replica, the same but for its number: counted once, like a Deployment
        written = {"serve-N.sbatch": len(self.jobs[0]["script_text"].splitlines())} if self.jobs else {}
        return {
            "discovery": "squeue for the job's node, scontrol show node for its NodeAddr (resolved with getent on "
                         "the login node), the port from the server's serve_listening event file; polled every "
                         f"{self.refresh_s:g} s by the harness",
            "balancing": "the harness's own reverse proxy on 127.0.0.1 (harness/serve/balancer.py): round-robin over "
                         "the discovered endpoints, /readyz health checks, one retry on a connection error",
            "restarts": "a crashed server: the restart loop in the batch script (srun again, up to "
                        f"{self.max_restarts} times); a lost node: --requeue puts the job back in the queue "
                        "and it starts again on another node (a new port, found again by discovery)",
            "scaling": "another batch job per replica (sbatch), which discovery and the balancer pick up",
            "written": written,
            "harness_parts": ["balancer (aiohttp reverse proxy, health checks, log)",
                              "discovery loop (squeue + scontrol + getent + event files)",
                              "restart loop in the batch script"],
        }

    def teardown(self) -> dict:
        removed, errors = [], []
        if self.balancer is not None:
            try:
                self.balancer.stop()
                removed.append(f"balancer {self.balancer.url if self.balancer.port else ''}".strip())
            except Exception as exc:   # noqa: BLE001 - teardown never raises; it says what it could not do
                errors.append(f"balancer: {exc}")
        ids = [j["job_id"] for j in self.jobs]
        try:
            if ids:
                self._run(["scancel", *ids], check=False)
                end = time.monotonic() + 60
                while True:
                    left = parse_jobs(self._run(["squeue", "-h", "-j", ",".join(ids), "-o", "%i|%T|%N|%r"],
                                                check=False).stdout)
                    if not left or time.monotonic() > end:
                        break
                    time.sleep(1)
                removed += [f"job {i}" for i in ids if i not in left]
                errors += [f"job {i} still {left[i]['state']} 60 s after scancel" for i in ids if i in left]
        except (TransportError, CommandError, BackendError) as exc:
            errors.append(f"scancel {' '.join(ids)}: {exc}")
        if self._lost:
            try:
                removed += [f"node {n} restored" for n in self.restore()["restored"]]
            except Exception as exc:   # noqa: BLE001
                errors.append(f"restore: {exc}")
        return {"removed": removed, "errors": errors}
