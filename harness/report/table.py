"""The runs a report covers, as columns: one entry per run, in report order.

Only the last record of each (campaign, run_id) counts (a resumed campaign may have retried a failed
run); runs keep the position of their first record. Per-run values live in numpy arrays, the
all-reduce curves and step samples in flat arrays with offsets, and the environment is reduced as it
is read to what the report shows of it, so no per-record dict outlives its line.
"""
from __future__ import annotations

import gc
import math
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np
from msgspec.structs import astuple

from ..errors import StoreError
from ..provenance import BUILD_KEYS
from ..store import bounded, runs_files
from . import defaults
from .comm_facts import CommFacts, facts_of
from .extras import Extras, is_probe
from .records import DERIVED, METRICS, PHASES, SETTING_FREE, HostLoad, Record, from_dicts, read_files

# Environment facts worth showing; secrets never reach the records in the first place.
SETTING_KEYS_SKIP = {"harness_host"}
_EMPTY = (None, "", [], {})
_NO_VALUES = (math.nan,) * len(METRICS)
_NO_PHASES = (math.nan,) * len(PHASES)
_VALUE, _UNCERTAINTY = attrgetter("value"), attrgetter("uncertainty")
_BYTES, _BUSBW = attrgetter("bytes"), attrgetter("busbw_gbps")


@dataclass(frozen=True)
class Ragged:
    """A list of arrays per run, stored flat: run i owns values[offsets[i]:offsets[i + 1]]."""
    offsets: np.ndarray
    values: np.ndarray

    def of(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i]:self.offsets[i + 1]]

    def take(self, rows: np.ndarray) -> Ragged:
        lens = np.diff(self.offsets)[rows]
        offsets = np.concatenate(([0], np.cumsum(lens)))
        idx = np.repeat(self.offsets[rows] - offsets[:-1], lens) + np.arange(offsets[-1])
        return Ragged(offsets, self.values[idx.astype(np.int64)])

    def row_of_each(self) -> np.ndarray:
        """For every stored value, the run it belongs to."""
        return np.repeat(np.arange(self.offsets.size - 1), np.diff(self.offsets))


@dataclass(frozen=True)
class Labels:
    """A short string per run (platform, scenario, status), stored as a code per run and the distinct strings."""
    codes: np.ndarray
    names: list

    def __getitem__(self, i: int):
        return self.names[self.codes[i]]

    def __len__(self) -> int:
        return self.codes.size

    def where(self, name) -> np.ndarray:
        return self.codes == self.names.index(name) if name in self.names else np.zeros(self.codes.size, bool)


class _Coder:
    def __init__(self) -> None:
        self.code: dict = {}
        self.codes = array("i")

    def append(self, name) -> None:
        self.codes.append(self.code.setdefault(name, len(self.code)))

    def labels(self, rows: np.ndarray) -> Labels:
        return Labels(np.frombuffer(self.codes, dtype=np.int32)[rows], list(self.code))


@dataclass(frozen=True)
class RunTable:
    run_id: list[str]
    campaign: list[str | None]
    platform: Labels
    scenario: Labels
    status: Labels
    values: dict[str, np.ndarray]  # metric -> value per run, NaN where the run has none
    uncertainty: dict[str, np.ndarray]  # metric -> its uncertainty per run, NaN where not recorded
    timeline: np.ndarray           # runs x PHASES, NaN where the run has no such phase
    has_timeline: np.ndarray
    curve_bytes: Ragged
    curve_busbw: Ragged
    samples: Ragged
    errors: dict[int, dict]        # run -> {stage, type, message, origin}, for runs that have one
    harness_error: np.ndarray      # the harness itself failed: no platform's fault
    gpus_visible: np.ndarray
    harness_host: list
    torch: list
    build: list                    # per run: the torch build (version and git revision), or None
    transport: list                # per run: the all-reduce transport the workload recorded, or None
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    pricing: dict[str, dict] = field(default_factory=dict)   # platform -> its cost metric's detail
    # per run (extras.py): the audit answers and UX counts (shared tuples, None where absent),
    # whether the run is a user-mistake probe, and each probe's outcome
    audit: list = field(default_factory=list)
    ux: list = field(default_factory=list)
    probe: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    mistakes: dict[int, dict] = field(default_factory=dict)
    # per run: its round in an interleaved campaign (order.round), -1 where the record has none
    round: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # per run: what it recorded about the collective's path beyond the transport's name (comm_facts.py), or None
    comm: list = field(default_factory=list)
    # per run, the host's load (harness/hostload.py), NaN where the record has none: the highest 1-min load
    # average seen while it ran, the host's CPUs, the share of the host's CPU time other processes (neither the
    # harness nor the clusters) used, and the share the hypervisor stole; the busiest other processes' names
    host_load1_max: np.ndarray = field(default_factory=lambda: np.zeros(0))
    host_cpus: np.ndarray = field(default_factory=lambda: np.zeros(0))
    host_other: np.ndarray = field(default_factory=lambda: np.zeros(0))
    host_steal: np.ndarray = field(default_factory=lambda: np.zeros(0))
    host_busiest: list = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.run_id)

    @property
    def status_ok(self) -> np.ndarray:
        return self.status.where("ok")

    @property
    def ok(self) -> np.ndarray:
        """The training runs that succeeded: a user-mistake probe is no training run, whatever its status."""
        return self.status_ok & ~self.probe


