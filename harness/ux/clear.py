"""When is a platform's message a clear error? When it names the problem (pure).

A message that names the wrong value (the typo'd queue, the missing image tag or path, the
misspelt script) tells the user what to fix; "Pending" or "(Resources)" does not. An impossible
resource request has no wrong name to repeat: there the scheduler's own words for "this request
cannot be met" count (Slurm's "Requested node configuration is not available"); whether the
message also names the resource (the GPUs) is recorded beside it.
"""
from __future__ import annotations

import re

IMPOSSIBLE = re.compile(r"(node configuration is not available|insufficient|exceed|maximum capacity|"
                        r"too many|not available|unavailable|no .*flavor|couldn't assign|invalid)", re.I)
GPU = re.compile(r"gpu|gres", re.I)


def is_clear(kind: str, wrong: str, text: str) -> bool:
    if kind == "impossible_resources":
        return bool(IMPOSSIBLE.search(text))
    return bool(wrong) and wrong.lower() in text.lower()


def verdict(messages: list[dict], kind: str, wrong: str) -> dict:
    """From the probe's messages [{"at_s", "resolution_s", "source", "text"}] (in the order seen):
    the first clear one and when, and the first message of any kind."""
    first_any = messages[0] if messages else None
    hit = next((m for m in messages if is_clear(kind, wrong, m["text"])), None)
    return {"clear": hit is not None,
            "time_to_error_s": None if hit is None else hit["at_s"],
            "resolution_s": None if hit is None else hit.get("resolution_s"),
            "message": None if hit is None else hit["text"],
            "source": None if hit is None else hit["source"],
            "at_submit": bool(hit and hit["source"].startswith("at submit")),
            "names_resource": None if hit is None or kind != "impossible_resources" else bool(GPU.search(hit["text"])),
            "first_message_s": None if first_any is None else first_any["at_s"]}
