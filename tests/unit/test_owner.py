"""The campaign's owner key: secret, kept mode 0600, and what is derived from it public and one-way."""
import json
import os

import pytest

from harness import owner
from harness.errors import StoreError
from harness.spec import campaign_dir
from harness.store import Store


def test_the_id_and_marks_are_derived_and_reveal_nothing_of_the_key():
    k = owner.OwnerKey.new()
    assert len(k.secret) == 64 and len(k.id) == 16 and k.secret[:16] != k.id
    assert k.id == owner.OwnerKey(k.secret).id   # deterministic
    a, b = owner.dir_mark(k, "smoke-x", "k8s-clean-01"), owner.dir_mark(k, "smoke-x", "k8s-clean-02")
    assert a != b and len(a) == 32 and k.secret not in a
    # another campaign's key makes another mark for the very same path
    assert owner.dir_mark(owner.OwnerKey.new(), "smoke-x", "k8s-clean-01") != a


def test_the_key_never_shows_in_a_repr_or_a_format():
    k = owner.OwnerKey.new()
    assert k.secret not in repr(k) and k.secret not in f"{k}" and k.secret not in str([k])


def test_the_key_file_is_made_private_and_read_back(tmp_path):
    k = owner.load_or_create(tmp_path)
    path = tmp_path / owner.KEY_FILE
    assert path.stat().st_mode & 0o777 == 0o600
    assert owner.load_or_create(tmp_path) == k


@pytest.mark.parametrize("damage", ["readable", "link", "garbage"])
def test_an_unsafe_or_damaged_key_file_is_refused_not_trusted(tmp_path, damage):
    path = tmp_path / owner.KEY_FILE
    if damage == "readable":
        owner.load_or_create(tmp_path)
        os.chmod(path, 0o644)
    elif damage == "link":
        (tmp_path / "elsewhere").write_text("a" * 64)
        os.symlink(tmp_path / "elsewhere", path)
    else:
        path.write_text("not a key\n")
        os.chmod(path, 0o600)
    with pytest.raises(owner.KeyFileError):
        owner.load_or_create(tmp_path)


def test_the_store_keeps_the_key_out_of_campaign_json_and_the_journal_private(tmp_path):
    s = Store(tmp_path, "camp")
    s.open("h", {"campaign": "camp"}, resume=False)
    meta = (tmp_path / "camp" / "campaign.json").read_text()
    assert s.owner_key.secret not in meta and json.loads(meta)["owner"] == s.owner_id
    s.mark_inflight({"run_id": "r1", "platform": "slurm", "owner_mark": "m"})
    assert (tmp_path / "camp" / "inflight" / "r1.json").stat().st_mode & 0o777 == 0o600
    s.close()


def test_a_readable_key_file_stops_the_campaign_with_a_tip(tmp_path):
    s = Store(tmp_path, "camp")
    s.open("h", {}, resume=False)
    s.close()
    os.chmod(tmp_path / "camp" / owner.KEY_FILE, 0o640)
    with pytest.raises(StoreError) as exc:
        Store(tmp_path, "camp").open("h", {}, resume=True)
    assert "chmod 600" in exc.value.tip


def test_a_spec_marks_its_own_run_directory_only():
    from dataclasses import replace

    from harness import config
    from harness.spec import build
    k = owner.OwnerKey.new()
    s = replace(build(config.load(None), "slurm", "slurm-clean-01", None), owner=k.id, owner_key=k)
    assert s.owner_mark == owner.dir_mark(k, campaign_dir(s.campaign, k.id), "slurm-clean-01")
    assert replace(s, run_id="slurm-clean-01-blocker").owner_mark != s.owner_mark
    assert k.secret not in repr(s)
