"""Recovery at each platform's default settings, projected from the phases the runs measured.

A cluster tuned for a quick smoke answers the recovery question for its own settings. Each setting
below governs one stretch of a recovery, which the run's own records bound:

  Slurm, any requeue: the requeued attempt is held until `cred_expire` has passed (sacct's Eligible of
    the new attempt − End of the failed one), then waits for a scheduling pass that nothing triggers
    (Start − Eligible: at most the shorter of `sched_interval` and `bf_interval`).
  Slurm, a lost node: slurmctld marks the node down once it has not answered for `SlurmdTimeout`;
    it asks every `SlurmdTimeout`/3, so the fault lands anywhere in that window (the detection phase).
  Kubernetes, a lost node: the node controller marks it NotReady after `node-monitor-grace-period`
    (detection; the kubelet renews its lease every 10 s and the controller looks every 5 s), and its
    pods are evicted when their not-ready/unreachable toleration runs out (teardown).
  Kubernetes, a killed rank or deleted pod: no cluster setting; JobSet recreates the pods at once.

The projection keeps everything a run measured outside those stretches and replaces each stretch by
what it becomes at the platform's default: the part beyond the setting's own value (Slurm's requeue
second, a scheduling pass) carries over, and where the fault's place in a polling window decides the
stretch, the bounds span the default's whole window. A run whose settings already are the defaults is
reported as measured. The defaults are the documented ones (slurm.conf(5); kube-controller-manager,
DefaultTolerationSeconds); benchmarks/recovery_at_defaults.py measures the Slurm case against this.

Beside the figures, the section says how a failed run restarts on each platform, from what the runs
recorded (records without it say nothing): Slurm requeues the job (the batch script's own scontrol
requeue, --requeue for a node failure; slurm.conf's requeue settings); Kubernetes follows the run's own
JobSet failurePolicy, and Kueue's waitForPodsReady where its configuration could be read.
"""
from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

from ..store import latest_records
from . import bounds

TITLE = "Recovery at each platform's defaults"
# (value in seconds, where it is documented)
SLURM_DEFAULTS = {"cred_expire": 120.0, "SlurmdTimeout": 300.0, "sched_interval": 60.0, "bf_interval": 30.0}
K8S_DEFAULTS = {"node-monitor-grace-period": 50.0, "pod toleration": 300.0}
DEFAULTS_SOURCE = {"slurm": "slurm.conf(5): AuthInfo cred_expire 120, SlurmdTimeout 300, "
                            "SchedulerParameters sched_interval 60 and bf_interval 30",
                   "k8s": "kube-controller-manager --node-monitor-grace-period 50s (since 1.32), "
                          "DefaultTolerationSeconds 300 s for not-ready and unreachable"}
K8S_LEASE_RENEW_S = 10.0        # a kubelet renews its node lease every 10 s by default
K8S_MONITOR_PERIOD_S = 5.0      # --node-monitor-period: how often the node controller looks
SACCT_RESOLUTION_S = 1.0        # sacct's Submit/Eligible/Start/End are whole seconds


@dataclass(frozen=True)
class Term:
    """One stretch of a recovery a setting governs: what it measured here, what it projects to."""
    setting: str
    stretch: str
    site: float
    default: float
    measured: float
    lo: float
    hi: float
    resolution: float = SACCT_RESOLUTION_S   # how far the measured stretch may be off (± s)


@dataclass(frozen=True)
class Projection:
    run_id: str
    platform: str
    fault: str
    measured: float
    terms: tuple[Term, ...]
    restart: str | None = None   # how a failed run restarts there, as the run recorded it (restart_text)
    # Kubernetes: the JobSet failurePolicy's maxRestarts the run's JobSet carried (the harness sets it); JobSet's
    # own default is no failurePolicy, under which a failed Job fails the JobSet and nothing restarts
    jobset_restarts: int | None = None

    @property
    def lo(self) -> float:
        return self.measured + sum(t.lo - t.measured for t in self.terms)

    @property
    def hi(self) -> float:
        return self.measured + sum(t.hi - t.measured for t in self.terms)

    @property
    def at_defaults(self) -> bool:
        """Every setting in its path was at its default: the run measured the defaults' figure."""
        return bool(self.terms) and all(t.site == t.default for t in self.terms)

    @property
    def governed(self) -> float:
        """The seconds of this recovery that settings set (the stretches measured here)."""
        return sum(t.measured for t in self.terms)

    @property
    def free(self) -> float:
        """The recovery with those stretches taken out: what the platform itself took."""
        return self.measured - self.governed

    @property
    def share(self) -> float:
        """The part of the recovery the settings set, 0-1."""
        return self.governed / self.measured if self.measured > 0 else math.nan

    @property
    def governed_resolution(self) -> float:
        return sum(t.resolution for t in self.terms)


