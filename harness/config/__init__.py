"""YAML -> validated configuration.

The built-in default lives in harness/default_config.yaml (with its comments, so `poc config show`
prints something a user can edit); the models carry the same defaults, and a test keeps the two equal.
One module per section of the file (workload, kubernetes, slurm, local, pricing, faults, contention,
ux, drills, serve), the whole in model.py, reading and error messages in loader.py.

The scenario sections (contention, ux, drills, serve) live here, not in their scenario packages,
because the import-linter layer contract puts config at the bottom, below the scenarios, and config
must not import a layer above it.
"""
from __future__ import annotations

from ..errors import ConfigError
from .contention import Contention
from .drills import Drills
from .faults import DESTRUCTIVE_FAULTS, Fault
from .kubernetes import NATIVE_KUBECONFIG, Kubernetes, PodPlacement
from .loader import default_yaml, expand, from_mapping, load, load_yaml, read_mapping
from .local import Local
from .model import PLATFORM_ALIASES, PLATFORMS, Config, Timeouts, normalize_platform
from .pricing import Price
from .serve import Serve
from .slurm import Slurm, SlurmRest
from .ux import Ux
from .workload import MAX_MODEL_PARAMS, SWEEP_MAX_BYTES, Fabric, Resources, Workload, parse_size

__all__ = [
    "DESTRUCTIVE_FAULTS",
    "MAX_MODEL_PARAMS",
    "NATIVE_KUBECONFIG",
    "PLATFORMS",
    "PLATFORM_ALIASES",
    "SWEEP_MAX_BYTES",
    "Config",
    "ConfigError",
    "Contention",
    "Drills",
    "Fabric",
    "Fault",
    "Kubernetes",
    "Local",
    "PodPlacement",
    "Price",
    "Resources",
    "Serve",
    "Slurm",
    "SlurmRest",
    "Timeouts",
    "Ux",
    "Workload",
    "default_yaml",
    "expand",
    "from_mapping",
    "load",
    "load_yaml",
    "normalize_platform",
    "parse_size",
    "read_mapping",
]