def read(results_dir: str) -> RunTable:
    files = runs_files(results_dir)
    return build(lambda: read_files(files))


def from_records(records: list[dict]) -> RunTable:
    return build(lambda: from_dicts(records))


def is_harness_error(rec: Record) -> bool:
    if rec.status == "harness_error":
        return True
    return rec.status != "ok" and rec.error is not None and rec.error.origin == "harness"


@dataclass
class Environment:
    """One distinct environment of the runs, and what the report shows of it."""
    facts: dict
    gpus_visible: bool
    harness_host: Any
    torch: Any
    build: str | None
    shown_for: set[str] = field(default_factory=set)   # platforms whose settings already took it in


class Environments:
    """Environments by their JSON text: the runs of a campaign mostly share a few, so each is parsed once."""

    KEEP = 256   # distinct texts remembered; past that the memory starts afresh (only speed is lost)

    def __init__(self) -> None:
        self._by_text: dict[bytes, Environment] = {}
        self._decode = msgspec.json.Decoder(dict[str, Any]).decode

    def __call__(self, raw: msgspec.Raw) -> Environment:
        text = bytes(raw)
        env = self._by_text.get(text)
        if env is None:
            if len(self._by_text) >= self.KEEP:
                self._by_text.clear()
            facts = _shallow(self._decode, text, "a run's environment")
            env = self._by_text[text] = Environment(facts, bool(facts.get("gpus_visible")),
                                                    _hashable(facts.get("harness_host") or None),
                                                    _hashable(facts.get("torch") or None), build_of(facts))
        return env


class _Settings:
    """Per platform, each environment fact's first non-empty value over the runs in report order.

    Fed in file order. A run's first record arrives after every run before it, so only facts the
    platform lacks so far can be new; a retried run's later record is checked in full. If a retry
    replaces the record that gave a fact, the next giver is unknown: `stale` asks for a second pass.
    """

    def __init__(self) -> None:
        self.first: dict[str, dict[str, tuple[int, int, Any]]] = {}
        self.givers: set[int] = set()
        self.max_pos = -1
        self.stale = False

    def add(self, platform: str, environment: Environment, pos: int, row: int, replaces: int | None) -> None:
        if replaces is not None and replaces in self.givers:
            self.stale = True
        have = self.first.setdefault(platform, {})
        in_order = pos > self.max_pos
        self.max_pos = max(self.max_pos, pos)
        if in_order and platform in environment.shown_for:
            return   # the same environment came earlier on this platform: every fact it has is shown already
        environment.shown_for.add(platform)
        env = environment.facts
        keys = env.keys() - have.keys() if in_order else env.keys()
        order = None
        for k in keys:
            v = env[k]
            if k in SETTING_KEYS_SKIP or v in _EMPTY:
                continue
            order = order or {key: j for j, key in enumerate(env)}
            old = have.get(k)
            if old is None or (pos, order[k]) < old[:2]:
                have[k] = (pos, order[k], v)
                self.givers.add(row)

    def result(self) -> dict[str, dict[str, Any]]:
        return {p: {k: v for k, (_, _, v) in sorted(d.items(), key=lambda kv: kv[1][:2])}
                for p, d in self.first.items()}


