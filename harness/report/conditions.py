"""What each platform ran under, side by side, for every row of the decision summary: the conditions ledger.

A ratio between two platforms compares everything that differed between their runs, not only the
schedulers. The ledger names what did, from the runs' own records:

  CPU cap       what the job asked per node and whether anything enforced it: Kubernetes' container limit
                (the kubelet's CFS quota), the baseline's `docker run --cpus` (the same quota), Slurm's
                --cpus-per-task (enforced only by a TaskPlugin that confines tasks: task/cgroup, or bound to
                CPUs by task/affinity; with task/none every task may use every CPU of its node)
  memory cap    the same for memory (a limit the kernel enforces, or Slurm's --mem, enforced by task/cgroup)
  exclusivity   whether the job held its nodes alone, and that every node of every platform shares one host
  image         whether the job's image was on its nodes before the run (nothing pulled inside the figure)
  settings      the scheduler and controller settings that govern the figure (report/bounds.py)
  restarts      how a failed run restarts (report/defaults.py), on the recovery row
  host load     how busy the host was while the row's runs ran (harness/hostload.py, per run)

A condition that differs between Kubernetes and Slurm is said first in the row; the report does not make
it equal after the fact. The caps are read from one successful training run of each platform (the pods,
containers and job as the platforms recorded them in its raw evidence), the settings from the runs'
environment. A condition no run recorded reads "not recorded".

Host load: a run's host was busy when its 1-min load average passed BUSY_LOAD_PER_CPU per CPU, when other
processes (neither the harness nor the clusters) used more than BUSY_OTHER_SHARE of the host's CPU time, or
the hypervisor stole more than BUSY_STEAL of it. A campaign made before runs sampled it may carry an
operator's note of the load instead (campaign.json "conditions": {"host_load": {...}}), shown as noted, not
measured.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import StoreError
from ..store import bounded, load_raw, runs_files
from . import bounds, defaults
from .stats import PLATFORM_LABEL
from .table import RunTable

BUSY_LOAD_PER_CPU = 2.0   # a 1-min load average above twice the CPUs: runnable work waited for a CPU
BUSY_OTHER_SHARE = 0.25   # a quarter of the host's CPU time went to processes the benchmark does not need
BUSY_STEAL = 0.10         # a tenth of the time the VM's CPUs were taken by its hypervisor
NOT_RECORDED = "not recorded"
JOB_ROWS = ("startup", "submit → first step", "all-reduce bus bandwidth", "recovery", "contention",
            "user experience", "cost")   # rows whose figure includes the job's own work: caps matter there
IMAGE_ROWS = ("startup", "submit → first step", "recovery", "user experience")


@dataclass(frozen=True)
class Condition:
    name: str
    text: dict[str, str]                          # platform -> what it ran under
    same: dict[str, Any] = field(default_factory=dict)   # platform -> what equality is judged on
    short: dict[str, str] = field(default_factory=dict)  # platform -> the same in a few words (the decision row)

    def equal(self, a: str = "k8s", b: str = "slurm") -> bool | None:
        if a not in self.same or b not in self.same or None in (self.same[a], self.same[b]):
            return None
        return self.same[a] == self.same[b]


@dataclass
class Facts:
    """One platform's conditions as one of its successful training runs recorded them: each (what it ran
    under, what equality is judged on, the same in a few words)."""
    cpu: tuple[str, Any, str] = (NOT_RECORDED, None, NOT_RECORDED)
    memory: tuple[str, Any, str] = (NOT_RECORDED, None, NOT_RECORDED)
    exclusive: tuple[str, Any, str] = (NOT_RECORDED, None, NOT_RECORDED)
    image: tuple[str, Any, str] = (NOT_RECORDED, None, NOT_RECORDED)


# ------------------------------------------------------------------ caps, from one run's raw evidence

def _num(v) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _cpu_quantity(q) -> float | None:
    if isinstance(q, str) and q.endswith("m"):
        v = _num(q[:-1])
        return None if v is None else v / 1000
    return _num(q)


def _mem_mib(q) -> float | None:
    if not isinstance(q, str):
        v = _num(q)
        return None if v is None else v / 2 ** 20
    units = {"Ki": 2 ** -10, "Mi": 1, "Gi": 2 ** 10, "Ti": 2 ** 20, "K": 1e3 / 2 ** 20, "M": 1e6 / 2 ** 20,
             "G": 1e9 / 2 ** 20}
    for suffix, scale in sorted(units.items(), key=lambda kv: -len(kv[0])):
        if q.endswith(suffix):
            v = _num(q[:-len(suffix)])
            return None if v is None else v * scale
    v = _num(q)
    return None if v is None else v / 2 ** 20


def _k8s(raw: dict, env: dict) -> Facts:
    f = Facts()
    pods = [p for p in raw.get("pods") or [] if isinstance(p, dict)]
    res = [(c.get("resources") or {}) for p in pods for c in ((p.get("spec") or {}).get("containers") or [])[:1]]
    if res:
        lim, req = res[0].get("limits") or {}, res[0].get("requests") or {}
        cpu_l, cpu_r = _cpu_quantity(lim.get("cpu")), _cpu_quantity(req.get("cpu"))
        if cpu_l is not None:
            f.cpu = (f"{cpu_l:g} CPU a pod, enforced (container limit: the kubelet's CFS quota)", (cpu_l, True),
                     f"{cpu_l:g} CPU, enforced (CFS quota)")
        elif cpu_r is not None:
            f.cpu = (f"{cpu_r:g} CPU a pod requested, no limit: not enforced (may use its node's idle CPUs)",
                     (cpu_r, False), f"{cpu_r:g} CPU requested, not enforced (no limit)")
        mem_l, mem_r = _mem_mib(lim.get("memory")), _mem_mib(req.get("memory"))
        if mem_l is not None:
            f.memory = (f"{mem_l:g} MiB a pod, enforced (container limit: killed beyond it)", (mem_l, True),
                        f"{mem_l:g} MiB, enforced")
        elif mem_r is not None:
            f.memory = (f"{mem_r:g} MiB a pod requested, no limit: not enforced", (mem_r, False),
                        f"{mem_r:g} MiB, not enforced")
    nodes = {n.get("node"): _cpu_quantity(n.get("cpu")) for n in env.get("nodes") or [] if isinstance(n, dict)}
    cpu = f.cpu[1][0] if f.cpu[1] else None
    node_cpus = {v for v in nodes.values() if v}
    if cpu is not None and node_cpus:
        most = max(node_cpus)
        f.exclusive = (f"shared: a pod holds {cpu:g} of its node's {most:g} CPUs; nothing keeps other pods off the "
                       "node", ("shared", cpu, most), f"shared ({cpu:g} of {most:g} CPUs)")
    imported = (env.get("setup") or {}).get("image_import")
    if isinstance(imported, dict) and imported and all(v == "present" for v in imported.values()):
        f.image = ("on every node before the run (imported by the harness; no pull inside the figures)", "present",
                   "on the nodes")
    elif env.get("image_pull_policy"):
        f.image = (f"pull policy {env.get('image_pull_policy')}: image_pull_s says per run whether it was pulled",
                   None, f"pull policy {env.get('image_pull_policy')}")
    return f


def _slurm(raw: dict, env: dict) -> Facts:
    f = Facts()
    conf = env.get("slurm_settings") if isinstance(env.get("slurm_settings"), dict) else {}
    task = str(conf.get("TaskPlugin") or "")
    none = task in ("", "(null)") or task.endswith("none")
    task = "task/none" if task == "(null)" else task   # scontrol prints the unset plugin as (null)
    job = _sacct_job(raw)
    req = job.get("required") or {}
    nodes = _num((next((t for t in (job.get("tres") or {}).get("requested") or [] if t.get("type") == "node"),
                       {}) or {}).get("count")) or 0
    cpus = _num(req.get("CPUs"))
    per_node = cpus / nodes if cpus and nodes else None
    mem = (req.get("memory_per_node") or {}).get("number") if isinstance(req.get("memory_per_node"), dict) else None
    how = ("not enforced (TaskPlugin " + (task or "not recorded") + ": no cgroup confines the tasks, which may use "
           "every CPU of their node)") if none else (
        f"enforced by {task}" + (" (CPU binding)" if "affinity" in task else " (if cgroup.conf constrains cores)"))
    short = f"not enforced ({task or 'TaskPlugin not recorded'})" if none else f"enforced ({task})"
    if per_node is not None:
        f.cpu = (f"{per_node:g} CPU a node asked (--cpus-per-task), {how}", (per_node, not none),
                 f"{per_node:g} CPU, {short}")
    elif task:
        f.cpu = (f"--cpus-per-task as the job asked, {how}", (None, not none), short)
    if mem:
        mhow = ("not enforced (TaskPlugin " + (task or "not recorded") + ")") if "cgroup" not in task else \
            "enforced by task/cgroup (if cgroup.conf constrains RAM)"
        f.memory = (f"{float(mem):g} MiB a node asked (--mem), {mhow}", (float(mem), "cgroup" in task),
                    f"{float(mem):g} MiB, " + ("enforced" if "cgroup" in task else f"not enforced ({task})"))
    sel = conf.get("SelectTypeParameters")
    node_cpus = {_num(n.get("cpus")) for n in env.get("nodes") or [] if isinstance(n, dict)} - {None}
    exclusive = "exclusive" in str(job.get("flags") or []).lower() or "--exclusive" in str(job.get("submit_line"))
    if per_node is not None and node_cpus:
        most = max(node_cpus)
        f.exclusive = (("exclusive: the job holds its nodes alone (--exclusive)" if exclusive else
                        f"shared: the job holds {per_node:g} of a node's {most:g} CPUs"
                        + (f" ({sel}: other jobs may take the rest)" if sel else "")),
                       ("exclusive",) if exclusive else ("shared", per_node, most),
                       "exclusive" if exclusive else f"shared ({per_node:g} of {most:g} CPUs)")
    source = str(((env.get("build") or {}).get("image") or {}).get("source") or "")
    if "compute node" in source or not env.get("container_image"):
        f.image = ("the nodes' own image: nothing pulled or imported per job", "present", "on the nodes")
    return f


def _local(raw: dict, env: dict) -> Facts:
    f = Facts()
    hc = [((c.get("HostConfig") or {}) if isinstance(c, dict) else {}) for c in raw.get("containers") or []]
    if hc:
        nano, mem = _num(hc[0].get("NanoCpus")) or 0, _num(hc[0].get("Memory")) or 0
        f.cpu = ((f"{nano / 1e9:g} CPU a container, enforced (docker --cpus: CFS quota)", (nano / 1e9, True),
                  f"{nano / 1e9:g} CPU, enforced (CFS quota)")
                 if nano else ("no CPU limit on its containers: not enforced", (None, False), "no limit"))
        f.memory = ((f"{mem / 2 ** 20:g} MiB a container, enforced (docker --memory)", (mem / 2 ** 20, True),
                     f"{mem / 2 ** 20:g} MiB, enforced")
                    if mem else ("no memory limit on its containers: not enforced", (None, False), "no limit"))
        f.exclusive = ("no scheduler: its containers run beside the clusters' nodes", ("none",), "no scheduler")
        f.image = ("a local image, never pulled", "present", "local")
    return f


def _sacct_job(raw: dict) -> dict:
    j = raw.get("sacct_json")
    if isinstance(j, dict) and isinstance(j.get("text"), str):
        try:
            j = bounded.loads(j["text"])
        except ValueError:   # not JSON, or nested past the reading limit (TooDeep)
            return {}
    jobs = j.get("jobs") if isinstance(j, dict) else None
    return jobs[0] if isinstance(jobs, list) and jobs and isinstance(jobs[0], dict) else {}


READERS = {"k8s": _k8s, "slurm": _slurm, "local": _local}


def _clean(pick: tuple[dict, Path] | None) -> bool:
    return pick is not None and pick[0].get("scenario") == "clean"


def _pick(lines, marks: dict, picked: dict, campaign_dir: Path) -> None:
    """Into picked: per platform, the first clean (else any ok) training run among lines (runs.jsonl)."""
    for line in lines:
        # parse only a line that could still change the pick: a platform without a clean run yet
        if not isinstance(line, bytes):   # past the reading limit: no record
            continue
        wanted = [p for p, (a, b) in marks.items() if (a in line or b in line) and not _clean(picked.get(p))]
        if not wanted or b'"ok"' not in line:
            continue
        try:
            rec = bounded.loads(line)
        except ValueError:
            continue
        plat, scen = rec.get("platform"), rec.get("scenario")
        if rec.get("status") != "ok" or plat not in READERS or scen in ("serve", "preflight") \
                or str(scen).startswith(("mistake", "drill", "scale")):
            continue
        if plat not in picked or (scen == "clean" and not _clean(picked[plat])):
            picked[plat] = (rec, campaign_dir / "runs" / str(rec.get("run_id")))
        if all(_clean(picked.get(p)) for p in READERS):
            return


def platform_facts(results_dir: str) -> dict[str, Facts]:
    """Each platform's caps, from the raw evidence of its first successful clean run (any training run where
    none was clean); a platform without one reads "not recorded"."""
    picked: dict[str, tuple[dict, Path]] = {}
    try:
        files = runs_files(results_dir)
    except StoreError:
        return {}
    # the store writes compact JSON; a hand-written file may have a space after the colon
    marks = {p: (f'"platform":"{p}"'.encode(), f'"platform": "{p}"'.encode()) for p in READERS}
    for f in files:
        try:
            _pick(bounded.iter_lines(f, None), marks, picked, f.parent)
        except StoreError:   # a link, a damaged file: its runs give no conditions
            continue
    out = {}
    for plat, (rec, run_dir) in picked.items():
        try:
            raw = load_raw(run_dir)
        except StoreError:
            raw = {}
        out[plat] = READERS[plat](raw, rec.get("environment") or {})
    return out


# ------------------------------------------------------------------ host load

@dataclass(frozen=True)
class HostState:
    state: str            # busy | quiet | noted (an operator's note, not sampled) | unknown
    runs: int             # runs weighed
    recorded: int         # of them, with a sampled host load
    busy: int             # of them, busy
    load_per_cpu: float   # the highest 1-min load average per CPU seen (NaN: none)
    load_max: float
    cpus: float
    other_share: float
    steal: float
    busiest: tuple = ()   # ((name, CPU seconds), ...) over the runs, other processes only
    note: str = ""        # the operator's note, where one stands in for samples

    @property
    def flagged(self) -> bool:
        return self.state in ("busy", "noted")

    def text(self, short: bool = False) -> str:
        """What the host's load was; short: without the note's source (a row's cell; the opening has it whole)."""
        if self.state == "unknown":
            return "not recorded (these runs predate its sampling): a busy host cannot be ruled out"
        if self.state == "noted":
            note = self.note.split(" (", 1)[0] if short else self.note
            return f"busy, as noted for the campaign (not sampled by its runs): {note}"
        load = (f"1-min load up to {self.load_max:.1f} on {self.cpus:g} CPUs ({self.load_per_cpu:.1f} a CPU)"
                if math.isfinite(self.load_max) else "load not recorded")
        other = (f", other processes {100 * self.other_share:.0f} % of its CPU" if math.isfinite(self.other_share)
                 else "")
        steal = f", steal {100 * self.steal:.0f} %" if math.isfinite(self.steal) and self.steal >= 0.005 else ""
        who = (" (busiest: " + ", ".join(f"`{n}` {s:.0f} s" for n, s in self.busiest) + ")") if self.busiest else ""
        part = f" in {self.busy} of {self.recorded} runs" if self.state == "busy" else ""
        cover = f"; {self.runs - self.recorded} run(s) without samples" if self.recorded < self.runs else ""
        return f"{self.state}{part}: {load}{other}{steal}{who}{cover}"


def _metas(results_dir: str) -> list[dict]:
    """Each campaign's campaign.json under results_dir, read within the reading limits (store/bounded.py);
    one that cannot be read is left out (the runs' own records still stand)."""
    out = []
    try:
        files = runs_files(results_dir)
    except StoreError:
        return out
    for f in files:
        try:
            meta = bounded.load_json(f.parent / "campaign.json", bounded.MAX_META_BYTES)
        except (OSError, StoreError):
            continue
        if isinstance(meta, dict):
            out.append(meta)
    return out


def noted_load(results_dir: str) -> dict[str, dict]:
    """campaign name -> the operator's note of its host load (campaign.json "conditions"."host_load")."""
    out = {}
    for meta in _metas(results_dir):
        note = (meta.get("conditions") or {}).get("host_load")
        if isinstance(note, dict):
            out[str(meta.get("campaign"))] = note
    return out


def campaign_notes(results_dir: str) -> list[str]:
    """What the campaign's maker wrote beside it for the opening (campaign.json "notes": a list of texts), e.g.
    which earlier verdicts a new campaign changes and why."""
    out: list[str] = []
    for meta in _metas(results_dir):
        notes = meta.get("notes")
        out += [str(n) for n in notes if isinstance(n, str) and n.strip()] if isinstance(notes, list) else []
    return out


def busy_runs(table: RunTable) -> np.ndarray:
    per_cpu = table.host_load1_max / table.host_cpus
    with np.errstate(invalid="ignore"):
        return (per_cpu > BUSY_LOAD_PER_CPU) | (table.host_other > BUSY_OTHER_SHARE) | (table.host_steal > BUSY_STEAL)


def host_state(table: RunTable, runs: np.ndarray, noted: dict[str, dict] | None = None) -> HostState:
    """The host's load over the given runs (table rows): busy if any sampled run was, else noted if an operator's
    note covers unsampled runs, quiet if every run was sampled quiet, unknown if none was sampled."""
    runs = np.asarray(runs, dtype=np.int64)
    runs = runs[(runs >= 0) & (runs < table.host_load1_max.size)]   # a hand-made table may hold fewer rows
    if not table.host_load1_max.size or not runs.size:
        return HostState("unknown", int(runs.size), 0, 0, *(math.nan,) * 5)
    sampled = runs[~np.isnan(table.host_load1_max[runs])]
    busy = runs[busy_runs(table)[runs]]
    per_cpu = table.host_load1_max[sampled] / table.host_cpus[sampled]

    def top(values: np.ndarray) -> float:
        v = values[~np.isnan(values)]
        return float(v.max()) if v.size else math.nan
    worst = int(sampled[np.nanargmax(per_cpu)]) if sampled.size and not np.isnan(per_cpu).all() else None
    busiest: dict[str, float] = {}
    for i in sampled.tolist():
        for name, sec in table.host_busiest[i] or ():
            busiest[name] = busiest.get(name, 0.0) + sec
    common = dict(runs=int(runs.size), recorded=int(sampled.size), busy=int(busy.size),
                  load_per_cpu=top(per_cpu), load_max=float(table.host_load1_max[worst]) if worst is not None
                  else math.nan, cpus=float(table.host_cpus[worst]) if worst is not None else math.nan,
                  other_share=top(table.host_other[sampled]), steal=top(table.host_steal[sampled]),
                  busiest=tuple(sorted(busiest.items(), key=lambda kv: -kv[1])[:3]))
    if busy.size:
        return HostState("busy", **common)
    unsampled = {table.campaign[i] for i in runs.tolist() if np.isnan(table.host_load1_max[i])}
    notes = [(c, n) for c, n in (noted or {}).items() if c in unsampled]
    if notes:
        text = "; ".join(_note_text(c, n) for c, n in notes)
        return HostState("noted", **{**common, "busy": 0}, note=text)
    if not sampled.size:
        return HostState("unknown", **common)
    return HostState("quiet", **common)


def _note_text(campaign: str, note: dict) -> str:
    load, cpus = note.get("load1_max"), note.get("cpus")
    head = f"1-min load up to {load:g} on {cpus:g} CPUs" if isinstance(load, int | float) and \
        isinstance(cpus, int | float) else "busy"
    return f"{head} during `{campaign}` ({note.get('source') or 'operator note'})"


# ------------------------------------------------------------------ the ledger per criterion

def ledger(criterion: str, facts: dict[str, Facts], table: RunTable, restart: dict[str, str] | None = None,
           plats: tuple[str, ...] = ("slurm", "k8s")) -> list[Condition]:
    """The conditions that shape a criterion's figure, each platform's side by side."""
    out = []
    have = [p for p in plats if p in facts]
    if criterion in JOB_ROWS and have:
        for name, attr in (("CPU cap", "cpu"), ("memory cap", "memory")):
            out.append(_condition(name, facts, have, attr))
    if criterion in JOB_ROWS + ("queue",) and have:
        out.append(_condition("exclusivity", facts, have, "exclusive"))
    if criterion in IMAGE_ROWS and have:
        out.append(_condition("image", facts, have, "image"))
    named = bounds.BOUNDS.get(criterion, {})
    if named:
        def value(p: str, path: tuple[str, ...]):
            v = bounds.recorded(table.settings.get(p, {}), path)
            return bounds.NOT_RECORDED if v is None else v
        text = {p: ", ".join(f"{n} {value(p, path)}" for n, path in named[p]) for p in plats if p in named}
        out.append(Condition("settings that govern it", text))
    if criterion == "recovery" and restart:
        out.append(Condition("restart policy", {p: restart[p] for p in plats if p in restart}))
    return out


def _condition(name: str, facts: dict[str, Facts], have: list[str], attr: str) -> Condition:
    return Condition(name, {p: getattr(facts[p], attr)[0] for p in have}, {p: getattr(facts[p], attr)[1] for p in have},
                     {p: getattr(facts[p], attr)[2] for p in have})


def unequal(conds: list[Condition]) -> list[Condition]:
    return [c for c in conds if c.equal() is False]


def cell(conds: list[Condition], host: HostState | None, label=lambda p: PLATFORM_LABEL.get(p, p)) -> str:
    """The decision row's conditions: what differed first, then the settings that govern it, then the host."""
    parts = [f"**unequal {c.name}**: " + ", ".join(f"{label(p)} {t}" for p, t in _ordered(c.short or c.text))
             for c in unequal(conds)]
    parts += ["settings: " + "; ".join(f"{label(p)}: {t}" for p, t in _ordered(c.text))
              for c in conds if c.name == "settings that govern it"]
    if host is not None:
        parts.append(f"host load: {host.text(short=True)}")
    return "; ".join(parts) or "–"


def _ordered(text: dict[str, str]) -> list[tuple[str, str]]:
    order = ("slurm", "k8s", "local")
    return sorted(text.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))


