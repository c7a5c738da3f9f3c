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
from ..spec import WORKLOAD_SCRIPT, JobSpec, campaign_dir
from .gloo_ifname import with_gloo_default
from .owned_dir import OWNER_MARK

TEMPLATE = ("sbatch", "job.sbatch.tmpl")     # in harness/data
_RUN_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
_HEAD = "__POC_HEAD__"
_PORT = "__POC_PORT__"
# The c10d store listens on the allocation's first node. Jobs that do not hold whole nodes share them,
# so a fixed port would clash (or, worse, join another job's rendezvous): each job takes the base port
# plus its job id modulo this span (29500-29999 by default, below Linux's ephemeral range).
RDZV_PORT_SPAN = 500
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
    if not 1 <= spec.rdzv_port <= 65536 - RDZV_PORT_SPAN:
        raise ConfigError(f"rendezvous port {spec.rdzv_port} is out of range (the job's port is it plus its "
                          f"job id modulo {RDZV_PORT_SPAN})")
    for key in ("venv", "setup_script"):
        val = getattr(cfg, key)
        if val and val.startswith("~") and not (val == "~" or val.startswith("~/")):
            raise ConfigError(f"slurm.{key} {val!r}: only ~ and ~/ are expanded (to $HOME on the node)",
                              "write the absolute path, e.g. /home/NAME/...")
    if cfg.checkpoint_dir and not cfg.checkpoint_dir.startswith("/"):
        # the workload gets it as an argument, where no shell expands ~ or resolves a relative path
        raise ConfigError(f"slurm.checkpoint_dir {cfg.checkpoint_dir!r} is not an absolute path",
                          "write the absolute path on the cluster, e.g. /lustre/NAME/ckpt")
    if not spec.entrypoint.strip():
        raise ConfigError("the entrypoint is empty", "name the script to run, e.g. ddp_train.py")


def job_name(run_id: str) -> str:
    """The job's name in squeue and sacct: what finds a job whose id a crash kept from the journal."""
    return f"poc-{run_id}"


def run_dir(spec: JobSpec, cfg: Slurm) -> str:
    return f"{cfg.workdir.rstrip('/')}/{campaign_dir(spec.campaign, spec.owner)}/{spec.run_id}"


