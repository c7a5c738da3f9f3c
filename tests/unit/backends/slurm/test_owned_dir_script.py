"""The owned-directory command (render/owned_dir.py) run for real with sh on real directories, with two
real uids where ownership is the point: as root the test runs the command as `nobody` (setpriv), the
user a co-user's directory must be refused to; run as another user it needs root to make the second
uid's files, and says so.

What is checked is what a co-user on a shared file system could do: plant a directory (with a mark they
learnt), point the directory or its mark at something else through a symbolic link, make the directory
between the check and the mkdir, or leave a file the user cannot remove (the command said 0 then)."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from harness.backends.slurm import guard
from harness.errors import BackendError
from harness.render.owned_dir import CANNOT_CLEAR, MARK_NOT_OURS, OWNER_MARK, owned_dir_argv
from harness.transports import LocalTransport

NOBODY = 65534
OTHER = 65533          # a second uid that is neither the caller nor root
ROOT = os.geteuid() == 0
MARK = "3f1c0a9e5b7d2c4e6f8091a2b3c4d5e6"


@pytest.fixture
def shared():
    """A world-writable sticky directory, like /tmp or a scratch file system: every uid may make entries."""
    d = Path(tempfile.mkdtemp(prefix="poc-owned-"))
    d.chmod(0o1777)
    yield d
    subprocess.run(["chmod", "-R", "u+rwX", str(d)], check=False)
    shutil.rmtree(d)


def run(mode: str, path: Path, mark: str = MARK, as_uid: int | None = None, umask: int | None = None,
        env: dict | None = None) -> subprocess.CompletedProcess:
    """The real command; as_uid: run as that uid (needs root)."""
    argv = owned_dir_argv(mode, str(path), mark)
    if as_uid is not None:
        argv = ["setpriv", f"--reuid={as_uid}", f"--regid={as_uid}", "--clear-groups", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False, env=env,
                          preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)


def make_dir(path: Path, uid: int, mark: str | None = MARK) -> Path:
    path.mkdir(parents=True)
    (path / "ckpt-999.pt").write_text("planted")
    if mark is not None:
        (path / OWNER_MARK).write_text(mark)
    for p in (path, *path.iterdir()):
        os.lchown(p, uid, uid)
    return path


needs_root = pytest.mark.skipif(not ROOT, reason="a second uid's files can only be made as root")


# ------------------------------------------------------------------ a clear that fails is a failure
def test_a_directory_rm_cannot_empty_fails_with_its_own_exit_code(shared):
    """The command exited 0 when `rm -rf` failed, and prepare then wrote the mark into what was left."""
    d = shared / "camp-aa11" / "r1"
    locked = d / "locked"
    if ROOT:   # the caller is nobody; a directory of root's inside theirs holds a file nobody can unlink
        make_dir(d, NOBODY)
        (shared / "camp-aa11").chmod(0o777)
        locked.mkdir()
        (locked / "ckpt-10.pt").write_text("root's")
        who = NOBODY
    else:      # the caller's own read-only directory holds a file it cannot unlink
        make_dir(d, os.geteuid())
        locked.mkdir()
        (locked / "ckpt-10.pt").write_text("stuck")
        locked.chmod(0o555)
        who = None
    for mode in ("remove", "prepare"):
        res = run(mode, d, as_uid=who)
        assert res.returncode == CANNOT_CLEAR, (mode, res)
        assert f"{d}: could not remove all of it" in res.stderr
        # what could go went; the mark stays with what could not, so the directory is still the run's
        assert (locked / "ckpt-10.pt").exists() and not (d / "ckpt-999.pt").exists()
        assert (d / OWNER_MARK).read_text() == MARK


def test_the_backend_says_what_could_not_be_cleared():
    class Stuck:
        def run(self, argv, **_kw):
            return subprocess.CompletedProcess(argv, CANNOT_CLEAR, "", "poc-owned-dir: /w/c/r1: could not remove "
                                               "all of it (see rm's words above)\nrm: cannot remove 'x'")
    with pytest.raises(BackendError, match="could not remove all of /w/c/r1") as e:
        guard.prepare_run_dir(Stuck(), "/w/c/r1", MARK)
    assert "nothing was started in it" in e.value.tip
    with pytest.raises(BackendError, match="could not remove all of"):
        guard.remove_run_dir(Stuck(), "/w/c/r1", MARK)
    with pytest.raises(BackendError, match="could not remove all of"):
        guard.prepare_checkpoint_dir(Stuck(), "/w/c/r1", MARK)


# ------------------------------------------------------------------ symbolic links are never followed
def test_a_directory_that_is_a_symbolic_link_is_refused_and_its_target_kept(tmp_path):
    target = make_dir(tmp_path / "elsewhere", os.geteuid())
    link = tmp_path / "camp-aa11" / "r1"
    link.parent.mkdir()
    link.symlink_to(target)
    for mode in ("remove", "prepare"):
        res = run(mode, link)
        assert res.returncode == MARK_NOT_OURS and "is a symbolic link" in res.stderr, res
        assert link.is_symlink() and (target / "ckpt-999.pt").read_text() == "planted"


def test_a_mark_that_is_a_symbolic_link_is_refused(tmp_path):
    real = tmp_path / "a-readable-file"
    real.write_text(MARK)
    d = make_dir(tmp_path / "camp-aa11" / "r1", os.geteuid(), mark=None)
    (d / OWNER_MARK).symlink_to(real)
    res = run("prepare", d)
    assert res.returncode == MARK_NOT_OURS and "owner mark is a symbolic link" in res.stderr
    assert (d / "ckpt-999.pt").exists() and real.read_text() == MARK


def test_a_parent_that_is_a_symbolic_link_is_refused(tmp_path):
    (tmp_path / "theirs").mkdir()
    (tmp_path / "camp-aa11").symlink_to(tmp_path / "theirs")
    res = run("prepare", tmp_path / "camp-aa11" / "r1")
    assert res.returncode == MARK_NOT_OURS and "parent is a symbolic link" in res.stderr
    assert list((tmp_path / "theirs").iterdir()) == []


# ------------------------------------------------------------------ made afresh, this user's alone
def test_prepare_makes_the_directory_0700_and_the_mark_0600_whatever_the_umask(tmp_path):
    d = tmp_path / "camp-aa11" / "r1"
    res = run("prepare", d, umask=0)
    assert res.returncode == 0, res
    assert stat.S_IMODE(d.stat().st_mode) == 0o700 and stat.S_IMODE(d.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE((d / OWNER_MARK).stat().st_mode) == 0o600 and (d / OWNER_MARK).read_text() == MARK


def test_a_directory_made_between_the_check_and_the_mkdir_is_refused_not_reused(tmp_path):
    """The race a co-user wins by making the run directory after the command found none: `id` (which the
    command runs right before its mkdir) is the co-user here, making it at that moment."""
    shim = tmp_path / "bin"
    shim.mkdir()
    real_id = shutil.which("id")
    (shim / "id").write_text(f'#!/bin/sh\nmkdir -p "$POC_TEST_PLANT" 2>/dev/null\nexec {real_id} "$@"\n')
    (shim / "id").chmod(0o755)
    d = tmp_path / "camp-aa11" / "r1"
    res = run("prepare", d, env={**os.environ, "PATH": f"{shim}:{os.environ['PATH']}", "POC_TEST_PLANT": str(d)})
    assert res.returncode == MARK_NOT_OURS and "someone made it in the meantime" in res.stderr, res
    assert not (d / OWNER_MARK).exists()


# ------------------------------------------------------------------ another uid's directory
@needs_root
def test_a_co_users_directory_with_the_right_mark_is_refused_to_a_user(shared):
    """A co-user who learnt the mark (it is in the workload's argv) plants the run directory with it: the
    mark matches, the owner does not."""
    d = make_dir(shared / "r1", OTHER)
    for mode in ("remove", "prepare"):
        res = run(mode, d, as_uid=NOBODY)
        assert res.returncode == MARK_NOT_OURS and "owned by another user" in res.stderr, res
        assert (d / "ckpt-999.pt").read_text() == "planted" and d.stat().st_uid == OTHER


@needs_root
def test_a_users_own_directory_whose_mark_a_co_user_owns_is_refused(shared):
    d = make_dir(shared / "r1", NOBODY, mark=None)
    (d / OWNER_MARK).write_text(MARK)
    os.chown(d / OWNER_MARK, OTHER, OTHER)
    res = run("remove", d, as_uid=NOBODY)
    assert res.returncode == MARK_NOT_OURS and "no owner mark of this user's" in res.stderr
    assert (d / "ckpt-999.pt").exists()


@needs_root
def test_a_campaign_directory_a_co_user_made_is_refused(shared):
    """The co-user makes the campaign's directory (its name is public) before the run: whatever is made
    in it, they could swap."""
    camp = shared / "camp-aa11"
    camp.mkdir()
    camp.chmod(0o777)
    os.chown(camp, OTHER, OTHER)
    res = run("prepare", camp / "r1", as_uid=NOBODY)
    assert res.returncode == MARK_NOT_OURS and "parent is owned by another user" in res.stderr, res
    assert list(camp.iterdir()) == []


@needs_root
def test_a_users_own_directory_is_taken_and_remade(shared):
    d = make_dir(shared / "camp-aa11" / "r1", NOBODY)
    os.chown(d.parent, NOBODY, NOBODY)
    res = run("prepare", d, as_uid=NOBODY)
    assert res.returncode == 0, res
    assert sorted(p.name for p in d.iterdir()) == [OWNER_MARK] and d.stat().st_uid == NOBODY


@needs_root
def test_as_root_the_mark_decides_as_on_a_claim_whose_pods_run_as_root(tmp_path):
    """A Kubernetes claim's directory is written by the run's pods, whichever uid their image runs as;
    the cleanup pod (root) takes it by its mark alone and still refuses another mark."""
    d = make_dir(tmp_path / "camp-aa11" / "r1", OTHER)
    assert run("remove", d).returncode == 0 and not d.exists()
    theirs = make_dir(tmp_path / "camp-aa11" / "r2", OTHER, mark="another-runs-mark")
    assert run("remove", theirs).returncode == MARK_NOT_OURS and theirs.exists()


def test_through_the_transport_a_link_is_refused_as_not_ours(tmp_path):
    target = make_dir(tmp_path / "elsewhere", os.geteuid())
    link = tmp_path / "camp-aa11" / "r1"
    link.parent.mkdir()
    link.symlink_to(target)
    with pytest.raises(BackendError, match=r"is not this campaign's \(it is a symbolic link; nothing was touched\)"):
        guard.prepare_run_dir(LocalTransport(), str(link), MARK)
    assert guard.remove_run_dir(LocalTransport(), str(link), MARK) is False
    assert (target / "ckpt-999.pt").exists()
