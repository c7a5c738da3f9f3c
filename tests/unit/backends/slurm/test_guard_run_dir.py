"""A Slurm run directory is made with its campaign's owner mark and removed only while that mark is
there: the real shell script (owned_dir.OWNED_DIR_SCRIPT) on a real directory, through LocalTransport."""
from __future__ import annotations

import stat
from dataclasses import replace
from pathlib import Path

import pytest
from support.fakes import record

from harness import config
from harness.backends.base import Handle
from harness.backends.slurm import SlurmBackend, guard
from harness.errors import BackendError
from harness.render import owned_dir
from harness.render.sbatch import run_dir
from harness.spec import build
from harness.store import Store
from harness.transports import LocalTransport, Result

T = LocalTransport()


def planted(path, mark: str | None):
    """A directory someone made, with a file of theirs in it, and their owner mark if mark is given."""
    path.mkdir(parents=True)
    (path / "theirs.txt").write_text("live")
    if mark is not None:
        (path / owned_dir.OWNER_MARK).write_text(mark)
    return path


def test_prepare_makes_the_directory_with_the_mark(tmp_path):
    d = tmp_path / "camp-aa11" / "r1"
    guard.prepare_run_dir(T, str(d), "aa11")
    assert (d / owned_dir.OWNER_MARK).read_text() == "aa11"


def test_prepare_remakes_the_campaigns_own_directory_from_scratch(tmp_path):
    d = planted(tmp_path / "r1", "aa11")
    guard.prepare_run_dir(T, str(d), "aa11")
    assert not (d / "theirs.txt").exists() and (d / owned_dir.OWNER_MARK).read_text() == "aa11"


@pytest.mark.parametrize("mark, owner", [("bb22", "aa11"),   # another campaign's
                                         (None, "aa11"),     # no mark: a campaign never takes it
                                         ("bb22", "")])      # outside a campaign: a marked one is someone's
def test_someone_elses_directory_is_refused_and_left_as_it_was(tmp_path, mark, owner):
    d = planted(tmp_path / "r1", mark)
    with pytest.raises(BackendError, match="is not this campaign's") as ei:
        guard.prepare_run_dir(T, str(d), owner)
    assert "nothing was removed" in ei.value.tip
    assert (d / "theirs.txt").read_text() == "live"
    assert not guard.remove_run_dir(T, str(d), owner)
    assert (d / "theirs.txt").read_text() == "live"


def test_outside_a_campaign_an_unmarked_directory_is_remade(tmp_path):
    d = planted(tmp_path / "r1", None)
    guard.prepare_run_dir(T, str(d), "")
    assert not (d / "theirs.txt").exists()


def test_remove_takes_the_campaigns_own_directory_and_a_missing_one(tmp_path):
    d = planted(tmp_path / "r1", "aa11")
    assert guard.remove_run_dir(T, str(d), "aa11") and not d.exists()
    assert guard.remove_run_dir(T, str(d), "aa11")


def test_words_with_shell_characters_stay_words(tmp_path):
    d = tmp_path / "r1 $(touch pwned); x"
    guard.prepare_run_dir(T, str(d), "aa11")
    assert (d / owned_dir.OWNER_MARK).exists() and not (tmp_path / "pwned").exists()


def test_cleanup_keeps_a_directory_whose_mark_changed(tmp_path):
    cfg = config.from_mapping({"platforms": ["slurm"], "slurm": {"workdir": str(tmp_path)}})
    be = SlurmBackend(cfg.slurm, T)
    d = planted(tmp_path / "camp-aa11" / "r1", "bb22")
    h = Handle("slurm", "r1", ["5"], 0.0, data={"job_id": "5", "run_dir": str(d), "campaign": "camp",
                                                 "owner": "aa11", "lost_nodes": []})
    out = be.cleanup(h, ok=True, keep="never")
    assert out == {"removed": [], "kept": [str(d)], "reason": "its owner mark is not this campaign's"}
    assert (d / "theirs.txt").exists()


def test_the_run_directory_carries_the_campaign_token():
    cfg = config.from_mapping({"platforms": ["slurm"], "campaign": "smoke"})
    spec = build(cfg, "slurm", "slurm-clean-01", None)
    assert run_dir(spec, cfg.slurm) == "/shared/poc/smoke/slurm-clean-01"
    from dataclasses import replace
    assert run_dir(replace(spec, owner="aa11"), cfg.slurm) == "/shared/poc/smoke-aa11/slurm-clean-01"


def test_a_campaigns_owner_id_is_random_and_kept_across_resume(tmp_path):
    a = Store(tmp_path, "c1")
    a.open("h1", {}, resume=False)
    a.append(record("r1"))
    a.close()
    b = Store(tmp_path, "c1")
    b.open("h1", {}, resume=True)
    b.close()
    c = Store(tmp_path, "c2")
    c.open("h1", {}, resume=False)
    c.close()
    assert len(a.owner_id) == 16 and a.owner_id.isalnum()
    assert b.owner_id == a.owner_id and c.owner_id != a.owner_id
    assert b.owner_key == a.owner_key


def test_a_stale_checkpoint_of_the_campaign_is_cleared_and_anothers_refused(tmp_path):
    mine = planted(tmp_path / "ckpt" / "camp-aa11" / "r1", "aa11")
    (mine / "ckpt-10.pt").write_text("from the interrupted attempt")
    guard.prepare_checkpoint_dir(T, str(mine), "aa11")
    # made afresh now, this user's alone with the mark in it: nobody can plant a checkpoint while the job queues
    assert sorted(p.name for p in mine.iterdir()) == [owned_dir.OWNER_MARK]
    assert stat.S_IMODE(mine.stat().st_mode) == 0o700 and (mine / owned_dir.OWNER_MARK).read_text() == "aa11"
    guard.prepare_checkpoint_dir(T, str(mine), "aa11")     # again: the same
    theirs = planted(tmp_path / "ckpt" / "camp-aa11" / "r2", "bb22")
    with pytest.raises(BackendError, match="resume from someone else's checkpoints"):
        guard.prepare_checkpoint_dir(T, str(theirs), "aa11")
    assert (theirs / "theirs.txt").read_text() == "live"


