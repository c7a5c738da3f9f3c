"""The Slurm serving job's batch script (pure: a function of its inputs, no I/O).

What a Slurm user writes to host an inference server: one node, ``--requeue`` (a lost node puts the
job back in the queue, and it starts again elsewhere), and a restart loop around ``srun`` because
Slurm restarts nothing when the server process dies: the loop is the user's, not the platform's.
The server binds port 0 by default (the kernel picks a free one, so two replicas may share a node)
and says where it listens in a ``serve_listening`` event under ``events/<job id>/``; the client finds
the node with squeue and the port there (harness/serve/slurm.py).

The loop is bounded (``max_restarts``), stops at once when the server says its checkpoint is
unusable (exit 2: a restart cannot help), and ends, not restarts, on scancel's SIGTERM. Every
start and exit is a line in ``clock-<job id>.txt`` (epoch with ns): the restarts' own evidence.
"""
from __future__ import annotations

import shlex

from ..config import Slurm
from ..render.sbatch import _node_path, check, container_binds, setup_lines
from ..spec import WORKLOAD_SCRIPT, JobSpec

SERVER_SCRIPT = "serve_model.py"    # harness/serve/base.py SERVER_SCRIPT, shipped into the serve directory
SERVE_SUBDIR = "serve"              # under the training run's directory: cleanup removes it with the run
LOAD_FAILED = 2                     # serve_model.py's exit code for an unusable checkpoint


def serve_dir(train_run_dir: str) -> str:
    return f"{train_run_dir.rstrip('/')}/{SERVE_SUBDIR}"


def script_path(train_run_dir: str, replica: int) -> str:
    return f"{serve_dir(train_run_dir)}/serve-{replica}.sbatch"


def job_name(spec: JobSpec, replica: int) -> str:
    return f"poc-serve-{spec.run_id}-{replica}"


def options(spec: JobSpec, cfg: Slurm, sdir: str, replica: int) -> list[str]:
    """The training run's site settings (partition, account, qos, ...), one node, one task."""
    opts = [f"--job-name={job_name(spec, replica)}", f"--comment=poc-run-id={spec.run_id}",
            "--nodes=1", "--ntasks=1", f"--cpus-per-task={max(1, spec.cpus_per_node)}", f"--mem={spec.memory_mb}M"]
    if spec.gpus_per_node:   # one server uses one device
        opts.append(f"--gpus-per-node={cfg.gpu_type}:1" if cfg.gpu_type else "--gpus-per-node=1")
    if cfg.gres:
        opts.append("--gres=" + ",".join(cfg.gres))
    opts.append(f"--time={cfg.time_limit}")
    for key in ("partition", "account", "qos", "reservation", "constraint"):
        val = getattr(cfg, key)
        if val:
            opts.append(f"--{key}={val}")
    # append: a requeued job (a lost node) must not overwrite the first attempt's output
    opts += ["--requeue", "--open-mode=append", f"--output={sdir}/slurm-%j.out", f"--chdir={sdir}"]
    return opts + list(cfg.extra_sbatch)


def server_argv(spec: JobSpec, cfg: Slurm, train_run_dir: str, ckpt_dir: str, port: int) -> list[str]:
    """The srun step: the server under the site's container runtime when there is one."""
    sdir = serve_dir(train_run_dir)
    py = [cfg.python, f"{sdir}/{SERVER_SCRIPT}", "--ckpt-dir", ckpt_dir, "--host", "__ADDR__", "--port", str(port),
          "--workload", f"{train_run_dir.rstrip('/')}/{WORKLOAD_SCRIPT}", "--run-id", spec.run_id,
          "--events-dir", "__EVENTS__"]
    srun = ["srun", "--nodes=1", "--ntasks=1", "--export=ALL"]
    if cfg.container == "pyxis":
        return srun + [f"--container-image={cfg.container_image}",
                       "--container-mounts=" + ",".join(f"{p}:{p}" for p in container_binds(cfg)),
                       f"--container-workdir={sdir}", "--no-container-mount-home"] + py
    if cfg.container == "apptainer":
        nv = ["--nv"] if spec.gpus_per_node and not spec.simulated_gpus else []
        binds = [w for p in container_binds(cfg) for w in ("--bind", f"{p}:{p}")]
        return srun + ["apptainer", "exec", *nv, *binds, cfg.container_image] + py
    return srun + py


