"""A checkpoint someone else planted is never loaded, and none runs code when it is: the shipped workload
(harness/data/workloads/ddp_train.py) with real torch, real files and, as root, a second real uid.

torch before 2.6 (the examples' 2.4 image) unpickled whatever a checkpoint held unless weights_only=True
was passed; TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 gives today's torch that default back, so the tests see
what a 2.4 image would have done."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import stat
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

# torch is a test dependency: without it these tests fail, never skip (the USR1 and SIGTERM checkpoints among them)
import torch
from support.paths import ROOT

SHIPPED = ROOT / "harness" / "data" / "workloads" / "ddp_train.py"
_spec = importlib.util.spec_from_file_location("ddp_train_checkpoints", SHIPPED)
ddp_train = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ddp_train)

MARK = "c0ffee0123456789abcdef0123456789"
OTHER = 65533
IS_ROOT = os.geteuid() == 0
AS_TORCH_2_4 = pytest.mark.filterwarnings("ignore:Environment variable TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")


class Payload:
    """What a hostile checkpoint holds: unpickling it opens (so creates) the canary file."""

    def __init__(self, canary: Path):
        self.canary = str(canary)

    def __reduce__(self):
        return (open, (self.canary, "w"))


def own_dir(path: Path) -> Path:
    path.mkdir(parents=True, mode=0o700, exist_ok=True)
    path.chmod(0o700)
    return path


def checkpoint(step: int = 7) -> dict:
    """A checkpoint as the workload saves one: the mlp, its SGD state, the step."""
    args = SimpleNamespace(model="mlp", model_params="20K", layers=2, batch=4, vocab_size=0, seq_len=0)
    w = ddp_train.setup_model(args, torch, torch.device("cpu"))
    opt = w["optimizer"](w["model"].parameters())
    return {"model": w["model"].state_dict(), "opt": opt.state_dict(), "step": step, **w["ckpt_extra"]}


@pytest.fixture
def single_rank(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for k, v in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "WORLD_SIZE": "1",
                 "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}.items():
        monkeypatch.setenv(k, v)
    saved = signal.getsignal(signal.SIGUSR1)
    yield
    signal.signal(signal.SIGUSR1, saved)
    if torch.distributed.is_initialized():   # a run refused after its rendezvous exits the process there
        torch.distributed.destroy_process_group()


def main(run: Path, ckpt: Path, *extra: str) -> tuple[int, list[dict]]:
    argv = ["--model-params", "20K", "--layers", "2", "--batch", "4", "--steps", "9", "--sweep", "",
            "--ckpt-dir", str(ckpt), "--ckpt-every", "0", "--events-dir", str(run / "events"), *extra]
    rc = ddp_train.main(argv)
    events = [json.loads(line) for f in sorted((run / "events").glob("*.jsonl")) for line in f.read_text().splitlines()]
    return rc, events


# ------------------------------------------------------------------ a pickle never runs
@AS_TORCH_2_4
def test_a_pickled_payload_in_a_checkpoint_does_not_run_when_the_run_resumes(single_rank, tmp_path, monkeypatch,
                                                                             capsys):
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")   # torch 2.4's default: unpickle everything
    canary = tmp_path / "canary"
    ckpt = own_dir(tmp_path / "run" / "ckpt")
    torch.save({"model": Payload(canary), "opt": {}, "step": 8}, ckpt / "ckpt-8.pt")
    rc, events = main(tmp_path / "run", ckpt)
    assert not canary.exists(), "the checkpoint's pickle ran"
    assert rc == ddp_train.CHECKPOINT_REFUSED
    refused = [e for e in events if e["kind"] == "workload_error"]
    assert len(refused) == 1 and refused[0]["error"] == "checkpoint"
    assert refused[0]["message"].startswith("the checkpoint does not load as tensors and plain values: ")
    assert "nothing was loaded" in refused[0]["tip"]
    assert not [e for e in events if e["kind"] in ("checkpoint_loaded", "train_start")]
    assert "poc-workload: ERROR the checkpoint does not load as tensors" in capsys.readouterr().err


@AS_TORCH_2_4
def test_safe_load_is_weights_only_whatever_torchs_default(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    canary = tmp_path / "canary"
    torch.save([Payload(canary)], tmp_path / "ckpt-1.pt")
    fd = os.open(tmp_path / "ckpt-1.pt", os.O_RDONLY)
    try:
        with pytest.raises(ddp_train.CheckpointRefused, match="does not load as tensors and plain values"):
            ddp_train.safe_load(torch, fd, {"map_location": "cpu"})
    finally:
        os.close(fd)
    assert not canary.exists()


def test_a_torch_without_weights_only_is_refused_not_asked_to_unpickle():
    def load(f, map_location=None, pickle_module=None, **pickle_load_args):   # torch 1.12's torch.load
        raise AssertionError("a torch that can only unpickle must not be asked to load")
    with pytest.raises(ddp_train.CheckpointRefused, match=r"torch 1\.12\.1 has no torch\.load\(weights_only=\.\.\.\)"):
        ddp_train.safe_load(SimpleNamespace(load=load, __version__="1.12.1"), 0, {})


@pytest.mark.parametrize("kind", ["mlp", "transformer"])
def test_what_the_workload_saves_loads_as_weights_only(tmp_path, kind):
    """The model's state dict, SGD's or AdamW's state (tensors, their step counts, the parameter groups'
    floats, bools and None), the step and the transformer's dims: nothing weights_only refuses."""
    args = SimpleNamespace(model=kind, model_params="200K" if kind == "transformer" else "20K", layers=2, batch=2,
                           vocab_size=256, seq_len=16)
    w = ddp_train.setup_model(args, torch, torch.device("cpu"))
    model, opt = w["model"], w["optimizer"](w["model"].parameters())
    x, y = w["batch"](torch.Generator().manual_seed(1))
    w["loss"](model(x), y).backward()
    opt.step()                                                   # AdamW: exp_avg, exp_avg_sq, step tensors
    saved = {"model": model.state_dict(), "opt": opt.state_dict(), "step": 3, **w["ckpt_extra"]}
    ckpt = own_dir(tmp_path / "ckpt")
    torch.save(saved, ckpt / "ckpt-3.pt")
    fd = ddp_train.checkpoint_dir_fd(str(ckpt))
    try:
        state, path, size = ddp_train.load_newest_checkpoint(torch, fd, str(ckpt), w["load"])
    finally:
        os.close(fd)
    assert path == str(ckpt / "ckpt-3.pt") and size == (ckpt / "ckpt-3.pt").stat().st_size
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    assert state["step"] == 3 and state.get("dims") == saved.get("dims")
    for k, v in saved["model"].items():
        assert torch.equal(state["model"][k], v)