def build(source: Callable[[], Iterator[Record]]) -> RunTable:
    """The table of the runs `source()` yields; `source` is called again only when a retried run
    replaced the record an environment fact was shown from (see _Settings)."""
    pos_of: dict[tuple, int] = {}
    last_row: list[int] = []
    cols = _Columns()
    settings = _Settings()
    envs = Environments()
    was_enabled = gc.isenabled()
    gc.disable()   # nothing read here forms a cycle; collecting while 100,000s of objects come and go is pure cost
    try:
        for row, rec in enumerate(source()):
            pos = pos_of.setdefault((rec.campaign, rec.run_id), len(last_row))
            replaces = None
            if pos == len(last_row):
                last_row.append(row)
            else:
                replaces, last_row[pos] = last_row[pos], row
            env = envs(rec.environment)
            cols.add(row, rec, env)
            settings.add(rec.platform, env, pos, row, replaces)
    finally:
        if was_enabled:
            gc.enable()
    if settings.stale:
        settings = _settings_of(source(), set(last_row), pos_of, Environments())
    return cols.table(last_row, settings.result())


def build_of(env: dict) -> str | None:
    """The torch build a run used, as one text: equal texts are provenance.same_build's equal builds
    (version, git revision, CUDA, NCCL). Older records kept only the torch version."""
    b = env.get("build")
    if isinstance(b, dict) and b.get("torch"):
        if b.get("mismatch"):   # ranks imported different builds: equal to no other run's
            return "mixed: " + " | ".join(_build_text(m) for m in b["mismatch"])
        return _build_text(b)
    return str(env["torch"]) if env.get("torch") else None


def _build_text(b: dict) -> str:
    rest = [f"{k.replace('_version', '')} {str(b[k])[:12]}" for k in BUILD_KEYS[1:] if b.get(k) is not None]
    return f"{b.get('torch')} ({', '.join(rest)})" if rest else str(b.get("torch"))


def _extend_floats(column: array, values: tuple) -> None:
    """Append floats; None (an explicit null) reads as NaN, like an absent value."""
    n = len(column)
    try:
        column.extend(values)
    except TypeError:
        del column[n:]   # extend stops at the None, keeping what came before it
        column.extend([math.nan if v is None else v for v in values])


