"""The part of a stored run record the report reads, and the reading itself.

A stored record carries every metric's sources and details, the stages and the scheduler's facts;
the report needs the values, the all-reduce curve, the step samples, the timeline, the error and
the environment. The types below name exactly that, so the decoder skips everything else without
building a Python object for it: reading 100,000 runs costs less than `json.loads` of the same lines.
"""
from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from ..errors import StoreError
from ..metrics import UNITS
from ..store import SCHEMA_VERSION, bounded

# The phases a timeline chart can show, in the order a run passes them.
PHASES = ("submitted", "blocker_released", "admitted", "allocated", "launched", "rendezvous", "sweep_done",
          "first_step", "fault", "resumed", "done")
# The newer metrics (recovery phases, goodput, run cost, average busbw, first_log_s) with their units,
# read whenever a record has them: the report does not wait for harness.metrics to list them, and
# older records without them still read.
RECOVERY_PHASES = tuple(f"recovery_{p}_s" for p in ("detection", "teardown", "rescheduling", "restart",
                                                     "checkpoint_load", "recompute"))
NEWER_UNITS = {**dict.fromkeys(RECOVERY_PHASES, "s"), "resume_s": "s", "goodput": "ratio", "cost_run_usd": "USD",
               "recovery_cost_usd": "USD", "allreduce_avg_busbw_gbps": "GB/s", "first_log_s": "s"}
REPORT_UNITS = {**UNITS, **{k: v for k, v in NEWER_UNITS.items() if k not in UNITS}}
METRICS = tuple(REPORT_UNITS)
# Metrics the report adds up from stored ones, per run. queue_s ends and startup_s begins at the same
# allocated stamp, so their sum is submitted -> first step: an edge every platform records the same way,
# where the allocated edge itself differs between platforms. Its lo and hi are the sums of the parts'
# (wider than the two outer stamps alone would give, never narrower).
DERIVED = {"submit_to_first_step_s": ("queue_s", "startup_s")}
# Per fault run, recovery_s less the stretches a cluster setting sets (report/defaults.py): what the platform
# itself took, where the verdict is drawn. From the run's recorded settings and scheduler attempts; NaN where
# those do not say enough (records without the settings).
SETTING_FREE = {"recovery_free_s": "recovery_s"}
TABLE_METRICS = METRICS + tuple(DERIVED) + tuple(SETTING_FREE)
TABLE_UNITS = {**REPORT_UNITS, **{k: REPORT_UNITS[parts[0]] for k, parts in DERIVED.items()},
               **{k: REPORT_UNITS[v] for k, v in SETTING_FREE.items()}}


class CurvePoint(msgspec.Struct, gc=False):
    bytes: int
    busbw_gbps: float


class CurveDetail(msgspec.Struct, gc=False):
    curve: list[CurvePoint] = []
    transport: Any = None   # what NCCL chose (IB, socket, P2P/NVLink/SHM), when the workload could tell
    # the facts behind it (metrics/bandwidth.py comm_facts), where the record has them
    backend: Any = None
    interface: Any = None
    comm_env: Any = None
    nccl: Any = None


class SamplesDetail(msgspec.Struct, gc=False):
    samples: list[float] = []


class Metric(msgspec.Struct, frozen=True, gc=False):
    value: float | None = None
    # (hi - lo) / 2 from the clocks' resolution; NaN in records written before it was stored
    uncertainty: float | None = math.nan


class BusbwMetric(msgspec.Struct, frozen=True, gc=False):
    value: float | None = None
    uncertainty: float | None = math.nan
    detail: CurveDetail | None = None


class StepTimeMetric(msgspec.Struct, frozen=True, gc=False):
    value: float | None = None
    uncertainty: float | None = math.nan
    detail: SamplesDetail | None = None


class CostMetric(msgspec.Struct, frozen=True, gc=False):
    value: float | None = None
    uncertainty: float | None = math.nan
    # the pricing model is the same for a platform's runs: kept unparsed, read once per platform
    detail: msgspec.Raw = msgspec.Raw(b"{}")


_DETAILED = {"allreduce_busbw_gbps": BusbwMetric, "step_time_s": StepTimeMetric, "cost_per_step_usd": CostMetric}
# An absent metric or phase reads as NaN, so a record's values go into float arrays as they are;
# only an explicit null (a metric that could not be measured) reads as None.
Metrics = msgspec.defstruct("Metrics", [(name, _DETAILED.get(name, Metric), _DETAILED.get(name, Metric)(math.nan))
                                        for name in METRICS], gc=False)
Timeline = msgspec.defstruct("Timeline", [(phase, float | None, math.nan) for phase in PHASES], gc=False)


class ErrorInfo(msgspec.Struct, gc=False):
    stage: Any = None
    type: Any = None
    message: str | None = None
    # "harness": the harness itself raised (its bug), not the platform under test
    origin: str | None = None


class AuditAnswer(msgspec.Struct, gc=False):
    """One of harness.audit's questions as a platform's own records answered it."""
    answered: Any = False
    value: Any = None
    source: Any = None
    note: Any = None


class Audit(msgspec.Struct, gc=False):
    answers: dict[str, AuditAnswer] = {}


class Ux(msgspec.Struct, gc=False):
    """What a user writes for the job and the calls each stage took; counts as the record has them."""
    calls: dict[str, Any] = {}
    written: dict[str, Any] = {}


