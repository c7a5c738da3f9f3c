"""A job trace: which jobs arrive when, how big, for how long, for whom; and its JSON Lines file.

The file is one header line (what the trace is, where it came from, the node shape it was made for)
then one job per line, sorted by submit offset. Times are whole seconds: Slurm's accounting keeps
whole seconds, and a replay that schedules at sub-second offsets would claim a precision no source
has.

A job's actual run time may not exceed its requested limit: Slurm kills a job at its limit, so a
trace where one runs longer describes something no scheduler would do. A file that says so is
refused; importers (harness/scale/sacct.py) clamp such rows (accounting can show a few seconds over,
from KillWait and OverTimeLimit) and record how many in the trace's notes.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import ConfigError
from ..fsutil import atomic_write

FORMAT = "poc-scale-trace"
VERSION = 1
MAX_TRACE_BYTES = 512 * 1024**2   # read whole: a trace of a million jobs is about 150 MiB
# Job-size classes by node count, fixed rather than relative to the cluster so that the same trace
# reads the same at 64 and at 1,000 nodes; (name, smallest, largest)
SIZE_CLASSES: tuple[tuple[str, int, float], ...] = (("1", 1, 1), ("2-8", 2, 8), ("9-64", 9, 64),
                                                     (">64", 65, math.inf))
_TIP = ("each job line needs id, submit_s, tenant, nodes, gpus_per_node, limit_s, runtime_s, qos:"
        " see docs/scale-traces.md")


class _Frozen(BaseModel):
    # a misspelt key is refused rather than ignored, as in harness/config; frozen so a Trace can be shared
    model_config = ConfigDict(extra="forbid", frozen=True)


class NodeShape(_Frozen):
    """The cluster a trace was made for: how many nodes, how many GPUs on each."""

    nodes: int = Field(ge=1, strict=True)
    gpus_per_node: int = Field(ge=0, strict=True)


class TraceJob(_Frozen):
    """One job. Offsets and durations are whole seconds; ``submit_s`` counts from the trace's zero."""

    model_config = ConfigDict(strict=True)   # "60" or true where a number belongs is a broken file, not a 60

    id: str = Field(min_length=1)
    submit_s: int = Field(ge=0)
    tenant: str = Field(min_length=1)        # the Slurm account (or user) / the Kueue LocalQueue's owner
    nodes: int = Field(ge=1)
    gpus_per_node: int = Field(ge=0)
    limit_s: int = Field(ge=1)               # the requested run time: what backfill plans with
    runtime_s: int = Field(ge=1)             # what it actually ran: what occupies the nodes
    qos: str = Field(default="normal", min_length=1)
    # how long the job waited in its own history (submit to start), where the history records it: a replay
    # on the emulated Slurm cluster can then be set beside the site's own queue (written only when known)
    recorded_wait_s: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _ends_by_its_limit(self) -> TraceJob:
        if self.runtime_s > self.limit_s:
            raise ValueError(f"runtime_s {self.runtime_s} is over limit_s {self.limit_s}: "
                             "a scheduler kills a job at its limit")
        return self


class Trace(_Frozen):
    """A whole trace. ``jobs`` are kept sorted by submit offset (ties keep their given order)."""

    name: str = Field(min_length=1)
    source: str                              # where it came from, in words
    seed: int | None = Field(default=None, strict=True)   # the generator's seed, when generated
    shape: NodeShape | None = None           # None: made for no particular cluster
    duration_s: int = Field(ge=1, strict=True)   # the arrival window: load is offered over this
    compression: float = Field(default=1.0, gt=0, allow_inf_nan=False)   # 2.0: twice as fast as the source
    params: dict[str, Any] = Field(default_factory=dict)   # how it was made (generator parameters, export)
    notes: tuple[str, ...] = ()             # what an importer or compress changed on the way
    jobs: tuple[TraceJob, ...] = ()

    @field_validator("params")
    @classmethod
    def _json_native(cls, v: dict[str, Any]) -> dict[str, Any]:
        # tuples become lists here, not only in the file, so a loaded trace equals the saved one
        return json.loads(json.dumps(v))

    @field_validator("jobs")
    @classmethod
    def _by_submit(cls, v: tuple[TraceJob, ...]) -> tuple[TraceJob, ...]:
        return _by_submit(v)

    @model_validator(mode="after")
    def _consistent(self) -> Trace:
        seen: set[str] = set()
        for j in self.jobs:
            problem = job_problem(j, self.shape, seen, self.duration_s)
            if problem:
                raise ValueError(f"job {j.id}: {problem}")
            seen.add(j.id)
        return self


def _by_submit(jobs: tuple[TraceJob, ...]) -> tuple[TraceJob, ...]:
    return tuple(sorted(jobs, key=lambda j: j.submit_s))   # stable: ties keep the source's order


