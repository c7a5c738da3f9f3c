"""The compose driver and image hashing, without Docker."""
from __future__ import annotations

import os
import stat

import pytest

from harness.clusters import images
from harness.clusters import slurm_docker as sd
from harness.clusters.slurm import compose
from harness.clusters.slurm.secrets import ensure_secrets
from harness.errors import ClusterError

ENV = {"POC_SLURM_IMAGE": "k8s-slurm-poc/slurm:trixie-abc", "POC_MARIADB_IMAGE": "k8s-slurm-poc/mariadb:trixie-def",
       "POC_SLURM_SECRETS": "/state/slurm/secrets", "POC_SLURM_SSH_PORT": "42022",
       "POC_SLURM_REST_PORT": "42820"}


def test_compose_file_describes_the_cluster():
    doc = compose.load_compose(ENV, sd.COMPOSE_FILE)
    assert set(doc["services"]) == {"mariadb", "slurmdbd", "slurmctld", "slurmrestd",
                                    "c1", "c2", "c3", "login"}
    order = compose.start_order(doc["services"])
    assert order.index("mariadb") < order.index("slurmdbd") < order.index("slurmctld") < order.index("c1")


def test_login_argv_publishes_ssh_on_loopback_only():
    doc = compose.load_compose(ENV, sd.COMPOSE_FILE)
    argv = compose.run_argv("login", doc["services"]["login"], doc)
    assert argv[:4] == ["docker", "run", "-d", "--name"] and "poc-slurm-login" in argv
    assert argv[argv.index("-p") + 1] == "127.0.0.1:42022:22"
    vols = [argv[i + 1] for i, a in enumerate(argv) if a == "-v"]
    assert "poc-slurm-shared:/shared" in vols
    assert "/state/slurm/secrets/authorized_keys:/run/poc-secrets/authorized_keys:ro" in vols
    assert argv[argv.index("--network") + 1] == "poc-slurm" and argv[argv.index("--network-alias") + 1] == "login"
    assert argv[-2:] == ["k8s-slurm-poc/slurm:trixie-abc", "login"]
    assert "--init" in argv


def test_slurmrestd_is_published_on_loopback_and_only_the_daemons_get_the_jwt_key():
    doc = compose.load_compose(ENV, sd.COMPOSE_FILE)
    argv = compose.run_argv("slurmrestd", doc["services"]["slurmrestd"], doc)
    assert argv[argv.index("-p") + 1] == "127.0.0.1:42820:6820"
    assert argv[-1] == "slurmrestd"
    key = "/state/slurm/secrets/jwt_hs256.key:/run/poc-secrets/jwt_hs256.key:ro"
    holders = {name for name, svc in doc["services"].items() if key in (svc.get("volumes") or [])}
    assert holders == {"slurmctld", "slurmdbd"}


def test_controller_state_is_on_a_volume():
    doc = compose.load_compose(ENV, sd.COMPOSE_FILE)
    argv = compose.run_argv("slurmctld", doc["services"]["slurmctld"], doc)
    assert "poc-slurm-ctld-state:/var/spool/slurmctld" in argv


def test_missing_variable_is_a_cluster_error():
    with pytest.raises(ClusterError, match="POC_SLURM_IMAGE"):
        compose.load_compose({k: v for k, v in ENV.items() if k != "POC_SLURM_IMAGE"}, sd.COMPOSE_FILE)


def test_unknown_compose_keys_are_refused(tmp_path):
    f = tmp_path / "compose.yml"
    f.write_text("services:\n  a:\n    image: x\n    privileged: true\n")
    with pytest.raises(ClusterError, match="privileged"):
        compose.load_compose({}, f)


def test_secrets_are_private_and_stable(tmp_path):
    sec = ensure_secrets(tmp_path)
    names = ["munge.key", "jwt_hs256.key", "db.pass", "id_ed25519", "id_ed25519.pub", "authorized_keys",
             "ssh_host_ed25519_key", "ssh_host_ed25519_key.pub"]
    before = {n: (sec / n).read_bytes() for n in names}
    for n in names:
        assert stat.S_IMODE(os.stat(sec / n).st_mode) == 0o600, n
    assert len(before["munge.key"]) == 1024 and len(before["jwt_hs256.key"]) == 32
    assert before["id_ed25519"].startswith(b"-----BEGIN OPENSSH PRIVATE KEY-----")
    assert before["authorized_keys"].startswith(b"ssh-ed25519 ")
    ensure_secrets(tmp_path)
    assert {n: (sec / n).read_bytes() for n in names} == before


def test_image_tags_are_content_hashes(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM x\n")
    h1 = images.context_hash(tmp_path, "trixie")
    assert h1 == images.context_hash(tmp_path, "trixie")
    assert h1 != images.context_hash(tmp_path, "bookworm")
    (tmp_path / "Dockerfile").write_text("FROM y\n")
    assert images.context_hash(tmp_path, "trixie") != h1
    for ref in (images.worker_ref("trixie"), images.slurm_ref("bookworm"), images.mariadb_ref("trixie")):
        assert ":latest" not in ref and len(ref.rsplit("-", 1)[1]) == 12
    assert images.slurm_ref("trixie") != images.slurm_ref("bookworm")


def test_unsupported_release_is_refused():
    with pytest.raises(ClusterError, match="unsupported Debian release"):
        images.worker_ref("buster")
