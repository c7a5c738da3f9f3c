"""Regenerates tests/fixtures/report/drills/ (run: cd tests && ../.venv/bin/python -m support.report_drills_fixture).

A scripted scheduler per platform with room for one job drives the real pipeline and store in real
time (the prober waits drills.probe_s of real time, so a simulated clock would space its tries
unlike a real drill's): one contention run, a restart drill and an upgrade drill per platform. The
Slurm upgrade is refused (the cluster is not known to be the user's): the failed drill run. The
Kubernetes upgrade kills the job at a kubelet and one kubelet never comes back. The numbers are
scripted, the record shapes are the pipeline's own.
"""
from __future__ import annotations

import random
import shutil
import tempfile
import threading
import time
from pathlib import Path
from unittest import mock

from harness import events as ev
from harness import evidence
from harness.backends.base import Collected, Observation
from harness.config import from_mapping
from harness.drills import platforms
from harness.drills.base import Step
from harness.pipeline import campaign
from harness.states import JobState
from harness.store import Store
from support.fakes import FIX, ScriptedBackend

CFG = {"campaign": "drills-fixture", "platforms": ["slurm", "k8s"], "repetitions": 0, "faults": [],
       "workload": {"steps": 20}, "contention": {"runs": 1},
       "drills": {"kinds": ["restart", "upgrade"], "probe_s": 0.5, "at_step": 5, "component_timeout_s": 4}}
STEP_S = {"slurm": 0.3, "k8s": 0.32}
HANDOVER_S = {"slurm": 0.6, "k8s": 1.7}      # the queued job allocated this long after the running one ended
APISERVER = "HTTPSConnectionPool(host='127.0.0.1', port=6443): Max retries exceeded (Connection refused)"
WEBHOOK = ('Internal error occurred: failed calling webhook "{hook}": Post "https://{svc}.svc:443/mutate": '
           'dial tcp: connect: connection refused')
# component, group, seconds down, submit/status while down (refuse | wait | None), kills the job
PLANS = {
    "slurm": [("slurmdbd", "database", 1.6, None, None, False),
              ("slurmctld", "control plane", 3.2, "wait", "wait", False),
              ("slurmd@c1", "nodes", 1.1, None, None, False), ("slurmd@c2", "nodes", 1.2, None, None, False)],
    "k8s": [("kube-apiserver", "control plane", 3.4, "refuse", "refuse", False),
            ("kube-controller-manager", "control plane", 1.0, None, None, False),
            ("kube-scheduler", "control plane", 0.9, None, None, False),
            ("kueue", "controllers", 2.2, "refuse", None, False), ("jobset", "controllers", 1.8, "refuse", None, False),
            ("kubelet@poc-worker-1", "nodes", 1.5, None, None, True),
            ("kubelet@poc-worker-2", "nodes", 1.3, None, None, False)],
}
VERSIONS = {"slurm": ({"slurmdbd": "22.05.8", "slurmctld": "22.05.8", "slurmd@c1": "22.05.8", "slurmd@c2": "22.05.8"},
                      "24.11.5"),
            "k8s": ({"kube-apiserver": "v1.31.4", "kube-controller-manager": "v1.31.4", "kube-scheduler": "v1.31.4",
                     "kueue": "v0.9.1", "jobset": "v0.7.1", "kubelet@poc-worker-1": "v1.31.4",
                     "kubelet@poc-worker-2": "v1.31.4"}, None)}
NEXT = {"v1.31.4": "v1.32.0", "v0.9.1": "v0.10.0", "v0.7.1": "v0.7.2", "22.05.8": "24.11.5"}
HEALTH = {"slurmdbd": "sacctmgr -n show cluster answers with the cluster", "slurmctld": "scontrol ping: UP",
          "slurmd": "slurmd running with a new pid, registered again (SlurmdStartTime changed) and responding",
          "kube-apiserver": "GET https://127.0.0.1:6443/readyz 200", "kube-controller-manager": "GET /healthz 200",
          "kube-scheduler": "GET /healthz 200",
          "kueue": "GET /readyz 200 and its webhook answers a server-side dry-run",
          "jobset": "GET /readyz 200 and its webhook answers a server-side dry-run",
          "kubelet": "GET /healthz 200, node Ready with a heartbeat after the restart"}


