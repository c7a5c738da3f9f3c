"""The calibration section (harness/report/calibration.py) from a small fixture campaign: the recorded
local-baseline campaigns under tests/fixtures/calibration/results (two runs that passed, one the
calibration stopped: every node's memlock below the bar), and Slurm GPU runs whose calibration events are
built with the workload's own parsers and verdict (ddp_train.py): two that passed, one whose node the
calibration refused (its record has no metrics, its stored events the phase), as the pipeline stores them."""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

from support.paths import FIXTURES, RESULTS, ROOT

from harness import events as ev
from harness.metrics.calibration import calibration
from harness.report import calibration as calmod
from harness.report import table
from harness.report.document import build
from harness.report.registry import DEFINITIONS, REGISTRY
from harness.store import SCHEMA_VERSION

spec = importlib.util.spec_from_file_location("ddp_train_report_calibration",
                                              ROOT / "harness" / "data" / "workloads" / "ddp_train.py")
ddp_train = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ddp_train)
calib = ddp_train.sibling("poc_calibration")   # the calibration phase, shipped beside it

RECORDED = FIXTURES / "calibration" / "results"
T0 = 1_796_600_000


def _perf(top_ip: float) -> str:
    """all_reduce_perf's table, two sizes; out-of-place 1 GB/s above in-place."""
    rows = [(1 << 20, 40.0), (8 << 30, top_ip)]
    return "# nccl-tests version 2.13.9 nccl-headers=22105\n" + "".join(
        f"{b:>12} {b // 4:>13}     float     sum      -1   99.0  1.00  {ip + 1:6.2f}      0   98.0  1.00  {ip:6.2f}"
        "      0\n" for b, ip in rows)


def _node(rank: int, host: str, gflops: float, top_ip: float, intra: float) -> list[dict]:
    """A 4-GPU node's rank reports as calibrate all-gathers them (local rank 0 carries the node's facts)."""
    smi = "".join(f"{i}, NVIDIA H100 80GB HBM3, GPU-{host}-{i}, 550.54.15, 81559, 0\n" for i in range(4))
    facts = {"limits": {"memlock": ["unlimited", "unlimited"]}, "torch": "2.5.1", "cuda": "12.4", "nccl": "2.21.5",
             "nvidia_smi": {"argv": ["nvidia-smi"], "rc": 0, "out": smi}, "gpus": calib.parse_smi(smi),
             "driver": "550.54.15", "ibv_devices": ["mlx5_0"], "ofed": "MLNX_OFED_LINUX-24.01"}
    parsed = calib.parse_nccl_tests(_perf(top_ip))
    top = parsed["rows"][-1]
    lead = {"rank": rank, "host": host, "local_rank": 0, "compute": {"gflops": gflops}, "facts": facts,
            "problems": calib.node_problems(facts, 4, False, 0),
            "nccl_tests": {"argv": ["all_reduce_perf", "-g", "4"], "rc": 0, "version": parsed["version"],
                           "bytes": top["bytes"], "busbw_gbps": top["oop_busbw_gbps"], "rows": parsed["rows"],
                           "out_tail": ""},
            "intra_node": {"bytes": 8 << 30, "time_s": 0.06, "busbw_gbps": intra, "correct": True}}
    return [lead] + [{"rank": rank + i, "host": host, "local_rank": i, "compute": {"gflops": gflops}}
                     for i in range(1, 4)]