def seconds(value: Any) -> float | None:
    """A recorded setting in seconds: 30, '30', '30 sec', '20s', '1m0s'; None if it does not read as one."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str):
        return None
    text = value.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(?:s|sec|secs|seconds)?", text)
    if m:
        return float(m.group(1))
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|ms|m|s)", text)
    if parts and "".join(a + b for a, b in parts) == text:
        scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
        return sum(float(a) * scale[b] for a, b in parts)
    return None


def slurm_site(env: dict) -> dict[str, float] | None:
    """The Slurm settings a recovery depends on, as the run recorded them (a key slurm.conf leaves out
    is at its default); None when the run recorded no Slurm configuration."""
    conf = env.get("slurm_settings")
    if not isinstance(conf, dict) or not conf:
        return None
    out = dict(SLURM_DEFAULTS)
    for name in ("cred_expire",):
        v = seconds(bounds.recorded(env, ("slurm_settings", "AuthInfo", name)))
        out[name] = out[name] if v is None else v
    for name in ("sched_interval", "bf_interval"):
        v = seconds(bounds.recorded(env, ("slurm_settings", "SchedulerParameters", name)))
        out[name] = out[name] if v is None else v
    v = seconds(conf.get("SlurmdTimeout"))
    out["SlurmdTimeout"] = out["SlurmdTimeout"] if v is None else v
    return out


def k8s_site(env: dict) -> dict[str, float] | None:
    """node-monitor-grace-period and the pods' toleration as the run recorded them; None if not recorded."""
    grace = seconds(env.get("node_monitor_grace_period"))
    tol = seconds(env.get("toleration_seconds"))
    if tol is None:
        tol = seconds(bounds.recorded(env, ("cluster_settings", "default_unreachable_toleration_seconds")))
    if grace is None or tol is None:
        return None
    return {"node-monitor-grace-period": grace, "pod toleration": tol}


def _requeue(attempts: list[dict], fault_at: float) -> tuple[dict, dict] | None:
    """The attempt the fault ended and the one that followed, as sacct recorded them."""
    for a, b in itertools.pairwise(attempts):
        if all(isinstance(x, int | float) for x in (a.get("ended"), b.get("eligible"), b.get("allocated"))) \
                and a["ended"] >= fault_at - SACCT_RESOLUTION_S:
            return a, b
    return None


def slurm_terms(fault: str, site: dict[str, float], attempts: list[dict], fault_at: float,
                detection: float | None, detection_u: float = SACCT_RESOLUTION_S,
                to: dict[str, float] | None = None) -> tuple[Term, ...] | None:
    """to: the settings to project to (each Slurm default where not given)."""
    target = {**SLURM_DEFAULTS, **(to or {})}
    pair = _requeue(attempts, fault_at)
    if pair is None:
        return ()   # restarted inside its allocation (torchrun): no requeue, nothing the settings hold
    a, b = pair
    hold = float(b["eligible"] - a["ended"])
    beyond = hold - site["cred_expire"]   # the requeue's own second(s), which carry over
    d = target["cred_expire"]
    terms = [Term("cred_expire", "requeue hold (Eligible − End)", site["cred_expire"], d, hold,
                  d + beyond - SACCT_RESOLUTION_S, d + beyond + SACCT_RESOLUTION_S)]
    wait = float(b["allocated"] - b["eligible"])
    site_pass = min(site["sched_interval"], site["bf_interval"])
    default_pass = min(target["sched_interval"], target["bf_interval"])
    terms.append(Term("sched_interval/bf_interval", "wait for a scheduling pass (Start − Eligible)", site_pass,
                      default_pass, wait, 0.0, default_pass + SACCT_RESOLUTION_S))
    if fault == "lose_node":
        if detection is None:
            return None
        t = target["SlurmdTimeout"]
        terms.insert(0, Term("SlurmdTimeout", "lost node noticed (detection)", site["SlurmdTimeout"], t, detection,
                             t - t / 3, t + t / 3, detection_u))
    return tuple(terms)


