"""Config overrides from the command line and the environment, applied to the file's mapping before
validation, so an override is checked exactly as the same value written in the file would be.

Precedence, lowest first: the config file (or the built-in default), then POC_* environment variables,
then --set. An environment variable POC_<KEY>[__<KEY>...] names a key path, one `__` per level, lower-cased:
POC_WORKLOAD__STEPS=10 is workload.steps. A POC_* variable whose first key is no config section is not an
override (POC_CACHE_DIR, POC_STATE_DIR are the harness's own), unless it has a `__`: that is a misspelt one.
"""
from __future__ import annotations

from collections.abc import Mapping

from ..config import Config, load_yaml
from ..errors import ConfigError

ENV_PREFIX = "POC_"
ENV_SEP = "__"


def from_env(env: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(key path, raw value, where it came from) for every POC_* override, in name order."""
    out = []
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX):
            continue
        parts = name[len(ENV_PREFIX):].lower().split(ENV_SEP)
        if parts[0] not in Config.model_fields:
            if len(parts) > 1:
                raise ConfigError(f"environment variable {name}: {parts[0]!r} is not a config section",
                                  tip=f"name a key path as POC_SECTION{ENV_SEP}KEY, e.g. "
                                      f"POC_WORKLOAD{ENV_SEP}STEPS=10; `poc config show` lists the sections")
            continue
        out.append((".".join(parts), env[name], f"env {name}"))
    return out


def from_set(items: list[str] | None) -> list[tuple[str, str, str]]:
    out = []
    for item in items or []:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY.PATH=VALUE",
                              tip="e.g. --set workload.steps=10 or --set 'platforms=[slurm, k8s]'")
        out.append((key.strip(), value, "--set"))
    return out


def apply(data: object, overrides: list[tuple[str, str, str]]) -> tuple[object, list[dict]]:
    """The mapping with each override set in order (a later one wins), and what was applied: key and
    origin only, since a value may be a secret's path; the effective config is recorded redacted."""
    if data is None:
        data = {}
    applied = []
    for path, raw, origin in overrides:
        value = load_yaml(raw, f"{origin} {path}") if raw.strip() else ""
        _set(data, path, value, origin)
        applied.append({"key": path, "from": origin})
    return data, applied


def _set(data: object, path: str, value: object, origin: str) -> None:
    keys = path.split(".")
    node = data
    for i, key in enumerate(keys):
        last = i == len(keys) - 1
        if isinstance(node, list):
            if not key.isdigit() or int(key) >= len(node):
                raise ConfigError(f"{origin} {path}: {key!r} is not an index of the list at "
                                  f"{'.'.join(keys[:i]) or '<top level>'} ({len(node)} items)",
                                  tip="address a list item by its 0-based index, or set the whole list: "
                                      "--set 'faults=[{kind: kill_rank, at_step: 15, rank: 1}]'")
            idx = int(key)
            if last:
                node[idx] = value
                return
            if not isinstance(node[idx], (dict, list)):
                node[idx] = {}
            node = node[idx]
            continue
        if not isinstance(node, dict):
            raise ConfigError(f"{origin} {path}: {'.'.join(keys[:i])} is a value, not a section",
                              tip="set the key that holds it instead")
        if last:
            node[key] = value
            return
        if not isinstance(node.get(key), (dict, list)):   # absent or null (contention: null): a section now
            node[key] = {}
        node = node[key]
