#!/usr/bin/env python3
"""Record real API objects from the local native cluster for the Kubernetes state tests.

Runs a clean run, a kill_rank run and a delete_pod run (both restart the JobSet) through the real
pipeline and backend; every look the backend takes at a run (its JobSet, Workload, Pods, Scheduled
events, node capacity, and the native state it derived) is kept when it differs from the previous
one, with managedFields dropped. Writes tests/fixtures/k8s/recorded/<run_id>.jsonl, and the run's
raw evidence as collect() returned it (final JobSet and Workload, every pod of every attempt, the
Events, the harness's submit bracket: ``Collected.raw``) as <run_id>.raw.json, the input of
harness.evidence.k8s. Needs `poc cluster up --k8s` (root); about 4 minutes.

    .venv/bin/python scripts/record_k8s_objects.py [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from harness import config
from harness.backends.k8s import KubernetesBackend
from harness.pipeline import campaign
from harness.store import Store

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "k8s" / "recorded"
CFG = {"campaign": "k8s-record", "platforms": ["k8s"], "repetitions": 1,
       "workload": {"steps": 24, "sweep": "1K:64K", "sweep_iters": 2, "model_params": "1M", "checkpoint_every": 5},
       "resources": {"nodes": 2, "memory_mb": 1024},
       "faults": [{"kind": "kill_rank", "at_step": 10, "rank": 1}, {"kind": "delete_pod", "at_step": 10, "rank": 1}],
       "timeouts": {"queue_s": 180, "run_s": 420}}


def _slim(o):
    """Drop what only bulks the fixture: managedFields, and the workload script in env/ConfigMaps."""
    if isinstance(o, dict):
        return {k: _slim(v) for k, v in o.items() if k != "managedFields"}
    if isinstance(o, list):
        return [_slim(v) for v in o]
    return o


def _shape(look: dict) -> str:
    """What makes a look worth keeping: the native state and each object's status."""
    return json.dumps([look["native"], look["reason"], (look["jobset"] or {}).get("status"),
                       (look["workload"] or {}).get("status"),
                       sorted(json.dumps([p["metadata"]["name"], p.get("status")], sort_keys=True)
                              for p in look["pods"]), len(look["scheduled_events"])], sort_keys=True, default=str)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    cfg = config.from_mapping(CFG)
    looks: dict[str, list[dict]] = {}
    last: dict[str, str] = {}

    def trace(run_id: str, look: dict) -> None:
        shape = _shape(look)
        if last.get(run_id) != shape:
            last[run_id] = shape
            looks.setdefault(run_id, []).append(_slim(look))

    raws: dict[str, dict] = {}

    class Recording(KubernetesBackend):
        def collect(self, handle):
            out = super().collect(handle)
            raws[handle.run_id] = out.raw
            return out

    def make(_platform):
        b = Recording.from_config(cfg)
        b.trace = trace
        return b

    with tempfile.TemporaryDirectory() as d:
        recs = campaign(cfg, ["k8s"], Store(d, cfg.campaign), make, resume=False)
    args.out.mkdir(parents=True, exist_ok=True)
    for rec in recs:
        run = looks.get(rec["run_id"], [])
        path = args.out / f"{rec['run_id']}.jsonl"
        path.write_text("".join(json.dumps(x, sort_keys=True, default=str) + "\n" for x in run))
        summary = {"status": rec["status"], "error": rec.get("error"), "times": rec["scheduler"]["times"],
                   "attempts": rec["scheduler"]["attempts"], "native_states": [x["native"] for x in run]}
        (args.out / f"{rec['run_id']}.summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
        if rec["run_id"] in raws:
            raw_path = args.out / f"{rec['run_id']}.raw.json"
            raw_path.write_text(json.dumps(raws[rec["run_id"]], indent=0, sort_keys=True, default=str) + "\n")
        print(f"{rec['run_id']}: {rec['status']}, {len(run)} looks -> {path} ({path.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