def k8s_terms(fault: str, site: dict[str, float] | None, phases: dict[str, float | None],
              uncertainty: dict[str, float] | None = None,
              to: dict[str, float] | None = None) -> tuple[Term, ...] | None:
    """to: the settings to project to (each Kubernetes default where not given)."""
    target = {**K8S_DEFAULTS, **(to or {})}
    if fault != "lose_node":
        return ()
    if site is None or phases.get("detection") is None or phases.get("teardown") is None:
        return None
    u = uncertainty or {}
    g = target["node-monitor-grace-period"]
    tol = target["pod toleration"]
    teardown = float(phases["teardown"])
    beyond = teardown - site["pod toleration"]
    return (Term("node-monitor-grace-period", "lost node noticed (detection)", site["node-monitor-grace-period"], g,
                 float(phases["detection"]), g - K8S_LEASE_RENEW_S, g + K8S_MONITOR_PERIOD_S,
                 u.get("detection", SACCT_RESOLUTION_S)),
            Term("pod toleration", "pods evicted (teardown)", site["pod toleration"], tol, teardown,
                 tol + beyond - K8S_MONITOR_PERIOD_S, tol + beyond + K8S_MONITOR_PERIOD_S,
                 u.get("teardown", SACCT_RESOLUTION_S)))


def _setting(v: Any) -> str:
    return "not set" if v in (None, "", "(null)") else str(v)


def slurm_restart(env: dict) -> str | None:
    """Slurm's restart path as preflight recorded it (backends/slurm/backend.py recovery_settings)."""
    r = env.get("slurm_recovery")
    if not isinstance(r, dict):
        return None
    conf = ", ".join(f"{k} {_setting(r.get(k))}" for k in ("JobRequeue", "RequeueExit", "RequeueExitHold",
                                                            "MaxBatchRequeue") if k in r)
    return (f"requeued, never restarted inside its allocation (torchrun --max_restarts="
            f"{r.get('torchrun_max_restarts', 0)}): after a failed srun the batch script requeues its own job "
            f"(scontrol requeue) while fewer than {_setting(r.get('max_restarts'))} restarts (slurm.max_restarts) were "
            "made; after a node failure Slurm requeues it (sbatch --requeue)"
            + (f"; slurm.conf {conf}" if conf else ""))


def _rule(r: Any) -> str:
    if not isinstance(r, dict):
        return str(r)
    on = r.get("onJobFailureReasons")
    return (f"{r.get('name') or 'rule'}: {r.get('action')}" + (f" on {', '.join(map(str, on))}" if on else "")
            + (f" for {', '.join(map(str, r['targetReplicatedJobs']))}" if r.get("targetReplicatedJobs") else ""))


def k8s_restart(env: dict, info: dict) -> str | None:
    """JobSet's failure policy from the run's own JobSet, Kueue's waitForPodsReady from its configuration
    (backends/k8s/preflight.py failure_policy_of, kueue_settings); None when neither was recorded."""
    fp, kueue = info.get("failure_policy"), env.get("kueue_config")
    parts = []
    if isinstance(fp, dict):
        if not fp.get("set", True):
            parts.append("the run's JobSet has no failurePolicy (a failed Job fails the JobSet)")
        else:
            rules = fp.get("rules") or []
            parts.append(f"the run's JobSet failurePolicy: maxRestarts {_setting(fp.get('maxRestarts'))}, "
                         f"restartStrategy {_setting(fp.get('restartStrategy'))}, "
                         + (f"rules {'; '.join(map(_rule, rules))}" if rules else "no rules"))
        limits = {v for v in (fp.get("job_backoff_limit") or {}).values()}
        if len(limits) == 1:
            parts[-1] += f"; its Jobs' backoffLimit {_setting(next(iter(limits)))}"
    if isinstance(kueue, dict):
        wait = kueue.get("waitForPodsReady")
        if "unreadable" in kueue:
            parts.append(f"Kueue's configuration unreadable here ({kueue.get('source')}: {kueue['unreadable']})")
        elif not wait or not wait.get("enable"):
            parts.append(f"Kueue waitForPodsReady off ({'not set' if not wait else 'enable false'} in "
                         f"{kueue.get('source')})")
        else:
            said = ", ".join(f"{k} {v}" for k, v in wait.items() if k != "enable")
            parts.append(f"Kueue waitForPodsReady on ({said or 'its defaults'}; {kueue.get('source')})")
    return "; ".join(parts) or None


