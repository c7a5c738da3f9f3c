"""The batch script's launch as a GPU site would run it: the time-limit warning reaches the workers and
not torchrun's agent, the ranks get slurmd's limits, and checkpoints outside slurm.workdir are keyed by
campaign and visible inside a container.

The USR1 tests run the rendered launch under bash with the real torchrun and a worker that checkpoints
on USR1, signalled as Slurm signals a step: the task's process alone (proctrack/pgid, where torchrun's
workers, in sessions of their own, get nothing), or every process of the step (cgroup, linuxproc).
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from harness import config, spec
from harness.backends.slurm import jobdesc
from harness.errors import ConfigError
from harness.render.owned_dir import OWNER_MARK
from harness.render.sbatch import SLURM_LAUNCH, render_sbatch

WORKER = '''
import os, signal, sys, time
got = []
signal.signal(signal.SIGUSR1, lambda *a: got.append(1))
open(os.path.join(sys.argv[1], "started-%d" % os.getpid()), "w").close()
t0 = time.monotonic()
while not got and time.monotonic() - t0 < 30:
    time.sleep(0.05)
time.sleep(0.5)     # a second USR1 (Slurm's and the forwarded one) lands here: one checkpoint still
with open(os.path.join(sys.argv[1], "checkpoints"), "a") as f:
    f.write("signal %d\\n" % len(got) if got else "none\\n")
sys.exit(0 if got else 3)
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/status") as f:
                    ppid = next(int(ln.split()[1]) for ln in f if ln.startswith("PPid:"))
            except (OSError, StopIteration):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def _launch(tmp_path, launch: str):
    """The launch script under bash as srun's task, running torchrun with one worker on this host."""
    (tmp_path / "worker.py").write_text(WORKER)
    argv = ["bash", "-c", launch, sys.executable, "--nnodes=1", "--nproc_per_node=1", "--rdzv_backend=c10d",
            f"--rdzv_endpoint=127.0.0.1:{_free_port()}", "--max_restarts=0", str(tmp_path / "worker.py"),
            str(tmp_path)]
    proc = subprocess.Popen(argv, env={**os.environ, "SLURM_NODEID": "0"}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while not any(p.name.startswith("started-") for p in tmp_path.iterdir()):
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.monotonic() < deadline, "the worker never started"
        time.sleep(0.1)
    return proc


@pytest.mark.parametrize("everyone", [False, True], ids=["task-only", "every-process"])
def test_usr1_reaches_the_workers_and_torchrun_goes_on(tmp_path, everyone):
    proc = _launch(tmp_path, SLURM_LAUNCH)
    targets = [proc.pid] + (_descendants(proc.pid) if everyone else [])
    for pid in targets:
        os.kill(pid, signal.SIGUSR1)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out.decode()[-2000:]
    assert (tmp_path / "checkpoints").read_text().startswith("signal")


def test_the_launch_keeps_torchruns_exit_status(tmp_path):
    (tmp_path / "worker.py").write_text("import sys; sys.exit(5)\n")
    res = subprocess.run(["bash", "-c", SLURM_LAUNCH, sys.executable, "--nnodes=1", "--nproc_per_node=1",
                          "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{_free_port()}", "--max_restarts=0",
                          str(tmp_path / "worker.py")], env={**os.environ, "SLURM_NODEID": "0"},
                         capture_output=True, timeout=120, check=False)
    assert res.returncode != 0


def _render(slurm: dict, campaign: str = "", owner: str = ""):
    cfg = config.from_mapping({"platforms": ["slurm"], "slurm": slurm})
    s = spec.build(cfg, "slurm", "slurm-clean-01", None)
    import dataclasses
    return render_sbatch(dataclasses.replace(s, campaign=campaign or s.campaign, owner=owner), cfg.slurm)


def test_ranks_get_slurmds_limits_not_the_submitting_shells():
    job = _render({})
    assert "#SBATCH --propagate=NONE\n" in job.script
    # a site that wants a limit propagated says so, and its option comes later, so it wins
    later = _render({"extra_sbatch": ["--propagate=STACK"]}).script
    assert later.index("--propagate=NONE") < later.index("--propagate=STACK")


def test_propagate_none_is_what_a_rest_job_gets_and_nothing_else_is_accepted():
    job = jobdesc.job_description(_render({}).script, "/shared/poc/x")
    assert not any(k.startswith("rlimit") for k in job)
    with pytest.raises(ConfigError, match="only be NONE"):
        jobdesc.job_description("#!/bin/bash\n#SBATCH --propagate=STACK\n", "/shared/poc/x")


def test_checkpoints_outside_the_workdir_are_keyed_by_campaign_and_run_and_owned():
    job = _render({"checkpoint_dir": "/lustre/ckpt"}, campaign="smoke", owner="t0k")
    assert job.ckpt_dir == "/lustre/ckpt/smoke-t0k/slurm-clean-01"
    assert f"--owner-mark /lustre/ckpt/smoke-t0k/slurm-clean-01/{OWNER_MARK} " in job.script
    assert "--owner t0k " in job.script
    # checkpoints in the run directory: the run directory's mark (the backend writes it) is the one the
    # workload checks before it loads a checkpoint from ckpt/
    plain = _render({}, campaign="smoke", owner="t0k")
    assert plain.ckpt_dir == "/shared/poc/smoke-t0k/slurm-clean-01/ckpt"
    assert f"--owner-mark /shared/poc/smoke-t0k/slurm-clean-01/{OWNER_MARK} " in plain.script
    assert "--owner t0k " in plain.script
    assert "\numask 077\nmkdir -p \"$RUN_DIR/ckpt\"" in plain.script   # ckpt/ and events/ are the user's alone


@pytest.mark.parametrize("container,mount", [
    ("pyxis", "--container-mounts=/shared/poc:/shared/poc,/lustre/ckpt:/lustre/ckpt "),
    ("apptainer", "--bind /shared/poc:/shared/poc \\\n  --bind /lustre/ckpt:/lustre/ckpt "),
])
def test_a_container_sees_the_checkpoint_directory(container, mount):
    job = _render({"container": container, "container_image": "/images/w.sqsh", "workdir": "/shared/poc",
                   "checkpoint_dir": "/lustre/ckpt"})
    assert mount in job.script


def test_a_checkpoint_directory_inside_the_workdir_is_mounted_once():
    job = _render({"container": "pyxis", "container_image": "/images/w.sqsh", "workdir": "/shared/poc",
                   "checkpoint_dir": "/shared/poc/ckpt"})
    assert "--container-mounts=/shared/poc:/shared/poc \\" in job.script


def test_the_launch_script_is_one_line_so_sacct_keeps_the_steps_row_whole():
    # sacct -P prints a step's SubmitLine as srun got it: a newline in it split the step's row in the
    # audit's sacct reading (one job read as 8 attempts)
    assert "\n" not in SLURM_LAUNCH
    assert subprocess.run(["bash", "-n", "-c", SLURM_LAUNCH], check=False).returncode == 0


# --local_addr: each agent names itself by its node's address as Slurm reaches it. The launch runs under bash
# with a stand-in for the Python that prints the torchrun arguments it was given.
def _agent_args(tmp_path, env: dict) -> list[str]:
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    fake.chmod(0o755)
    base = {k: v for k, v in os.environ.items() if k not in ("SLURMD_NODENAME", "POC_NODE_ADDRS")}
    res = subprocess.run(["bash", "-c", SLURM_LAUNCH, str(fake), "--nnodes=2", "train.py"],
                         env={**base, "SLURM_NODEID": "1", **env}, capture_output=True, text=True, timeout=30,
                         check=True)
    return res.stdout.splitlines()


@pytest.mark.parametrize("env, addr", [
    ({"SLURMD_NODENAME": "c2", "POC_NODE_ADDRS": "c1=10.1.0.1 c2=10.1.0.2 c3=10.1.0.3 "}, "10.1.0.2"),
    ({"SLURMD_NODENAME": "c2", "POC_NODE_ADDRS": "c22=10.1.0.22 c1=10.1.0.1"}, "c2"),   # not in the map: NodeName
    ({"SLURMD_NODENAME": "c2"}, "c2"),
    ({}, socket.gethostname()),                          # outside a Slurm step: the host name, as torchrun would
])
def test_each_agent_names_itself_by_its_nodes_address(tmp_path, env, addr):
    got = _agent_args(tmp_path, env)
    assert got[:3] == ["-m", "torch.distributed.run", "--rdzv_conf=is_host=0"]
    assert got[3] == f"--local_addr={addr}" and got[4:] == ["--nnodes=2", "train.py"]


def test_the_batch_script_maps_each_node_to_its_address_from_scontrol(tmp_path):
    """The rendered line runs under bash with an `scontrol` that prints `show node -o` as Slurm 24.11 does
    (NodeAddr differs from NodeName on c2 here)."""
    from support.paths import FIXTURES
    shown = (FIXTURES / "slurm" / "drill" / "show_node.txt").read_text().replace("NodeAddr=c2 ", "NodeAddr=10.1.0.2 ")
    (tmp_path / "shown").write_text(shown)
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "scontrol").write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/asked\ncat {tmp_path}/shown\n')
    (bin_ / "scontrol").chmod(0o755)
    line = next(ln for ln in _render({}).script.splitlines() if ln.startswith("export POC_NODE_ADDRS="))
    res = subprocess.run(["bash", "-c", f'set -uo pipefail; {line}; printf "%s" "$POC_NODE_ADDRS"'],
                         env={**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "c[1-3]"},
                         capture_output=True, text=True, timeout=30, check=True)
    assert res.stdout.split() == ["c1=c1", "c2=10.1.0.2", "c3=c3"]
    assert (tmp_path / "asked").read_text().split() == ["show", "node", "-o", "c[1-3]"]


