"""What the Slurm drill tests share: a real 2-node job running with a same-shape job queued behind
it, a probe thread that records when submissions and status queries were refused (as the drill runner
does), and what identifies the running job's processes on its nodes."""
from __future__ import annotations

import threading
import time

from _poc import login, slurm_queue, squeue_state, wait_for, wait_slurm_nodes_free

from harness import config
from harness.backends.base import Handle
from harness.backends.slurm.backend import SlurmBackend
from harness.clusters import slurm_docker

SHAPE = ["-N2", "--exclusive", "-o", "/dev/null"]


def backend() -> SlurmBackend:
    return SlurmBackend.from_config(config.from_mapping({"campaign": "drill-test", "platforms": ["slurm"]}))


def submit_pair(jobs: list[str]) -> tuple[str, str]:
    """A running 2-node job (an srun step of sleep) and a same-shape one queued behind it. Each job id
    goes into `jobs` as soon as it is submitted, so the caller cancels it even when a wait here fails
    (a leaked `sleep 900` holds c1 and c2 for every later test)."""
    wait_slurm_nodes_free(("c1", "c2"))
    run_id = login(["sbatch", "--parsable", "-J", "poc-drill-run", "-w", "c1,c2", *SHAPE, "--wrap",
                    "srun sleep 900"], check=True).stdout.strip()
    jobs.append(run_id)
    wait_for(f"job {run_id} running", lambda: squeue_state(run_id) == "RUNNING", 120, context=slurm_queue)
    wait_for(f"job {run_id}'s srun step", lambda: f"{run_id}.0" in login(["squeue", "-h", "-s", "-o", "%i"]).stdout,
             30, context=slurm_queue)
    queued = login(["sbatch", "--parsable", "-J", "poc-drill-queued", *SHAPE, "--wrap", "srun sleep 900"],
                   check=True).stdout.strip()
    jobs.append(queued)
    wait_for(f"job {queued} pending", lambda: squeue_state(queued) == "PENDING", 30, context=slurm_queue)
    return run_id, queued


def handle(job_id: str) -> Handle:
    return Handle("slurm", f"drill-{job_id}", [job_id], time.time(), data={"job_id": job_id})


def step_pids(nodes=("c1", "c2")) -> dict[str, str]:
    """The pids of the running step's processes (`sleep`) on each node: unchanged means not restarted."""
    out = {}
    for n in nodes:
        res = slurm_docker.run(["docker", "exec", f"poc-slurm-{n}", "ps", "-o", "pid=", "-C", "sleep"], check=False)
        out[n] = " ".join(sorted(res.stdout.split()))
    return out


class Probes:
    """try_submit/try_status every 0.5 s from a thread of its own; refused seconds per probe."""

    def __init__(self, drill, every: float = 0.5):
        self.drill, self.every = drill, every
        self.log: list[tuple[float, str, str | None]] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(60)

    def _loop(self):
        while not self._stop.is_set():
            for what, fn in (("submit", self.drill.try_submit), ("status", self.drill.try_status)):
                t = time.time()
                self.log.append((t, what, fn()))
            self._stop.wait(self.every)

    def refused_s(self, what: str) -> float:
        """Seconds from each first refusal to the next success, summed (the runner's figure, roughly)."""
        total, since = 0.0, None
        for t, w, err in self.log:
            if w != what:
                continue
            if err is not None and since is None:
                since = t
            elif err is None and since is not None:
                total, since = total + (t - since), None
        return round(total, 2)

    def refusals(self, what: str) -> list[str]:
        return sorted({err[:120] for _, w, err in self.log if w == what and err})
