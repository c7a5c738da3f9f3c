"""Config -> one scheduler-neutral job spec per run.

Renderers turn a JobSpec into an sbatch script, JobSet objects or local
torchrun commands; they choose paths, the spec chooses everything else, so
the three platforms run the same job.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import NamedTuple

from .config import Config, Fault
from .owner import OwnerKey, dir_mark

WORKLOAD_SCRIPT = "ddp_train.py"
RDZV_PORT = 29500
# Launcher-level restarts per platform. Schedulers recover through their own
# mechanism (Slurm requeue, JobSet restart), so torchrun must not hide a failure
# from them; the local baseline has only torchrun.
TORCHRUN_RESTARTS = {"local": 3, "slurm": 0, "k8s": 0}


@dataclass(frozen=True)
class FaultPlan:
    kind: str
    at_step: int
    rank: int

    @classmethod
    def of(cls, f: Fault) -> FaultPlan:
        return cls(kind=f.kind, at_step=f.at_step, rank=f.rank)


@dataclass(frozen=True)
class JobSpec:
    run_id: str
    campaign: str
    platform: str
    scenario: str                      # "clean", the fault kind, "contention" or "blocker"
    nodes: int
    procs_per_node: int
    gpus_per_node: int
    cpus_per_node: int
    memory_mb: int
    steps: int
    batch: int
    model_params: str
    layers: int
    checkpoint_every: int
    sweep: str
    sweep_iters: int
    sweep_warmup: int
    backend: str
    max_restarts: int                  # scheduler-level restarts (Slurm self-requeue, JobSet maxRestarts)
    torchrun_restarts: int
    time_limit_s: float
    fault: FaultPlan | None = None
    rdzv_port: int = RDZV_PORT
    # whole nodes (Slurm --exclusive; Kubernetes: no other JobSet's pod on the run's nodes): resources.exclusive,
    # on by default for real GPUs; the contention scenario's blocker always
    exclusive: bool = False
    # "enforced": cpus_per_node and memory_mb confine the job; "requests": they only reserve
    # (config resources.caps, resolved for the campaign by resolve_caps)
    caps: str = "enforced"
    labels: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    model: str = "mlp"
    seq_len: int = 512
    vocab_size: int = 32000
    precision: str = "auto"
    simulated_gpus: bool = False       # GPUs allocated, none there: the workload trains on CPUs and says so
    fabric_env: tuple[tuple[str, str], ...] = field(default_factory=tuple)   # config fabric.env, in order
    # the script path the launch line names, relative to where the workload is shipped; the file
    # itself is always WORKLOAD_SCRIPT (the user-experience probe's entrypoint typo changes only this)
    entrypoint: str = WORKLOAD_SCRIPT
    # the campaign's public owner id (Store.owner_id, harness/owner.py): names the run's directory on a
    # shared filesystem and labels its Kubernetes objects; empty outside a campaign (render, validate, a
    # backend used as a library)
    owner: str = ""
    # the campaign's secret key: makes the owner mark of each run directory (owner_mark); never rendered
    owner_key: OwnerKey | None = field(default=None, repr=False, compare=False)
    # the workload's calibration options (config calibration): checked in the allocation before training
    calibration: tuple[str, ...] = ()
    checkpoint_keep: int = 0           # the newest N checkpoints stay (0: all)
    # the step before training (workloads/poc_check.py: the health gate, the all-reduce across the allocation):
    # its options (config calibration.check_args), none when off; check_mpi: srun --mpi for its GPU form
    allocation_check: tuple[str, ...] = ()
    check_mpi: str = "pmix"
    rdzv_join_timeout_s: int | None = None   # torchrun's rendezvous join timeout (workload.rdzv_join_timeout_s)
    stop_grace_s: int = 60             # before a stop: Slurm --signal=B:USR1@N, Kubernetes' grace period

    @property
    def join_timeout_s(self) -> int:
        """The configured join timeout; unset, torch's 600 s plus 60 s a node above 4 (this job's nodes: a scale
        curve's 16-node run waits longer than its 2-node one)."""
        return self.rdzv_join_timeout_s or 600 + 60 * max(0, self.nodes - 4)

    @property
    def real_gpus(self) -> bool:
        return bool(self.gpus_per_node and not self.simulated_gpus)

    @property
    def owner_mark(self) -> str:
        """What the owner mark of this run's directory holds: a keyed digest of the directory's path, good
        for that directory alone (harness/owner.py). Without a key (a campaign of an older harness, a
        test), the owner id itself, as marks were written then."""
        if self.owner_key is None:
            return self.owner
        return dir_mark(self.owner_key, campaign_dir(self.campaign, self.owner), self.run_id)

    @property
    def world_size(self) -> int:
        return self.nodes * self.procs_per_node

    def launch_env(self) -> dict[str, str]:
        """Environment every platform gives torchrun, so ranks run alike everywhere."""
        return {
            # one rank per cpus_per_node/procs_per_node cores, on every platform
            "OMP_NUM_THREADS": str(max(1, self.cpus_per_node // self.procs_per_node)),
            # torchrun restarts with the agent's shared TCPStore hung in gloo's connect
            # (torch 2.13, seen here); a fresh store per rendezvous round restarts cleanly
            "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
            "PYTHONUNBUFFERED": "1",
            # the fabric's settings last: the same on every platform (config fabric.env); their names
            # too, so the workload records each one with its comm event, whatever its prefix
            **({"POC_FABRIC_ENV": ",".join(k for k, _ in self.fabric_env)} if self.fabric_env else {}),
            **dict(self.fabric_env),
        }

    def workload_args(self, ckpt_dir: str, events_dir: str, owner_mark: str | None = None) -> list[str]:
        """Arguments of workloads/ddp_train.py (after the script path). owner_mark: where the workload
        writes the campaign's token (render/owned_dir.py) on a platform where the harness cannot."""
        return [
            "--run-id", self.run_id,
            "--steps", str(self.steps),
            "--batch", str(self.batch),
            "--model-params", self.model_params,
            "--layers", str(self.layers),
            "--ckpt-dir", ckpt_dir,
            "--ckpt-every", str(self.checkpoint_every),
            *(["--ckpt-keep", str(self.checkpoint_keep)] if self.checkpoint_keep else []),
            "--sweep", self.sweep,
            "--sweep-iters", str(self.sweep_iters),
            "--sweep-warmup", str(self.sweep_warmup),
            "--backend", self.backend,
            "--events-dir", events_dir,
            "--model", self.model,
            "--seq-len", str(self.seq_len),
            "--vocab-size", str(self.vocab_size),
            "--precision", self.precision,
            "--gpus-per-node", str(self.gpus_per_node),
            *(["--simulated-gpus"] if self.simulated_gpus else []),
            *(["--owner-mark", owner_mark, "--owner", self.owner_mark] if owner_mark and self.owner else []),
            *self.calibration,
        ]

    def torchrun_args(self, rdzv_endpoint: str) -> list[str]:
        """torchrun options shared by every platform (underscore spellings work on torch 1.13 to 2.x)."""
        return [
            f"--nnodes={self.nodes}",
            f"--nproc_per_node={self.procs_per_node}",
            "--rdzv_backend=c10d",
            f"--rdzv_endpoint={rdzv_endpoint}",
            f"--rdzv_id={self.run_id}",
            f"--max_restarts={self.torchrun_restarts}",
        ]


class Planned(NamedTuple):
    """One run of a platform's plan (harness/scenarios.py: plan), as its scenario planned it."""
    run_id: str
    fault: FaultPlan | None = None
    scenario: str = "clean"


def campaign_dir(campaign: str, owner: str) -> str:
    """The campaign's directory name on a shared filesystem (Slurm's workdir, a Kubernetes checkpoint
    volume): <campaign>-<owner id> in a campaign, so that two users' campaigns of one name (the default
    `smoke`) never share a run's directory or resume from each other's checkpoints."""
    return f"{campaign}-{owner}" if owner else campaign


def slurm_confines(settings: dict | None) -> bool | None:
    """Whether a Slurm cluster confines a task to what it asked (its TaskPlugin, as preflight read it from
    `scontrol show config`): task/cgroup does; task/none and task/affinity alone do not (affinity binds CPUs
    but caps no memory). None when the setting was not read."""
    task = str((settings or {}).get("TaskPlugin") or "")
    return ("cgroup" in task) if task else None


def resolve_caps(setting: str | None, platform_info: dict[str, dict]) -> tuple[str, str]:
    """The caps every run of the campaign gets, and why: the config's resources.caps when set; else
    enforced, unless a Slurm cluster of the campaign cannot confine its tasks (platform_info: each
    platform's preflight), where requests everywhere keeps the platforms on equal terms."""
    if setting:
        return setting, f"resources.caps: {setting} (set in the config)"
    slurm = platform_info.get("slurm")
    if slurm is not None:
        settings = slurm.get("slurm_settings") or {}
        if slurm_confines(settings) is False:
            return "requests", (f"Slurm's TaskPlugin {settings.get('TaskPlugin')} confines no task, so no platform "
                                "caps the job: CPU and memory are reserved, never limited (resources.caps unset)")
    return "enforced", "every platform of the campaign confines the job to what it asked (resources.caps unset)"


def blocker_spec(spec: JobSpec, steps: int | None = None) -> JobSpec:
    """The contention scenario's blocker: the same job, holding whole nodes until it finishes."""
    run_id = f"{spec.run_id}-blocker"
    return replace(spec, run_id=run_id, scenario="blocker", steps=steps or spec.steps, fault=None, exclusive=True,
                   labels=(("poc/campaign", spec.campaign), ("poc/run-id", run_id)))


def build(cfg: Config, platform: str, run_id: str, fault: FaultPlan | None, scenario: str | None = None) -> JobSpec:
    """The config's job for one run; a scenario that needs another (harness/scenarios.py: job_spec) changes it."""
    w, r = cfg.workload, cfg.resources
    max_restarts = {"local": TORCHRUN_RESTARTS["local"], "slurm": cfg.slurm.max_restarts,
                    "k8s": cfg.kubernetes.max_restarts}[platform]
    return JobSpec(
        run_id=run_id,
        campaign=cfg.campaign,
        platform=platform,
        scenario=scenario or (fault.kind if fault else "clean"),
        nodes=r.nodes,
        procs_per_node=r.procs_per_node,
        gpus_per_node=r.gpus_per_node,
        cpus_per_node=r.cpus_per_node,
        memory_mb=r.memory_mb,
        caps=r.caps or "enforced",
        steps=w.steps,
        batch=w.batch,
        model_params=w.model_params,
        layers=w.layers,
        checkpoint_every=w.checkpoint_every,
        sweep=w.sweep,
        sweep_iters=w.sweep_iters,
        sweep_warmup=w.sweep_warmup,
        backend=w.backend,
        max_restarts=max_restarts,
        torchrun_restarts=TORCHRUN_RESTARTS[platform],
        time_limit_s=cfg.timeouts.run_s,
        fault=fault,
        labels=(("poc/campaign", cfg.campaign), ("poc/run-id", run_id)),
        model=w.model,
        seq_len=w.seq_len,
        vocab_size=w.vocab_size,
        precision=w.precision,
        simulated_gpus=w.simulated_gpus,
        fabric_env=tuple(cfg.fabric.env.items()),
        exclusive=r.exclusive if r.exclusive is not None else bool(r.gpus_per_node and not w.simulated_gpus),
        calibration=cfg.calibration.workload_args(),
        checkpoint_keep=w.checkpoint_keep,
        allocation_check=cfg.calibration.check_args(bool(r.gpus_per_node and not w.simulated_gpus)),
        check_mpi=cfg.calibration.mpi,
        rdzv_join_timeout_s=w.rdzv_join_timeout_s,
        stop_grace_s=w.stop_grace_s,
    )