def restart_text(record: dict) -> str | None:
    """How a failed run restarts on its platform, from what the run recorded; None for older records."""
    env = record.get("environment") or {}
    if record.get("platform") == "slurm":
        return slurm_restart(env)
    if record.get("platform") == "k8s":
        return k8s_restart(env, (record.get("scheduler") or {}).get("info") or {})
    return None


def _value(metrics: dict, name: str, field: str = "value") -> float | None:
    v = (metrics.get(name) or {}).get(field)
    return float(v) if isinstance(v, int | float) and math.isfinite(v) else None


def project(record: dict, to: dict[str, float] | None = None) -> Projection | None:
    """A successful fault run's recovery at its platform's defaults (or at the settings `to` names, the
    defaults for the rest: what benchmarks/recovery_at_defaults.py compares a measured run with); None when it
    is no such run or its records do not say enough (nothing is filled in)."""
    fault, plat = record.get("scenario"), record.get("platform")
    if record.get("status") != "ok" or plat not in ("slurm", "k8s") or not record.get("faults"):
        return None
    metrics = record.get("metrics") or {}
    measured = _value(metrics, "recovery_s")
    if measured is None:
        return None
    env = record.get("environment") or {}
    phases = {p: _value(metrics, f"recovery_{p}_s") for p in ("detection", "teardown")}
    unc = {p: u for p in ("detection", "teardown")
           if (u := _value(metrics, f"recovery_{p}_s", "uncertainty")) is not None}
    if plat == "slurm":
        site = slurm_site(env)
        if site is None:
            return None
        sched = record.get("scheduler") or {}
        fault_at = float(record["faults"][0].get("injected_at") or 0.0)
        terms = slurm_terms(fault, site, sched.get("attempts") or [], fault_at, phases["detection"],
                            unc.get("detection", SACCT_RESOLUTION_S), to)
    else:
        terms = k8s_terms(fault, k8s_site(env), phases, unc, to)
    if terms is None:
        return None
    fp = (((record.get("scheduler") or {}).get("info") or {}).get("failure_policy")
          or (record.get("environment") or {}).get("failure_policy"))
    restarts = fp.get("maxRestarts") if isinstance(fp, dict) and fp.get("set", True) else None
    return Projection(record.get("run_id", "?"), plat, fault, measured, terms, restart_text(record),
                      int(restarts) if isinstance(restarts, int | float) and plat == "k8s" else None)


def load(results_dir: str | Path) -> list[Projection]:
    """Every fault run's projection (a retried run's last record only); only lines with an injected
    fault are parsed."""
    out = []
    for rec, _ in latest_records(results_dir, b'"injected_at"', lambda r: bool(r.get("faults"))):
        p = project(rec)
        if p is not None:
            out.append(p)
    return out


@dataclass(frozen=True)
class Summary:
    platform: str
    fault: str
    n: int
    measured: float          # median recovery_s at the runs' own settings
    projected: float         # median of the runs' projected centres
    lo: float                # the lowest and highest projected bound over the runs
    hi: float
    terms: tuple[Term, ...]  # one run's terms, for the settings' names and values
    at_defaults: bool
    restart: tuple[str, ...] = ()   # the runs' distinct restart_text
    free: float = math.nan          # median recovery with the setting-governed stretches taken out
    share_lo: float = math.nan      # the lowest and highest share of a run's recovery that settings set
    share_hi: float = math.nan
    jobset_restarts: int | None = None   # Kubernetes: the failurePolicy maxRestarts the runs' JobSets carried

    @property
    def no_restart_at_defaults(self) -> bool:
        """Kubernetes runs that restarted only because their JobSet had a failurePolicy: at JobSet's default
        (none) the first failed Job fails the JobSet and the job does not come back by itself."""
        return self.platform == "k8s" and bool(self.jobset_restarts)


def summarize(projections: Iterable[Projection]) -> list[Summary]:
    groups: dict[tuple[str, str], list[Projection]] = {}
    for p in projections:
        groups.setdefault((p.platform, p.fault), []).append(p)
    out = []
    for (plat, fault), ps in sorted(groups.items()):
        shares = [p.share for p in ps if math.isfinite(p.share)]
        out.append(Summary(plat, fault, len(ps), median(p.measured for p in ps),
                           median((p.lo + p.hi) / 2 for p in ps), min(p.lo for p in ps), max(p.hi for p in ps),
                           ps[0].terms, all(p.at_defaults for p in ps),
                           tuple(dict.fromkeys(p.restart for p in ps if p.restart)),
                           median(p.free for p in ps), min(shares, default=math.nan), max(shares, default=math.nan),
                           max((p.jobset_restarts for p in ps if p.jobset_restarts is not None), default=None)))
    return out


