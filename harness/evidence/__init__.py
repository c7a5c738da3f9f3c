"""Raw scheduler evidence -> time-stamps with source and resolution, one module per platform.

Pure functions of what a backend kept in `Collected.raw`: the pipeline calls them at the end of a
run, and `poc rederive` calls them again on the stored raw evidence, so both take the same path.
Shape of the result: see docs in each module; every instant is a `timing.Stamp`.
"""
from __future__ import annotations

from importlib import import_module

from ..timing import Stamp

_MODULES = {"local": "local", "slurm": "slurm", "k8s": "k8s"}


def stamps(platform: str, raw: dict) -> dict:
    mod = import_module(f"{__name__}.{_MODULES[platform]}")
    return mod.stamps(raw or {})


def to_json(st: dict) -> dict:
    """Stamps -> plain JSON (for the run record)."""
    def conv(v):
        if isinstance(v, Stamp):
            return v.to_json()
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        if isinstance(v, list):
            return [conv(x) for x in v]
        return v
    return conv(st)


def from_json(d: dict) -> dict:
    """Plain JSON -> Stamps (dicts with t/lo/hi/source become Stamp)."""
    def conv(v):
        if isinstance(v, dict):
            if {"t", "lo", "hi", "source"} <= v.keys():
                return Stamp.from_json(v)
            return {k: conv(x) for k, x in v.items()}
        if isinstance(v, list):
            return [conv(x) for x in v]
        return v
    return conv(d)
