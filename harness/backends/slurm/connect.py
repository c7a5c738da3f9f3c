"""How the Slurm backend reaches the cluster, from the config: the transport for commands and files
(local, ssh with ssh_config/ProxyJump, or slurmrestd plus a files channel), and the local Docker
cluster's containers when that is the cluster (its node faults stop containers).

Nothing here contacts the cluster: a missing login node or token becomes a transport that fails
with why, so rendering works without one and preflight reports it."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ...config import Config
from ...errors import BackendError, PocError, TransportError
from ...paths import SLURM_CLUSTER, cluster_state_dir
from ...transports import LocalTransport, SshTransport, make_transport


def default_connection_file() -> Path:
    """Where `poc cluster up --slurm` writes how to reach its login node."""
    return cluster_state_dir(SLURM_CLUSTER) / "ssh.json"


def docker_cluster_settings(path: str | os.PathLike | None = None) -> dict | None:
    """The ssh.json that `poc cluster up --slurm` wrote, or None."""
    p = Path(path) if path else default_connection_file()
    try:
        return json.loads(p.read_text())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise BackendError(f"{p} is not valid JSON: {exc}", tip="run `poc cluster up --slurm` again") from exc


class _Unconfigured:
    """Stands in for a transport when no login node is known: every command fails with why."""
    name = "unconfigured"

    def __init__(self, message: str, tip: str):
        self.message, self.tip = message, tip

    def run(self, argv, **_kw):
        raise TransportError(self.message, tip=self.tip)

    def describe(self) -> dict:
        return {"transport": "unconfigured", "why": self.message}

    def close(self) -> None:
        pass


def build(cls, cfg: Config):
    """cls(cfg.slurm, transport, ...): SlurmBackend.from_config's work."""
    s = cfg.slurm
    settings = None
    if s.transport == "rest":
        from .rest import rest_parts  # requests is imported only for this transport

        try:
            files, sched, docker = rest_parts(s, docker_cluster_settings(s.connection_file))
        except PocError as exc:   # no url, token or login node: rendering still works, preflight says why
            return cls(s, _Unconfigured(exc.message, exc.tip))
        return cls(s, files, docker=docker, scheduler=sched, allow_destructive_faults=cfg.allow_destructive_faults,
                   gpus_per_node=cfg.resources.gpus_per_node,
                   most_nodes=cfg.scale.most_nodes("slurm", cfg.resources.nodes))
    if s.transport == "ssh" and not s.host:
        settings = docker_cluster_settings(s.connection_file)
        if settings is None:
            # Rendering needs no cluster; preflight reports this (and the run is stored as failed).
            return cls(s, _Unconfigured("no Slurm login node configured and no local cluster found "
                                        f"({s.connection_file or default_connection_file()} is missing)",
                                        "run `poc cluster up --slurm`, or set slurm.host/user/key_file"))
    elif s.transport == "local":
        settings = docker_cluster_settings(s.connection_file)
    docker = None
    if settings and settings.get("login_container"):
        docker = {"login": settings["login_container"],
                  "controller": settings.get("controller_container", "poc-slurm-slurmctld"),
                  "nodes": settings.get("node_containers") or {}}
    if s.transport == "ssh":
        if s.host:   # with slurm.ssh_config (Host aliases, ProxyJump) and slurm.proxy_jump
            t = SshTransport.from_slurm(s)
        else:
            t = make_transport("ssh", host=settings["host"], port=settings["port"], user=settings["user"],
                               key_file=settings["key_path"], known_hosts=settings["known_hosts_path"],
                               accept_unknown_host=s.accept_unknown_host)
    elif s.transport == "local":
        prefix: list[str] = []
        if shutil.which("sbatch") is None and docker:
            # Not on a login node, but the local Docker cluster is up: run inside its login node.
            prefix = ["docker", "exec", "-i", "-u", settings.get("user", "poc"), docker["login"]]
        t = LocalTransport(prefix)
    else:
        t = make_transport(s.transport)
    return cls(s, t, docker=docker, allow_destructive_faults=cfg.allow_destructive_faults,
               gpus_per_node=cfg.resources.gpus_per_node,
               most_nodes=cfg.scale.most_nodes("slurm", cfg.resources.nodes))