def _fmt(x: float) -> str:
    return f"{x:.0f}" if abs(x) >= 10 or x == round(x) else f"{x:.1f}"


def _settings(terms: tuple[Term, ...], which: str) -> str:
    if not terms:
        return "none in its path"
    return ", ".join(f"{t.setting} {_fmt(getattr(t, which))} s" for t in terms)


NO_RESTART = ("does not restart at JobSet's default (no failurePolicy: the first failed Job fails the JobSet; "
              "these runs' JobSets carried maxRestarts {n}, set by the harness)")


def _at_defaults(s: Summary) -> str:
    if s.at_defaults:
        return f"{_fmt(s.measured)} s measured"
    if not s.terms:
        text = f"{_fmt(s.measured)} s (no cluster setting in its path)"
    else:
        text = f"{_fmt(s.projected)} s [{_fmt(s.lo)}–{_fmt(s.hi)}] projected"
    if s.no_restart_at_defaults:
        text += "; " + NO_RESTART.format(n=s.jobset_restarts)
    return text


def share_text(s: Summary) -> str:
    """'49–65 % (requeue hold cred_expire 10 s, ...)': how much of the figure the settings set, by name."""
    if not s.terms or not math.isfinite(s.share_lo):
        return "0 % (no cluster setting in its path)"
    span = (f"{100 * s.share_lo:.0f} %" if round(100 * s.share_lo) == round(100 * s.share_hi)
            else f"{100 * s.share_lo:.0f}–{100 * s.share_hi:.0f} %")
    return span + " (" + ", ".join(f"{t.stretch.split(' (')[0]}: {t.setting} {_fmt(t.site)} s" for t in s.terms) + ")"


def cell(summaries: list[Summary], label) -> str:
    """The decision row's words: 'at each platform's defaults: Slurm kill_rank 146 s [129–164] projected, ...'."""
    return "at each platform's defaults: " + ", ".join(
        f"{label(s.platform)} {s.fault} {_at_defaults(s)}" for s in summaries)


def restart_notes(summaries: list[Summary], label) -> list[str]:
    """One line per platform (per distinct text its runs recorded): how a failed run restarts there."""
    said = dict.fromkeys((s.platform, t) for p in ("slurm", "k8s") for s in summaries if s.platform == p
                         for t in s.restart)
    return [f"How a failed run restarts on {label(p)}, as its runs recorded it: {t}." for p, t in said]


def section(summaries: list[Summary], label) -> list[tuple[str, list]]:
    """The report's section: each platform's recovery per fault at these runs' settings and at its defaults."""
    if not summaries:
        return []
    header = ["platform", "fault", "runs", "recovery here (median)", "settings here", "share the settings set",
              "setting-free (median)", "at the platform's defaults", "default settings"]
    rows = []
    for s in summaries:
        there = (f"{_fmt(s.measured)} s (measured: these runs used the defaults)" if s.at_defaults
                 else _at_defaults(s).replace(" projected", " (projected)"))
        rows.append([label(s.platform), s.fault, str(s.n), f"{_fmt(s.measured)} s", _settings(s.terms, "site"),
                     share_text(s), f"{_fmt(s.free)} s", there, _settings(s.terms, "default")])
    notes = ["Projected from the recovery's phases: what the runs measured outside the stretches a setting governs "
             "is kept, and each such stretch is replaced by its length at the platform's default (see "
             "docs/method.md). The bounds span the runs' lowest and highest projection, widened by the default's "
             "polling window where the fault's place in it decides the stretch.",
             "Setting-free: the recovery less those stretches as these runs measured them, what the platform itself "
             "took; the decision summary draws the recovery verdict on it (`recovery_free_s`), and shows the ratio at "
             "these settings beside it, with the share the settings set named."]
    notes += [f"{label(p)} defaults: {DEFAULTS_SOURCE[p]}." for p in ("slurm", "k8s")
              if any(s.platform == p and s.terms for s in summaries)]
    notes += restart_notes(summaries, label)
    return [(TITLE, [("table", (header, rows))] + [("p", n) for n in notes])]