class Training:
    """One job's workload events on the real clock: the recorded startup, compressed, then steps."""

    def __init__(self, run_id: str, start: float, steps: int, step_s: float, seed: int):
        base = ev.parse_lines((FIX / "clean_events.jsonl").read_text().splitlines())
        t0 = base[0]["ts_ns"]
        pre = [e for e in base if e["kind"] not in ("step", "checkpoint_saved", "done")]
        self.events = [dict(e, run_id=run_id, ts_ns=int((start + (e["ts_ns"] - t0) / 1e9 * 0.08) * 1e9)) for e in pre]
        t = max(e["ts_ns"] for e in self.events) / 1e9
        rng = random.Random(seed)
        for k in range(1, steps + 1):
            t += step_s * rng.uniform(0.85, 1.2)
            for r in (0, 1):
                like = next(e for e in pre if e["rank"] == r)
                common = {k2: like[k2] for k2 in ("v", "run_id", "rank", "local_rank", "world_size", "host", "pid",
                                                   "attempt", "restarts")}
                self.events.append({**common, "kind": "step", "ts_ns": int((t + 0.002 * r) * 1e9), "step": k,
                                    "dur_s": step_s, "loss": 1.0 / k})
                if k == steps:
                    self.events.append({**common, "kind": "done", "ts_ns": int((t + 0.01) * 1e9), "steps": steps})
        self.killed_at: float | None = None

    @property
    def end(self) -> float:
        return (self.killed_at if self.killed_at is not None else max(e["ts_ns"] for e in self.events) / 1e9)

    def seen(self, now: float) -> list[dict]:
        cut = min(now, self.killed_at) if self.killed_at is not None else now
        return [e for e in self.events if e["ts_ns"] / 1e9 <= cut]


class ScriptedDrill:
    def __init__(self, backend: Scheduler, kind: str, owned: bool):
        self.b, self.kind, self._owned, self.platform = backend, kind, owned, backend.platform
        self.down: dict[str, str | None] = {}
        self.back_event = threading.Event()
        self.snapshots = 0

    def owned(self):
        return (True, "the harness's own local cluster (scripted)") if self._owned else \
            (False, "not a cluster the harness made (no local cluster markers) and drills.confirm_cluster is not set")

    def prepare(self, kind):
        return {"newer releases": "cached", "seconds": 0.2} if kind == "upgrade" else {}

    def plan(self, kind):
        return [c[0] for c in PLANS[self.platform]]

    def versions(self):
        before = VERSIONS[self.platform][0]
        upgraded = {s.component for s in self.b.steps_done if s.ok} if self.kind == "upgrade" else set()
        return {c: NEXT[v] if c in upgraded else v for c, v in before.items()}

    def step(self, kind, component):
        _, group, down_s, submit, status, kills = next(c for c in PLANS[self.platform] if c[0] == component)
        started = time.time()
        v0 = VERSIONS[self.platform][0][component]
        st = Step(component, group, started, version_before=v0, version_after=NEXT[v0] if kind == "upgrade" else v0,
                  how=f"{'replace' if kind == 'upgrade' else 'restart'} {component} (scripted)",
                  health=HEALTH[component.split("@")[0]], resolution_s=0.5)
        self.back_event.clear()
        self.down = {"submit": submit, "status": status}
        if kills and kind == "upgrade":
            self.b.main.killed_at = started + 0.4
        time.sleep(down_s)
        self.down = {}
        self.back_event.set()
        if kind == "upgrade" and component == "kubelet@poc-worker-2":
            time.sleep(CFG["drills"]["component_timeout_s"])
            st.ok, st.error = False, ("not healthy within 4s: node poc-worker-2 NotReady "
                                      "(kubelet stopped posting status)")
        else:
            time.sleep(random.uniform(0.1, 0.5))   # the health check's own poll
            st.back = time.time()
        self.b.steps_done.append(st)
        return st

    def _try(self, what: str) -> str | None:
        mode = self.down.get(what)
        if mode == "refuse":
            return APISERVER if self.down.get("status") == "refuse" else WEBHOOK.format(
                hook="mjobset.kb.io", svc="kueue-webhook-service.kueue-system")
        if mode == "wait":   # a Slurm client retries until slurmctld answers again
            self.back_event.wait(30)
        time.sleep(0.03)
        return None

    def try_submit(self):
        return self._try("submit")

    def try_status(self):
        return self._try("status")

    def snapshot(self, handles):
        self.snapshots += 1
        ident = {f"{h.run_id} id": h.ids[0] for h in handles}
        if self.platform == "k8s":
            ident.update({f"{h.run_id} workload uid": f"uid-{h.run_id[-6:]}-1" for h in handles})
            if self.kind == "upgrade" and self.snapshots > 1:   # the queued job's Workload was recreated
                ident[f"{handles[-1].run_id} workload uid"] = f"uid-{handles[-1].run_id[-6:]}-2"
        return {"identity": ident, "state": "scripted"}

    def leftovers(self, handles):
        if self.platform == "k8s" and self.kind == "upgrade":
            return [{"what": "Workload still admitted after its JobSet ended",
                     "workload": f"jobset-{handles[0].run_id}"},
                    {"what": "node not Ready", "node": "poc-worker-2"}]
        return []

    def restore(self, kind):
        if kind == "upgrade":
            return {"recreated": "the native cluster at the pinned versions", "seconds": 61.5}
        return {"did": "nothing: a restart keeps the versions"}


