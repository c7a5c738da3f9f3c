"""The Slurm cluster's secrets: munge key, JWT signing key, database password, client and host SSH keys.

Created once under ``<state>/slurm/secrets`` (mode 0600 from creation on, never printed), so a
cluster brought down and up again keeps its identities and known_hosts entry.
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path

from harness.fsutil import atomic_write


def _secret(path: Path, data: bytes) -> None:
    atomic_write(path, data, mode=0o600)


def _ed25519_pair() -> tuple[bytes, bytes]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    priv = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                             serialization.NoEncryption())
    pub = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                        serialization.PublicFormat.OpenSSH)
    return priv, pub


def ensure_secrets(sdir: Path) -> Path:
    """Create (once) the munge key, JWT key, DB password, client and host SSH keys under sdir/secrets."""
    sec = sdir / "secrets"
    sec.mkdir(parents=True, exist_ok=True)
    os.chmod(sec, 0o700)
    if not (sec / "munge.key").exists():
        _secret(sec / "munge.key", secrets.token_bytes(1024))
    if not (sec / "jwt_hs256.key").exists():
        # slurmctld and slurmdbd sign and check slurmrestd's JWTs (auth/jwt, HS256) with it.
        _secret(sec / "jwt_hs256.key", secrets.token_bytes(32))
    if not (sec / "db.pass").exists():
        _secret(sec / "db.pass", secrets.token_hex(24).encode())
    if not (sec / "id_ed25519").exists():
        priv, pub = _ed25519_pair()
        _secret(sec / "id_ed25519", priv)
        _secret(sec / "id_ed25519.pub", pub + b" poc@k8s-slurm-poc\n")
    _secret(sec / "authorized_keys", (sec / "id_ed25519.pub").read_bytes())
    if not (sec / "ssh_host_ed25519_key").exists():
        priv, pub = _ed25519_pair()
        _secret(sec / "ssh_host_ed25519_key", priv)
        _secret(sec / "ssh_host_ed25519_key.pub", pub + b" root@login\n")
    return sec