def _render_fabric(fabric: dict, **slurm):
    cfg = config.from_mapping({"platforms": ["slurm"], "slurm": slurm, "fabric": {"env": fabric}})
    return render_sbatch(spec.build(cfg, "slurm", "slurm-clean-01", None), cfg.slurm)


def test_gloo_takes_the_interface_named_for_nccl_in_every_container_form():
    assert "NCCL_SOCKET_IFNAME=ib0 GLOO_SOCKET_IFNAME=ib0" in _render_fabric({"NCCL_SOCKET_IFNAME": "ib0"}).script
    pyxis = _render_fabric({"NCCL_SOCKET_IFNAME": "ib0"}, container="pyxis", container_image="/images/w.sqsh").script
    names = next(w for w in pyxis.split() if w.startswith("--container-env=")).split("=", 1)[1].split(",")
    assert names[-2:] == ["NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"]   # the image cannot mask it
    app = _render_fabric({"NCCL_SOCKET_IFNAME": "ib0"}, container="apptainer", container_image="/images/w.sqsh")
    assert "APPTAINERENV_GLOO_SOCKET_IFNAME=ib0" in app.script


def test_gloo_keeps_the_users_interface_and_its_default_where_nccl_names_none():
    own = _render_fabric({"NCCL_SOCKET_IFNAME": "ib0", "GLOO_SOCKET_IFNAME": "bond0"}).script
    assert "GLOO_SOCKET_IFNAME=bond0" in own and "GLOO_SOCKET_IFNAME=ib0" not in own
    assert "GLOO_SOCKET_IFNAME" not in _render_fabric({"NCCL_SOCKET_IFNAME": "^docker,lo"}).script
    assert "GLOO_SOCKET_IFNAME" not in _render({}).script
