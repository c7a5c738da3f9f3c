"""The same-image local baseline end to end: a real 2-container gloo DDP job of the worker image (a clean
run and a kill_rank run) through harness.pipeline with the real ContainerBackend.

Checks that the baseline ran the clusters' torch build (Debian's, in the worker image) and not the
host's, that the raw evidence yields consistent stamps, that the rank kill was recovered by torchrun
inside its container, and that no container or network of the campaign is left afterwards.
Run under `flock /tmp/poc-docker.lock` with the other Docker-heavy tests.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest

from harness import config, evidence, provenance
from harness.backends.container import ContainerBackend
from harness.backends.factory import make_backend
from harness.clusters import images
from harness.pipeline import campaign
from harness.store import Store

pytestmark = [pytest.mark.integration, pytest.mark.local]

WORKLOAD = {"steps": 24, "checkpoint_every": 5, "sweep": "1K:1M", "sweep_iters": 2, "sweep_warmup": 1}


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True, timeout=60).stdout


def host_torch() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.__version__


@pytest.fixture(scope="module")
def worker_image() -> str:
    if shutil.which("docker") is None or subprocess.run(["docker", "info"], capture_output=True,
                                                          check=False).returncode != 0:
        pytest.skip("no Docker engine")
    return images.ensure_worker_image()      # built here when missing, as `poc cluster up` builds it


def image_torch(ref: str) -> str:
    return docker("run", "--rm", "--network", "none", ref, "python3", "-c",
                  "import torch; print(torch.__version__)").strip()


def test_container_baseline_clean_and_kill_rank(tmp_path, monkeypatch, worker_image):
    monkeypatch.setenv("POC_STATE_DIR", str(tmp_path / "state"))
    campaign_name = f"bl-{int(time.time()) % 100000}"
    cfg = config.from_mapping({"campaign": campaign_name, "platforms": ["local"], "repetitions": 1,
                               "workload": WORKLOAD, "faults": [{"kind": "kill_rank", "at_step": 8, "rank": 1}]})
    assert cfg.local.runtime == "container"
    collected: dict[str, object] = {}

    def factory(platform: str):
        backend = make_backend(platform, cfg)
        assert isinstance(backend, ContainerBackend) and backend.image == worker_image
        inner = backend.collect

        def collect(handle):                  # keep what the pipeline was given, raw evidence included
            got = inner(handle)
            collected[handle.run_id] = got
            return got
        backend.collect = collect
        return backend

    t0 = time.monotonic()
    recs = campaign(cfg, ["local"], Store(str(tmp_path / "results"), cfg.campaign), factory, resume=False)
    print(f"\n{campaign_name}: {time.monotonic() - t0:.1f}s")
    assert [(r["run_id"], r["status"]) for r in recs] == [("local-clean-01", "ok"), ("local-kill-rank-01", "ok")], \
        json.dumps([r.get("error") for r in recs], indent=1)[:3000]

    want = image_torch(worker_image)
    assert "debian" in want
    image_id = docker("image", "inspect", "--format", "{{.Id}}", worker_image).strip()
    builds = []
    for rec in recs:
        c = collected[rec["run_id"]]
        raw = c.raw
        assert raw["runtime"] == "container" and raw["image"]["ref"] == worker_image
        assert raw["image"]["id"] == image_id
        # the ranks ran the worker image's torch, not the host's
        ranks = {e["torch"] for e in c.events if e["kind"] == "torch_imported"}
        assert ranks == {want} and (host_torch() is None or host_torch() != want)
        build = provenance.build(c.events, raw)
        assert build["torch"] == want and build["image"]["id"] == image_id
        builds.append(build)
        assert rec["environment"]["torch"] == want
        # stamps: ns records from dockerd, every cross-check holds
        st = evidence.stamps("local", raw)
        assert all(ch["ok"] for ch in st["checks"]), st["checks"]
        sub, alloc, end = st["submitted"], st["allocated"], st["ended"]
        assert raw["submit"]["before"] <= sub.t <= alloc.t <= raw["submit"]["after"] < end.t
        assert alloc.resolution_s == 1e-9 and end == st["released"]
        first_step = min(e["ts_ns"] / 1e9 for e in c.events if e["kind"] == "step")
        assert alloc.t < first_step < end.t
        assert len(st["attempts"]) == 1 and len(st["attempts"][0]["nodes"]) == 2
        # no environment values in the raw evidence
        assert all("=" not in e for ct in raw["containers"] for e in ct["Config"]["Env"])
    assert provenance.same_build(*builds)

    kill = recs[1]
    (fault,) = kill["faults"]
    assert fault["target"]["rank"] == 1 and fault["detail"]["signal"] == "SIGKILL"
    assert fault["target"]["host"].endswith("-1") and fault["detail"]["container"].endswith("-1")
    ev = collected["local-kill-rank-01"].events
    assert max(e["attempt"][2] for e in ev if e["kind"] == "step") >= 1       # torchrun restarted the rank
    assert max(e["step"] for e in ev if e["kind"] == "step") == WORKLOAD["steps"]

    # nothing of the campaign is left: no container, no network
    label = f"label=poc/campaign={campaign_name}"
    assert docker("ps", "-a", "--filter", label, "--format", "{{.Names}}").split() == []
    assert docker("network", "ls", "--filter", label, "--format", "{{.Name}}").split() == []


def test_interrupted_container_run_leaves_nothing(tmp_path, monkeypatch, worker_image):
    """Ctrl-C while the containers train: the run is stored as interrupted, its containers and network go."""
    monkeypatch.setenv("POC_STATE_DIR", str(tmp_path / "state"))
    campaign_name = f"bli-{int(time.time()) % 100000}"
    cfg = config.from_mapping({"campaign": campaign_name, "platforms": ["local"], "repetitions": 1, "faults": [],
                               "workload": {**WORKLOAD, "steps": 400}})
    seen_running: list[list[str]] = []

    def factory(platform: str):
        backend = make_backend(platform, cfg)
        inner = backend.observe

        def observe(handles):
            got = inner(handles)
            if any(e["kind"] == "step" for o in got.values() for e in o.events):
                label = f"label=poc/campaign={campaign_name}"
                seen_running.append(docker("ps", "--filter", label, "--format", "{{.Names}}").split())
                raise KeyboardInterrupt
            return got
        backend.observe = observe
        return backend

    store = Store(str(tmp_path / "results"), cfg.campaign)
    with pytest.raises(KeyboardInterrupt):
        campaign(cfg, ["local"], store, factory, resume=False)
    assert seen_running and len(seen_running[0]) == 2, seen_running      # both containers were training
    (rec,) = [json.loads(x) for x in (tmp_path / "results" / campaign_name / "runs.jsonl").read_text().splitlines()]
    assert rec["status"] == "interrupted" and rec["error"]["origin"] == "user"
    assert not list((tmp_path / "results" / campaign_name).glob("inflight/*"))
    label = f"label=poc/campaign={campaign_name}"
    assert docker("ps", "-a", "--filter", label, "--format", "{{.Names}}").split() == []
    assert docker("network", "ls", "--filter", label, "--format", "{{.Name}}").split() == []