class _Columns:
    """What the report keeps of each record, appended column by column as records arrive. The per-value
    work runs in C (map, attrgetter, array.extend): a record costs a few dozen Python steps, not hundreds."""

    def __init__(self) -> None:
        self.run_id: list[str] = []
        self.campaign: list[str | None] = []
        self.platform, self.scenario, self.status = _Coder(), _Coder(), _Coder()
        self.values = array("d")        # runs x METRICS, row-major
        self.uncertainty = array("d")   # runs x METRICS, row-major
        self.timeline = array("d")      # runs x PHASES, row-major
        self.curve_bytes, self.curve_busbw, self.curve_end = array("q"), array("d"), array("q", [0])
        self.samples, self.samples_end = array("d"), array("q", [0])
        self.errors: dict[int, dict] = {}
        self.harness_error, self.gpus_visible = bytearray(), bytearray()
        self.harness_host: list = []
        self.torch: list = []
        self.build: list = []
        self.transport: list = []
        self.comm: list = []
        self._comm_seen: dict[CommFacts, CommFacts] = {}   # one object per distinct set of facts
        self.round = array("q")
        self.free, self.free_u = array("d"), array("d")
        self.host = array("d")              # runs x 4: load1_max, cpus, other share, steal share
        self.host_busiest: list = []
        self._busiest_seen: dict[tuple, tuple] = {}
        self.pricing: dict[str, dict] = {}
        self.extras = Extras()
        self._decode_dict = msgspec.json.Decoder(dict[str, Any]).decode

    def add(self, row: int, rec: Record, env: Environment) -> None:
        self.run_id.append(rec.run_id)
        self.campaign.append(rec.campaign)
        self.platform.append(rec.platform)
        self.scenario.append(rec.scenario)
        self.status.append(rec.status)
        m = rec.metrics
        transport = comm = None
        if m is None:
            self.values.extend(_NO_VALUES)
            self.uncertainty.extend(_NO_VALUES)
        else:
            each = astuple(m)
            _extend_floats(self.values, tuple(map(_VALUE, each)))
            _extend_floats(self.uncertainty, tuple(map(_UNCERTAINTY, each)))
            curve = m.allreduce_busbw_gbps.detail
            if curve is not None:
                self.curve_bytes.extend(map(_BYTES, curve.curve))
                self.curve_busbw.extend(map(_BUSBW, curve.curve))
                transport = None if curve.transport in _EMPTY else _hashable(curve.transport)
                comm = facts_of(curve.backend, curve.interface, curve.comm_env, curve.nccl)
                comm = comm and self._comm_seen.setdefault(comm, comm)
            if rec.platform not in self.pricing and rec.status == "ok" and not is_probe(rec.scenario):
                self.pricing[rec.platform] = self._pricing(m.cost_per_step_usd.detail)
            steps = m.step_time_s.detail
            if steps is not None:
                self.samples.extend(steps.samples)
        self.curve_end.append(len(self.curve_bytes))
        self.samples_end.append(len(self.samples))
        _extend_floats(self.timeline, _NO_PHASES if rec.timeline is None else astuple(rec.timeline))
        if rec.error is not None:
            e = rec.error
            self.errors[row] = {"stage": e.stage, "type": e.type, "message": e.message, "origin": e.origin}
        self.harness_error.append(rec.status != "ok" and is_harness_error(rec))
        self.gpus_visible.append(env.gpus_visible)
        self.harness_host.append(env.harness_host)
        self.torch.append(env.torch)
        self.build.append(env.build)
        self.transport.append(transport)
        self.comm.append(comm)
        self.round.append(-1 if rec.order is None or rec.order.round is None else rec.order.round)
        self.free.extend(_setting_free(rec, env))
        self.host.extend(_host(rec.host_load))
        busiest = _busiest_other(rec.host_load)
        self.host_busiest.append(busiest and self._busiest_seen.setdefault(busiest, busiest))
        self.extras.add(row, rec)

    def _pricing(self, raw: msgspec.Raw) -> dict:
        try:
            return _shallow(self._decode_dict, raw, "a run's cost detail")
        except msgspec.DecodeError:   # a null or odd detail: the record's value still counts
            return {}

    def table(self, last_row: list[int], settings: dict) -> RunTable:
        values = np.frombuffer(self.values, dtype=np.float64).reshape(-1, len(METRICS))
        uncertainty = np.frombuffer(self.uncertainty, dtype=np.float64).reshape(-1, len(METRICS))
        timeline = np.frombuffer(self.timeline, dtype=np.float64).reshape(-1, len(PHASES))
        curve_end = np.frombuffer(self.curve_end, dtype=np.int64)
        curve_bytes = Ragged(curve_end, np.frombuffer(self.curve_bytes, dtype=np.int64))
        curve_busbw = Ragged(curve_end, np.frombuffer(self.curve_busbw, dtype=np.float64))
        samples = Ragged(np.frombuffer(self.samples_end, dtype=np.int64), np.frombuffer(self.samples, dtype=np.float64))
        rows = np.asarray(last_row, dtype=np.int64)
        retried = len(last_row) < len(self.run_id)   # else every record is its run's only one, in order
        if retried:
            values, uncertainty, timeline = values[rows], uncertainty[rows], timeline[rows]
            curve_bytes, curve_busbw, samples = curve_bytes.take(rows), curve_busbw.take(rows), samples.take(rows)

        def pick(items: list) -> list:
            return [items[i] for i in last_row] if retried else items

        audit, ux, probe, mistakes = self.extras.take(last_row, retried)
        vals = {m: np.ascontiguousarray(values[:, j]) for j, m in enumerate(METRICS)}
        uncs = {m: np.ascontiguousarray(uncertainty[:, j]) for j, m in enumerate(METRICS)}
        for name, parts in DERIVED.items():
            vals[name] = sum(vals[p] for p in parts)
            uncs[name] = sum(uncs[p] for p in parts)   # lo and hi add, so their half-distance does
        free = np.frombuffer(self.free, dtype=np.float64).reshape(-1, 2)[rows]
        for name in SETTING_FREE:
            vals[name], uncs[name] = np.ascontiguousarray(free[:, 0]), np.ascontiguousarray(free[:, 1])
        host = np.frombuffer(self.host, dtype=np.float64).reshape(-1, 4)[rows]

        return RunTable(
            run_id=pick(self.run_id), campaign=pick(self.campaign),
            platform=self.platform.labels(rows), scenario=self.scenario.labels(rows), status=self.status.labels(rows),
            values=vals, uncertainty=uncs,
            timeline=timeline, has_timeline=~np.isnan(timeline).all(axis=1),
            curve_bytes=curve_bytes, curve_busbw=curve_busbw, samples=samples,
            errors={i: self.errors[r] for i, r in enumerate(last_row) if r in self.errors} if retried else self.errors,
            harness_error=np.frombuffer(self.harness_error, dtype=np.bool_)[rows],
            gpus_visible=np.frombuffer(self.gpus_visible, dtype=np.bool_)[rows],
            harness_host=pick(self.harness_host), torch=pick(self.torch), build=pick(self.build),
            transport=pick(self.transport), comm=pick(self.comm), settings=settings, pricing=self.pricing,
            audit=audit, ux=ux,
            probe=np.frombuffer(bytes(probe), dtype=np.bool_), mistakes=mistakes,
            round=np.frombuffer(self.round, dtype=np.int64)[rows],
            host_load1_max=host[:, 0].copy(), host_cpus=host[:, 1].copy(), host_other=host[:, 2].copy(),
            host_steal=host[:, 3].copy(), host_busiest=pick(self.host_busiest))


