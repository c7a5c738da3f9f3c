"""Emulated Slurm nodes at scale on one host: slurmctld's real scheduler over N slurmd in one container.

Slurm built with ``--enable-multiple-slurmd`` (image ``k8s-slurm-poc/slurm-emulated``, from the
slurm-wlm source that Debian ships) runs one slurmd per emulated node, each ``NodeName=eNNNN
NodeHostname=emu Port=<its own>``, next to slurmctld in a single container on its own network
(``poc-slurm-emulated``). Jobs are batch scripts that sleep for their duration, so a node costs one
idle slurmd plus a slurmstepd while it runs a job. The scheduler is not emulated: cons_tres, backfill,
priority/multifactor and topology/tree are the plugins a site runs; srun steps run on every node of
an allocation, and each sees its GPUs (``SLURM_GPUS_ON_NODE``, ``CUDA_VISIBLE_DEVICES``).

Accounting: slurmdbd and a small MariaDB (127.0.0.1 only) run in the same container, a fresh database
per start, so accounts are associations that slurmctld enforces (``AccountingStorageEnforce``: a job
of an unknown account is refused at submit), and fair share and age weigh in the job priority as on
a site's cluster. The replay makes one account per tenant (harness/replay/local.py) with the shares
that mirror Kubernetes' quotas. Fair share decays with ``PriorityDecayHalfLife``: a replay compressed
by a factor should compress the half-life (and ``PriorityMaxAge``) by the same factor, which is why
they are settings of the shape; Slurm counts both in whole minutes, so compression stops at one.

What it costs (2 cores, 24 GiB, 8 GPUs a node; ``benchmarks/slurm_emulated_scale.py``): all nodes
idle 1 s after ``docker run`` at 64 nodes, 12 s at 256, 23 s at 1,000, 44 s at 2,000. Each slurmd
reads the whole configuration (every node and switch), so its memory grows with N: the idle container
took 0.11, 0.5, 3.1 and 9.0 GiB, about N × (1.65 + 0.0015 N) MiB, which extrapolates to a ceiling
near 3,000 nodes on a 24 GiB host.
A running job adds a slurmstepd (about 1.3 MiB). Those figures predate slurmdbd; MariaDB and slurmdbd
add a fixed amount that does not grow with N: at 16 nodes the idle container took 129 MiB with them and
53 MiB once both were stopped (MariaDB about 100 MiB RSS, slurmdbd 10); ``memory()`` reports each.

Rendering (``render_slurm_conf``, ``render_slurmdbd_conf``, ``render_gres_conf``, ``render_topology_conf``)
is pure; the
``EmulatedSlurm`` driver takes a runner (argv list → CompletedProcess), so tests can record calls.
Nothing here touches the ``poc-slurm-*`` containers of the Slurm-in-Docker cluster.
"""
from __future__ import annotations

import hashlib
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.clusters import images
from harness.errors import ClusterError, ConfigError
from harness.fsutil import atomic_write
from harness.paths import cluster_state_dir

Runner = Callable[..., subprocess.CompletedProcess]

NETWORK = "poc-slurm-emulated"
CONTAINER = "poc-slurm-emulated"
HOSTNAME = "emu"
LABEL = "k8s-slurm-poc.cluster=slurm-emulated"
# the running container's configuration and image, so `up` can tell "already up as asked" from "up, but other"
CONFIG_LABEL = "k8s-slurm-poc.slurm-emulated.config"
STATE_NAME = "slurm-emulated"      # under the state directory, beside the other clusters' (harness.paths)
# the rendered files, mounted read-only; the entrypoint copies them to /etc/slurm, where slurmdbd.conf
# must be owned by the SlurmUser with mode 600, which a bind mount of a host's file cannot be
CONF_DIR_IN_CONTAINER = "/etc/slurm-poc"
# made by the entrypoint with mknod (CAP_MKNOD is in Docker's default set); nothing ever opens them
FAKE_GPU_DIR = "/dev/fakegpu"
NVIDIA_MAJOR = 195