def _gpu_events(run_id: str, t: float, slow_b: bool) -> list[dict]:
    ranks = _node(0, "gpu-a", 700e3, 230.0, 226.0) + _node(4, "gpu-b", 150e3 if slow_b else 690e3, 228.0, 205.0)
    nodes, refused = calib.verdict(ranks, 0.5)
    head = {"v": 1, "run_id": run_id, "local_rank": 0, "world_size": 8, "pid": 7, "attempt": [0, 0, 0],
            "restarts": {"jobset": 0, "slurm": 0, "torchelastic": 0}}
    out = [{**head, "kind": "rendezvous_done", "ts_ns": int(t * 1e9), "rank": r, "host": x["host"]}
           for r, x in enumerate(ranks)]
    out.append({**head, "kind": "calibration", "ts_ns": int((t + 40) * 1e9), "rank": 0, "host": "gpu-a",
                "ok": not refused, "nodes": nodes, "refused": refused,
                "job_allreduce": {"bytes": 16 << 20, "time_s": 0.0004, "busbw_gbps": 73.4, "correct": True,
                                  "backend": "nccl", "world_size": 8},
                "min_ratio": 0.5, "min_memlock_kib": 0, "seconds": 40.0})
    if refused:
        out.append({**head, "kind": "workload_error", "ts_ns": int((t + 40.1) * 1e9), "rank": 0, "host": "gpu-a",
                    "error": "calibration", "message": f"calibration refused node {refused[0]['host']}: "
                    + "; ".join(refused[0]["why"]), "refused": refused})
    return out


def _slurm_campaign(root: Path) -> None:
    d = root / "calibration-gpu"
    recs = []
    for i, slow in enumerate((False, False, True)):
        run_id = f"slurm-clean-{i + 1:02d}"
        events = _gpu_events(run_id, T0 + 100 * i, slow)
        (d / "runs" / run_id).mkdir(parents=True)
        (d / "runs" / run_id / "events.jsonl").write_text(ev.dumps(events))
        rec = {"schema": SCHEMA_VERSION, "run_id": run_id, "campaign": "calibration-gpu", "platform": "slurm",
               "scenario": "clean", "status": "failed" if slow else "ok", "environment": {}}
        if slow:
            (err,) = [e for e in events if e["kind"] == "workload_error"]
            rec["error"] = {"stage": "run", "type": "BackendError", "origin": "platform",
                            "message": f"job ended cancelled: the workload refused to run: {err['message']}"}
        else:
            rec["metrics"] = {**calibration(events), "calibration_s": {"value": 41.5 + i, "unit": "s",
                                                                       "uncertainty": 0.0}}
        recs.append(rec)
    (d / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))


def campaign(tmp: Path) -> Path:
    root = tmp / "results"
    shutil.copytree(RECORDED, root)
    _slurm_campaign(root)
    return root


def _section(md: str, title: str) -> str:
    start = md.index(f"## {title}")
    return md[start:md.index("\n## ", start + 1)]


