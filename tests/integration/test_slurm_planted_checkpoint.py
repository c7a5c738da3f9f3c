"""A co-user cannot plant a checkpoint a run loads, on the Slurm-in-Docker cluster with two real uids.

The victim is the harness as user poc (ssh to the login node), with slurm.workdir and slurm.checkpoint_dir
in a directory every user may write (mode 1777, like /tmp or a scratch file system). The co-user is
`nobody` (uid 65534) on the same login node, acting through `docker exec -u 65534`. They know what any
co-user can see: the campaign's directory name (its public owner id), the run ids, and, worst case, the
run's owner mark (it is in the workload's argv, which `ps` shows on its nodes).

- Planted before the run: the co-user makes the run's directory (or its checkpoint directory) first,
  with a loadable checkpoint of the run's model at the last step and a mark in it. The submit is refused
  with ERROR/TIP and their files are left as they were: nothing of theirs is taken, nothing loaded.
- Planted while the job queues: the co-user acts between the submit's preparation and sbatch (a real
  queue can hold a job for hours; here a transport runs the co-user's commands just before sbatch). The
  checkpoint directory already exists, the user's alone (0700): they can make nothing in it, and the run
  trains from step 0.

Before the fix the first case took the co-user's directory and the second loaded their checkpoint
(checkpoint_loaded at step 24 of 24: a run that trained nothing and reported success)."""
from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest
from _slurm_checks import settings_without_starting

from harness import config
from harness.backends.slurm import SlurmBackend
from harness.clusters import slurm_docker
from harness.owner import dir_mark, load_or_create
from harness.pipeline import campaign
from harness.render.local import workload_script
from harness.render.owned_dir import OWNER_MARK
from harness.spec import build, campaign_dir
from harness.store import Store, load_events

pytestmark = [
    pytest.mark.integration, pytest.mark.slurm,
    pytest.mark.filterwarnings("ignore:unclosed file:ResourceWarning"),   # see test_slurm_runs.py
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]
RELEASE = os.environ.get("POC_SLURM_RELEASE", "trixie")
NOBODY = "65534"
WORKLOAD = {"model_params": "200K", "layers": 2, "steps": 24, "checkpoint_every": 5, "sweep": "", "batch": 8}
RUN_ID = "slurm-clean-01"

# What the co-user runs: the run's own model (the workload's setup_model, the source read on stdin) saved
# as the workload saves a checkpoint, at the run's last step; then their mark beside it.
PLANT = r'''
import os, sys, types
from types import SimpleNamespace
import torch
w = types.ModuleType("w"); exec(compile(sys.stdin.read(), "ddp_train.py", "exec"), w.__dict__)
path, step, mark, params, layers, batch = sys.argv[1:7]
a = SimpleNamespace(model="mlp", model_params=params, layers=int(layers), batch=int(batch), vocab_size=0, seq_len=0)
m = w.setup_model(a, torch, torch.device("cpu"))
opt = m["optimizer"](m["model"].parameters())
os.makedirs(path, mode=0o777, exist_ok=True)
os.chmod(path, 0o777); os.chmod(os.path.dirname(path), 0o777)
torch.save({"model": m["model"].state_dict(), "opt": opt.state_dict(), "step": int(step)}, f"{path}/ckpt-{step}.pt")
with open(f"{path}/.poc-owner", "w") as f:
    f.write(mark)
'''


def as_user(user: str, argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "exec", "-i", "-u", user, "-e", "HOME=/tmp", slurm_docker.LOGIN_CONTAINER,
                           *argv], input=stdin, capture_output=True, text=True, timeout=300, check=False)


def plant(path: str, mark: str) -> subprocess.CompletedProcess:
    """As the co-user: a loadable checkpoint of the run's model at its last step, and a mark, at path."""
    return as_user(NOBODY, ["python3", "-c", PLANT, path, str(WORKLOAD["steps"]), mark, WORKLOAD["model_params"],
                            str(WORKLOAD["layers"]), str(WORKLOAD["batch"])], stdin=workload_script().read_text())


def listing(path: str) -> str:
    return as_user("0", ["sh", "-c", 'cd "$1" && find . -exec stat -c "%n %u %a" {} +', "sh", path]).stdout


@pytest.fixture(scope="module")
def cluster():
    return settings_without_starting(RELEASE)


@pytest.fixture
def shared(cluster):
    """A directory every user of the cluster may write, as scratch file systems are."""
    root = f"/shared/pub-{uuid.uuid4().hex[:8]}"
    assert as_user("0", ["install", "-d", "-m", "1777", root]).returncode == 0
    yield root
    as_user("0", ["rm", "-rf", "--", root])