class Scheduler(ScriptedBackend):
    """Room for one job: a blocker (contention) or the drilled job runs; the other waits."""

    def __init__(self, platform: str):
        super().__init__()
        self.platform = platform
        self.jobs: dict[str, Training] = {}
        self.main: Training | None = None
        self.steps_done: list[Step] = []
        self.scenario = "clean"

    def render(self, spec):
        self.scenario = spec.scenario
        return super().render(spec)

    def make_drill(self, drills):
        self.steps_done = []
        kind = self.scenario.split(":", 1)[1]
        return ScriptedDrill(self, kind, owned=not (self.platform == "slurm" and kind == "upgrade"))

    def submit(self, spec, rendered):
        h = super().submit(spec, rendered)
        h.platform = self.platform
        h.ids = [str(100 + len(self.jobs))]
        rid = h.run_id
        if rid.endswith(("-queued", "-contention-01")):   # waits for the one running, then starts
            self.jobs[rid] = None
        else:
            self.jobs[rid] = self.main = Training(rid, h.submitted_at + 0.2, 8 if rid.endswith("-blocker") else 60,
                                                  STEP_S[self.platform], seed=len(self.jobs))
        return h

    def _waiter(self, rid: str, now: float) -> Training | None:
        t = self.jobs.get(rid)
        if t is None and self.main is not None and now >= self.main.end + HANDOVER_S[self.platform]:
            t = self.jobs[rid] = Training(rid, self.main.end + HANDOVER_S[self.platform], 10, 0.05, seed=99)
        return t

    def observe(self, handles):
        now, out = time.time(), {}
        for h in handles:
            t = self.jobs[h.run_id] or self._waiter(h.run_id, now)
            times = {"submitted": h.submitted_at}
            if t is None:
                out[h.run_id] = Observation(JobState.PENDING, [], times, native_state="PENDING")
                continue
            times["allocated"] = t.events[0]["ts_ns"] / 1e9 - 0.05
            state = JobState.RUNNING
            if now > t.end:
                state = JobState.FAILED if t.killed_at is not None else JobState.SUCCEEDED
            out[h.run_id] = Observation(state, t.seen(now), times, native_state=state.value.upper())
        return out

    def collect(self, handle):
        t = self.jobs.get(handle.run_id)
        if t is None:
            return Collected(events=[], times={}, attempts=[], raw={})
        alloc = t.events[0]["ts_ns"] / 1e9 - 0.05
        procs = [{"pid": 100 + i, "spawn_before": alloc, "spawn_after": alloc, "exited_at": t.end,
                  "exit_code": 0 if t.killed_at is None else 137} for i in range(2)]
        raw = {"runtime": "host", "submit": {"before": handle.submitted_at, "after": handle.submitted_at + 0.005},
               "processes": procs}
        events = [e for e in t.events if e["ts_ns"] / 1e9 <= min(t.end, time.time())]
        return Collected(events=events, times={}, attempts=[], raw=raw)


def generate(dest: Path) -> None:
    cfg = from_mapping(CFG)
    with tempfile.TemporaryDirectory() as tmp:
        backends = {p: Scheduler(p) for p in CFG["platforms"]}
        parts = {p: (lambda b, drills: b.make_drill(drills)) for p in CFG["platforms"]}
        with mock.patch.dict(platforms.PARTS, parts):   # each platform's drill part is the fake scheduler's own
            campaign(cfg, CFG["platforms"], Store(tmp, cfg.campaign), lambda p: backends[p], resume=False,
                     poll_s=0.1, stamps_fn=lambda platform, raw: evidence.stamps("local", raw))
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(Path(tmp) / cfg.campaign, dest / cfg.campaign)


if __name__ == "__main__":
    generate(Path(__file__).parents[1] / "fixtures" / "report" / "drills")
