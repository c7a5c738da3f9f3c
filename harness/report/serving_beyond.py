"""What serving needed beyond the platform, in the serve runs' own words (raw["serve"]["beyond"]): the
table, the "second platform" paragraph, and the decision summary's line about it."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .sections import fmt
from .stats import PLATFORM_LABEL, platform_sort_key

if TYPE_CHECKING:   # serving.py imports this module: the type only, never at run time
    from .serving import Serve

NEEDS = ("discovery", "balancing", "restarts", "scaling")
NEED_TEXT = {"discovery": "endpoint discovery", "balancing": "load balancing", "restarts": "restarts",
             "scaling": "scaling out"}
LIST_SHOWN = 6   # files and parts listed per cell


def _written(b: dict) -> str:
    w = b.get("written")
    if not isinstance(w, dict) or not w:
        return "–"
    total = sum(v for v in w.values() if isinstance(v, int | float))
    items = [f"`{k}` {v:g}" for k, v in list(w.items())[:LIST_SHOWN] if isinstance(v, int | float)]
    more = f" and {len(w) - LIST_SHOWN} more" if len(w) > LIST_SHOWN else ""
    return f"{total:g} lines: " + ", ".join(items) + more


def _parts(b: dict) -> list[str]:
    p = b.get("harness_parts")
    return [str(x) for x in p] if isinstance(p, list) else []


def beyond_table(serves: list[Serve]) -> tuple[list[str], list[list[str]]]:
    plats = sorted({s.platform for s in serves} | {"slurm", "k8s"}, key=platform_sort_key)
    by = {s.platform: s.beyond() for s in serves}
    header = ["what serving needs"] + [PLATFORM_LABEL.get(p, p) for p in plats]
    rows = []
    for need in NEEDS:
        rows.append([NEED_TEXT[need]] + [" ".join(str(by[p].get(need) or "–").split()) if p in by else "not run"
                                         for p in plats])
    rows.append(["written for it (files: lines)"] + [_written(by[p]) if p in by else "–" for p in plats])
    rows.append(["parts the harness supplied"] + [
        (", ".join(_parts(by[p])) or "none") if by.get(p) else "–" for p in plats])
    return header, rows


def second_platform(serves: list[Serve]) -> list[str]:
    """What a Slurm site would have to build against what Kubernetes gave, stated from the runs' own words."""
    by = {s.platform: s for s in serves}
    out = []
    slurm, k8s = by.get("slurm"), by.get("k8s")
    if slurm is not None and slurm.beyond():
        parts = _parts(slurm.beyond())
        if parts:
            out.append("To serve on Slurm, a site would have to build and run, beside the scheduler, what this harness "
                       "supplied here: " + ", ".join(parts) + ". That is the \"second platform\" the POC asks about, "
                       "in the smallest form that served here: parts the harness ran itself for the length of one run, "
                       "which a site would have to run, and keep available, as a service of its own.")
        else:
            out.append("The Slurm run named no part the harness had to supply beyond the platform.")
    if k8s is not None and k8s.beyond():
        native = [NEED_TEXT[n] for n in NEEDS if k8s.beyond().get(n)]
        parts = _parts(k8s.beyond())
        out.append("Kubernetes gave " + (", ".join(native) if native else "none of these") + " from its own objects"
                   + (f"; the harness still supplied {', '.join(parts)}" if parts else
                      "; the harness supplied no serving part of its own") + ".")
    cost = [f"{s.label} {fmt(s.value('serve_cost_per_1k_usd'), 'USD')} USD" for s in serves
            if s.value("serve_cost_per_1k_usd") is not None]
    if cost:
        out.append("Cost per 1,000 successful requests over the whole serve run's billed time: " + ", ".join(cost)
                   + " (one run each; the second platform's own machines are not in these prices).")
    return out


def needed_text(serves: list[Serve]) -> str | None:
    """What Slurm needed beyond itself, in the runs' own words, against Kubernetes; None without that evidence."""
    by = {s.platform: s.beyond() for s in serves}
    if not by.get("slurm"):
        return None
    parts = _parts(by["slurm"])
    text = ("Slurm needed beyond itself, run by the harness: " + ", ".join(parts) if parts
            else "Slurm named nothing it needed beyond itself")
    if by.get("k8s"):
        k8s = _parts(by["k8s"])
        text += "; Kubernetes: " + (", ".join(k8s) if k8s else "nothing beyond its own objects")
    return text
