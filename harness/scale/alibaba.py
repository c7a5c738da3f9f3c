"""Alibaba's public GPU cluster trace (cluster-trace-gpu-v2023, "openb"), read into a Trace.

The trace (github.com/alibaba/clusterdata, ``cluster-trace-gpu-v2023/csv/openb_pod_list_default.csv``;
Weng et al., "Beware of Fragmentation", USENIX ATC 2023) lists 8,152 tasks of a production GPU cluster of
1,523 nodes (6,212 GPUs), one pod each: CPU and memory asked, ``num_gpu`` (0 to 8), ``gpu_milli`` (the
share of one GPU a GPU-sharing pod asked for), ``qos``, the phase it ended in, and three instants in
seconds from the trace's zero: ``creation_time``, ``scheduled_time`` and ``deletion_time``. It records its
own waits (scheduled - created): a replay on the emulated Slurm cluster can be set beside them.

What is kept, and how (each count lands in the trace's notes):

* A pod is a one-node job; its run time is deletion - scheduled (under 1 s kept as 1 s).
* Never scheduled (``scheduled_time`` empty: phase Pending at the end) -> dropped: it held nothing.
* CPU-only pods (``num_gpu`` 0) -> kept as CPU jobs (0 GPUs, one node), or dropped with ``cpu_jobs="drop"``.
* GPU sharing (``num_gpu`` 1 and ``gpu_milli`` under 1000) -> one whole GPU: neither Slurm's gres nor the
  emulated device plugin shares a GPU, so these jobs ask for more than they did (the load rises).
* No time limits (Kubernetes pods have none) -> ``limits.LimitModel``, stated in the notes.
* No requeued attempts (one pod, one run) and no virtual clusters, users or quotas: every job is one
  tenant (``tenant``), the QoS class is kept as the job's ``qos`` (a label unless a replay maps classes to
  priorities).
* A slice (``start_s``, ``end_s``: creations within it) keeps the pods still running at its start as jobs
  submitted during a lead-in before it, one every ``lead_gap_s`` (a burst of them at one instant would be a
  burst the history never had), each running to the instant it ended in the history (or the slice's end),
  with no recorded wait (counted); pods still waiting at its start join the queue at its start (their
  recorded wait not kept, counted); and cuts every run at the slice's end (counted): a replay observes the
  slice, not what ran after it. A pod scheduled only after the slice's end keeps its whole run (counted).
* Offsets count from the slice's start (the trace's zero without one); ``params`` keep the slice.
"""
from __future__ import annotations

import csv
import io

from pydantic import ValidationError

from ..errors import ConfigError
from .limits import LimitModel
from .trace import NodeShape, Trace, TraceJob

COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
           "creation_time", "deletion_time", "scheduled_time")
SOURCE = ("Alibaba cluster-trace-gpu-v2023 (openb pod list; github.com/alibaba/clusterdata; Weng et al., "
          "USENIX ATC 2023)")
_TIP = "give cluster-trace-gpu-v2023/csv/openb_pod_list_*.csv as published (docs/scale-traces.md)"


def _int(row: dict, key: str, n: int) -> int | None:
    v = (row.get(key) or "").strip()
    if v == "":
        return None
    try:
        return int(float(v))
    except ValueError:
        raise ConfigError(f"openb line {n}: {key} {v!r} is not a number", _TIP) from None


