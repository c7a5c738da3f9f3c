"""What is stored with every run about where and with what it ran: the harness's host, the
platform's facts from preflight, the workload's torch build and image, and the harness's own footprint.

A step time measured under one torch build says little about a scheduler when the other platform ran
another build (PyPI's torch on the host vs Debian's in the worker image: about ten times apart), so
every run records its build (`build`) and the report compares two runs only when `same_build`."""
from __future__ import annotations

import platform as pyplatform
import resource
import socket
import sys

from . import __version__


def host_facts() -> dict:
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"harness_host": socket.gethostname(), "harness_python": sys.version.split()[0],
            "machine": pyplatform.machine(), "cpu_model": cpu}


def own_usage() -> dict:
    """The harness process's CPU time and peak RSS so far (benchmarks/observation_latency.py prints them)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu_s": round(ru.ru_utime + ru.ru_stime, 3), "max_rss_mb": round(ru.ru_maxrss / 1024, 1)}


BUILD_KEYS = ("torch", "git_version", "cuda", "nccl")   # what makes two torch builds the same build


def _build_of(ev: dict) -> dict:
    """One torch_imported event -> its torch build; workloads older than torch_build give the version only."""
    tb = ev.get("torch_build") or {}
    return {"torch": tb.get("version", ev.get("torch")), "git_version": tb.get("git_version"),
            "cuda": tb.get("cuda", ev.get("cuda")), "nccl": tb.get("nccl"), "debug": tb.get("debug")}


def build(events: list[dict], raw: dict | None) -> dict:
    """The torch build and image a run ran: {"torch", "git_version", "cuda", "nccl", "debug", "image"}.

    From the ranks' torch_imported events and the backend's raw["image"] ({"ref", "id", "source"}).
    Ranks that imported different builds (a mixed image or node set) are listed under "mismatch"."""
    builds = [_build_of(e) for e in events if e.get("kind") == "torch_imported"]
    out = dict(builds[0]) if builds else {k: None for k in (*BUILD_KEYS, "debug")}
    distinct = {tuple(b[k] for k in BUILD_KEYS) for b in builds}
    if len(distinct) > 1:
        out["mismatch"] = [dict(zip(BUILD_KEYS, d, strict=True)) for d in sorted(distinct, key=str)]
    out["image"] = (raw or {}).get("image")
    return out


def same_build(a: dict | None, b: dict | None) -> bool:
    """Whether two runs' builds (environment.build) ran the same torch: version, git commit, CUDA and
    NCCL equal, neither unknown nor mixed. The image may differ (the Slurm node image is built FROM the
    worker image) as long as the torch in it is the same; a git_version of "Unknown" (Debian's build)
    compares as a value, so two Debian builds of one version match and a PyPI build does not."""
    if not a or not b or a.get("torch") is None or b.get("torch") is None:
        return False
    if a.get("mismatch") or b.get("mismatch"):
        return False
    return all(a.get(k) == b.get(k) for k in BUILD_KEYS)


def environment(platform_info: dict, events: list[dict], raw: dict | None = None) -> dict:
    torch_ev = next((e for e in events if e["kind"] == "torch_imported"), {})
    return {
        "harness_version": __version__,
        **host_facts(),
        **platform_info,
        "torch": torch_ev.get("torch"),
        "cuda": torch_ev.get("cuda"),
        "gpus_visible": torch_ev.get("gpus"),
        # GPUs the scheduler allocated but that do not exist (the local GPU-shaped clusters): the
        # run trained on CPUs, and what the scheduler exposed to it is kept
        "gpus_per_node": torch_ev.get("gpus_per_node"),
        "simulated_gpus": torch_ev.get("simulated_gpus"),
        "gpu_env": torch_ev.get("gpu_env"),
        "comm_backend": torch_ev.get("backend"),
        "hosts": sorted({e.get("host") for e in events if e.get("host")}),   # where the ranks ran
        "world_size": max((e.get("world_size", 0) for e in events), default=None),
        "build": build(events, raw),      # what the report checks before it compares two platforms
    }