_NO_FREE = (math.nan, math.nan)
_NO_HOST = (math.nan,) * 4


def _setting_free(rec: Record, env: Environment) -> tuple[float, float]:
    """(recovery_free_s, its ±) of a fault run: recovery_s less the stretches its recorded settings set
    (defaults.project), recovery_s itself on the baseline (no cluster setting in its path); NaN otherwise."""
    m = rec.metrics
    if not rec.faults or rec.status != "ok" or m is None:
        return _NO_FREE
    rv, ru = m.recovery_s.value, m.recovery_s.uncertainty
    if rv is None or rv != rv:
        return _NO_FREE
    ru = math.nan if ru is None else ru
    if rec.platform not in ("slurm", "k8s"):
        return rv, ru
    phases = {f"recovery_{p}_s": {"value": getattr(m, f"recovery_{p}_s").value,
                                  "uncertainty": getattr(m, f"recovery_{p}_s").uncertainty}
              for p in ("detection", "teardown")}
    p = defaults.project({"run_id": rec.run_id, "platform": rec.platform, "scenario": rec.scenario,
                          "status": rec.status, "faults": rec.faults, "environment": env.facts,
                          "metrics": {"recovery_s": {"value": rv}, **phases},
                          "scheduler": {"attempts": rec.scheduler.attempts if rec.scheduler else []}})
    if p is None:
        return _NO_FREE
    return p.free, ru + p.governed_resolution if ru == ru else math.nan


def _host(h: HostLoad | None) -> tuple[float, float, float, float]:
    if h is None or h.unavailable:
        return _NO_HOST
    cpus = float(h.cpus) if h.cpus else math.nan
    wall = h.cpu.get("wall_s")
    other = h.groups_cpu_s.get("other")
    share = other / (wall * cpus) if isinstance(other, int | float) and isinstance(wall, int | float) \
        and wall > 0 and cpus == cpus else math.nan
    load = h.during.get("load1_max")
    steal = h.cpu.get("steal_share")
    return (float(load) if isinstance(load, int | float) else math.nan, cpus, share,
            float(steal) if isinstance(steal, int | float) else math.nan)


def _busiest_other(h: HostLoad | None) -> tuple | None:
    """The three busiest processes outside the harness and the clusters, as (name, CPU seconds)."""
    if h is None:
        return None
    out = tuple((str(b.get("name")), float(b.get("cpu_s") or 0.0)) for b in h.busiest
                if b.get("group") == "other")[:3]
    return out or None


def _settings_of(records: Iterable[Record], latest: set[int], pos_of: dict[tuple, int],
                 envs: Environments) -> _Settings:
    out = _Settings()
    for row, rec in enumerate(records):
        if row in latest:
            out.add(rec.platform, envs(rec.environment), pos_of[(rec.campaign, rec.run_id)], row, None)
    return out


def _shallow(decode: Callable[[bytes], dict], raw, what: str) -> dict:
    """A record's JSON text kept unparsed (msgspec.Raw), parsed within bounded.MAX_JSON_DEPTH."""
    try:
        return bounded.check_depth(decode(raw))
    except (RecursionError, bounded.TooDeep):
        raise StoreError(f"{what} is JSON nested more than {bounded.MAX_JSON_DEPTH} levels deep",
                         tip="the record was edited by hand; restore runs.jsonl from the campaign's copy") from None


def _hashable(v):
    try:
        hash(v)
    except TypeError:   # the caveats collect these in sets
        return repr(v)
    return v
