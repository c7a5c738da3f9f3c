"""What is stored with every run about where and with what it ran: the harness's host, the
platform's facts from preflight, the workload's torch build, and the harness's own footprint."""
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


def environment(platform_info: dict, events: list[dict]) -> dict:
    torch_ev = next((e for e in events if e["kind"] == "torch_imported"), {})
    return {
        "harness_version": __version__,
        **host_facts(),
        **platform_info,
        "torch": torch_ev.get("torch"),
        "cuda": torch_ev.get("cuda"),
        "gpus_visible": torch_ev.get("gpus"),
        "comm_backend": torch_ev.get("backend"),
        "hosts": sorted({e.get("host") for e in events if e.get("host")}),   # where the ranks ran
        "world_size": max((e.get("world_size", 0) for e in events), default=None),
    }