class Order(msgspec.Struct, gc=False):
    """Where the run sat in its campaign (harness/order.py): runs of one round form a block."""
    round: int | None = None


class Scheduler(msgspec.Struct, gc=False):
    """The scheduler's attempts as the run recorded them (sacct's Eligible, Start and End per attempt on Slurm):
    what the setting-governed stretches of a recovery are measured from."""
    attempts: list[dict[str, Any]] = []


class HostLoad(msgspec.Struct, gc=False):
    """harness/hostload.py's summary, the parts the report weighs; absent in records made before it."""
    cpus: int | None = None
    during: dict[str, Any] = {}
    cpu: dict[str, Any] = {}
    groups_cpu_s: dict[str, Any] = {}
    busiest: list[dict[str, Any]] = []
    unavailable: str | None = None


class Record(msgspec.Struct, gc=False):
    run_id: str
    platform: str
    schema: Any = None
    campaign: str | None = None
    scenario: str = "clean"
    status: str | None = None
    metrics: Metrics | None = None  # type: ignore[valid-type]
    timeline: Timeline | None = None  # type: ignore[valid-type]
    error: ErrorInfo | None = None
    # kept as its JSON text: the runs of a campaign mostly share one, parsed once (table.Environments)
    environment: msgspec.Raw = msgspec.Raw(b"{}")
    audit: Audit | None = None
    ux: Ux | None = None
    mistake: dict[str, Any] | None = None   # a user-mistake probe's outcome (scenario "mistake:<kind>")
    order: Order | None = None
    faults: list[Any] | None = None
    scheduler: Scheduler | None = None
    host_load: HostLoad | None = None


_DECODER = msgspec.json.Decoder(Record)
_EDITED = "the file was edited by hand; restore it"
_OTHER_SCHEMA = "use the harness version that wrote it, or start a new campaign"


_WARNED: set[str] = set()


def _warn_skipped(note: str) -> None:
    """Once per line per process: the report reads the files in more than one pass."""
    if note not in _WARNED:
        _WARNED.add(note)
        print(f"WARNING {note}", file=sys.stderr, flush=True)


def read_files(files: Iterable[Path], on_skip: Callable[[str], None] = _warn_skipped) -> Iterator[Record]:
    """Every complete record, in file order. As store.iter_runs: blank lines are skipped, and so is a
    line that is not JSON (a write torn by a crash or a full disk), or one past the reading limits
    (harness/store/bounded.py: too long, nested too deep), described to on_skip (a WARNING by
    default): the records around it are still the campaign's. A JSON line of another shape or
    schema is an error: another writer made it, and nothing in it can be trusted."""
    decode = _DECODER.decode
    for path in files:
        skip = bounded.SkipNotes(on_skip, path)
        for i, line in enumerate(bounded.iter_lines(path, total=None)):
            if isinstance(line, bounded.LineTooLong):
                skip(f"{path}: line {i + 1} is {line}: skipped")
                continue
            try:
                rec = _shallow(decode(line))
            except msgspec.ValidationError as exc:
                raise StoreError(f"{path}: line {i + 1}: {exc}", tip=_EDITED) from None
            except (RecursionError, bounded.TooDeep):
                skip(f"{path}: line {i + 1} is JSON nested more than {bounded.MAX_JSON_DEPTH} levels deep, "
                     "not a run record: skipped")
                continue
            except msgspec.DecodeError:
                if not line.isspace():
                    skip(f"{path}: line {i + 1} is not a JSON record ({len(line)} bytes, a torn write?): skipped")
                continue
            if rec.schema != SCHEMA_VERSION:
                raise StoreError(f"{path}: line {i + 1} has schema {repr(rec.schema)[:40]}; this harness reads "
                                 f"{SCHEMA_VERSION}", tip=_OTHER_SCHEMA)
            yield rec
        skip.done()


def _shallow(rec: Record) -> Record:
    """rec, when what it holds untyped (the fields typed Any, which msgspec builds as they come) is
    within bounded.MAX_JSON_DEPTH; the typed fields are as deep as their types, and the Raw ones are
    checked where they are parsed (table.py). A new Any field belongs in this list."""
    m, e, a, u = rec.metrics, rec.error, rec.audit, rec.ux
    curve = m.allreduce_busbw_gbps.detail if m is not None else None
    bounded.check_depth((
        rec.schema, rec.mistake,
        (e.stage, e.type) if e is not None else None,
        [(x.answered, x.value, x.source, x.note) for x in a.answers.values()] if a is not None else None,
        (u.calls, u.written) if u is not None else None,
        (curve.transport, curve.backend, curve.interface, curve.comm_env, curve.nccl) if curve is not None else None,
    ), bounded.MAX_JSON_DEPTH + 3)   # the tuples above add up to three levels of their own
    return rec


def from_dicts(records: Iterable[dict]) -> Iterator[Record]:
    """Records already in memory (as store.read_runs returns them), as the report reads them."""
    for i, r in enumerate(records):
        try:
            yield _DECODER.decode(msgspec.json.encode(r))
        except msgspec.ValidationError as exc:
            raise StoreError(f"run record {i + 1}: {exc}", tip="the record was not written by this harness") from None
