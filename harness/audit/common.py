"""The shape of one audit answer, shared by the platforms' readers."""
from __future__ import annotations

import datetime as dt


def answer(value: str, source: str, note: str | None = None) -> dict:
    """A question the platform's records answered: value, and the record it came from."""
    return {"answered": True, "value": value, "source": source, "note": note}


def no(source: str, note: str, value: str | None = None) -> dict:
    """A question the records do not answer: where one would look, and why it is not there."""
    return {"answered": False, "value": value, "source": source, "note": note}


def iso(t) -> str:
    """Epoch seconds (number or digits) -> ISO 8601 UTC; anything else as it is ('Unknown', None -> '?')."""
    try:
        return dt.datetime.fromtimestamp(float(t), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (TypeError, ValueError, OverflowError, OSError):
        return "?" if t in (None, "") else str(t)
