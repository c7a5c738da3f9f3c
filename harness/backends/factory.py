"""Platform name -> a backend built from the config. Imports lazily: each backend pulls its own client."""
from __future__ import annotations

from ..config import Config
from ..errors import BackendError
from ..paths import LOCAL_RUNS, cluster_state_dir
from .base import Backend


def make_backend(platform: str, cfg: Config) -> Backend:
    if platform == "local":
        work_root = cluster_state_dir(LOCAL_RUNS) / cfg.campaign
        if cfg.local.runtime == "host":
            from .local import LocalBackend

            return LocalBackend(work_root)
        from .container import ContainerBackend

        image = cfg.local.image
        if image is None:
            from ..clusters import images  # the ref Kubernetes uses: a content hash of the recipe, no docker call
            image = images.worker_ref()
        return ContainerBackend(work_root, image, default_image=cfg.local.image is None)
    if platform == "slurm":
        try:
            from .slurm import SlurmBackend
        except ImportError as exc:
            raise BackendError(f"the Slurm backend is not available: {exc}",
                               tip="pip install -e . in the repository") from None
        return SlurmBackend.from_config(cfg)
    if platform == "k8s":
        try:
            from .k8s import KubernetesBackend
        except ImportError as exc:
            raise BackendError(f"the Kubernetes backend is not available: {exc}",
                               tip="pip install -e . in the repository") from None
        return KubernetesBackend.from_config(cfg)
    raise BackendError(f"unknown platform {platform!r}", tip="choose local, slurm or k8s")
