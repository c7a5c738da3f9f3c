"""JobSpec + the slurm config section -> a batch script (pure: no I/O but reading the template).

Every value that reaches the script is validated here or by the config model, and quoted with
shlex.quote where the shell reads it. The template is harness/data/sbatch/job.sbatch.tmpl
(string.Template, so ``$$`` is a literal ``$``).
"""
from __future__ import annotations

import re
import shlex
import string
from dataclasses import dataclass
from functools import lru_cache

from .. import data
from ..config import Slurm
from ..errors import ConfigError
from ..imageref import FORM, SLURM_FORMS, slurm_image_problem
from ..spec import WORKLOAD_SCRIPT, JobSpec

TEMPLATE = ("sbatch", "job.sbatch.tmpl")     # in harness/data
_RUN_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
_HEAD = "__POC_HEAD__"
CLOCK_FILE = "batch-clock.txt"   # in the run dir; read back by SlurmBackend.collect


@dataclass(frozen=True)
class SbatchJob:
    script: str
    run_dir: str
    workload_path: str
    output_pattern: str
    events_dir: str
    ckpt_dir: str
    clock_file: str       # the batch script's own sub-second time-stamps (allocation evidence)


@lru_cache(maxsize=1)
def _template() -> string.Template:
    return string.Template(data.text(*TEMPLATE))


def check(spec: JobSpec, cfg: Slurm) -> None:
    """What render_sbatch refuses; `poc validate` runs it on every planned run (render/validate.py)."""
    if not _RUN_ID.match(spec.run_id):
        raise ConfigError(f"run id {spec.run_id!r} is not usable in a Slurm job name",
                          "run ids are lower-case letters, digits and '-'")
    problem = slurm_image_problem(cfg.container, cfg.container_image)
    if problem:
        raise ConfigError(f"slurm.container_image {cfg.container_image!r} {problem}",
                          f"{SLURM_FORMS}; an image reference is {FORM}")
    if not 1 <= spec.rdzv_port <= 65535:
        raise ConfigError(f"rendezvous port {spec.rdzv_port} is out of range")


def run_dir(spec: JobSpec, cfg: Slurm) -> str:
    return f"{cfg.workdir.rstrip('/')}/{spec.campaign}/{spec.run_id}"


def sbatch_options(spec: JobSpec, cfg: Slurm, rdir: str) -> list[str]:
    cpus = max(1, spec.cpus_per_node // 1)  # one task (a torchrun agent) per node holds the node's CPUs
    opts = [
        f"--job-name=poc-{spec.run_id}",
        f"--comment=poc-run-id={spec.run_id}",
        f"--nodes={spec.nodes}",
        "--ntasks-per-node=1",
        f"--cpus-per-task={cpus}",
        f"--mem={spec.memory_mb}M",
    ]
    if spec.gpus_per_node:
        opts.append(f"--gpus-per-node={spec.gpus_per_node}")
    if spec.exclusive:
        opts.append("--exclusive")
    opts.append(f"--time={cfg.time_limit}")
    for key in ("partition", "account", "qos"):
        val = getattr(cfg, key)
        if val:
            opts.append(f"--{key}={val}")
    opts += ["--requeue", "--open-mode=append", "--signal=B:USR1@60",
             f"--output={rdir}/slurm-%j.out", f"--chdir={rdir}"]
    opts += list(cfg.extra_sbatch)
    return opts


def launch_line(spec: JobSpec, cfg: Slurm, rdir: str) -> str:
    """The srun line that starts one torchrun agent per node."""
    script = f"{rdir}/{WORKLOAD_SCRIPT}"
    torchrun = [cfg.python, "-m", "torch.distributed.run",
                *spec.torchrun_args(f"{_HEAD}:{spec.rdzv_port}"),
                script, *spec.workload_args(f"{rdir}/ckpt", f"{rdir}/events")]
    srun = ["srun", "--kill-on-bad-exit=1", f"--nodes={spec.nodes}", "--ntasks-per-node=1"]
    if cfg.container == "pyxis":
        srun += [f"--container-image={cfg.container_image}", f"--container-mounts={cfg.workdir}:{cfg.workdir}",
                 f"--container-workdir={rdir}"]
        cmd = srun + torchrun
    elif cfg.container == "apptainer":
        cmd = srun + ["apptainer", "exec", "--bind", f"{cfg.workdir}:{cfg.workdir}", cfg.container_image] + torchrun
    else:
        cmd = srun + torchrun
    breaks = {cfg.python, script, "apptainer"}
    parts: list[str] = []
    for a in cmd:
        q = shlex.quote(a)
        if parts and (a.startswith("-") or a in breaks):
            parts.append(" \\\n  " + q)
        else:
            parts.append((" " if parts else "") + q)
    # The rendezvous host is only known inside the allocation: let the shell expand it.
    return "".join(parts).replace(_HEAD, '"$head"')


def render_sbatch(spec: JobSpec, cfg: Slurm) -> SbatchJob:
    check(spec, cfg)
    rdir = run_dir(spec, cfg)
    clock = f"{rdir}/{CLOCK_FILE}"
    lines = "\n".join(f"#SBATCH {o}" for o in sbatch_options(spec, cfg, rdir))
    text = _template().substitute(
        run_id=spec.run_id, q_run_id=shlex.quote(spec.run_id), q_run_dir=shlex.quote(rdir),
        q_clock_file=shlex.quote(clock),
        launch_env=" ".join(f"{k}={shlex.quote(v)}" for k, v in spec.launch_env().items()),
        sbatch_lines=lines, max_restarts=int(spec.max_restarts), rdzv_port=int(spec.rdzv_port),
        launch=launch_line(spec, cfg, rdir))
    return SbatchJob(script=text, run_dir=rdir, workload_path=f"{rdir}/{WORKLOAD_SCRIPT}",
                     output_pattern=f"{rdir}/slurm-%j.out", events_dir=f"{rdir}/events", ckpt_dir=f"{rdir}/ckpt",
                     clock_file=clock)
