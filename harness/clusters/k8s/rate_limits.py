"""The controllers' client-side API rate limits on the native cluster: a setting of the cluster.

Each controller limits its own requests to the API server (queries per second, and a burst above
them). At a thousand nodes they bound how fast Kueue writes admissions and ungates pods and how fast
kube-controller-manager makes pods and collects garbage: the 1,000-node throughput sweep placed 1.5
jobs a second at Kueue's default 20/30 and 2.9 at 200/300. So they can be set, and every replay
records what they were:

    poc cluster up --k8s --provider native --client-qps kueue=200/300,kube-controller-manager=200/300

Set values live in the cluster's config directory (``client-rate-limits.json``), which `poc cluster
down` removes: a new cluster starts at the defaults. Setting them on a running cluster restarts the
controllers whose limits changed (their state survives: it is in the API server). Kueue takes them in
its Configuration's ``clientConnection``, kube-controller-manager as ``--kube-api-qps``/``--kube-api-burst``.
kube-scheduler (50/100) and JobSet (500) stay at theirs: neither was what limited a replay here.
"""
from __future__ import annotations

import json
import re

from ...errors import ConfigError
from .layout import Layout

# component -> (qps, burst) by default, read from the Kueue v0.14.5 and Kubernetes v1.34.4 sources
DEFAULTS: dict[str, tuple[int, int]] = {"kueue": (20, 30), "kube-controller-manager": (20, 30)}
FIXED = {"kube-scheduler": "50/100 (clientConnection, default)", "jobset": "500 (--kube-api-qps, default)"}
HOW = {"kueue": "Configuration clientConnection", "kube-controller-manager": "--kube-api-qps/--kube-api-burst"}
FILE = "client-rate-limits.json"
FAIR_FILE = "kueue-fair-sharing.json"   # Kueue's fairSharing.enable, a setting of its process as the limits are
_PAIR = re.compile(r"^(\d+)(?:/(\d+))?$")
_TIP = "--client-qps kueue=200/300,kube-controller-manager=200/300 (QPS/BURST; a burst below the QPS is raised to it)"


def parse(text: str) -> dict[str, tuple[int, int]]:
    """``kueue=200/300,kube-controller-manager=100`` -> {component: (qps, burst)}; ``default`` -> {} (all at
    their defaults). A burst not given is twice the QPS, as the controllers' own defaults are about."""
    if text.strip() == "default":
        return {}
    out: dict[str, tuple[int, int]] = {}
    for part in text.split(","):
        name, eq, value = part.strip().partition("=")
        m = _PAIR.match(value.strip())
        if not eq or name not in DEFAULTS:
            raise ConfigError(f"--client-qps {part.strip()!r}: give COMPONENT=QPS[/BURST], COMPONENT one of "
                              f"{', '.join(DEFAULTS)}", tip=_TIP)
        if not m or not 1 <= int(m.group(1)) <= 10_000:
            raise ConfigError(f"--client-qps {part.strip()!r}: QPS must be a whole number from 1 to 10000", tip=_TIP)
        qps = int(m.group(1))
        out[name] = (qps, max(qps, int(m.group(2)) if m.group(2) else 2 * qps))
    return out


def load(L: Layout) -> dict[str, tuple[int, int]]:
    """The limits set on this cluster (components at their default are absent)."""
    path = L.config / FILE
    if not path.is_file():
        return {}
    try:
        return {k: (int(v[0]), int(v[1])) for k, v in json.loads(path.read_text()).items() if k in DEFAULTS}
    except (ValueError, TypeError, IndexError, AttributeError):
        return {}


def save(L: Layout, limits: dict[str, tuple[int, int]]) -> None:
    L.config.mkdir(parents=True, exist_ok=True)
    (L.config / FILE).write_text(json.dumps({k: list(v) for k, v in sorted(limits.items())}))


def kueue_client_connection(L: Layout) -> dict | None:
    """Kueue's Configuration ``clientConnection``, or None to leave Kueue at its default."""
    qps, burst = load(L).get("kueue", (None, None))
    return None if qps is None else {"qps": qps, "burst": burst}


def kcm_flags(L: Layout) -> list[str]:
    """kube-controller-manager's flags for its limit; none at the default."""
    qps, burst = load(L).get("kube-controller-manager", (None, None))
    return [] if qps is None else [f"--kube-api-qps={qps}", f"--kube-api-burst={burst}"]


def with_kcm_flags(argv: list[str], L: Layout) -> list[str]:
    """A stored kube-controller-manager argv with its limit flags replaced by the cluster's setting."""
    return [a for a in argv if not a.startswith(("--kube-api-qps=", "--kube-api-burst="))] + kcm_flags(L)


def fair_sharing(L: Layout) -> bool:
    """Whether Kueue's fair sharing is set on for this cluster (off: Kueue's default)."""
    path = L.config / FAIR_FILE
    try:
        return bool(json.loads(path.read_text()).get("enable")) if path.is_file() else False
    except (ValueError, AttributeError):
        return False


def save_fair_sharing(L: Layout, enable: bool) -> None:
    L.config.mkdir(parents=True, exist_ok=True)
    (L.config / FAIR_FILE).write_text(json.dumps({"enable": bool(enable)}))


def kueue_fair_sharing(L: Layout) -> dict:
    """What Kueue's Configuration gets for fair sharing: ``fairSharing: {enable: true}`` when set on (ClusterQueues
    of a cohort are then admitted in order of their dominant resource share), nothing at the default (off)."""
    return {"fairSharing": {"enable": True}} if fair_sharing(L) else {}


def describe(L: Layout) -> dict[str, str]:
    """Every controller's limit as a replay records it: QPS/burst, how it is set, set here or default."""
    got = load(L)
    out = {}
    for name, (qps, burst) in DEFAULTS.items():
        q, b = got.get(name, (qps, burst))
        out[name] = f"{q}/{b} ({HOW[name]}, {'set by poc cluster up --client-qps' if name in got else 'default'})"
    return {**out, **FIXED, "kueue fairSharing": "enable" if fair_sharing(L) else "off (Kueue's default)"}


def changed(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    """The components whose effective limit differs between two settings."""
    return [n for n in DEFAULTS if before.get(n, DEFAULTS[n]) != after.get(n, DEFAULTS[n])]
