"""The container runtime of the local baseline (harness/backends/container.py): its render is pure,
printable, and the argv it runs."""
from __future__ import annotations

import shlex

from harness.backends.container import ContainerBackend, job_names, render_containers
from harness.config import from_mapping
from harness.render.local import workload_script
from harness.spec import build


def test_container_render_is_pure_and_matches_the_clusters_job():
    cfg = from_mapping({"campaign": "c1", "faults": [], "resources": {"cpus_per_node": 1, "memory_mb": 2048}})
    spec = build(cfg, "local", "local-clean-01", None)
    job = render_containers(spec, "img:1", "/w/run", "/s/ddp_train.py", "1000:1000")
    assert job == render_containers(spec, "img:1", "/w/run", "/s/ddp_train.py", "1000:1000")
    assert job.names == ("poc-c1-local-clean-01-0", "poc-c1-local-clean-01-1") == job_names(spec)[1]
    assert "--internal" in job.network_argv and job.network_argv[-1] == job.network
    for argv, host in zip(job.run_argvs, job.hosts, strict=True):
        assert argv[:2] == ("docker", "run") and "--cpus=1" in argv and "--memory=2048m" in argv
        assert argv[argv.index("--hostname") + 1] == host == argv[argv.index("--network-alias") + 1]
        assert "--rdzv_endpoint=local-clean-01-0:29500" in argv and "--max_restarts=3" in argv
        i = argv.index("/opt/poc/ddp_train.py")
        assert list(argv[i + 1:]) == spec.workload_args("/poc-run/ckpt", "/poc-run/events")
        assert "GLOO_SOCKET_IFNAME=eth0" in argv and "/w/run:/poc-run" in argv
    backend = ContainerBackend("/w", "img:1", user="0:0")
    script = backend.render(spec).files["launch.sh"]
    lines = [ln for ln in script.splitlines() if ln.startswith("docker run")]
    want = render_containers(spec, "img:1", "/w/local-clean-01", str(workload_script()), "0:0").run_argvs
    assert [tuple(shlex.split(ln)) for ln in lines] == list(want)   # the printed script is the argv run