def test_the_checkpoint_directory_must_be_the_runs_own_under_checkpoint_dir(tmp_path):
    root = str(tmp_path / "ckpt")
    assert guard.own_checkpoint_dir(root, f"{root}/camp-aa11/r1", "camp-aa11", "r1") == f"{root}/camp-aa11/r1"
    assert guard.own_checkpoint_dir(None, f"{root}/camp-aa11/r1", "camp-aa11", "r1") is None
    with pytest.raises(BackendError, match=r"under slurm\.checkpoint_dir"):
        guard.own_checkpoint_dir(root, f"{root}/camp-aa11", "camp-aa11", "r1")


def test_cleanup_removes_the_run_and_checkpoint_directories_it_owns(tmp_path):
    cfg = config.from_mapping({"platforms": ["slurm"], "slurm": {"workdir": str(tmp_path / "w"),
                                                                 "checkpoint_dir": str(tmp_path / "ckpt")}})
    be = SlurmBackend(cfg.slurm, T)
    d = planted(tmp_path / "w" / "camp-aa11" / "r1", "aa11")
    ck = planted(tmp_path / "ckpt" / "camp-aa11" / "r1", "bb22")
    data = {"job_id": "5", "run_dir": str(d), "ckpt_dir": str(ck), "campaign": "camp", "owner": "aa11",
            "lost_nodes": []}
    kept = be.cleanup(Handle("slurm", "r1", ["5"], 0.0, data=data), ok=False, keep="on_failure")
    assert kept["kept"] == [str(d), str(ck)] and d.exists() and ck.exists()
    out = be.cleanup(Handle("slurm", "r1", ["5"], 0.0, data=data), ok=True, keep="never")
    assert out == {"removed": [str(d)], "kept": [str(ck)], "reason": "its owner mark is not this campaign's"}
    (ck / owned_dir.OWNER_MARK).write_text("aa11")
    again = be.cleanup(Handle("slurm", "r1", ["5"], 0.0, data=data), ok=True, keep="never")
    assert again == {"removed": [str(d), str(ck)], "kept": []}     # the run directory was gone already
    assert not ck.exists()


class Sbatch(LocalTransport):
    """This machine's shell for the owned-directory command and the files; sbatch answers a job id."""

    def run(self, argv, **kw):
        if argv[0] == "sbatch":
            return Result(tuple(argv), 0, "123\n", "")
        return super().run(argv, **kw)


def test_submit_marks_the_directories_with_the_runs_keyed_mark_and_the_handle_carries_it(tmp_path):
    """The mark is spec.owner_mark (a keyed digest of the directory's path), not the public owner id that
    names the directory: knowing the directory's name no longer gives its mark."""
    store = Store(tmp_path / "results", "camp")
    store.open("h1", {}, resume=False)
    cfg = config.from_mapping({"platforms": ["slurm"], "campaign": "camp",
                               "slurm": {"workdir": str(tmp_path / "w"), "checkpoint_dir": str(tmp_path / "ck")}})
    spec = replace(build(cfg, "slurm", "slurm-clean-01", None), owner=store.owner_id, owner_key=store.owner_key)
    store.close()
    assert spec.owner_mark not in (spec.owner, "")
    be = SlurmBackend(cfg.slurm, Sbatch())
    h = be.submit(spec, be.render(spec))
    rdir, ckpt = Path(h.data["run_dir"]), Path(h.data["ckpt_dir"])
    assert h.data["owner_mark"] == spec.owner_mark and h.data["owner"] == spec.owner
    for d in (rdir, ckpt):
        assert (d / owned_dir.OWNER_MARK).read_text() == spec.owner_mark
        assert stat.S_IMODE(d.stat().st_mode) == 0o700 and stat.S_IMODE(d.parent.stat().st_mode) == 0o700
    assert f"--owner {spec.owner_mark} " in (rdir / "job.sbatch").read_text()
    assert be.cleanup(h, ok=True, keep="never") == {"removed": [str(rdir), str(ckpt)], "kept": []}


def test_a_handle_journalled_before_marks_were_keyed_uses_its_owner_as_the_mark(tmp_path):
    cfg = config.from_mapping({"platforms": ["slurm"], "slurm": {"workdir": str(tmp_path)}})
    be = SlurmBackend(cfg.slurm, T)
    old = planted(tmp_path / "camp-aa11" / "r1", "aa11")        # as the harness marked it then: the owner id
    keyed = planted(tmp_path / "camp-aa11" / "r2", "k3y3d")
    legacy = {"job_id": "5", "campaign": "camp", "owner": "aa11", "lost_nodes": []}
    assert be.cleanup(Handle("slurm", "r1", ["5"], 0.0, data={**legacy, "run_dir": str(old)}), ok=True,
                      keep="never")["removed"] == [str(old)]
    data = {**legacy, "run_dir": str(keyed), "owner_mark": "k3y3d"}
    assert be.cleanup(Handle("slurm", "r2", ["5"], 0.0, data=data), ok=True, keep="never")["removed"] == [str(keyed)]
    # a keyed handle never takes a directory by the public owner id alone
    again = planted(tmp_path / "camp-aa11" / "r2", "aa11")
    assert be.cleanup(Handle("slurm", "r2", ["5"], 0.0, data=data), ok=True, keep="never")["kept"] == [str(again)]
