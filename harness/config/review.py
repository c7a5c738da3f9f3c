"""What a reviewer of a shared config must see: the choices it may make that widen what the job, or the
harness on the machine that runs it, can do. None is an error (each has a real use: host networking for
RDMA without a CNI, a toleration for a GPU pool's taint), so each is said: `poc validate` and `poc run`
print them as WARNING lines, and a campaign keeps them in campaign.json (config_warnings) beside the
config they came from.

What the config cannot say is not listed: there is no privileged, no securityContext, no volume but
the run's own checkpoint volume, and extra_sbatch is an allow-list (config/sbatch.py).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .kubernetes import Kubernetes

if TYPE_CHECKING:
    from .model import Config

# Variables that choose what code a process loads or runs before its own: set for a job, they run
# whatever they name inside every rank (a preloaded library, a shell's startup file, a module path).
CODE_LOADING_ENV = ("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_ENV", "ENV", "PATH", "PYTHONPATH",
                    "PYTHONHOME", "PYTHONSTARTUP", "PROMPT_COMMAND", "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN")
# The capabilities the Pod Security Standards' baseline profile allows a container to add, and IPC_LOCK,
# which RDMA memory registration needs (docs/gpu-guide.md); any other is said, SYS_ADMIN above all.
BASELINE_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                   "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
                                   "IPC_LOCK"})
CAPABILITY_WHY = {
    "SYS_ADMIN": "nearly root on the node (mount, namespaces, devices): a container escape away from the host",
    "ALL": "every capability: root on the node in all but name",
    "SYS_PTRACE": "reads and changes other processes' memory",
    "SYS_MODULE": "loads kernel modules",
    "NET_ADMIN": "reconfigures the network it sees (with host_network: the node's)",
    "NET_RAW": "raw sockets: spoofed packets on the pod network",
    "DAC_READ_SEARCH": "reads any file it can reach, whatever its permissions",
    "BPF": "loads BPF programs into the kernel",
    "SYS_RAWIO": "raw I/O to devices and ports",
}


def warnings(cfg: Config) -> list[str]:
    """Each security-relevant choice the config makes, as 'field: what it allows', in config order."""
    out = _env_warnings(cfg)
    out += _pod_warnings("kubernetes", cfg.kubernetes)
    if cfg.ux.kubernetes:   # the probes' own placement, over the campaign's: its pod settings may differ
        probe = Kubernetes.model_validate({**cfg.kubernetes.model_dump(mode="json"), **cfg.ux.kubernetes})
        out += [w for w in _pod_warnings("ux.kubernetes", probe) if w.split(": ", 1)[1] not in
                {x.split(": ", 1)[1] for x in out}]
    s = cfg.slurm
    if s.accept_unknown_host:
        out.append("slurm.accept_unknown_host: an ssh host key never seen before is trusted: whoever answers for "
                   f"{s.host or 'the login node'} first gets the connection and the commands")
    if s.rest.allow_insecure_http and (s.rest.url or "").startswith("http://"):
        out.append(f"slurm.rest.allow_insecure_http: the slurmrestd token crosses {s.rest.url} unencrypted")
    for plat, kinds in cfg.drills.commands.items():
        for kind, steps in (kinds or {}).items():
            for i, step in enumerate(steps or []):
                out.append(f"drills.commands.{plat}.{kind}[{i}]: runs {' '.join(step['argv'])!r} on this machine "
                           "during the drill")
    return out


def _env_warnings(cfg: Config) -> list[str]:
    out = []
    for item in cfg.slurm.extra_sbatch:
        opt, _, value = item.partition("=")
        if opt == "--export":
            named = [n for n in (v.partition("=")[0] for v in value.split(",")) if n in CODE_LOADING_ENV]
            if named:
                out.append(f"slurm.extra_sbatch: {item} sets {', '.join(named)} for the batch script and every "
                           "rank: it chooses code they load or run before their own")
    named = [n for n in cfg.fabric.env if n in CODE_LOADING_ENV]
    if named:
        out.append(f"fabric.env: sets {', '.join(named)} in every rank on every platform: it chooses code they "
                   "load or run before their own")
    job_env = cfg.slurm.rest.job_environment or {}
    named = [n for n in job_env if n in CODE_LOADING_ENV and n != "PATH"]   # PATH it must set
    if named:
        out.append(f"slurm.rest.job_environment: sets {', '.join(named)} for every job: it chooses code they load "
                   "or run before their own")
    return out


def _pod_warnings(where: str, k: Kubernetes) -> list[str]:
    pod, out = k.pod, []
    for i, t in enumerate(pod.tolerations):
        if t.get("operator") == "Exists" and not t.get("key"):
            out.append(f"{where}.pod.tolerations[{i}]: operator Exists with no key tolerates every taint: the pods "
                       "may land on control-plane, cordoned-for-maintenance and reserved nodes")
    for c in pod.capabilities:
        if c not in BASELINE_CAPABILITIES:
            why = CAPABILITY_WHY.get(c, "beyond the Pod Security Standards' baseline")
            out.append(f"{where}.pod.capabilities: {c}: {why}")
    for key, value in pod.annotations.items():
        if ("seccomp" in key or "apparmor" in key) and "unconfined" in value.lower():
            out.append(f"{where}.pod.annotations: {key}: {value}: the containers run without that kernel "
                       "confinement")
    if pod.host_network:
        out.append(f"{where}.pod.host_network: the pods share the nodes' network namespace (every interface and "
                   "port of the node, its localhost services included)")
    if k.checkpoint_host_path:
        out.append(f"{where}.checkpoint_host_path: a hostPath volume under {k.checkpoint_host_path} on every node "
                   "the pods land on, writable by the job")
    if pod.priority_class and pod.priority_class.startswith("system-"):
        out.append(f"{where}.pod.priority_class: {pod.priority_class} is the cluster's own critical class: the "
                   "pods preempt other users' and even system pods")
    return out