def job_problem(job: TraceJob, shape: NodeShape | None, seen: set[str], duration_s: int) -> str | None:
    """What makes a well-formed job wrong within its trace, or None."""
    if job.id in seen:
        return f"job id {job.id!r} appears twice"
    if job.submit_s > duration_s:
        return f"submit_s {job.submit_s} is after the trace's duration_s {duration_s}"
    if shape is not None and job.nodes > shape.nodes:
        return f"asks for {job.nodes} nodes and the trace's cluster has {shape.nodes}: it could never start"
    if shape is not None and job.gpus_per_node > shape.gpus_per_node:
        return (f"asks for {job.gpus_per_node} GPUs per node and the trace's nodes have "
                f"{shape.gpus_per_node}: it could never start")
    return None


# ---- the JSON Lines file ---------------------------------------------------------------------------

def dumps(trace: Trace) -> str:
    """The file's text. Same trace, same bytes: keys in field order, no spaces, no float noise added."""
    header = {"format": FORMAT, "version": VERSION, "jobs": len(trace.jobs),
              **trace.model_dump(mode="json", exclude={"jobs"})}
    lines = [json.dumps(header, separators=(",", ":"), ensure_ascii=False)]
    lines += [json.dumps(j.model_dump(mode="json", exclude={"recorded_wait_s"} if j.recorded_wait_s is None else None),
                         separators=(",", ":"), ensure_ascii=False) for j in trace.jobs]
    return "\n".join(lines) + "\n"


def save(trace: Trace, path: Path) -> None:
    atomic_write(Path(path), dumps(trace))


def load(path: Path) -> Trace:
    path = Path(path)
    try:
        if path.stat().st_size > MAX_TRACE_BYTES:
            raise ConfigError(f"trace {path} is over {MAX_TRACE_BYTES // 1024**2} MiB; not read",
                              "replay a part of it: the header line and the next N job lines (head -n) are a trace")
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read trace {path}: {e.strerror or e}", "check the path") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"trace {path} is not UTF-8 text (byte {e.start})", _TIP) from None
    return loads(text, where=str(path))


def _fields(e: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'job'}: {err['msg']}" for err in e.errors())


def _json_line(line: str, where: str, n: int) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{where}:{n}: not JSON ({e.msg} at column {e.colno})", _TIP) from e
    except RecursionError:   # a job is a flat object: anything this deep is not a trace line
        raise ConfigError(f"{where}:{n}: nested too deep to be a trace line", _TIP) from None
    if not isinstance(obj, dict):
        raise ConfigError(f"{where}:{n}: a line must be a JSON object, found {type(obj).__name__}", _TIP)
    return obj


def loads(text: str, where: str = "<trace>") -> Trace:
    """Parse a trace file's text; every error names the line (``where:N``) that caused it."""
    lines = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    if not lines:
        raise ConfigError(f"{where}: empty trace file", f"the first line is the header (format {FORMAT!r})")
    hn, head = lines[0][0], _json_line(lines[0][1], where, lines[0][0])
    if head.get("format") != FORMAT:
        raise ConfigError(f"{where}:{hn}: not a trace header (format {head.get('format')!r}, expected {FORMAT!r})",
                          "the first line of a trace file describes the trace; see docs/scale-traces.md")
    if head.get("version") != VERSION:
        raise ConfigError(f"{where}:{hn}: trace format version {head.get('version')!r}; this harness reads {VERSION}",
                          "regenerate the trace with this harness")
    count = head.pop("jobs", None)
    fields = {k: v for k, v in head.items() if k not in ("format", "version")}
    try:
        shell = Trace(**fields)
    except ValidationError as e:
        raise ConfigError(f"{where}:{hn}: header: {_fields(e)}", "see docs/scale-traces.md for the header") from e
    jobs: list[TraceJob] = []
    seen: set[str] = set()
    for n, line in lines[1:]:
        try:
            job = TraceJob.model_validate_json(line)
        except ValidationError as e:
            _json_line(line, where, n)   # a line that is not JSON at all gets the plainer message
            raise ConfigError(f"{where}:{n}: {_fields(e)}", _TIP) from e
        problem = job_problem(job, shell.shape, seen, shell.duration_s)
        if problem:
            raise ConfigError(f"{where}:{n}: {problem}",
                              "fix or drop that job, or make the trace again for the cluster it is meant for")
        seen.add(job.id)
        jobs.append(job)
    if count is not None and count != len(jobs):
        raise ConfigError(f"{where}: the header says {count} jobs and the file has {len(jobs)}",
                          "the file was cut short or appended to; regenerate it")
    return shell.model_copy(update={"jobs": _by_submit(tuple(jobs))})


# ---- derived traces and figures ------------------------------------------------------------------

def _halfup(x: float) -> int:
    # not round(): banker's rounding would send 0.5 s and 1.5 s both to 2
    return math.floor(x + 0.5)


