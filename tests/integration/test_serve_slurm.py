"""Serving on the local Slurm cluster (harness/serve/slurm.py), for real: a short training run writes
a checkpoint, a --requeue batch job serves it, discovery finds its node and port, the harness's
balancer routes a bounded load to it, a SIGKILLed server is restarted by the batch script's loop,
a second job is picked up by the balancer, and teardown leaves nothing in squeue.

Holds /tmp/poc-slurm.lock like the other suites that submit to the shared cluster; never `down`.
"""
from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import time
import urllib.request

import pytest

from harness import config, scenarios
from harness.backends.slurm.backend import SlurmBackend
from harness.clusters import slurm_docker
from harness.serve import load
from harness.serve.platforms import platform_serve
from harness.spec import Planned
from harness.states import JobState

pytestmark = [pytest.mark.integration, pytest.mark.slurm]
RELEASE = os.environ.get("POC_SLURM_RELEASE", "trixie")
LOCK = "/tmp/poc-slurm.lock"
SMALL = {"steps": 10, "checkpoint_every": 5, "sweep": "1K:1M", "sweep_iters": 1, "sweep_warmup": 1}


@pytest.fixture(scope="module")
def cluster():
    info = slurm_docker.up(release=RELEASE, timeout=300)
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield info


def login(argv):
    return slurm_docker.run(slurm_docker.login_exec_argv(argv), check=False).stdout


def wait(what, probe, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = probe()
        if got:
            return got
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout:g} s waiting for {what}")


def allow_of(nets):
    nets = [ipaddress.ip_network(n) for n in nets]
    return lambda addr: any(ipaddress.ip_address(addr) in n for n in nets)


def get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def train(backend, cfg):
    """A real short training run: its checkpoints are what is served."""
    spec = scenarios.job_spec(cfg, "slurm", Planned(f"serve-train-{int(time.time()) % 100000}", None, "serve"))
    h = backend.submit(spec, backend.render(spec))
    obs = wait("the training run to end", lambda: (o := backend.observe([h])[spec.run_id]).state.terminal and o, 180)
    assert obs.state is JobState.SUCCEEDED, obs
    return spec, h


def test_serving_job_discovered_balanced_restarted_and_scaled(cluster, tmp_path):
    assert "OK" in slurm_docker.run(["docker", "exec", "poc-slurm-c1", "python3", "-c",
                                     "import aiohttp; print('OK')"], check=False).stdout, \
        "the cluster runs a worker image without python3-aiohttp: `poc cluster up --slurm` after the image rebuild"
    cfg = config.from_mapping({"campaign": "serve-slurm-test", "platforms": ["slurm"], "workload": SMALL,
                               "faults": [], "serve": {"train_steps": 10}, "allow_destructive_faults": True})
    backend = SlurmBackend.from_config(cfg)
    t_start = time.monotonic()
    spec, th = train(backend, cfg)
    t_trained = time.monotonic()
    serve = platform_serve(backend, cfg.serve)
    try:
        dep = serve.deploy(th, spec)
        job0 = dep["job_id"]
        url = serve.url(120)
        assert url.startswith("http://127.0.0.1:")
        ready = wait("replica 0 ready through the balancer", lambda: [r for r in serve.replicas() if r["ready"]], 120)
        ready_s = ready[0]["since"] - dep["submitted"]
        info = get(url + "/info")
        assert info["ready"] and info["model"]["step"] >= 5 and info["model"]["checkpoint"].startswith(dep["ckpt_dir"])
        body = {"inputs": [[0.5] * info["model"]["dims"]["width"]] * 4}
        nets = serve.networks()
        # loopback (the balancer) and the Slurm containers' network, wherever Docker's address pools put it
        # (172.18+ usually; 192.168.x/20 once those pools were taken)
        assert "127.0.0.0/8" in nets and any(ipaddress.ip_network(n).is_private
                                             and not ipaddress.ip_network(n).is_loopback for n in nets), nets
        allow = allow_of(nets)
        res = load.run(load.Plan(url + "/predict", body, requests=400, duration_s=4, clients=2), allow=allow)
        assert res["ok"] > 10 and res["failed"] == 0, res["errors"]
        # a direct POST to the node's endpoint is within networks(); anything else is refused
        ep = ready[0]["endpoint"]
        direct = load.run(load.Plan(f"http://{ep}/predict", body, requests=3, duration_s=5, clients=1), allow=allow)
        assert direct["ok"] == 3
        with pytest.raises(load.AddressRefused):
            load.check_target("http://192.168.77.1:8000/predict", allow)

        # kill_server: SIGKILL to the srun step's python; the batch script's loop starts it again
        before = {r["endpoint"] for r in serve.replicas()}
        pid = serve._found[job0]["pid"]
        node = serve._found[job0]["node"]
        kill = serve.kill_server()
        assert kill["step"].startswith(f"{job0}.")
        wait("the killed server's process gone", lambda: slurm_docker.run(
            ["docker", "exec", f"poc-slurm-{node}", "kill", "-0", str(pid)], check=False).returncode != 0, 15)
        back = wait("a restarted server ready", lambda: [r for r in serve.replicas()
                                                          if r["ready"] and r["endpoint"] not in before], 90)
        recovered_s = back[0]["since"] - kill["t"]
        steps = login(["squeue", "-h", "-s", "-j", job0, "-o", "%i"]).split()
        assert f"{job0}.{int(kill['step'].split('.')[1]) + 1}" in steps, steps
        clock = login(["cat", f"{serve.sdir}/clock-{job0}.txt"])
        assert "server_exit" in clock and ":137" in clock and clock.count("server_start") == 2, clock
        assert get(url + "/info")["pid"] != pid

        # scale to 2: another job; the balancer routes to both once both answer /readyz
        t_scale = time.time()
        serve.scale(2)
        two = wait("two ready replicas", lambda: (rs := [r for r in serve.replicas() if r["ready"]]) and
                   len(rs) == 2 and rs, 120)
        scale_s = max(r["since"] for r in two) - t_scale
        res2 = load.run(load.Plan(url + "/predict", body, requests=400, duration_s=4, clients=4), allow=allow)
        assert res2["failed"] == 0, res2["errors"]
        served = {b["endpoint"]: b["served"] for b in serve.balancer.backends()}
        assert all(served[r["endpoint"]] >= 5 for r in two), served

        ev = serve.evidence()
        assert ev["squeue"]["rc"] == 0 and ev["sacct"]["rc"] == 0 and job0 in ev["scontrol"]
        assert "serve_listening" in ev["event_files"]["text"]
        log_events = {e["event"] for e in ev["balancer"]["log"]["entries"]}
        assert {"started", "added", "healthy", "unhealthy"} <= log_events, log_events
        assert set(serve.beyond()) >= {"discovery", "balancing", "restarts", "scaling", "written", "harness_parts"}
        (tmp_path / "evidence.json").write_text(json.dumps(ev, indent=1, default=str))
        print(f"\nserve on slurm: trained in {t_trained - t_start:.1f} s; ready {ready_s:.1f} s after submit; "
              f"kill -> ready again {recovered_s:.1f} s; scale 1->2 ready {scale_s:.1f} s; "
              f"load {res['throughput_rps']:.0f} rps p50 {res['latency_s']['p50'] * 1e3:.1f} ms (1 replica), "
              f"{res2['throughput_rps']:.0f} rps p50 {res2['latency_s']['p50'] * 1e3:.1f} ms (2); "
              f"evidence {tmp_path / 'evidence.json'}")
    finally:
        td = serve.teardown()
        backend.cleanup(th, True, "never")
    assert not td["errors"], td
    assert not serve.balancer.running()
    ids = [j["job_id"] for j in serve.jobs]
    assert not login(["squeue", "-h", "-j", ",".join(ids), "-o", "%i"]).strip()
    print(f"total {time.monotonic() - t_start:.1f} s")


