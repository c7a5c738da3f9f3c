"""The calibration phase: what the job checks in its own allocation before training, and the bars a node (and
the allocation) must clear to be measured. Two parts, both on with `enabled`: the step before training
(workloads/poc_check.py: the health gate and an all-reduce across the whole allocation, rendered into the
batch script and the pods' command) and the training job's own calibration (workloads/poc_calibration.py:
calibrate, after the rendezvous: each rank's matmul beside its peers', nccl-tests on each node, the workload's
own all-reduce)."""
from __future__ import annotations

import shlex

from pydantic import Field, field_validator

from .base import Model
from .workload import _SIZE, parse_size

# Keys added after campaigns were stored, with their defaults: at the default, config_hash leaves them out, so an
# older campaign keeps its hash (and `--resume` still finds it its own).
LATER_DEFAULTS = {"allocation_check": True, "min_allreduce_busbw_gbps": 0.0, "allocation_nccl_tests":
                  "all_reduce_perf_mpi", "allocation_args": "-b 8 -e 8G -f 2", "mpi": "pmix", "mpirun": "mpirun",
                  "sshd": "/usr/sbin/sshd", "ssh_port": 2222, "min_power_ratio": 0.9, "min_ib_rate_gbps": 0,
                  "require_gdr": False, "dcgm_diag_level": 0, "max_clock_offset_s": 0.0, "check_timeout_s": 1800}
_WORD = "letters, digits, '/', '.', '_', '-'"


def _program(v: str) -> str:
    if v and not all(c.isalnum() or c in "/._-" for c in v):
        raise ValueError(f"must be a program name or path ({_WORD})")
    return v


def _bench_args(v: str) -> str:
    words = shlex.split(v)
    if any(not w.replace("-", "").replace(".", "").isalnum() for w in words):
        raise ValueError("must be all_reduce_perf options such as '-b 8 -e 8G -f 2' (letters, digits, '-', '.')")
    if "-g" in words:
        raise ValueError("-g is set by the harness: the node's GPUs (or 1 per MPI rank)")
    return " ".join(words)


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
    # The step before training (workloads/poc_check.py), in the job's allocation: the health gate on every node,
    # then an all-reduce across the whole allocation. On GPUs an MPI build of nccl-tests (one rank per GPU):
    # on Slurm an srun step with the site's PMI (`srun --mpi=<mpi>`); on Kubernetes the first pod's mpirun over
    # ssh into a per-run sshd in each pod (the image needs Open MPI and openssh-server; examples/images/). On
    # CPUs, gloo over TCP (-b 1K -e allreduce_bytes), read by the same parser.
    allocation_check: bool = True
    # the all-reduce across the allocation: in-place bus bandwidth at its largest size at least this (GB/s);
    # 0: no floor. A figure, not a ratio between nodes: two equally slow nodes are refused too
    min_allreduce_busbw_gbps: float = Field(0.0, ge=0, le=1e6)
    allocation_nccl_tests: str = "all_reduce_perf_mpi"
    allocation_args: str = "-b 8 -e 8G -f 2"
    mpi: str = Field("pmix", pattern=r"^[a-z0-9_]{1,32}$")      # srun --mpi=: pmix, pmix_v4, pmi2, ...
    mpirun: str = "mpirun"
    sshd: str = "/usr/sbin/sshd"
    ssh_port: int = Field(2222, ge=1024, le=65535)
    # the health gate's bars: a GPU whose power limit is below this share of its default is refused
    min_power_ratio: float = Field(0.9, ge=0, le=1)
    min_ib_rate_gbps: int = Field(0, ge=0, le=100_000)   # every selected HCA port at least this (ibstat's Rate)
    require_gdr: bool = False          # refuse a GPU node without GPUDirect RDMA (nvidia_peermem or DMA-BUF)
    dcgm_diag_level: int = Field(0, ge=0, le=4)   # `dcgmi diag -r N` on every GPU node (0: not run)
    max_clock_offset_s: float = Field(0.0, ge=0, le=3600)   # refuse a node whose clock is further off; 0: record
    check_timeout_s: int = Field(1800, ge=60, le=86_400)

    @field_validator("allreduce_bytes")
    @classmethod
    def _bytes(cls, v: str) -> str:
        if not _SIZE.match(str(v)) or not 4 <= parse_size(v) <= 8 * 1024**3:
            raise ValueError("must be a size like 16M or 1G, from 4 bytes to 8G")
        return str(v)

    @field_validator("nccl_tests_args", "allocation_args")
    @classmethod
    def _args(cls, v: str) -> str:
        return _bench_args(v)

    @field_validator("nccl_tests", "allocation_nccl_tests", "mpirun", "sshd")
    @classmethod
    def _binary(cls, v: str) -> str:
        return _program(v)

    def workload_args(self) -> tuple[str, ...]:
        """ddp_train.py's calibration options; none when the phase is off."""
        if not self.enabled:
            return ()
        return ("--calibrate", "--calibrate-min-ratio", f"{self.min_peer_ratio:g}",
                "--calibrate-min-memlock-kib", str(self.min_memlock_kib),
                "--calibrate-seconds", f"{self.compute_seconds:g}",
                "--calibrate-bytes", str(parse_size(self.allreduce_bytes)),
                "--nccl-tests", self.nccl_tests, f"--nccl-tests-args={self.nccl_tests_args}")

    def check_args(self, gpus: bool) -> tuple[str, ...]:
        """workloads/poc_check.py's options (the renderers add the part, the ranks and the store); none when the
        step is off. gpus: real GPUs (the MPI forms), else the gloo form."""
        if not (self.enabled and self.allocation_check):
            return ()
        bench = (self.allocation_args if gpus else f"-b 1K -e {self.allreduce_bytes} -f 4 -n 5 -w 1")
        out = ["--min-memlock-kib", str(self.min_memlock_kib), "--min-ib-rate-gbps", str(self.min_ib_rate_gbps),
               "--max-clock-offset-s", f"{self.max_clock_offset_s:g}", "--min-busbw-gbps",
               f"{self.min_allreduce_busbw_gbps:g}", f"--args={bench}", "--timeout-s", str(self.check_timeout_s)]
        if gpus:    # the GPU checks and the MPI forms' programs
            out += ["--min-power-ratio", f"{self.min_power_ratio:g}", *(["--require-gdr"] if self.require_gdr else []),
                    "--dcgm-level", str(self.dcgm_diag_level), "--binary", self.allocation_nccl_tests,
                    "--mpirun", self.mpirun, "--sshd", self.sshd, "--ssh-port", str(self.ssh_port)]
        return tuple(out)