def render(spec: JobSpec, cfg: Slurm, train_run_dir: str, ckpt_dir: str, replica: int, *,
           port: int = 0, max_restarts: int = 20) -> str:
    """The batch script of serving replica `replica` for the checkpoints in ckpt_dir."""
    check(spec, cfg)
    if not 0 <= port <= 65535 or max_restarts < 0 or replica < 0:
        raise ValueError(f"port {port}, max_restarts {max_restarts}, replica {replica}")
    sdir = serve_dir(train_run_dir)
    env = {"POC_RUN_ID": spec.run_id, **spec.launch_env()}
    srv = " ".join(shlex.quote(a) for a in server_argv(spec, cfg, train_run_dir, ckpt_dir, port))
    srv = srv.replace("__EVENTS__", '"$EVENTS"').replace("__ADDR__", '"$ADDR"')
    head = "\n".join(f"#SBATCH {o}" for o in options(spec, cfg, sdir, replica))
    return f"""#!/bin/bash
# k8s-slurm-poc: serving replica {replica} of run {spec.run_id} (harness/render/serving_sbatch.py).
# One node; --requeue brings the job back after a lost node; the loop below restarts a crashed server.
{head}

{setup_lines(cfg)}

set -uo pipefail
export {" ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())}
SERVE_DIR={_node_path(sdir)}
EVENTS="$SERVE_DIR/events/$SLURM_JOB_ID"     # the server's serve_listening event says its port here
CLOCK="$SERVE_DIR/clock-$SLURM_JOB_ID.txt"
MAX_RESTARTS={int(max_restarts)}
mkdir -p "$EVENTS"
# the server listens on the node's NodeAddr only: the address the harness reaches it at (scontrol show
# node, resolved as on the login node), and no other interface of the node
node="${{SLURMD_NODENAME:-$(hostname)}}"
ADDR=$(scontrol show node -o "$node" 2>/dev/null | tr ' ' '\n' | sed -n 's/^NodeAddr=//p')
case "$ADDR" in ''|*[!0-9.]*) ADDR=$(getent ahostsv4 "${{ADDR:-$node}}" | awk 'NR == 1 {{print $1}}') ;; esac
if [ -z "$ADDR" ]; then
  echo "poc-serve: no IPv4 address for node $node (its NodeAddr, resolved with getent ahostsv4)" >&2
  exit 1
fi
clock() {{
  printf '%s %s %s %s %s\\n' "$1" "$(date +%s.%N)" "${{SLURM_RESTART_COUNT:-0}}" "$(hostname)" "$2" >> "$CLOCK"
}}
# scancel sends SIGTERM: end the loop (and the server) instead of restarting it
stopping=0 srv=
trap 'stopping=1; kill -TERM "$srv" 2>/dev/null' TERM
n=0
while [ "$stopping" = 0 ]; do
  clock server_start "$n"
  {srv} &
  srv=$!
  wait "$srv"; rc=$?
  while kill -0 "$srv" 2>/dev/null; do wait "$srv"; rc=$?; done   # wait was cut short by the trap
  clock server_exit "$n:$rc"
  [ "$stopping" = 1 ] && exit 0
  if [ "$rc" -eq {LOAD_FAILED} ]; then
    echo "poc-serve: the server cannot load the checkpoint (exit {LOAD_FAILED}); not restarting" >&2
    exit {LOAD_FAILED}
  fi
  n=$((n + 1))
  if [ "$n" -gt "$MAX_RESTARTS" ]; then
    echo "poc-serve: the server exited $rc; $MAX_RESTARTS restarts used" >&2
    exit "$rc"
  fi
  echo "poc-serve: the server exited $rc at $(date +%s.%N); restart $n of $MAX_RESTARTS"
  sleep 1
done
exit 0
"""