def table_rows(rows: list[tuple[str, list[Condition], dict[str, HostState]]],
               plats: tuple[str, ...] = ("slurm", "k8s")) -> tuple[list[str], list[list[str]]]:
    """The ledger as a table: per criterion, each condition with each platform's value and whether they match;
    the host's load over each platform's runs of the row."""
    header = ["criterion", "condition"] + [PLATFORM_LABEL.get(p, p) for p in plats] + ["the same on both?"]
    out = []
    for criterion, conds, hosts in rows:
        first = True
        for c in conds:
            eq = c.equal(*plats[::-1])
            out.append([criterion if first else "", c.name] + [c.text.get(p, "–") for p in plats]
                       + ["yes" if eq else "**no**" if eq is False else "–"])
            first = False
        if hosts:
            states = [hosts[p].state if p in hosts else None for p in plats]
            out.append([criterion if first else "", "host load over its runs"]
                       + [hosts[p].text(short=True) if p in hosts else "–" for p in plats]
                       + ["yes" if len(set(states)) == 1 and states[0] != "unknown" else
                          "**no**" if "busy" in states else "–"])
    return header, out


def restart_policies(at_defaults: list[defaults.Summary]) -> dict[str, str]:
    """Each platform's restart path as its fault runs recorded it (the first text)."""
    out: dict[str, str] = {}
    for s in at_defaults:
        if s.restart and s.platform not in out:
            out[s.platform] = s.restart[0]
    return out
