"""What several commands share: the config as the command line and environment make it, platforms."""
from __future__ import annotations

import logging
import os

from .. import config as cfgmod
from ..errors import ConfigError
from . import overrides

log = logging.getLogger(__name__)

DEFAULT_RESULTS = "poc-results"
PLATFORM_CHOICES = "local, slurm or k8s"


def platforms(args, cfg) -> list[str]:
    if not getattr(args, "platform", None):
        return cfg.platforms
    try:
        return [cfgmod.normalize_platform(p) for p in args.platform]
    except ValueError as exc:
        raise ConfigError(str(exc), tip=f"use --platform {PLATFORM_CHOICES}") from None


def load(args):
    """The config of --config (or the built-in default) with the POC_* environment overrides, then --set,
    applied before validation; what was applied is left in args.overrides_applied for the store."""
    data, source = cfgmod.read_mapping(getattr(args, "config", None))
    env = getattr(args, "env", None)
    todo = overrides.from_env(os.environ if env is None else env) + overrides.from_set(getattr(args, "set", None))
    if todo:
        data, applied = overrides.apply(data, todo)
        source += " with " + ", ".join(f"{a['key']} from {a['from']}" for a in applied)
    else:
        applied = []
    args.overrides_applied = applied
    if applied:
        log.info("config %s", source)
    cfg = cfgmod.from_mapping(data, source)
    if getattr(args, "campaign", None):
        try:
            cfg.campaign = args.campaign
        except (ValueError, TypeError) as exc:  # pydantic's ValidationError, reduced to one line
            errs = getattr(exc, "errors", lambda: [])()
            why = errs[0].get("msg") if errs else str(exc).splitlines()[0]
            raise ConfigError(f"--campaign {args.campaign!r}: {why}",
                              tip="use lower-case letters, digits and '-'") from None
    return cfg