def test_the_section_shows_every_platforms_nodes_checks_and_refusals(tmp_path):
    md = build(str(campaign(tmp_path)), str(tmp_path / "rep"))["report.md"].read_text()
    sec = _section(md, calmod.TITLE)
    assert re.findall(r"^### (.+)$", sec, flags=re.M) == ["local (baseline): the nodes", "Slurm: the nodes",
                                                           "Refused nodes"]
    # the method names its settings beside the figures
    assert "`calibration.min_peer_ratio` 0.5, `calibration.min_memlock_kib` 0 KiB (recorded only), 1048576 KiB" in sec
    assert "left out of `startup_s` and `sweep_s`" in sec
    # the job-wide check per platform: 3 calibrated runs each, one stopped
    assert "| local (baseline) | 3 | 1 | 0.668 (0.667–0.669, 2 runs) | 16 MiB over 2 ranks, gloo over TCP |" in sec
    assert "| Slurm | 3 | 1 | 42.00 (41.50–42.50, 2 runs) | 16 MiB over 8 ranks, NCCL | 73.40 (3 runs) | 3 of 3 |" \
           in sec
    # the nodes: the recorded ones refused in one run of two (memlock), gpu-b in one of three (matmul)
    assert re.search(r"\| `local-clean-01-0` \| 2 \| 1 \| [^|]+ \| [^|]+ \| 8192 KiB \| torch 2\.6\.0\+debian \| – \| "
                     r"none found \| memlock is 8192 KiB .* \| refused in 1 of 2 run\(s\) \|", sec)
    assert ("| `gpu-a` | 3 | 4 | 700000 (3 runs) | 1.01 | unlimited "
            "| torch 2.5.1 · CUDA 12.4 · NCCL 2.21.5 · driver 550.54.15 | 4 × NVIDIA H100 80GB HBM3 "
            "| mlx5_0 (OFED MLNX_OFED_LINUX-24.01) | none | passed in all 3 runs |") in sec
    assert "| `gpu-b` | 3 | 4 | 690000 (150000–690000, 3 runs) | 0.353 |" in sec and "refused in 1 of 3 run(s)" in sec
    # GPUs: nccl-tests beside the workload on the same node and size, against the goal
    # (the stopped run's figures too: derived from its stored events)
    assert "| `gpu-a` | 8 GiB | 230 (3 runs) | 226 (3 runs) | 0.983 | meets ≥ 95 % |" in sec
    assert "| `gpu-b` | 8 GiB | 228 (3 runs) | 205 (3 runs) | 0.899 | below ≥ 95 % |" in sec
    refused = sec[sec.index("### Refused nodes"):]
    assert refused.count("\n- ") == 3
    # platforms in report order; run ids repeat across the campaigns, so each names its campaign
    assert refused.index("(local (baseline))") < refused.index("(Slurm)")
    assert "- `calibration-gpu/slurm-clean-03` (Slurm): `gpu-b`: matmul 1.5e+05 GFLOP/s is 0.35 of the nodes' median" \
           in refused
    assert ("- `calibration-local-refused/local-clean-01` (local (baseline)): `local-clean-01-1`: memlock is 8192 KiB "
            "(ulimit -l), below") in refused
    # the definitions name the calibration figures where the campaign calibrated
    defs = _section(md + "\n## end", "Definitions")
    assert "`calibration_s`: rendezvous → every rank done calibrating" in defs
    assert "`calibration_workload_vs_nccl_tests`" in defs


def test_calibration_figures_stay_out_of_the_headline_and_summary(tmp_path):
    paths = build(str(campaign(tmp_path)), str(tmp_path / "rep"))
    assert "calibration" not in paths["summary.csv"].read_text()
    assert "calibration" not in _section(paths["report.md"].read_text(), "Headline")


def test_the_section_sits_at_its_registry_place_and_only_where_runs_calibrated(tmp_path):
    titles = [s.title for s in REGISTRY]
    assert titles.index(calmod.TITLE) == titles.index("Auditing") + 1
    t = table.read(str(RESULTS / "smoke-2026-12-03"))
    assert not calmod.applies(t)   # a committed campaign from before the phase: no section, no definitions
    assert not any("calibration" in d for d in DEFINITIONS)
    only_refused = tmp_path / "refused"
    shutil.copytree(RECORDED / "calibration-local-refused", only_refused / "calibration-local-refused")
    t = table.read(str(only_refused))
    assert calmod.applies(t)   # a campaign whose every run the calibration stopped still shows why
    (run,) = calmod.load(str(only_refused), t)
    assert run.status == "failed" and run.calibration_s is None and len(run.refused) == 2


def test_a_retried_run_counts_by_its_last_record(tmp_path):
    root = campaign(tmp_path)
    runs = root / "calibration-gpu" / "runs.jsonl"
    recs = [json.loads(line) for line in runs.read_text().splitlines()]
    retry = {**recs[0], "run_id": "slurm-clean-03", "metrics": recs[0]["metrics"]}
    runs.write_text(runs.read_text() + json.dumps(retry) + "\n")
    t = table.read(str(root))
    got = {(r.platform, r.run_id): r for r in calmod.load(str(root), t)}
    assert got[("slurm", "slurm-clean-03")].status == "ok" and not got[("slurm", "slurm-clean-03")].refused
    sec = calmod.section(list(got.values()))
    assert not any("slurm-clean-03" in x for b in sec if b[0] == "ul" for x in b[1])