def setup(tmp_path: Path, shared: str, camp: str):
    cfg = config.from_mapping({"campaign": camp, "platforms": ["slurm"], "repetitions": 1, "faults": [],
                               "workload": WORKLOAD, "keep_run_files": "never",
                               "timeouts": {"queue_s": 120, "run_s": 300},
                               "slurm": {"workdir": f"{shared}/work", "checkpoint_dir": f"{shared}/ckpt"}})
    results = tmp_path / "results"
    key = load_or_create(results / camp)   # the campaign's key, as its first `poc run` makes it
    cdir = campaign_dir(camp, key.id)       # public: the directories' name
    return cfg, Store(str(results), camp), cdir, dir_mark(key, cdir, RUN_ID)


@pytest.mark.parametrize("where", ["ckpt", "work"])
@pytest.mark.parametrize("learnt", ["owner id", "owner mark"])
def test_a_directory_planted_before_the_run_is_refused_and_left_as_it_was(cluster, shared, tmp_path, where, learnt):
    cfg, store, cdir, mark = setup(tmp_path, shared, f"plant-{where}-{learnt.split()[1]}")
    target = f"{shared}/{where}/{cdir}/{RUN_ID}"
    res = plant(target, cdir.rsplit("-", 1)[1] if learnt == "owner id" else mark)
    assert res.returncode == 0, res.stderr
    before = listing(f"{shared}/{where}")
    (rec,) = campaign(cfg, ["slurm"], store, lambda p: SlurmBackend.from_config(cfg), resume=False)
    print(f"\n{where}, {learnt}: {rec['status']}: {rec.get('error', {}).get('message')}")
    assert rec["status"] == "failed" and rec["error"]["stage"] == "submit", rec.get("error")
    assert f"{target}" in rec["error"]["message"] and "owned by another user" in rec["error"]["message"]
    assert "nothing was removed" in rec["error"]["tip"]
    assert listing(f"{shared}/{where}") == before            # every file of theirs, owner and mode as it was
    assert not [e for e in load_events(store.run_dir(RUN_ID)) or [] if e["kind"] == "checkpoint_loaded"]


class CoUserBeforeSbatch:
    """The harness's transport, with the co-user acting just before sbatch: after the submit prepared the
    run's directories, while the job would wait in the queue."""

    def __init__(self, inner, act):
        self.inner, self.act, self.acted = inner, act, []

    def run(self, argv, **kw):
        if argv and argv[0] == "sbatch":
            self.acted.append(self.act(argv))
        return self.inner.run(argv, **kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_checkpoint_planted_while_the_job_queues_is_never_loaded(cluster, shared, tmp_path):
    cfg, store, cdir, mark = setup(tmp_path, shared, "plant-queued")
    ckpt = f"{shared}/ckpt/{cdir}/{RUN_ID}"
    real = SlurmBackend.from_config(cfg)
    attack = CoUserBeforeSbatch(real.sched.t.inner, lambda _argv: plant(ckpt, mark))
    be = SlurmBackend(cfg.slurm, attack, docker=real.docker)
    (rec,) = campaign(cfg, ["slurm"], store, lambda p: be, resume=False)
    (tried,) = attack.acted
    print(f"\nthe co-user's plant: rc {tried.returncode}: {tried.stderr.strip().splitlines()[-1:]}")
    events = load_events(store.run_dir(RUN_ID)) or []
    loaded = [e for e in events if e["kind"] == "checkpoint_loaded"]
    # before the fix: both ranks loaded ckpt-24.pt (step 24 of 24) and the run was recorded ok
    assert loaded and all(e["step"] == 0 and e["path"] is None for e in loaded), loaded
    assert tried.returncode != 0 and "Permission denied" in tried.stderr    # the directory is the user's alone
    assert rec["status"] == "ok", rec.get("error")
    assert max(e["step"] for e in events if e["kind"] == "step") == WORKLOAD["steps"]
    assert [e["step"] for e in events if e["kind"] == "checkpoint_saved" and e["rank"] == 0] == [5, 10, 15, 20]


def test_the_spec_names_the_directories_the_co_user_aimed_at(tmp_path):
    """The test's paths are the harness's: a change there would make the attacks above miss."""
    cfg, _store, cdir, mark = setup(tmp_path, "/shared/pub-x", "plant-paths")
    spec = build(cfg, "slurm", RUN_ID, None)
    from dataclasses import replace

    from harness.owner import load_or_create as key_of
    from harness.render.sbatch import ckpt_dir, owner_mark, run_dir
    key = key_of(tmp_path / "results" / "plant-paths")
    s = replace(spec, owner=key.id, owner_key=key)
    assert run_dir(s, cfg.slurm) == f"/shared/pub-x/work/{cdir}/{RUN_ID}"
    assert ckpt_dir(s, cfg.slurm, run_dir(s, cfg.slurm)) == f"/shared/pub-x/ckpt/{cdir}/{RUN_ID}"
    assert owner_mark(s, cfg.slurm, run_dir(s, cfg.slurm)).endswith(f"/{cdir}/{RUN_ID}/{OWNER_MARK}")
    assert s.owner_mark == mark
