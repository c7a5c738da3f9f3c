"""What every config section shares: the strict base model and the validators more than one section uses."""
from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticCustomError

from .. import imageref


class Model(BaseModel):
    # a misspelt key is refused rather than ignored, and a value set after loading (--campaign) is checked too
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def image_reference(v: str | None) -> str | None:
    """An image field (local.image, kubernetes.image): None, or a valid OCI reference."""
    problem = None if v is None else imageref.reference_problem(v)
    if problem:
        raise PydanticCustomError("image_reference", "{value} {problem}", {"value": repr(v), "problem": problem})
    return v
