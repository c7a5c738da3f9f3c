"""The five mistakes users make, as changes to a valid config (pure).

Each returns the config the probe submits with, the one-line change a user would have made, and
the wrong value itself: a message that names it tells the user what is wrong (harness/ux/clear.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config import Config
from ..config.ux import MISTAKES
from ..errors import ConfigError
from ..spec import WORKLOAD_SCRIPT

# more GPUs per node than any node has: the config's own ceiling (no node on sale has 64)
IMPOSSIBLE_GPUS = 64
MISSING_TAG = "does-not-exist"
MISSING_VENV = "/opt/poc-venv-missing"
WRONG_PARTITION_SUFFIX = "-typo"
ENTRYPOINT_TYPO = "ddp_trian.py"
MISSING_PVC = "poc-checkpoints-missing"
# a file system that is not mounted on the nodes. Under / so that no ordinary user can create it: on
# a user's shared cluster a probe must not make a directory where their /lustre or /scratch really is
MISSING_CKPT_ROOT = "/poc-missing-filesystem"
MISSING_CKPT_DIR = f"{MISSING_CKPT_ROOT}/ckpt"


@dataclass(frozen=True)
class Mistake:
    kind: str
    platform: str
    cfg: Config                   # the config with the mistake in it
    change: str                   # what the user got wrong, as the config line they would have written
    wrong: str                    # the wrong value; a message naming it is clear (not for impossible_resources)
    entrypoint: str = WORKLOAD_SCRIPT

    def to_json(self) -> dict:
        return {"kind": self.kind, "change": self.change, "wrong": self.wrong, "entrypoint": self.entrypoint}


def probe_config(cfg: Config, platform: str) -> Config:
    """The campaign's config with the probes' own Kubernetes identity and place (ux.kubernetes)."""
    if platform != "k8s" or not cfg.ux.kubernetes:
        return cfg
    data = cfg.model_dump(mode="json")
    data["kubernetes"].update(cfg.ux.kubernetes)
    return Config.model_validate(data)


def _image_repo(ref: str) -> str:
    """registry/name:tag@digest -> registry/name (a ':' before the last '/' is a registry port)."""
    ref = ref.split("@", 1)[0]
    head, _, last = ref.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


def make(cfg: Config, platform: str, kind: str, worker_image: str | None = None) -> Mistake:
    """cfg with `kind` made on `platform`. worker_image: the locally built worker's ref, the image a
    native-cluster config runs when kubernetes.image is null."""
    if kind not in MISTAKES:
        raise ConfigError(f"unknown mistake {kind!r}", tip=f"choose from {', '.join(MISTAKES)}")
    base = probe_config(cfg, platform)
    data = base.model_dump(mode="json")
    entry = WORKLOAD_SCRIPT
    if kind == "impossible_resources":
        r, w = data["resources"], data["workload"]
        r["gpus_per_node"] = r["procs_per_node"] = IMPOSSIBLE_GPUS
        # a job that did start would train on the CPUs and say so, not refuse (it never starts)
        w["simulated_gpus"], w["backend"] = True, "auto"
        change, wrong = f"resources.gpus_per_node: {IMPOSSIBLE_GPUS}", str(IMPOSSIBLE_GPUS)
    elif kind == "missing_image":
        if platform == "k8s":
            if base.kubernetes.image is None and worker_image is None:
                from ..clusters.images import worker_ref  # a content hash of the recipe: no docker call
                worker_image = worker_ref()
            ref = base.kubernetes.image or worker_image
            data["kubernetes"]["image"] = f"{_image_repo(ref)}:{MISSING_TAG}"
            # as from a registry: a tag that is not there fails the pull (Never would not even try)
            data["kubernetes"]["image_pull_policy"] = "IfNotPresent"
            change, wrong = f"kubernetes.image: {data['kubernetes']['image']}", MISSING_TAG
        elif base.slurm.container == "none":
            # without a container runtime a Slurm job's software is an environment on the shared file system
            data["slurm"]["venv"] = MISSING_VENV
            change, wrong = f"slurm.venv: {MISSING_VENV}", MISSING_VENV
        else:
            img = base.slurm.container_image or ""
            missing = (img.rsplit(".", 1)[0] + f"-{MISSING_TAG}.sif" if img.endswith(".sif")
                       else f"{_image_repo(img)}:{MISSING_TAG}")
            data["slurm"]["container_image"] = missing
            change, wrong = f"slurm.container_image: {missing}", MISSING_TAG
    elif kind == "wrong_queue":
        if platform == "k8s":
            q = (base.kubernetes.local_queue + WRONG_PARTITION_SUFFIX)[:63]
            data["kubernetes"]["local_queue"] = q
            change, wrong = f"kubernetes.local_queue: {q}", q
        else:
            part = f"{base.slurm.partition or 'gpu'}{WRONG_PARTITION_SUFFIX}"
            data["slurm"]["partition"] = part
            change, wrong = f"slurm.partition: {part}", part
    elif kind == "entrypoint_typo":
        entry = ENTRYPOINT_TYPO
        change, wrong = f"the job's script: {ENTRYPOINT_TYPO} (for {WORKLOAD_SCRIPT})", ENTRYPOINT_TYPO
    else:  # missing_checkpoint_volume
        if platform == "k8s":
            data["kubernetes"]["checkpoint_pvc"], data["kubernetes"]["checkpoint_host_path"] = MISSING_PVC, None
            change, wrong = f"kubernetes.checkpoint_pvc: {MISSING_PVC}", MISSING_PVC
        else:
            data["slurm"]["checkpoint_dir"] = MISSING_CKPT_DIR
            change, wrong = f"slurm.checkpoint_dir: {MISSING_CKPT_DIR}", MISSING_CKPT_ROOT
    try:
        bad = Config.model_validate(data)
    except Exception as exc:  # noqa: BLE001 - the campaign's own config made invalid by the change
        raise ConfigError(f"the {kind} probe's config does not validate: {exc}",
                          tip="report this: a probe's change should keep the config valid") from None
    return Mistake(kind=kind, platform=platform, cfg=bad, change=change, wrong=wrong, entrypoint=entry)