def parse_openb(text: str, *, name: str = "alibaba-gpu-2023", shape: NodeShape | None = None,
                start_s: int | None = None, end_s: int | None = None, tenant: str = "openb",
                cpu_jobs: str = "keep", limits: LimitModel | None = None, lead_gap_s: int = 60) -> Trace:
    """The pod list's CSV text -> Trace (module docstring: what is kept and how)."""
    limits = limits or LimitModel()
    if cpu_jobs not in ("keep", "drop"):
        raise ConfigError(f"cpu_jobs {cpu_jobs!r}", tip="keep (as CPU jobs) or drop (counted)")
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise ConfigError(f"openb header lacks {', '.join(missing)}", _TIP)
    counts: dict[str, int] = {}

    def count(what: str) -> None:
        counts[what] = counts.get(what, 0) + 1

    lo = start_s if start_s is not None else 0
    rows = list(reader)
    # the pods running at the slice's start: submitted one every lead_gap_s before it, in the order they started
    running = sorted((r for r in rows if start_s is not None and r.get("scheduled_time", "").strip()
                      and (_int(r, "creation_time", 0) or 0) < start_s
                      and (_int(r, "scheduled_time", 0) or 0) < start_s
                      and (_int(r, "deletion_time", 0) or 0) > start_s
                      and not (cpu_jobs == "drop" and not _int(r, "num_gpu", 0))),
                     key=lambda r: int(float(r["scheduled_time"])))
    lead = {r["name"]: i * lead_gap_s for i, r in enumerate(running)}
    shift = len(running) * lead_gap_s
    jobs: list[TraceJob] = []
    for n, row in enumerate(rows, 2):
        created, sched, deleted = (_int(row, k, n) for k in ("creation_time", "scheduled_time", "deletion_time"))
        gpus, milli = _int(row, "num_gpu", n) or 0, _int(row, "gpu_milli", n)
        if created is None:
            raise ConfigError(f"openb line {n}: no creation_time", _TIP)
        if end_s is not None and created >= end_s:
            continue
        if sched is None:
            if start_s is None or created >= start_s:
                count("never scheduled (Pending at the end), dropped")
            continue
        if deleted is None or deleted < sched:
            count("no deletion after the scheduling, dropped")
            continue
        before = start_s is not None and created < start_s
        if before and deleted <= start_s:
            continue                               # over before the slice: not in it
        if gpus == 0 and cpu_jobs == "drop":
            count("CPU-only, dropped")
            continue
        if gpus == 0:
            count("CPU-only, kept as CPU jobs (0 GPUs)")
        if gpus == 1 and milli is not None and 0 < milli < 1000:
            count("GPU-sharing (part of one GPU), given a whole GPU")
        if gpus < 0 or gpus > (shape.gpus_per_node if shape else 8):
            raise ConfigError(f"openb line {n}: num_gpu {gpus} does not fit one node", _TIP)
        stop = deleted
        if end_s is not None and sched >= end_s:
            # it waited through the whole slice: its queue is part of the slice, its run is not there to cut
            count("scheduled only after the slice's end, kept with its whole run time")
        elif end_s is not None and deleted > end_s:
            count("ran past the slice's end, cut there")
            stop = end_s
        wait = None if before else sched - created
        if row["name"] in lead:
            count(f"running at the slice's start, submitted one every {lead_gap_s} s before it, running to "
                  "when it ended")
            submit = lead[row["name"]]
            runtime = max(1, (stop - lo) + (shift - submit))
        else:
            if before:
                # still waiting at the slice's start: it joins the queue there; the wait it had is not all seen
                count("waiting at the slice's start, submitted at it (its recorded wait not kept)")
            submit = max(created, lo) - lo + shift
            runtime = max(1, stop - sched)
            if stop - sched < 1:
                count("ran under 1 s, kept as 1 s")
        try:
            jobs.append(TraceJob(id=row["name"], submit_s=submit, tenant=tenant, nodes=1, gpus_per_node=gpus,
                                 limit_s=limits.limit(runtime), runtime_s=runtime, qos=row.get("qos") or "normal",
                                 recorded_wait_s=wait))
        except ValidationError as e:
            raise ConfigError(f"openb line {n}: {e.errors()[0]['msg']}", _TIP) from None
    if not jobs:
        raise ConfigError("no pod of the trace falls in the slice asked for", tip="widen --start/--end")
    last = max(j.submit_s for j in jobs)
    window = (end_s - lo + shift) if end_s is not None else last + 1
    notes = (*(f"{v} {k}" for k, v in counts.items()), limits.text(),
             "no virtual clusters, users or quotas in this trace: one tenant; no requeued attempts (one run a pod)")
    try:
        return Trace(name=name, source=SOURCE, shape=shape, duration_s=max(1, window, last + 1), notes=notes,
                     params={"format": "alibaba-gpu-2023-openb", "start_s": start_s, "end_s": end_s,
                             "lead_in_s": shift, "lead_gap_s": lead_gap_s,
                             "tenant": tenant, "cpu_jobs": cpu_jobs, "limit_model": limits.params()},
                     jobs=tuple(jobs))
    except ValidationError as e:
        raise ConfigError(f"{SOURCE}: {e.errors()[0]['msg']}",
                          "give the shape of the cluster to replay it on") from None