# ------------------------------------------------------------------ only from the run's own directory
def test_a_checkpoint_directory_others_can_write_is_never_read(single_rank, tmp_path, capsys):
    """A directory at the checkpoint path that anyone may write (a co-user made it, or planted into it)."""
    ckpt = tmp_path / "run" / "ckpt"
    ckpt.mkdir(parents=True)
    ckpt.chmod(0o777)
    torch.save(checkpoint(step=9), ckpt / "ckpt-9.pt")   # step 9 of 9: loaded, the run would train nothing
    rc, events = main(tmp_path / "run", ckpt)
    assert not [e for e in events if e["kind"] == "checkpoint_loaded"], "the planted checkpoint was loaded"
    assert rc == ddp_train.CHECKPOINT_REFUSED
    assert [e["kind"] for e in events] == ["process_start", "workload_error"]   # before the rendezvous
    assert events[-1]["message"] == f"the checkpoint directory {ckpt} is writable by other users (mode 777)"


@pytest.mark.skipif(not IS_ROOT, reason="a second uid's directory can only be made as root")
def test_a_checkpoint_directory_of_another_uid_is_never_read(tmp_path):
    ckpt = own_dir(tmp_path / "ckpt")
    torch.save(checkpoint(), ckpt / "ckpt-7.pt")
    os.chown(ckpt, OTHER, OTHER)
    with pytest.raises(ddp_train.CheckpointRefused, match=f"is owned by uid {OTHER}, not this job's uid 0"):
        ddp_train.checkpoint_dir_fd(str(ckpt))


def test_a_checkpoint_directory_that_is_a_link_is_never_read(tmp_path):
    theirs = own_dir(tmp_path / "theirs")
    torch.save(checkpoint(), theirs / "ckpt-7.pt")
    (tmp_path / "ckpt").symlink_to(theirs)
    with pytest.raises(ddp_train.CheckpointRefused, match="is not a directory of its own"):
        ddp_train.checkpoint_dir_fd(str(tmp_path / "ckpt"))


def test_a_checkpoint_that_is_a_link_is_never_read(tmp_path):
    ckpt = own_dir(tmp_path / "ckpt")
    torch.save(checkpoint(), tmp_path / "elsewhere.pt")
    (ckpt / "ckpt-7.pt").symlink_to(tmp_path / "elsewhere.pt")
    fd = ddp_train.checkpoint_dir_fd(str(ckpt))
    try:
        with pytest.raises(ddp_train.CheckpointRefused, match="cannot be opened safely"):
            ddp_train.load_newest_checkpoint(torch, fd, str(ckpt), {"map_location": "cpu"})
    finally:
        os.close(fd)


def test_no_checkpoint_directory_is_a_fresh_start(tmp_path):
    assert ddp_train.checkpoint_dir_fd(str(tmp_path / "none")) is None
    assert ddp_train.checkpoint_dir_fd("") is None
    run = own_dir(tmp_path / "run")
    (run / ".poc-owner").write_text("not even this run's")     # nothing to load: no mark is asked for
    assert ddp_train.checkpoint_dir_fd(str(run / "ckpt"), str(run / ".poc-owner"), MARK) is None


def run_dir_with_mark(tmp_path: Path, mark: str | None = MARK) -> tuple[Path, Path]:
    run = own_dir(tmp_path / "camp-aa11" / "r1")
    if mark is not None:
        (run / ".poc-owner").write_text(mark)
        (run / ".poc-owner").chmod(0o600)
    ckpt = own_dir(run / "ckpt")
    torch.save(checkpoint(), ckpt / "ckpt-7.pt")
    return run, ckpt