@dataclass(frozen=True)
class EmulatedShape:
    """N nodes × G GPUs in racks of ``rack_size`` nodes and blocks of ``racks_per_block`` racks.

    CPUs and memory are what each node claims to slurmctld (``config_overrides``: the host has far
    less), so CPU and memory requests schedule the way they would on the cluster being emulated."""

    nodes: int
    gpus_per_node: int = 8
    cpus_per_node: int = 64
    memory_mb: int = 512_000
    rack_size: int = 8          # the same defaults as the KWOK nodes (clusters/k8s/kwok.py) and the CLI
    racks_per_block: int = 4
    base_port: int = 17_000
    scheduler_parameters: str = "bf_interval=5,sched_interval=5,bf_continue"
    # priority/multifactor with slurmdbd. Fair share dominates (as a site that shares a cluster among
    # tenants sets it), age breaks ties among a tenant's own jobs; a QOS's priority outweighs both.
    # Half-life, max age and the recalculation period are minutes (Slurm's resolution): Slurm's
    # defaults are 7 days, 7 days and 5 minutes; a trace compressed k-fold wants them divided by k.
    # The period is 1 here, not 5: a replay makes its accounts just before it submits, and their
    # fair-share factor is 0 (no weight at all) until the first recalculation after that (seen: still
    # 0 at 56 s, live at the first pass after a minute).
    priority_weight_fairshare: int = 10_000
    priority_weight_age: int = 1_000
    # job size favours big jobs (1000 here, Slurm's default 0); sched/builtin is strict priority order with
    # no backfill: the queue policy pairs of render/replay_policy.py set these three with the weights above
    priority_weight_job_size: int = 1_000
    scheduler_type: str = "sched/backfill"
    priority_decay_half_life_min: int = 7 * 24 * 60
    priority_max_age_min: int = 7 * 24 * 60
    priority_calc_period_min: int = 1

    def __post_init__(self) -> None:
        tip = "e.g. --emulated 256 --gpus-per-node 8 --rack-size 16 --racks-per-block 4"
        for name in ("nodes", "cpus_per_node", "memory_mb", "rack_size", "racks_per_block"):
            if getattr(self, name) < 1:
                raise ConfigError(f"emulated Slurm: {name.replace('_', ' ')} must be at least 1, "
                                  f"not {getattr(self, name)}", tip=tip)
        for name in ("priority_decay_half_life_min", "priority_max_age_min", "priority_calc_period_min"):
            if getattr(self, name) < 1:
                raise ConfigError(f"emulated Slurm: {name.replace('_', ' ')} must be at least 1 (Slurm counts "
                                  f"whole minutes), not {getattr(self, name)}", tip="e.g. a half-life of 60 minutes")
        if self.scheduler_type not in ("sched/backfill", "sched/builtin"):
            raise ConfigError(f"emulated Slurm: SchedulerType {self.scheduler_type!r}",
                              tip="sched/backfill or sched/builtin")
        for name in ("priority_weight_fairshare", "priority_weight_age", "priority_weight_job_size"):
            if getattr(self, name) < 0:
                raise ConfigError(f"emulated Slurm: {name.replace('_', ' ')} must be 0 or more, "
                                  f"not {getattr(self, name)}", tip="e.g. 10000 for fair share, 1000 for age")
        if self.gpus_per_node < 0:
            raise ConfigError(f"emulated Slurm: GPUs per node must be 0 or more, not {self.gpus_per_node}", tip=tip)
        if self.base_port < 1024 or self.base_port + self.nodes > 65_535:
            raise ConfigError(f"emulated Slurm: slurmd ports {self.base_port + 1}..{self.base_port + self.nodes} "
                              "are outside 1024..65535", tip="fewer nodes, or a lower base port")

    @property
    def width(self) -> int:
        """Digits in a node number: e0001 up to 9,999 nodes, so names sort as numbers."""
        return max(4, len(str(self.nodes)))

    def node(self, i: int) -> str:
        return f"e{i:0{self.width}d}"

    @property
    def racks(self) -> int:
        return -(-self.nodes // self.rack_size)

    @property
    def blocks(self) -> int:
        return -(-self.racks // self.racks_per_block)


def hostlist(prefix: str, first: int, last: int, width: int) -> str:
    """Slurm's compact form of prefix+first..last: ``e[0001-0016]``, or ``e0001`` for one."""
    if first == last:
        return f"{prefix}{first:0{width}d}"
    return f"{prefix}[{first:0{width}d}-{last:0{width}d}]"


def all_nodes(shape: EmulatedShape) -> str:
    return hostlist("e", 1, shape.nodes, shape.width)


def render_slurm_conf(shape: EmulatedShape) -> str:
    nodes = all_nodes(shape)
    ports = f"[{shape.base_port + 1}-{shape.base_port + shape.nodes}]" if shape.nodes > 1 \
        else str(shape.base_port + 1)
    gres = f" Gres=gpu:{shape.gpus_per_node}" if shape.gpus_per_node else ""
    return "\n".join([
        "# Emulated cluster: slurmctld and one slurmd per node in one container (multiple-slurmd build).",
        "ClusterName=emulated",
        f"SlurmctldHost={HOSTNAME}",
        "SlurmUser=slurm",
        "AuthType=auth/munge",
        # A requeued job (preempted with PreemptMode=REQUEUE) is held until its old credential has expired:
        # 120 s by default, an age in a replay compressed 60-fold; 10 s here, and replays record it.
        "AuthInfo=cred_expire=10",
        "CredType=cred/munge",
        "MpiDefault=none",
        # there is no mail here; the default (/bin/mail) is missing and slurmctld logs it as an error
        "MailProg=/bin/true",
        # cgroup plugins cannot work in an unprivileged container; real clusters keep proctrack/cgroup.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "ReturnToService=2",
        "StateSaveLocation=/var/spool/slurmctld",
        # %n: every slurmd on the host needs its own spool, pid file and log, or they overwrite each other.
        "SlurmdSpoolDir=/var/spool/slurmd/%n",
        "SlurmdPidFile=/run/slurmd-%n.pid",
        "SlurmdLogFile=/var/log/slurm/slurmd-%n.log",
        "SlurmctldPidFile=/run/slurmctld.pid",
        "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
        "SlurmctldDebug=info",
        # a thousand chatty slurmd logs cost the host's disk and CPU, not the scheduler's
        "SlurmdDebug=error",
        # Registration and pings of hundreds of daemons on 2 cores can take longer than the defaults.
        "MessageTimeout=60",
        "SlurmdTimeout=600",
        "SlurmctldTimeout=120",
        "InactiveLimit=0",
        "KillWait=5",
        "MinJobAge=300",
        "Waittime=0",
        # the node lines claim the emulated machine's CPUs and memory, not this host's
        "SlurmdParameters=config_overrides",
        f"SchedulerType={shape.scheduler_type}",
        f"SchedulerParameters={shape.scheduler_parameters}",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "PriorityType=priority/multifactor",
        f"PriorityWeightFairshare={shape.priority_weight_fairshare}",
        f"PriorityWeightAge={shape.priority_weight_age}",
        f"PriorityWeightJobSize={shape.priority_weight_job_size}",
        # A QOS's priority outweighs fair share and age, as a Workload's priority orders Kueue's queues
        # before its creation time (render/replay_priority.py); every job of a replay without
        # --preemption priority is in `normal`, priority 0, so then it weighs nothing.
        "PriorityWeightQOS=100000",
        f"PriorityDecayHalfLife={shape.priority_decay_half_life_min}",
        f"PriorityMaxAge={shape.priority_max_age_min}",
        f"PriorityCalcPeriod={shape.priority_calc_period_min}",
        "TopologyPlugin=topology/tree",
        # A QOS preempts only the QOSes its Preempt= list names (none has one unless a replay sets it);
        # a preempted job goes back to the queue and runs again from its start.
        "PreemptType=preempt/qos",
        "PreemptMode=REQUEUE",
        # slurmdbd in this container (the entrypoint starts it first): accounts are associations, and a
        # job of an account that is not one, or over an association's or QOS's limit, is refused.
        "AccountingStorageType=accounting_storage/slurmdbd",
        "AccountingStorageHost=localhost",
        "AccountingStorageEnforce=associations,limits,qos",
        # GPU-hours per account, the usage fair share weighs besides CPU
        "AccountingStorageTRES=gres/gpu",
        # The replay reads the job completion log (each finished job's nodes and times), not sacct:
        # one file read after the replay, whatever slurmdbd has committed by then.
        "JobCompType=jobcomp/filetxt",
        "JobCompLoc=/var/log/slurm/jobcomp.log",
        "GresTypes=gpu",
        f"NodeName={nodes} NodeHostname={HOSTNAME} NodeAddr=127.0.0.1 Port={ports} "
        f"CPUs={shape.cpus_per_node} RealMemory={shape.memory_mb}{gres} State=UNKNOWN",
        f"PartitionName=emu Nodes={nodes} Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


def render_slurmdbd_conf() -> str:
    """slurmdbd and MariaDB on this container's loopback. No password here: the entrypoint makes one per
    start and appends StoragePass to its copy, so nothing on the host holds it."""
    return "\n".join([
        "AuthType=auth/munge",
        "DbdHost=localhost",
        "SlurmUser=slurm",
        "StorageType=accounting_storage/mysql",
        "StorageHost=localhost",
        "StoragePort=3306",
        "StorageUser=slurm",
        "StorageLoc=slurm_acct_db",
        "LogFile=/var/log/slurm/slurmdbd.log",
        "PidFile=/run/slurmdbd.pid",
        # startup and connection problems, not a line per request
        "DebugLevel=info",
        "",
    ])


def render_gres_conf(shape: EmulatedShape) -> str:
    """Device-backed fake GPUs. Without File= slurmd ignores a GPU ("file-less GPU") and slurmctld sets
    the node INVAL; a plain file works but slurmd logs "not a valid character or block device" per GPU
    and node. So every node points at the same G character devices (major 195, NVIDIA's) that the
    entrypoint makes; no device is ever opened."""
    lines = ["AutoDetect=off"]
    if shape.gpus_per_node:
        files = "nvidia" + (f"[0-{shape.gpus_per_node - 1}]" if shape.gpus_per_node > 1 else "0")
        lines.append(f"NodeName={all_nodes(shape)} Name=gpu File={FAKE_GPU_DIR}/{files}")
    return "\n".join(lines) + "\n"


def render_topology_conf(shape: EmulatedShape) -> str:
    """Leaf switches are racks (r…), their parents blocks (b…), one root over several blocks."""
    rw, bw = len(str(shape.racks)), len(str(shape.blocks))
    lines = []
    for r in range(shape.racks):
        first, last = r * shape.rack_size + 1, min((r + 1) * shape.rack_size, shape.nodes)
        lines.append(f"SwitchName=r{r + 1:0{rw}d} Nodes={hostlist('e', first, last, shape.width)}")
    for b in range(shape.blocks):
        first, last = b * shape.racks_per_block + 1, min((b + 1) * shape.racks_per_block, shape.racks)
        lines.append(f"SwitchName=b{b + 1:0{bw}d} Switches={hostlist('r', first, last, rw)}")
    if shape.blocks > 1:
        lines.append(f"SwitchName=top Switches={hostlist('b', 1, shape.blocks, bw)}")
    return "\n".join(lines) + "\n"


def default_conf_dir() -> Path:
    """Where ``poc cluster up --slurm --emulated`` renders the configuration: the state directory."""
    return cluster_state_dir(STATE_NAME) / "etc"


def config_id(shape: EmulatedShape, image: str) -> str:
    """A short hash of the rendered files and the image: equal ids, the same cluster."""
    h = hashlib.sha256(image.encode())
    for text in (render_slurm_conf(shape), render_slurmdbd_conf(), render_gres_conf(shape),
                 render_topology_conf(shape)):
        h.update(text.encode())
    return h.hexdigest()[:12]


def write_config(shape: EmulatedShape, conf_dir: Path) -> Path:
    """The four files under conf_dir (mounted at CONF_DIR_IN_CONTAINER, copied to /etc/slurm)."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(conf_dir / "slurmdbd.conf", render_slurmdbd_conf().encode(), mode=0o600)
    atomic_write(conf_dir / "slurm.conf", render_slurm_conf(shape).encode(), mode=0o644)
    atomic_write(conf_dir / "gres.conf", render_gres_conf(shape).encode(), mode=0o644)
    atomic_write(conf_dir / "topology.conf", render_topology_conf(shape).encode(), mode=0o644)
    conf_dir.chmod(0o755)
    return conf_dir


def parse_node_states(sinfo_out: str) -> dict[str, int]:
    """``sinfo -h -N -o '%N %T'`` → {state: nodes}; a node appears once per partition (one here)."""
    counts: dict[str, int] = {}
    for line in sinfo_out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            counts[parts[1]] = counts.get(parts[1], 0) + 1
    return counts


# One line per process: name, RSS and PSS in KiB. Without CAP_SYS_PTRACE root cannot read the
# smaps_rollup of slurmctld (user slurm) or munged: their PSS is given as their RSS (from status).
_PS_SCRIPT = (
    "for d in /proc/[0-9]*; do n=$(cat $d/comm 2>/dev/null) || continue; "
    "{ cat $d/status; cat $d/smaps_rollup; } 2>/dev/null | awk -v n=\"$n\" "
    "'/^VmRSS:/{v=$2} /^Rss:/{r=$2} /^Pss:/{p=$2} END{if (r == \"\") {r = v; p = v} if (r != \"\") print n, r, p}'; "
    "done")


def parse_mem(text: str) -> float:
    """``docker stats`` memory (``1.2GiB / 23GiB``) → MiB used."""
    m = re.match(r"\s*([\d.]+)\s*([KMG]i?B|B)", text)
    if not m:
        raise ValueError(f"cannot read a memory size from {text!r}")
    scale = {"B": 1 / 2**20, "KiB": 1 / 1024, "KB": 1 / 1024, "MiB": 1, "MB": 1, "GiB": 1024, "GB": 1024}
    return float(m.group(1)) * scale[m.group(2)]


@dataclass(frozen=True)
class EmulatedSlurm:
    """The emulated cluster's container. ``runner`` runs one argv list (``images.run`` by default)."""

    shape: EmulatedShape
    conf_dir: Path
    image: str
    runner: Runner = images.run

    def exec(self, argv: Sequence[str], timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess:
        return self.runner(["docker", "exec", CONTAINER, *argv], timeout=timeout, check=check,
                           what=f"docker exec {CONTAINER}")

    def running_config(self) -> str | None:
        """The config id the existing container was started with ("" if unlabelled); None when there is none."""
        res = self.runner(["docker", "container", "inspect", "--format",
                           f'{{{{index .Config.Labels "{CONFIG_LABEL}"}}}}', CONTAINER], check=False)
        return res.stdout.strip() if res.returncode == 0 else None

    def up(self, idle_timeout: float = 600) -> dict[str, float | bool]:
        """Render the configuration, start the container, wait until every node is idle.

        A container started with the same configuration and image is kept (cheap, like the other
        clusters' `up`); one with another shape is refused rather than replaced under a user's jobs."""
        want = config_id(self.shape, self.image)
        have = self.running_config()
        if have is not None and have != want:
            raise ClusterError(f"container {CONTAINER} already runs another emulated cluster (config {have or '?'})",
                               "remove it first: poc cluster down --slurm --emulated")
        t0 = time.monotonic()
        if have is None:
            write_config(self.shape, self.conf_dir)
            if self.runner(["docker", "network", "inspect", NETWORK], check=False).returncode != 0:
                self.runner(["docker", "network", "create", "--label", LABEL, NETWORK], what="docker network create")
            self.runner(["docker", "run", "-d", "--name", CONTAINER, "--hostname", HOSTNAME, "--network", NETWORK,
                         "--label", LABEL, "--label", f"{CONFIG_LABEL}={want}",
                         "-e", f"POC_FAKE_GPUS={self.shape.gpus_per_node}", "-e", f"POC_FAKE_GPU_DIR={FAKE_GPU_DIR}",
                         "-e", f"POC_FAKE_GPU_MAJOR={NVIDIA_MAJOR}",
                         "-v", f"{self.conf_dir}:{CONF_DIR_IN_CONTAINER}:ro", self.image, all_nodes(self.shape)],
                        what="docker run")
        return {"idle_s": round(self.wait_idle(idle_timeout, t0), 2), "reused": have is not None}

    def summary(self, started: dict) -> dict:
        """What `poc cluster up --slurm --emulated` prints: the shape, where things are, what `up` returned."""
        return {"container": CONTAINER, "network": NETWORK, "nodes": self.shape.nodes,
                "gpus_per_node": self.shape.gpus_per_node, "racks": self.shape.racks, "blocks": self.shape.blocks,
                "image": self.image, "conf_dir": str(self.conf_dir), **started,
                "try": f"docker exec {CONTAINER} sinfo"}

    def node_states(self) -> dict[str, int]:
        res = self.exec(["sinfo", "-h", "-N", "-o", "%N %T"], timeout=60)
        return parse_node_states(res.stdout) if res.returncode == 0 else {}

    def running(self) -> bool:
        res = self.runner(["docker", "container", "inspect", "--format", "{{.State.Running}}", CONTAINER],
                          check=False)
        return res.returncode == 0 and res.stdout.strip() == "true"

    def wait_idle(self, timeout: float, t0: float | None = None) -> float:
        """Seconds from t0 until sinfo shows every node idle."""
        t0 = time.monotonic() if t0 is None else t0
        last: dict[str, int] = {}
        while time.monotonic() - t0 < timeout:
            last = self.node_states()
            if last.get("idle", 0) == self.shape.nodes:
                return time.monotonic() - t0
            # the entrypoint exits when slurmctld or any slurmd fails to start: say so now, not at the timeout
            if not last and not self.running():
                logs = self.runner(["docker", "logs", "--tail", "30", CONTAINER], check=False)
                raise ClusterError(f"emulated Slurm: container {CONTAINER} stopped before its nodes were idle\n"
                                   f"--- docker logs ---\n{logs.stdout}{logs.stderr}",
                                   f"the daemons' logs: `docker cp {CONTAINER}:/var/log/slurm .`; "
                                   "then remove it: poc cluster down --slurm --emulated")
            time.sleep(0.5)
        tail = self.exec(["tail", "-n", "30", "/var/log/slurm/slurmctld.log"]).stdout
        raise ClusterError(f"emulated Slurm: not all {self.shape.nodes} nodes idle after {timeout:.0f}s: {last}\n"
                           f"--- slurmctld.log ---\n{tail}",
                           f"registration is slower on a loaded host: wait longer, or see "
                           f"`docker exec {CONTAINER} sinfo -R` for why nodes are down")

    def memory(self) -> dict[str, float]:
        """Memory of the daemons (MiB) and the container's total from docker stats.

        RSS counts the shared libraries in every slurmd again, so it overstates a thousand copies of
        one program; PSS splits shared pages among their users and sums to what the daemons cost."""
        out: dict[str, float] = {}
        ps = self.exec(["sh", "-c", _PS_SCRIPT]).stdout
        for daemon in ("slurmd", "slurmctld", "slurmstepd", "slurmdbd", "mariadbd"):
            rows = [line.split()[1:] for line in ps.splitlines() if line.split()[:1] == [daemon]]
            out[f"{daemon}_count"] = len(rows)
            out[f"{daemon}_rss_mib"] = round(sum(int(r[0]) for r in rows) / 1024, 1)
            out[f"{daemon}_pss_mib"] = round(sum(int(r[1]) for r in rows) / 1024, 1)
        if out["slurmd_count"]:
            out["slurmd_rss_mib_each"] = round(out["slurmd_rss_mib"] / out["slurmd_count"], 2)
            out["slurmd_pss_mib_each"] = round(out["slurmd_pss_mib"] / out["slurmd_count"], 2)
        stats = self.runner(["docker", "stats", "--no-stream", "--format", "{{.MemUsage}}", CONTAINER])
        out["container_mib"] = round(parse_mem(stats.stdout), 1)
        return out

    def down(self) -> list[str]:
        return down(self.runner)


def down(runner: Runner = images.run) -> list[str]:
    """Remove the container and the network, whichever exist; returns what was removed. The rendered
    configuration stays for inspection; the next `up` writes it again."""
    removed = []
    if runner(["docker", "rm", "-f", CONTAINER], check=False).returncode == 0:
        removed.append(f"container {CONTAINER}")
    if runner(["docker", "network", "rm", NETWORK], check=False).returncode == 0:
        removed.append(f"network {NETWORK}")
    return removed
