"""The cluster settings that bound a criterion of the decision summary, as the runs recorded them.

A local cluster tuned for a quick smoke (Slurm's `cred_expire=10`, a 20 s node-monitor grace period)
answers the recovery question for those settings, not for a site's: a requeued Slurm job waits out
`cred_expire` before it may start again, a lost node is noticed after `SlurmdTimeout` or the
node-monitor grace period and its pods evicted after their tolerations. Each row names the settings
that govern it with the values the runs' environment holds; a setting the runs did not record says
"not recorded" (the report never fills in a value of its own).
"""
from __future__ import annotations

from typing import Any

# (label, path into a platform's recorded environment): SchedulerParameters and AuthInfo are
# "key=value,..." texts, read as mappings
_SCHED = [("sched_interval", ("slurm_settings", "SchedulerParameters", "sched_interval")),
          ("bf_interval", ("slurm_settings", "SchedulerParameters", "bf_interval"))]
_SLURM_RECOVERY = [("cred_expire", ("slurm_settings", "AuthInfo", "cred_expire")),
                   ("SlurmdTimeout", ("slurm_settings", "SlurmdTimeout")), *_SCHED,
                   ("JobRequeue", ("slurm_settings", "JobRequeue"))]
_K8S_RECOVERY = [("JobSet maxRestarts", ("failure_policy", "maxRestarts")),
                 ("JobSet restartStrategy", ("failure_policy", "restartStrategy")),
                 ("node-monitor-grace-period", ("node_monitor_grace_period",)),
                 ("pod tolerationSeconds", ("toleration_seconds",)),
                 ("default not-ready toleration", ("cluster_settings", "default_not_ready_toleration_seconds")),
                 ("default unreachable toleration", ("cluster_settings", "default_unreachable_toleration_seconds")),
                 ("Kueue requeue backoff", ("kueue_requeue_backoff",))]
BOUNDS: dict[str, dict[str, list[tuple[str, tuple[str, ...]]]]] = {
    "queue": {"slurm": _SCHED},
    "submit → first step": {"slurm": _SCHED},
    "recovery": {"slurm": _SLURM_RECOVERY, "k8s": _K8S_RECOVERY},
    "contention": {"slurm": _SCHED},
}
NOT_RECORDED = "not recorded"


def _pairs(text: str) -> dict[str, str]:
    out = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def recorded(env: dict[str, Any], path: tuple[str, ...]) -> Any:
    """The value at path in one platform's environment facts, or None."""
    v: Any = env
    for key in path:
        if isinstance(v, str):
            v = _pairs(v)
        if not isinstance(v, dict) or key not in v:
            return None
        v = v[key]
    return None if v in (None, "", {}, []) else v


def settings_text(criterion: str, settings: dict[str, dict[str, Any]], order: tuple[str, ...],
                  label) -> str:
    """'Slurm: cred_expire 10, ...; Kubernetes: ...' for the platforms in order; '–' where none bound it."""
    parts = []
    for plat in order:
        named = BOUNDS.get(criterion, {}).get(plat)
        if not named:
            continue
        env = settings.get(plat, {})
        values = [f"{name} {NOT_RECORDED if (v := recorded(env, path)) is None else v}" for name, path in named]
        parts.append(f"{label(plat)}: " + ", ".join(values))
    return "; ".join(parts) or "–"
