"""The local section: the baseline that runs without a scheduler."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from .base import Model, image_reference


class Local(Model):
    """The baseline without a scheduler. container: one container per node of the image the clusters
    run (same torch build, a bridge network between them); host: torchrun processes of this Python."""
    runtime: Literal["container", "host"] = "container"
    image: str | None = None          # None: the locally built worker image (the one the clusters run)
    # the baseline's runs of each scenario (clean, each fault kind) at most; None: as many as the
    # schedulers'. It answers no Kubernetes-vs-Slurm question, so a campaign whose time goes to those
    # rounds (the smoke, beside the schedulers: 1) gives it fewer: its figures are then a reference, not a test
    rounds: int | None = Field(None, ge=1, le=1000)

    _image = field_validator("image")(image_reference)
