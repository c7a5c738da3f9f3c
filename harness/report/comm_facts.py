"""What each run recorded about its collective's path, and how two platforms' runs differ in it.

The workload's comm event names the transport ("NET/IB+P2P", gloo's "tcp") and, beside it, what
decides how fast that path is: NCCL's version, network and net plugin, the interfaces or HCAs it
took, its channel paths (NET/IB/0/GDRDMA, P2P/CUMEM/read), whether GPUDirect RDMA and NVLS were
used, gloo's interface, and every NCCL_*, GLOO_*, TORCH_NCCL_*, TORCH_GLOO_* and fabric.env variable.
harness/metrics/bandwidth.py keeps them in the all-reduce metric's detail. Two platforms whose runs
differ in any of them may differ in bandwidth for that reason, not the scheduler's: compare.py warns
on every difference, names both values, and notes a difference among one platform's own runs.

A fact a run did not record (older records, or NCCL that printed no INFO lines) is left out of the
comparison, never read as "off". What varies with the host and not the path (the addresses in
NCCL's "Using" line, the device index in a channel path) is dropped before comparing.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_ADDRESS = re.compile(r":[^\s<>\[\]]*<\d+>")   # "eth0:10.244.1.5<0>" -> "eth0"


@dataclass(frozen=True)
class NcclFacts:
    version: str | None
    network: str | None
    net_plugin: tuple[str, ...]
    using: str | None              # the interfaces or HCAs, without their addresses
    path_kinds: tuple[str, ...]    # the channel paths without device indices: NET/IB/GDRDMA, P2P/CUMEM/read
    gdrdma: bool
    nvls: bool


@dataclass(frozen=True)
class CommFacts:
    """One run's collective as recorded; None in a field: not recorded."""
    backend: str | None
    interface: str | None
    env: tuple[tuple[str, str], ...] | None
    nccl: NcclFacts | None


def path_kind(path: str) -> str:
    """A channel path without its device indices: "NET/IB/0/GDRDMA" -> "NET/IB/GDRDMA"."""
    return "/".join(p for p in str(path).split("/") if not p.isdigit())


def _nccl(d: Any) -> NcclFacts | None:
    if not isinstance(d, dict):
        return None
    paths = [p for p in d.get("paths") or [] if isinstance(p, str)]
    if not (d.get("version") or d.get("network") or paths):
        return None   # NCCL printed no INFO lines the workload could read: nothing known
    using = d.get("using")
    return NcclFacts(version=d.get("version"), network=d.get("network"),
                     net_plugin=tuple(str(x) for x in d.get("net_plugin") or []),
                     using=_ADDRESS.sub("", using) if isinstance(using, str) else None,
                     path_kinds=tuple(sorted({path_kind(p) for p in paths})),
                     gdrdma=bool(d.get("gdrdma")), nvls=bool(d.get("nvls")))


def facts_of(backend: Any, interface: Any, comm_env: Any, nccl: Any) -> CommFacts | None:
    """From the all-reduce detail's fields (metrics/bandwidth.py comm_facts); None for a record from before
    they were kept."""
    env = tuple((str(k), str(v)) for k, v in sorted(comm_env.items())) if isinstance(comm_env, dict) else None
    facts = CommFacts(backend=backend if isinstance(backend, str) else None,
                      interface=interface if isinstance(interface, str) else None, env=env, nccl=_nccl(nccl))
    return None if facts == CommFacts(None, None, None, None) else facts


def transport_name(transport: Any, backend: str | None = None) -> str:
    """As the report names a collective's path: "gloo over TCP", "NCCL over NET/IB+P2P". An older workload
    wrote gloo's interface into the transport ("tcp GLOO_SOCKET_IFNAME=eth0"): kept, in brackets."""
    head, _, rest = str(transport).partition(" ")
    if backend == "gloo" or head.lower() == "tcp":
        return "gloo over TCP" + (f" ({rest})" if head.lower() == "tcp" and rest else "")
    return f"NCCL over {transport}"


_UNSET = "unset"
IFACE = "interface of gloo over TCP"


def _bool(v: bool) -> str:
    return "used" if v else "not used"


# (what, its value in one run: None where the run did not record it, the text of one value); the
# variables follow, by name
FACTS: tuple[tuple[str, Any, Any], ...] = (
    (IFACE, lambda f: f.interface, str),
    ("NCCL version", lambda f: f.nccl and f.nccl.version, str),
    ("NCCL network", lambda f: f.nccl and f.nccl.network, str),
    ("NCCL net plugin", lambda f: f.nccl and f.nccl.net_plugin,
     lambda v: " | ".join(f'"{x}"' for x in v) if v else "none reported"),
    ("NCCL's interfaces/HCAs", lambda f: f.nccl and f.nccl.using, str),
    ("GPUDirect RDMA", lambda f: f.nccl and f.nccl.gdrdma, _bool),
    ("NVLS", lambda f: f.nccl and f.nccl.nvls, _bool),
    ("NCCL channel path kinds", lambda f: f.nccl and f.nccl.path_kinds, lambda v: ", ".join(v) or "none"),
)


def _values(facts: list[CommFacts], get) -> set:
    return {v for v in map(get, facts) if v is not None and v != ""}


def _env_values(facts: list[CommFacts], name: str) -> set:
    return {dict(f.env).get(name, _UNSET) for f in facts if f.env is not None}


def _listed(vs: set, text) -> str:
    return " / ".join(sorted(text(v) for v in vs))


def _between(what: str, va: set, vb: set, text, a: str, b: str) -> str:
    if text is _bool and len(va) == len(vb) == 1 and va != vb:
        return f"{what} on {a if True in va else b} only"
    if what == "NCCL channel path kinds" and len(va) == len(vb) == 1:
        ka, kb = set(next(iter(va))), set(next(iter(vb)))
        only = [f"{', '.join(sorted(k))} on {p} only" for k, p in ((ka - kb, a), (kb - ka, b)) if k]
        return f"NCCL channel path kinds: {' and '.join(only)}"
    return f"{what}: {_listed(va, text)} on {a} vs {_listed(vb, text)} on {b}"


def differences(fa: list[CommFacts], fb: list[CommFacts], a: str, b: str) -> list[str]:
    """Each recorded fact in which side a's runs differ from side b's, naming both values; a fact
    only one side recorded is not compared."""
    out, interface_named = [], False
    for what, get, text in FACTS:
        va, vb = _values(fa, get), _values(fb, get)
        if va and vb and va != vb:
            out.append(_between(what, va, vb, text, a, b))
            interface_named = interface_named or what == IFACE
    if any(f.env is not None for f in fa) and any(f.env is not None for f in fb):
        names = sorted({k for f in fa + fb if f.env is not None for k, _ in f.env})
        for name in names:
            if name == "GLOO_SOCKET_IFNAME" and interface_named:
                continue   # the interface line names it: it is what sets it
            va, vb = _env_values(fa, name), _env_values(fb, name)
            if va != vb:
                out.append(f"{name}: {_listed(va, str)} on {a} vs {_listed(vb, str)} on {b}")
    return out


def within(facts: list[CommFacts]) -> list[str]:
    """Each recorded fact in which one platform's own runs differ among themselves."""
    out = []
    for what, get, text in FACTS:
        vs = _values(facts, get)
        if len(vs) > 1:
            out.append(f"{what} {_listed(vs, text)}")
    recorded = [f for f in facts if f.env is not None]
    for name in sorted({k for f in recorded for k, _ in f.env}):
        vs = _env_values(recorded, name)
        if len(vs) > 1:
            out.append(f"{name} {_listed(vs, str)}")
    return out
