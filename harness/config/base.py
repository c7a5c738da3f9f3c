"""What every config section shares: the strict base model and the validators more than one section uses."""
from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticCustomError

from .. import imageref


class Model(BaseModel):
    # a misspelt key is refused rather than ignored, and a value set after loading (--campaign) is checked too;
    # a float is finite (.inf as a price or a time-out would pass every `ge` and `gt`)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


# Upper bounds every section shares, each far above a real campaign and far below harm (a plan,
# a loop or an allocation sized by the number).
MAX_STEPS = 1_000_000       # training steps: a million steps of 0.1 s is more than a day of one run
MAX_RESTARTS = 1_000        # restarts a scheduler or torchrun may make of one job
MAX_RANKS = 4096 * 64       # resources.nodes at most times procs_per_node at most


ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def image_reference(v: str | None) -> str | None:
    """An image field (local.image, kubernetes.image): None, or a valid OCI reference."""
    problem = None if v is None else imageref.reference_problem(v)
    if problem:
        raise PydanticCustomError("image_reference", "{value} {problem}", {"value": repr(v), "problem": problem})
    return v
