"""The local section: the baseline that runs without a scheduler."""
from __future__ import annotations

from typing import Literal

from pydantic import field_validator

from .base import Model, image_reference


class Local(Model):
    """The baseline without a scheduler. container: one container per node of the image the clusters
    run (same torch build, a bridge network between them); host: torchrun processes of this Python."""
    runtime: Literal["container", "host"] = "container"
    image: str | None = None          # None: the locally built worker image (the one the clusters run)

    _image = field_validator("image")(image_reference)
