"""What every local cluster offers (Slurm in Docker, native Kubernetes, kind): one interface, so
`poc cluster` and `poc smoke` treat them alike.

    c = clusters.get("k8s", provider="native", say=print)
    c.up()        # -> the cluster's info dataclass; cheap when it already runs (repairs what it can)
    c.down()      # -> a report dict of what was stopped and removed
    c.status()    # -> [ComponentStatus]; cheap: never builds, pulls or starts anything
    c.is_up()     # -> bool; cheap

Errors are ClusterError (a PocError): the CLI's boundary prints them as ERROR/TIP.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

Say = Callable[[str], None]   # where progress lines go (the CLI's Out.info: stderr, silent with --quiet)


@dataclass(frozen=True)
class ComponentStatus:
    """One process or container of a local cluster."""

    name: str
    pid: int | None
    alive: bool
    log: str | None = None
    state: str = ""          # the platform's own word ("running", "exited", ...) where it has one


@runtime_checkable
class LocalCluster(Protocol):
    name: str                # "slurm", "k8s-native", "kind"

    def up(self) -> Any: ...

    def down(self) -> dict: ...

    def status(self) -> list[ComponentStatus]: ...

    def is_up(self) -> bool: ...
