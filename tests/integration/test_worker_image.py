"""The workload the harness ships runs in the worker image it builds, with no scheduler in between.

A throwaway container (testcontainers): the worker image, built from harness/data/images/worker
when missing, with harness/data/workloads mounted read-only, runs the local baseline's own torchrun
command (harness/render/local.py) for one node of two ranks on loopback only. The wait strategy
holds until the ranks have met (rendezvous_done), the exit code and the logs are captured when the
container ends, and the logs go through the harness's event parser. Both clusters run this image
and this file; when this fails, the image or the workload is at fault, not Slurm or Kubernetes.
"""
from __future__ import annotations

import re
import shutil

import pytest

from harness import config, data, spec
from harness import events as evmod
from harness.render.local import render_local

pytestmark = [pytest.mark.integration, pytest.mark.local]

STEPS = 6


def test_workload_runs_in_the_worker_image():
    if shutil.which("docker") is None:
        pytest.skip("docker is not installed")
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import LogMessageWaitStrategy

    from harness.clusters import images

    ref = images.ensure_worker_image()              # present after `poc cluster up`; else built (minutes)
    cfg = config.from_mapping({"resources": {"nodes": 1, "procs_per_node": 2}, "faults": [],
                               "workload": {"steps": STEPS, "checkpoint_every": 3, "model_params": "64K",
                                            "sweep": "1K:16K", "sweep_iters": 2, "sweep_warmup": 1}})
    s = spec.build(cfg, "local", "image-check-01", None)
    (argv,) = render_local(s, "/poc-run", "python3", script=f"/opt/poc/{spec.WORKLOAD_SCRIPT}")
    container = (DockerContainer(ref)
                 .with_command(argv)
                 .with_envs(**s.launch_env(), GLOO_SOCKET_IFNAME="lo")
                 .with_volume_mapping(str(data.path("workloads")), "/opt/poc", "ro")
                 .with_tmpfs_mount("/poc-run")
                 .with_kwargs(network_mode="none")          # loopback only: the ranks meet on 127.0.0.1
                 .waiting_for(LogMessageWaitStrategy(re.compile('"kind":"rendezvous_done"'))
                              .with_startup_timeout(300)))
    with container:
        status = container.get_wrapped_container().wait(timeout=300)
        stdout, stderr = container.get_logs()
    logs = (stdout + stderr).decode(errors="replace")
    events = evmod.parse_lines(logs.splitlines())
    assert status["StatusCode"] == 0, logs[-4000:]
    assert sorted(e["rank"] for e in events if e["kind"] == "done") == [0, 1], logs[-4000:]
    steps = {(e["rank"], e["step"]) for e in events if e["kind"] == "step"}
    assert steps == {(r, i) for r in (0, 1) for i in range(1, STEPS + 1)}
    assert any(e["kind"] == "allreduce" for e in events)        # the bus-bandwidth sweep ran too
    torch_versions = {e["torch"] for e in events if e["kind"] == "torch_imported"}
    assert len(torch_versions) == 1 and "+cu" not in next(iter(torch_versions))   # Debian's CPU torch, not PyPI's
