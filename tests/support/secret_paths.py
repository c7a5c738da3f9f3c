"""Every credential of the corpus (secret_shapes.py) pushed through every path by which the harness stores or
prints something, with the real parts: a real Store (campaign.json, runs.jsonl records with an error's message,
tip and traceback, artifacts of every kind, raw.json.gz), a replay's store, and the real `poc` CLI (its
ERROR/TIP lines, its --log-file). `push_everywhere(workdir)` returns, per path, the cases whose body survived.

Only interfaces that every harness version since the owner key has are used, so
scripts/secret_survivors.py can count survivors of an older checkout too (PYTHONPATH=<that checkout>).
"""
from __future__ import annotations

import contextlib
import gzip
import io
import json
from collections.abc import Callable
from pathlib import Path

from support.secret_shapes import Case, cases, survivors

PATHS = ("campaign.json", "runs.jsonl: error message", "runs.jsonl: error tip", "runs.jsonl: traceback",
         "runs.jsonl: record fields", "runs/<id>/logs/", "runs/<id>/events.jsonl", "runs/<id>/rendered/",
         "runs/<id>/raw.json.gz", "replay store (scale/<name>/k8s.json)", "cli: ERROR/TIP", "cli: --log-file")


def _text(path: Path) -> str:
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8", errors="replace")


def _by_shape(all_cases: list[Case]) -> dict[str, list[Case]]:
    out: dict[str, list[Case]] = {}
    for c in all_cases:
        out.setdefault(c.shape, []).append(c)
    return out


def _store_paths(work: Path, all_cases: list[Case]) -> dict[str, list[Case]]:
    from harness.store import RunRecord, Store

    found: dict[str, list[Case]] = {p: [] for p in PATHS[:9]}
    for i, group in enumerate(_by_shape(all_cases).values()):
        store = Store(work / "results", f"c{i:03d}")
        # campaign.json: the config holds the credential (the fabric's environment, the way a user sets it)
        config = {"workload": {"fabric": {"env": {f"X{j}": c.text for j, c in enumerate(group)}}},
                  "notes": [c.value for c in group]}
        store.open("h", config, resume=False)
        found["campaign.json"] += survivors(_text(store.root / "campaign.json"), group)
        for j, c in enumerate(group):
            rec = RunRecord(run_id=f"r{j}", campaign=store.campaign, platform="slurm", scenario="clean",
                            config_hash="h", started_at=0.0, status="failed", stages=[],
                            error={"stage": "submit", "type": "SubmitError", "origin": "platform",
                                   "message": f"sbatch: error: {c.text}", "tip": f"check {c.text}",
                                   "traceback": f"Traceback (most recent call last):\n  {c.text}\n"},
                            environment={"fabric": {"env": c.value}}, collect_error=c.text)
            store.append(rec)
        lines = store.runs_path.read_text().splitlines()
        for j, c in enumerate(group):
            rec = json.loads(lines[j])
            err = rec.get("error") or {}
            found["runs.jsonl: error message"] += survivors(str(err.get("message")), [c])
            found["runs.jsonl: error tip"] += survivors(str(err.get("tip")), [c])
            found["runs.jsonl: traceback"] += survivors(str(err.get("traceback")), [c])
            rest = {k: v for k, v in rec.items() if k != "error"}
            found["runs.jsonl: record fields"] += survivors(json.dumps(rest), [c])
        # one run: every artifact kind, and its raw evidence
        files = {f"logs/{c.context}.log": c.text for c in group}
        files["events.jsonl"] = "".join(json.dumps({"kind": "note", "rank": 0, "ts_ns": 1, "text": c.value}) + "\n"
                                        for c in group)
        files.update({f"rendered/{c.context}.yaml": c.text for c in group})
        store.write_artifacts("run", files)
        store.write_raw("run", {"events": [{"message": c.text} for c in group],
                                "objects": [{"spec": c.value} for c in group]})
        run = store.run_dir("run")
        found["runs/<id>/logs/"] += survivors("".join(_text(p) for p in (run / "logs").iterdir()), group)
        found["runs/<id>/events.jsonl"] += survivors(_text(run / "events.jsonl"), group)
        found["runs/<id>/rendered/"] += survivors("".join(_text(p) for p in (run / "rendered").iterdir()), group)
        found["runs/<id>/raw.json.gz"] += survivors(_text(run / "raw.json.gz"), group)
        store.close()
    return found


def _replay_path(work: Path, all_cases: list[Case], trace_file: Path) -> list[Case]:
    from harness.replay import store as replaystore
    from harness.scale import trace as tr

    trace = tr.load(trace_file)
    where = work / "replay"
    result = {"raw": {"jobsets": [], "pods": [], "workloads": [],
                      "events": [{"message": c.text, "object": c.value} for c in all_cases]},
              "submitted": [], "settings": {"notes": [c.text for c in all_cases]}}
    replaystore.save(where, trace, "k8s", result, total_gpus=8)
    return survivors(_text(where / "k8s.json"), all_cases)


def _cli_paths(work: Path, all_cases: list[Case]) -> tuple[list[Case], list[Case], list[Case]]:
    """Each shape's cases given to `poc run` on its command line (a --set of the fabric's environment), which
    its campaign.json and --log-file record, and coming back as a platform's error, whose message and tip its
    ERROR/TIP lines print."""
    from harness.cli import main
    from harness.errors import BackendError

    printed, logged, configured = [], [], []
    for i, group in enumerate(_by_shape(all_cases).values()):
        message = "\n".join(c.text for c in group)

        def fail(cfg, platforms, store, make_backend, *, resume, message=message, **_kw):
            store.open(cfg.config_hash(), cfg.redacted(), resume)
            store.close()
            raise BackendError(f"sbatch: error: {message}", tip=f"the site said: {message}")

        err = io.StringIO()
        log_file = work / f"cli-{i:03d}.log"
        one_line = " ".join(c.text.replace("\n", " ") for c in group)
        with contextlib.redirect_stderr(err):
            rc = main(["run", "--results", str(work / "cli"), "--campaign", f"cli{i:03d}", "--log-file", str(log_file),
                       "--set", f"fabric.env.DEPLOY_VALUE={json.dumps(one_line)}"], campaign_fn=fail, env={})
        if rc != BackendError.exit_code or "ERROR sbatch: error:" not in err.getvalue():
            raise AssertionError(f"`poc run` did not reach the platform's error (exit {rc}): {err.getvalue()[:300]}")
        printed += survivors(err.getvalue(), group)
        logged += survivors(log_file.read_text(), group)
        configured += survivors(_text(work / "cli" / f"cli{i:03d}" / "campaign.json"), group)
    return printed, logged, configured


def push_everywhere(work: Path, trace_file: Path, among: list[Case] | None = None,
                    progress: Callable[[str], None] = lambda _s: None) -> dict[str, list[Case]]:
    """Every case through every path; the survivors per path (PATHS, in order)."""
    all_cases = cases() if among is None else among
    found = _store_paths(work, all_cases)
    progress("store done")
    found["replay store (scale/<name>/k8s.json)"] = _replay_path(work, all_cases, trace_file)
    progress("replay done")
    found["cli: ERROR/TIP"], found["cli: --log-file"], configured = _cli_paths(work, all_cases)
    found["campaign.json"] += [c for c in configured if c not in found["campaign.json"]]
    return {p: found[p] for p in PATHS}