def test_under_the_runs_own_mark_the_newest_checkpoint_is_loaded(tmp_path):
    run, ckpt = run_dir_with_mark(tmp_path)
    torch.save(checkpoint(step=8), ckpt / "ckpt-8.pt")
    fd = ddp_train.checkpoint_dir_fd(str(ckpt), str(run / ".poc-owner"), MARK)
    try:
        state, path, _ = ddp_train.load_newest_checkpoint(torch, fd, str(ckpt), {"map_location": "cpu"})
    finally:
        os.close(fd)
    assert state["step"] == 8 and path.endswith("ckpt-8.pt")


@pytest.mark.parametrize(("mark", "why"), [
    ("bb22", "is not this run's"),                    # another run's (or campaign's) mark
    (MARK + "x", "is not this run's"),                # one that begins like this run's
    (None, "holds no owner mark"),
])
def test_a_directory_under_another_mark_or_none_is_never_read(tmp_path, mark, why):
    run, ckpt = run_dir_with_mark(tmp_path, mark)
    with pytest.raises(ddp_train.CheckpointRefused, match=why):
        ddp_train.checkpoint_dir_fd(str(ckpt), str(run / ".poc-owner"), MARK)


def test_a_mark_that_is_a_link_or_not_a_file_is_refused(tmp_path):
    run, ckpt = run_dir_with_mark(tmp_path, None)
    (tmp_path / "copied-mark").write_text(MARK)
    (run / ".poc-owner").symlink_to(tmp_path / "copied-mark")
    with pytest.raises(ddp_train.CheckpointRefused, match=r"owner mark .* cannot be read safely"):
        ddp_train.checkpoint_dir_fd(str(ckpt), str(run / ".poc-owner"), MARK)
    (run / ".poc-owner").unlink()
    os.mkfifo(run / ".poc-owner")                     # read without O_NONBLOCK, this would hang
    with pytest.raises(ddp_train.CheckpointRefused, match="is not a file"):
        ddp_train.checkpoint_dir_fd(str(ckpt), str(run / ".poc-owner"), MARK)


def test_a_writable_directory_between_the_mark_and_the_checkpoints_is_refused(tmp_path):
    run, ckpt = run_dir_with_mark(tmp_path)
    ckpt.chmod(0o757)
    with pytest.raises(ddp_train.CheckpointRefused, match=r"ckpt/ in .* is writable by other users \(mode 757\)"):
        ddp_train.checkpoint_dir_fd(str(ckpt), str(run / ".poc-owner"), MARK)


def test_a_checkpoint_directory_the_mark_does_not_cover_is_refused(tmp_path):
    run, _ = run_dir_with_mark(tmp_path)
    other = own_dir(tmp_path / "elsewhere")
    with pytest.raises(ddp_train.CheckpointRefused, match=r"is not in .*, which holds the owner mark"):
        ddp_train.checkpoint_dir_fd(str(other), str(run / ".poc-owner"), MARK)


def test_a_directory_swapped_in_after_the_check_is_not_the_one_read(tmp_path):
    """The check and the load are seconds apart (the rendezvous, the sweep): what is read is the directory
    that was checked, through its descriptor, not whatever the path names by then."""
    run, ckpt = run_dir_with_mark(tmp_path)
    fd = ddp_train.checkpoint_dir_fd(str(ckpt), str(run / ".poc-owner"), MARK)
    try:
        ckpt.rename(run / "moved")
        planted = own_dir(run / "ckpt")
        torch.save(checkpoint(step=99), planted / "ckpt-99.pt")
        state, _, _ = ddp_train.load_newest_checkpoint(torch, fd, str(ckpt), {"map_location": "cpu"})
    finally:
        os.close(fd)
    assert state["step"] == 7


# ------------------------------------------------------------------ the mark the workload writes
def test_the_workloads_mark_is_0600_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        ddp_train.write_owner_mark(str(tmp_path / "run" / ".poc-owner"), MARK)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "run" / ".poc-owner").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "run").stat().st_mode) == 0o700


def test_the_mark_is_never_written_through_a_link(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ".poc-owner").symlink_to(tmp_path / "theirs")
    ddp_train.write_owner_mark(str(tmp_path / "run" / ".poc-owner"), MARK)
    assert not (tmp_path / "theirs").exists()


@pytest.mark.skipif(not IS_ROOT, reason="a second uid's directory can only be made as root")
def test_the_mark_is_never_written_in_another_users_directory(capsys):
    """A co-user made the checkpoint directory first: writing the mark there would hand them the value
    that makes their directory pass for this run's."""
    base = Path(tempfile.mkdtemp(prefix="poc-mark-"))
    try:
        theirs = base / "ckpt"
        theirs.mkdir(mode=0o777)
        os.chown(theirs, OTHER, OTHER)
        ddp_train.write_owner_mark(str(theirs / ".poc-owner"), MARK)
        assert not (theirs / ".poc-owner").exists()
        assert "another user owns it" in capsys.readouterr().err
    finally:
        shutil.rmtree(base)
