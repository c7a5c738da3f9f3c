"""slurmrestd of the local Slurm cluster: its loopback port, a readiness probe, and JWTs for users.

slurmrestd runs in its own container as an unprivileged user with ``rest_auth/jwt``; slurmctld and
slurmdbd check tokens with the cluster's HS256 key (``secrets/jwt_hs256.key``). A token is minted
on demand by ``scontrol token`` in the controller container and handed to the caller: the harness
never writes one to disk.
"""
from __future__ import annotations

import os
import re
import urllib.error
import urllib.request
from pathlib import Path

from harness.clusters.images import run
from harness.errors import ClusterError
from harness.fsutil import atomic_write
from harness.netutil import free_port

REST_CONTAINER = "poc-slurm-slurmrestd"
REST_CONTAINER_PORT = 6820
_USER = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


def loopback_port(sdir: Path, name: str, env_var: str) -> int:
    """A host port for a published service: $env_var, else the one chosen before (sdir/name), else a
    free one, remembered so a restarted cluster keeps its address."""
    if os.environ.get(env_var):
        return int(os.environ[env_var])
    f = sdir / name
    if f.exists():
        return int(f.read_text().strip())
    port = free_port()
    atomic_write(f, f"{port}\n")
    return port


def rest_url(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def answers(port: int) -> tuple[bool, str]:
    """True once slurmrestd answers HTTP on the port (401 without a token counts: it is up)."""
    try:
        with urllib.request.urlopen(f"{rest_url(port)}/openapi/v3", timeout=3) as resp:
            return True, f"HTTP {resp.status}"
    except urllib.error.HTTPError as exc:
        return True, f"HTTP {exc.code}"
    except (OSError, ValueError) as exc:
        return False, str(exc)


def mint_token(controller: str, user: str, lifespan_s: int = 600) -> str:
    """A JWT for user, valid lifespan_s seconds, from `scontrol token` run as root in the controller
    container. Returned, never stored or printed."""
    if not _USER.match(user):
        raise ClusterError(f"not a valid user name for a Slurm token: {user!r}")
    if int(lifespan_s) <= 0:
        raise ClusterError(f"token lifespan must be positive, got {lifespan_s}")
    res = run(["docker", "exec", controller, "scontrol", "token", f"username={user}",
               f"lifespan={int(lifespan_s)}"], check=False, timeout=30)
    out = res.stdout.strip()
    if res.returncode != 0 or not out.startswith("SLURM_JWT="):
        # stdout would hold the token on success only; on failure it is an error text
        raise ClusterError(f"`scontrol token username={user}` failed (exit {res.returncode}): "
                           f"{(res.stderr or out).strip()[-2000:]}",
                           "is the Slurm cluster up (`poc cluster up --slurm`)?")
    return out.split("=", 1)[1]
