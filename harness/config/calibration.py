"""The calibration phase: what the workload checks in its own allocation before training
(workloads/ddp_train.py: calibrate), and the bar a node must clear to be measured."""
from __future__ import annotations

import shlex

from pydantic import Field, field_validator

from .base import Model
from .workload import _SIZE, parse_size


class Calibration(Model):
    # off by default: it adds seconds before training, and the committed smoke campaigns ran without it
    enabled: bool = False
    # a node whose slowest rank multiplies matrices (or, on GPUs, whose nccl-tests bus bandwidth is)
    # below this share of the nodes' median is refused: the run would measure the node, not the scheduler
    min_peer_ratio: float = Field(0.5, gt=0, le=1)
    # RDMA registers (pins) memory: below this memlock (ulimit -l) a node is refused; 0 records it only
    min_memlock_kib: int = Field(0, ge=0, le=2**40)   # 1 PiB: above any node's memory
    compute_seconds: float = Field(0.5, gt=0, le=60)
    # the job-wide all-reduce check's size (and the intra-node one's where nccl-tests gives none)
    allreduce_bytes: str = "16M"
    # nccl-tests' all_reduce_perf, run once per node on GPUs when the image has it; empty: not run
    nccl_tests: str = "all_reduce_perf"
    nccl_tests_args: str = "-b 8 -e 8G -f 2"

    @field_validator("allreduce_bytes")
    @classmethod
    def _bytes(cls, v: str) -> str:
        if not _SIZE.match(str(v)) or not 4 <= parse_size(v) <= 8 * 1024**3:
            raise ValueError("must be a size like 16M or 1G, from 4 bytes to 8G")
        return str(v)

    @field_validator("nccl_tests_args")
    @classmethod
    def _args(cls, v: str) -> str:
        words = shlex.split(v)
        if any(not w.replace("-", "").replace(".", "").isalnum() for w in words):
            raise ValueError("must be all_reduce_perf options such as '-b 8 -e 8G -f 2' (letters, digits, '-', '.')")
        if "-g" in words:
            raise ValueError("-g is set by the workload: the node's GPUs")
        return " ".join(words)

    @field_validator("nccl_tests")
    @classmethod
    def _binary(cls, v: str) -> str:
        if v and not all(c.isalnum() or c in "/._-" for c in v):
            raise ValueError("must be a program name or path (letters, digits, '/', '.', '_', '-')")
        return v

    def workload_args(self) -> tuple[str, ...]:
        """ddp_train.py's calibration options; none when the phase is off."""
        if not self.enabled:
            return ()
        return ("--calibrate", "--calibrate-min-ratio", f"{self.min_peer_ratio:g}",
                "--calibrate-min-memlock-kib", str(self.min_memlock_kib),
                "--calibrate-seconds", f"{self.compute_seconds:g}",
                "--calibrate-bytes", str(parse_size(self.allreduce_bytes)),
                "--nccl-tests", self.nccl_tests, f"--nccl-tests-args={self.nccl_tests_args}")
