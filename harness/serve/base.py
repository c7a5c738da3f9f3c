"""What the serving scenario asks of a platform: run the inference server for a checkpoint the
training run just wrote, tell the client where it answers, and suffer the faults the POC measures.

The session (harness/serve/session.py) is the same for every platform: after the scenario's training
job succeeded (its checkpoint still on the cluster) it deploys one replica, probes submit -> first
answer, drives the same bounded closed-loop load (harness/serve/load.py) through each phase (steady,
the serving process killed, the node lost, scaled out to two replicas), and keeps every load result
and every platform record in raw["serve"], so harness/serve/metrics.py can re-derive the figures.

Threads: the load runs on a thread of its own while the session's thread calls kill_server,
lose_node and scale; an implementation must not share a non-thread-safe connection between the
session's thread and anything it starts itself (a balancer's discovery loop, say).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ..backends.base import Handle
from ..spec import JobSpec

SERVER_SCRIPT = "serve_model.py"          # harness/data/serve/serve_model.py, shipped with the run
SERVER_PORT = 8000                        # the container's / compute node's port (Slurm may pick 0)
PREDICT = "/predict"


class PlatformServe(Protocol):
    platform: str

    def deploy(self, train: Handle, spec: JobSpec) -> dict:
        """Submit one serving replica for the newest checkpoint of the training run `train` (spec is
        the training job's spec: its run_id, image, model shape). Returns at least {"submitted": epoch s
        just before the submit call, "submitted_after": epoch s just after it, "how": [argv or API
        calls, in words], "objects": [names it created]}. Raises BackendError (ERROR/TIP) when refused."""

    def url(self, timeout_s: float) -> str:
        """The base URL a client posts to ("http://10.96.0.37:8000"): the Service's ClusterIP on
        Kubernetes; on Slurm the harness's balancer in front of the jobs it discovered. Blocks, bounded
        by timeout_s, until the platform has an address to give (a Slurm job must be running and have
        said where it listens); it need not answer yet."""

    def networks(self) -> list[str]:
        """The CIDRs of this platform's own addresses on this machine (the Service and pod ranges; the
        Slurm containers' network; loopback for a balancer): the load generator refuses any other."""

    def replicas(self) -> list[dict]:
        """What the platform says now, one dict per replica: {"name", "node", "endpoint" ("ip:port" a
        client can reach directly, or None), "ready": bool, "since": epoch s or None, "in_service": bool
        (the platform's own routing sends it requests: Kubernetes' EndpointSlices, Slurm's balancer)}."""

    def scale(self, n: int) -> dict:
        """Ask for n replicas (Kubernetes: the Deployment's replicas; Slurm: another serving job, which
        the balancer adds once it answers). {"asked": epoch s, "how": [...]}."""

    def kill_server(self) -> dict:
        """SIGKILL the serving process of one replica, the way a crash would end it (not a graceful
        delete): {"t": epoch s of the kill, "replica", "node", "how"}. What brings it back is the
        platform's (a container restart) or what a Slurm user must write (a loop in the batch script)."""

    def lose_node(self, journal: Callable[[], None]) -> dict:
        """Lose the node of one replica with the platform's node-loss fault (only a node the run holds):
        {"t": epoch s, "node", "replica", "how"}. Before it acts it names the node, with the mark the
        fault leaves on it, on the training run's handle and calls journal(), so whatever cancels that
        handle after a crash (`poc cleanup`, --resume) brings the node back and only while that mark is
        still the node's. (A node the native cluster powers off goes into the backend's ledger instead,
        before the power-off: the backend's next preflight or `poc cluster up` powers it on.)"""

    def restore(self) -> dict:
        """Bring back what lose_node took (the node usable again for the next run): {"restored": [...]}."""

    def evidence(self) -> dict:
        """The platform's raw records of the serving (JSON-ready, no secrets): Kubernetes objects and
        Events of the Deployment, ReplicaSets, pods, Service and EndpointSlices; Slurm's squeue/scontrol/
        sacct records of the serving jobs and their event files; the balancer's log."""

    def beyond(self) -> dict:
        """What serving needed beyond the platform itself, for the report's answer to the POC's
        question: {"discovery": words, "balancing": words, "restarts": words, "scaling": words,
        "written": {file: lines} the user wrote, "harness_parts": [what the harness had to run]}."""

    def teardown(self) -> dict:
        """Remove everything deploy/scale made (delete, scancel, stop the balancer); never raises:
        {"removed": [...], "errors": [...]}."""
