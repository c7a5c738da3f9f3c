"""The Slurm backend: backend.py (submit, observe, faults, collect, cancel), eventfiles.py (the
workload's event files, read incrementally for every watched run in one command)."""
from .backend import TIME_ENV, SlurmBackend, docker_cluster_settings

__all__ = ["TIME_ENV", "SlurmBackend", "docker_cluster_settings"]