def cpus_per_task(spec: JobSpec) -> int:
    return max(1, spec.cpus_per_node // 1)  # one task (a torchrun agent) per node holds the node's CPUs


def sbatch_options(spec: JobSpec, cfg: Slurm, rdir: str) -> list[str]:
    cpus = cpus_per_task(spec)
    opts = [
        f"--job-name={job_name(spec.run_id)}",
        f"--comment=poc-run-id={spec.run_id}",
        f"--nodes={spec.nodes}",
        "--ntasks-per-node=1",
        f"--cpus-per-task={cpus}",
        f"--mem={spec.memory_mb}M",
    ]
    if spec.gpus_per_node:
        gpus = f"{cfg.gpu_type}:{spec.gpus_per_node}" if cfg.gpu_type else str(spec.gpus_per_node)
        opts.append(f"--gpus-per-node={gpus}")
    if cfg.gres:
        opts.append("--gres=" + ",".join(cfg.gres))
    if spec.exclusive:
        opts.append("--exclusive")
    opts.append(f"--time={cfg.time_limit}")
    for key in ("partition", "account", "qos", "reservation", "constraint", "switches"):
        val = getattr(cfg, key)
        if val:
            opts.append(f"--{key}={val}")
    # --propagate=NONE: the ranks get the limits slurmd gives (sites raise memlock there for RDMA), not the
    # submitting shell's; a login shell's `ulimit -l` of 64 KiB would make ibv_reg_mr fail, or NCCL fall
    # back to sockets without a word. A site that wants some propagated says so in slurm.extra_sbatch
    # (a later --propagate wins).
    opts += ["--requeue", "--open-mode=append", "--signal=B:USR1@60", "--propagate=NONE",
             f"--output={rdir}/slurm-%j.out", f"--chdir={rdir}"]
    opts += [o for o in cfg.extra_sbatch if o not in opts]   # --exclusive may be asked for twice
    return opts


def entrypoint_path(spec: JobSpec, rdir: str) -> str:
    """The script the launch line names: spec.entrypoint, relative to the run directory (where the
    workload is shipped as WORKLOAD_SCRIPT) unless absolute. A typo stays a typo: python says so."""
    return spec.entrypoint if spec.entrypoint.startswith("/") else f"{rdir}/{spec.entrypoint}"


def ckpt_dir(spec: JobSpec, cfg: Slurm, rdir: str) -> str:
    """slurm.checkpoint_dir/<campaign>-<owner id>/<run_id> (a parallel file system, say), keyed as the run
    directory is so that no other campaign, nor a later one of the same name, resumes from it; else the
    run directory's ckpt/. The backend makes it at submit (mode 0700, with the run's owner mark); a
    directory the job cannot write fails it with python's own PermissionError/OSError."""
    if cfg.checkpoint_dir:
        return f"{cfg.checkpoint_dir.rstrip('/')}/{campaign_dir(spec.campaign, spec.owner)}/{spec.run_id}"
    return f"{rdir}/ckpt"


def owner_mark(spec: JobSpec, cfg: Slurm, rdir: str) -> str:
    """The owner mark over the run's checkpoints: in the checkpoint directory under slurm.checkpoint_dir,
    else in the run directory that holds ckpt/. The backend writes it at submit; the workload is given
    its path and value, and before it loads a checkpoint checks that the directory holding it is its own
    (this mark, its uid, writable by no one else: a checkpoint a co-user planted is never loaded)."""
    return f"{ckpt_dir(spec, cfg, rdir) if cfg.checkpoint_dir else rdir}/{OWNER_MARK}"


def container_binds(cfg: Slurm) -> list[str]:
    """The cluster paths a container must see: the work directory, and slurm.checkpoint_dir when it is
    elsewhere (in the container's own root file system a checkpoint would vanish with the attempt,
    and a restart would start again from step 0)."""
    paths = [cfg.workdir.rstrip("/") or "/"]
    ck = (cfg.checkpoint_dir or "").rstrip("/")
    if ck and not (ck + "/").startswith(paths[0].rstrip("/") + "/"):
        paths.append(ck)
    return paths


# torchrun hosts the c10d store only where it recognises the endpoint's host as its own (the host name,
# its FQDN, or an IP literal); the endpoint is Slurm's NodeName, which need not be either (a NodeName
# for the IB address, say), and then no agent hosts the store and every agent waits. The allocation's
# first node (SLURM_NODEID 0 in the step, evaluated on each node) is told so.
# A USR1 (--signal=B:USR1's warning before the time limit, which the batch script passes on through
# srun) is for the workers, whose handler checkpoints; torchrun's agent has no handler for it and would
# die, failing the job and spending a requeue. So torchrun starts with USR1 ignored (its workers inherit
# that until the workload installs its handler), and this shell, not exec'd away, passes a USR1 on to
# torchrun's children: under proctrack/pgid Slurm signals only this process group, and the workers run
# in sessions of their own; under cgroup or linuxproc they get Slurm's signal too, and a second USR1
# before the step ends asks for the same one checkpoint. A constant script: the Python is "$0" and
# torchrun's arguments "$@".
# Each agent names itself (--local_addr; rank 0's is the workers' MASTER_ADDR) by its node's address as Slurm
# reaches it: NodeAddr from the batch script's POC_NODE_ADDRS, else the NodeName. torchrun would otherwise
# take socket.getfqdn(), read from an /etc/hosts where Ubuntu, DGX OS and enroot containers put the host
# name at 127.0.1.1, beside names the other nodes need not resolve.
# One line: sacct -P prints a step's SubmitLine as it was, so a newline in it would split the step's row.
SLURM_LAUNCH = ('if [ "${SLURM_NODEID:-0}" = 0 ]; then h=1; else h=0; fi; '
                'a=${SLURMD_NODENAME:-$(hostname)}; '
                'for p in ${POC_NODE_ADDRS:-}; do if [ "${p%%=*}" = "$a" ]; then a=${p#*=}; break; fi; done; '
                'usr1_to_workers() { for s in /proc/[0-9]*/status; do while read -r k v; do '
                'if [ "$k" = PPid: ]; then [ "$v" = "$c" ] && p=${s#/proc/} && kill -USR1 "${p%/status}"; break; fi; '
                'done < "$s"; done 2>/dev/null; }; '
                'trap "" USR1; '
                '"$0" -m torch.distributed.run --rdzv_conf="is_host=$h" --local_addr="$a" "$@" & c=$!; '
                'trap usr1_to_workers USR1; '
                # a trapped USR1 ends `wait` early; the last wait gives torchrun's own exit status
                'while kill -0 "$c" 2>/dev/null; do wait "$c"; done; '
                'wait "$c"')


def launch_line(spec: JobSpec, cfg: Slurm, rdir: str) -> str:
    """The srun line that starts one torchrun agent per node."""
    script = entrypoint_path(spec, rdir)
    torchrun = ["bash", "-c", SLURM_LAUNCH, cfg.python,
                *spec.torchrun_args(f"{_HEAD}:{_PORT}"),
                script, *spec.workload_args(ckpt_dir(spec, cfg, rdir), f"{rdir}/events",
                                             owner_mark(spec, cfg, rdir))]
    # --export=ALL: every node's step gets this script's environment (setup, fabric), whatever
    # --export the job itself was given (extra_sbatch may say NONE, which srun would inherit).
    # --cpus-per-task: srun of Slurm 22.05-23.02 does not take it from the job, and the agent, its ranks
    # and NCCL's proxy threads would share one core. The number the #SBATCH line asks for, written out:
    # a job submitted through slurmrestd has no SLURM_CPUS_PER_TASK in its environment.
    srun = ["srun", "--kill-on-bad-exit=1", f"--nodes={spec.nodes}", "--ntasks-per-node=1",
            f"--cpus-per-task={cpus_per_task(spec)}", "--export=ALL"]
    if cfg.container == "pyxis":
        # Pyxis passes the job's environment into the container, but a variable the image sets
        # keeps the image's value unless --container-env names it; GPUs need nothing here (enroot's
        # nvidia hook follows the allocation). No home mount: ~/.local could shadow the image's torch.
        srun += [f"--container-image={cfg.container_image}",
                 "--container-mounts=" + ",".join(f"{p}:{p}" for p in container_binds(cfg)),
                 f"--container-workdir={rdir}", "--no-container-mount-home",
                 "--container-env=" + ",".join(_env_names(spec))]
        cmd = srun + torchrun
    elif cfg.container == "apptainer":
        # --nv binds the host's NVIDIA driver and devices; simulated GPUs have none to bind.
        nv = ["--nv"] if spec.gpus_per_node and not spec.simulated_gpus else []
        binds = [w for p in container_binds(cfg) for w in ("--bind", f"{p}:{p}")]
        cmd = srun + ["apptainer", "exec", *nv, *binds, cfg.container_image] + torchrun
    else:
        cmd = srun + torchrun
    breaks = {cfg.python, script, "apptainer", "bash"}
    parts: list[str] = []
    for a in cmd:
        q = shlex.quote(a)
        if parts and (a.startswith("-") or a in breaks):
            parts.append(" \\\n  " + q)
        else:
            parts.append((" " if parts else "") + q)
    # The rendezvous host and port are only known inside the allocation: let the shell expand them.
    return "".join(parts).replace(_HEAD, '"$head"').replace(_PORT, '"$rdzv_port"')


def launch_env(spec: JobSpec) -> dict[str, str]:
    """The spec's launch environment, with gloo's interface defaulted from NCCL's (render/gloo_ifname.py)."""
    return with_gloo_default(spec.launch_env())


def _env_names(spec: JobSpec) -> list[str]:
    return ["POC_RUN_ID", *launch_env(spec)]


def launch_exports(spec: JobSpec, cfg: Slurm) -> str:
    """The export line's words: the launch environment (fabric.env last), each value quoted exactly.

    Apptainer passes the host environment in (without --cleanenv, which is not used), but a
    variable the image sets keeps the image's value; APPTAINERENV_NAME overrides it.
    """
    env = {"POC_RUN_ID": spec.run_id, **launch_env(spec)}
    words = [f"{k}={shlex.quote(v)}" for k, v in env.items()]
    if cfg.container == "apptainer":
        words += [f"APPTAINERENV_{k}={shlex.quote(v)}" for k, v in env.items()]
    return " ".join(words)


def _node_path(path: str) -> str:
    """A cluster path for the shell: quoted, with a leading ~ as the node's $HOME (check() refuses ~user)."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def _fail(what: str) -> str:
    """`|| { message; exit 1; }` for a setup step: a failed setup ends the job with its reason."""
    return "|| { echo " + shlex.quote(f"poc: {what} failed on") + ' "$(hostname)" >&2; exit 1; }'


def setup_lines(cfg: Slurm) -> str:
    """modules, venv, setup_script, in that order, in the batch script. srun --export=ALL gives the
    result to the step on every node, so torchrun starts in it everywhere; with a container they
    set up the host side (e.g. `module load apptainer`). Every word is quoted."""
    lines: list[str] = []
    if cfg.modules:
        lines += [
            "# `module` is a shell function that a non-login batch shell may lack: try the usual init files",
            "if ! type module >/dev/null 2>&1; then",
            '  for f in /etc/profile.d/lmod.sh /etc/profile.d/modules.sh "${LMOD_PKG:-/nonexistent}/init/bash" '
            '"${MODULESHOME:-/nonexistent}/init/bash"; do',
            '    if [ -r "$f" ]; then . "$f"; break; fi',
            "  done",
            "fi",
            "if ! type module >/dev/null 2>&1; then",
            '  echo "poc: slurm.modules is set but module is neither a command nor a shell function on '
            '$(hostname) (no Lmod or Environment Modules found)" >&2',
            "  exit 1",
            "fi",
        ]
        lines += [f"module load {shlex.quote(m)} {_fail('module load ' + m)}" for m in cfg.modules]
    if cfg.venv:
        act = _node_path(cfg.venv.rstrip("/") + "/bin/activate")
        lines.append(f"source {act} {_fail('activating slurm.venv ' + cfg.venv)}")
    if cfg.setup_script:
        lines.append(f"source {_node_path(cfg.setup_script)} {_fail('slurm.setup_script ' + cfg.setup_script)}")
    if not lines:
        return "# (no slurm.modules, venv or setup_script)"
    return "\n".join(lines)


def render_sbatch(spec: JobSpec, cfg: Slurm) -> SbatchJob:
    check(spec, cfg)
    rdir = run_dir(spec, cfg)
    clock = f"{rdir}/{CLOCK_FILE}"
    lines = "\n".join(f"#SBATCH {o}" for o in sbatch_options(spec, cfg, rdir))
    text = _template().substitute(
        run_id=spec.run_id, q_run_dir=shlex.quote(rdir),
        q_clock_file=shlex.quote(clock),
        launch_env=launch_exports(spec, cfg), setup=setup_lines(cfg),
        sbatch_lines=lines, max_restarts=int(spec.max_restarts), rdzv_port=int(spec.rdzv_port),
        rdzv_span=RDZV_PORT_SPAN,
        launch=launch_line(spec, cfg, rdir))
    return SbatchJob(script=text, run_dir=rdir, workload_path=f"{rdir}/{WORKLOAD_SCRIPT}",
                     output_pattern=f"{rdir}/slurm-%j.out", events_dir=f"{rdir}/events",
                     ckpt_dir=ckpt_dir(spec, cfg, rdir),
                     clock_file=clock)
