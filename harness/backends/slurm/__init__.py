"""The Slurm backend: backend.py (submit, observe, faults, collect, cancel), connect.py (the transport
from the config), scheduler.py/rest.py (the CLI or slurmrestd), eventfiles.py (the
workload's event files, read incrementally for every watched run in one command)."""
from .backend import SlurmBackend
from .connect import docker_cluster_settings
from .records import TIME_ENV

__all__ = ["TIME_ENV", "SlurmBackend", "docker_cluster_settings"]
