"""The interface gloo binds, defaulted from the one the user named for NCCL (pure).

gloo binds the address its host name resolves to. Ubuntu and DGX OS map the host name to 127.0.1.1 in
/etc/hosts, which enroot containers and hostNetwork pods inherit: gloo then binds loopback and tells the
other nodes to reach it at 127.0.1.1, that is at themselves (the CPU-side collectives, the calibration's
gloo group, hang or fail). Where fabric.env names NCCL_SOCKET_IFNAME and not GLOO_SOCKET_IFNAME, the
renders (Slurm's batch script, hostNetwork pods) give gloo the same interface.

NCCL reads a bare name as a prefix ("ib" is every ib*), "=name" as exact, "^..." as an exclusion, and a
comma list as alternatives; gloo takes whole interface names, every one of a list on every node. So only
one interface is carried over: "=name", or a bare name ending in a digit (ib0, eth0, bond0, enp65s0f0: the
interface itself, as sites write it). A prefix such as "ib", a list or an exclusion names no single
interface: gloo keeps its default, and GLOO_SOCKET_IFNAME in fabric.env says what it should bind.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

_ONE_INTERFACE = re.compile(r"^[A-Za-z0-9_.:-]*[0-9]$")


def gloo_ifname_default(env: Mapping[str, str]) -> dict[str, str]:
    """{"GLOO_SOCKET_IFNAME": name} to add to a launch environment, or {} where none is implied."""
    if env.get("GLOO_SOCKET_IFNAME"):
        return {}
    nccl = (env.get("NCCL_SOCKET_IFNAME") or "").strip()
    if nccl.startswith("="):
        name = nccl[1:].strip()
        return {"GLOO_SOCKET_IFNAME": name} if name and "," not in name else {}
    return {"GLOO_SOCKET_IFNAME": nccl} if _ONE_INTERFACE.match(nccl) else {}


def with_gloo_default(env: Mapping[str, str]) -> dict[str, str]:
    """The launch environment with gloo's interface defaulted (after every other name, so it reads last)."""
    return {**env, **gloo_ifname_default(env)}
