"""The subset of docker-compose.yml that ``slurm_docker`` drives: parse, interpolate, check, order,
and turn each service into a ``docker run`` argv. Pure (no Docker), so it is tested without one.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from harness.errors import ClusterError

ALLOWED_SERVICE_KEYS = {"image", "container_name", "hostname", "command", "depends_on", "volumes",
                        "ports", "environment", "networks", "init", "labels", "extra_hosts"}

_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}")


def _interpolate(value: Any, env: dict[str, str]) -> Any:
    if isinstance(value, str):
        def sub(m: re.Match) -> str:
            if m.group(0) == "$$":
                return "$"
            name, default = m.group(1), m.group(2)
            if env.get(name):
                return env[name]
            if default is not None:
                return default
            raise ClusterError(f"docker-compose.yml needs ${{{name}}}, which is not set")
        return _VAR.sub(sub, value)
    if isinstance(value, list):
        return [_interpolate(v, env) for v in value]
    if isinstance(value, dict):
        return {k: _interpolate(v, env) for k, v in value.items()}
    return value


def load_compose(env: dict[str, str], path: Path) -> dict[str, Any]:
    """Parse the compose file, interpolate ${VARS} from env, check it uses only known keys."""
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ClusterError(f"cannot read {path}: {exc}") from exc
    doc = {k: v for k, v in doc.items() if not str(k).startswith("x-")}
    doc = _interpolate(doc, env)
    for name, svc in doc.get("services", {}).items():
        unknown = set(svc) - ALLOWED_SERVICE_KEYS
        if unknown:
            raise ClusterError(f"docker-compose.yml: service {name} uses keys this driver does not "
                               f"implement: {sorted(unknown)}",
                               "extend harness/clusters/slurm/compose.py or drop the keys")
    return doc


def start_order(services: dict[str, Any]) -> list[str]:
    """Services in an order that starts each one after what it depends on."""
    order: list[str] = []
    seen: set[str] = set()

    def visit(n: str, stack: tuple[str, ...] = ()) -> None:
        if n in seen:
            return
        if n in stack:
            raise ClusterError(f"docker-compose.yml: depends_on cycle through {n}")
        for d in services[n].get("depends_on", []) or []:
            visit(d, stack + (n,))
        seen.add(n)
        order.append(n)

    for n in services:
        visit(n)
    return order


def run_argv(name: str, svc: dict[str, Any], doc: dict[str, Any]) -> list[str]:
    """The `docker run` argv for one compose service."""
    cname = svc.get("container_name") or f"{doc.get('name', 'poc')}-{name}"
    argv = ["docker", "run", "-d", "--name", cname, "--restart", "no"]
    if svc.get("hostname"):
        argv += ["--hostname", svc["hostname"]]
    if svc.get("init"):
        argv.append("--init")
    labels = dict(svc.get("labels") or {})
    labels["k8s-slurm-poc.service"] = name
    for k, v in labels.items():
        argv += ["--label", f"{k}={v}"]
    nets = svc.get("networks") or []
    # a list of network names, or compose's long form {name: {aliases: [...]}}: other names the service is found
    # by on that network (docker run joins one network at start; the first is the one)
    for i, net in enumerate(nets):
        real = (doc.get("networks", {}).get(net) or {}).get("name", net)
        aliases = ((nets[net] or {}).get("aliases") or []) if isinstance(nets, dict) else []
        if i == 0:
            argv += ["--network", real, "--network-alias", name]
            argv += [a for alias in aliases if alias != name for a in ("--network-alias", alias)]
    # extra_hosts: /etc/hosts lines ahead of docker's own entry for the container (HOST:IP, or compose's HOST=IP)
    for entry in svc.get("extra_hosts") or []:
        host, _, ip = str(entry).replace("=", ":", 1).partition(":")
        argv += ["--add-host", f"{host}:{ip}"]
    vols = doc.get("volumes", {}) or {}
    for spec in svc.get("volumes") or []:
        parts = spec.split(":")
        src = parts[0]
        if not src.startswith(("/", ".")):
            src = (vols.get(src) or {}).get("name", src)
        argv += ["-v", ":".join([src] + parts[1:])]
    for p in svc.get("ports") or []:
        argv += ["-p", str(p)]
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) for e in env)
    for k, v in env.items():
        argv += ["-e", f"{k}={v}"]
    argv.append(svc["image"])
    cmd = svc.get("command")
    if cmd:
        argv += list(cmd) if isinstance(cmd, list) else cmd.split()
    return argv