def test_a_crash_during_the_serving_node_loss_is_undone_by_poc_cleanup(cluster, tmp_path):
    """The serving node loss names the replica's node on the training run's handle and journals it
    before the node goes; the harness then dies (nothing restores, nothing tears down) and the real
    `poc cleanup` cancels the training and serving jobs and brings the node back."""
    import subprocess

    from _poc import inflight, poc_argv, wait_slurm_nodes_free, write_config

    from harness.slurm_parse import node_usable
    from harness.store import Store

    campaign = f"serve-crash-{os.getpid() % 100000}-{int(time.time()) % 100000}"
    data = {"campaign": campaign, "platforms": ["slurm"], "workload": SMALL, "faults": [],
            "serve": {"train_steps": 10}, "allow_destructive_faults": True}
    cfg_path = write_config(tmp_path / "poc.yaml", data)
    cfg = config.from_mapping(data)
    results = tmp_path / "results"
    store = Store(results, campaign)
    store.open(cfg.config_hash(), cfg.redacted(), resume=False)
    wait_slurm_nodes_free(("c1", "c2", "c3"))
    backend = SlurmBackend.from_config(cfg)
    spec, th = train(backend, cfg)
    serve = platform_serve(backend, cfg.serve)
    node = container = None
    try:
        dep = serve.deploy(th, spec)
        serve.url(120)
        wait("the replica ready through the balancer", lambda: [r for r in serve.replicas() if r["ready"]], 120)
        rec = serve.lose_node(journal=lambda: store.mark_inflight(th.to_json()))
        node = rec["node"]
        container = th.data["stopped_containers"][node]
        (saved,) = store.inflight()
        assert saved["data"]["lost_nodes"] == [node] and dep["job_id"] in saved["ids"], saved
        assert saved["data"]["lost_marks"] == {node: f"poc-lose-node job {dep['job_id']}"}
        # the harness dies here: its balancer thread goes with it, nothing is restored or torn down
        serve.balancer.stop()
        store.close()
        t0 = time.monotonic()
        p = subprocess.run(poc_argv("cleanup", "--config", str(cfg_path), "--results", str(results), "--json"),
                           capture_output=True, text=True, timeout=300, check=False)
        took = time.monotonic() - t0
        assert p.returncode == 0, p.stderr[-3000:]
        assert json.loads(p.stdout)["undone"] == [spec.run_id]
        out = slurm_docker.run(["docker", "inspect", "-f", "{{.State.Running}}", container], check=False).stdout
        assert out.strip() == "true"
        assert node_usable(login(["sinfo", "-h", "-n", node, "-o", "%T"]))
        ids = [j["job_id"] for j in serve.jobs]
        wait("the serving jobs gone from squeue", lambda: not login(["squeue", "-h", "-j", ",".join(ids),
                                                                    "-o", "%i"]).strip(), 60)
        assert inflight(results / campaign) == []
        print(f"\npoc cleanup after a crash mid serving node loss: {node} back, jobs {', '.join(ids)} "
              f"cancelled in {took:.1f} s")
    finally:
        if container and "true" not in slurm_docker.run(["docker", "inspect", "-f", "{{.State.Running}}",
                                                         container], check=False).stdout:
            slurm_docker.run(["docker", "start", container], check=False)
        serve.teardown()
        backend.cleanup(th, True, "never")