def compress(trace: Trace, factor: float) -> Trace:
    """The same trace ``factor`` times faster: submit offsets, limits, run times and the window all
    divided by ``factor`` and rounded half up to whole seconds; a run time or limit that would round
    to 0 is kept at 1 s (counted in the notes), so every job still occupies its nodes. Rounding is
    monotone, so no job ends up over its limit. What does not compress: the schedulers' own pass
    intervals and pod/step start-up, which weigh more the harder a trace is compressed."""
    if not (isinstance(factor, int | float) and math.isfinite(factor) and factor > 0):
        raise ConfigError(f"compression factor must be a positive number, got {factor!r}", "e.g. 10 for 10x faster")
    raised = sum(1 for j in trace.jobs if _halfup(j.runtime_s / factor) < 1)
    jobs = tuple(j.model_copy(update={"submit_s": _halfup(j.submit_s / factor),
                                      "limit_s": max(1, _halfup(j.limit_s / factor)),
                                      "runtime_s": max(1, _halfup(j.runtime_s / factor)),
                                      "recorded_wait_s": None if j.recorded_wait_s is None
                                      else _halfup(j.recorded_wait_s / factor)}) for j in trace.jobs)
    note = f"compressed {factor:g}x (times rounded half up to whole seconds)"
    if raised:
        note += f"; {raised} run time(s) under 1 s kept at 1 s"
    return Trace(**{**trace.model_dump(exclude={"jobs", "shape"}), "shape": trace.shape,
                    "duration_s": max(1, _halfup(trace.duration_s / factor)),
                    "compression": trace.compression * factor, "notes": (*trace.notes, note), "jobs": jobs})


@dataclass(frozen=True)
class TenantShare:
    jobs: int
    node_share: float   # of all node-seconds actually run
    gpu_share: float    # of all GPU-seconds actually run (0 where the trace has no GPU jobs)


@dataclass(frozen=True)
class TraceSummary:
    jobs: int
    duration_s: int
    sizes: dict[str, int]              # SIZE_CLASSES name -> job count
    node_load: float | None            # node-seconds run / (window x cluster nodes); None without a shape
    node_load_requested: float | None  # the same with limits instead of run times: what the schedulers plan for
    gpu_load: float | None             # GPU-seconds run / (window x cluster GPUs)
    tenants: dict[str, TenantShare]

    def lines(self) -> list[str]:
        def pct(x: float | None) -> str:
            return "n/a" if x is None else f"{x:.1%}"
        out = [f"{self.jobs} jobs over {self.duration_s / 3600:.2f} h",
               "sizes (nodes): " + ", ".join(f"{k}: {v}" for k, v in self.sizes.items()),
               f"offered load: nodes {pct(self.node_load)} (requested {pct(self.node_load_requested)}),"
               f" GPUs {pct(self.gpu_load)}"]
        out += [f"tenant {t}: {s.jobs} jobs, {s.node_share:.1%} of node-seconds, {s.gpu_share:.1%} of GPU-seconds"
                for t, s in self.tenants.items()]
        return out


def size_class(nodes: int) -> str:
    return next(name for name, lo, hi in SIZE_CLASSES if lo <= nodes <= hi)


def summary(trace: Trace, shape: NodeShape | None = None) -> TraceSummary:
    """Counts per size class, offered load against the cluster (``shape``, else the trace's own),
    and each tenant's share of the work. Load is offered over the arrival window, so jobs that run
    past its end still count in full: this is demand, not utilisation."""
    shape = shape or trace.shape
    sizes = dict.fromkeys((name for name, _, _ in SIZE_CLASSES), 0)
    node_s = node_req = gpu_s = 0
    per: dict[str, list[int]] = {}
    for j in trace.jobs:
        sizes[size_class(j.nodes)] += 1
        ns, gs = j.nodes * j.runtime_s, j.nodes * j.gpus_per_node * j.runtime_s
        node_s, node_req, gpu_s = node_s + ns, node_req + j.nodes * j.limit_s, gpu_s + gs
        t = per.setdefault(j.tenant, [0, 0, 0])
        t[0], t[1], t[2] = t[0] + 1, t[1] + ns, t[2] + gs
    tenants = {k: TenantShare(v[0], v[1] / node_s if node_s else 0.0, v[2] / gpu_s if gpu_s else 0.0)
               for k, v in sorted(per.items())}
    cap_nodes = shape.nodes * trace.duration_s if shape else None
    cap_gpus = shape.nodes * shape.gpus_per_node * trace.duration_s if shape else None
    return TraceSummary(
        jobs=len(trace.jobs), duration_s=trace.duration_s, sizes=sizes,
        node_load=node_s / cap_nodes if cap_nodes else None,
        node_load_requested=node_req / cap_nodes if cap_nodes else None,
        gpu_load=gpu_s / cap_gpus if cap_gpus else None, tenants=tenants)
