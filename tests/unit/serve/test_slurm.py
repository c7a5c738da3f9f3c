"""Serving on Slurm without a cluster: the batch script (rendered, syntax-checked by bash, and its
restart loop run for real against a stand-in srun), the parsing of squeue/scontrol/getent/event-file
outputs recorded on the local cluster (tests/fixtures/serve/slurm/), and SlurmServe's discovery,
kill and teardown over a transport that answers with those recordings."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.paths import FIXTURES

from harness import config
from harness import spec as specmod
from harness.backends.base import Handle
from harness.render import serving_sbatch as rs
from harness.serve import slurm as ss
from harness.transports import Result

FIX = FIXTURES / "serve" / "slurm"


def fixture(name: str) -> str:
    return (FIX / name).read_text()


def make_cfg(workdir="/shared/poc", **slurm):
    return config.from_mapping({"campaign": "c1", "platforms": ["slurm"], "faults": [],
                                "slurm": {"workdir": workdir, **slurm}})


def make_spec(cfg):
    return specmod.build(cfg, "slurm", "slurm-serve", None, "serve")


# ---------------------------------------------------------------- the batch script
def test_render_holds_the_site_settings_requeue_and_the_server_line():
    cfg = make_cfg(partition="gpu-a", account="proj_1", qos="high", extra_sbatch=["--exclusive"])
    spec = make_spec(cfg)
    text = rs.render(spec, cfg.slurm, "/shared/poc/c1/slurm-serve", "/shared/poc/c1/slurm-serve/ckpt", 1)
    heads = [ln[len("#SBATCH "):] for ln in text.splitlines() if ln.startswith("#SBATCH ")]
    assert heads[:3] == ["--job-name=poc-serve-slurm-serve-1", "--comment=poc-run-id=slurm-serve", "--nodes=1"]
    for opt in ("--ntasks=1", "--partition=gpu-a", "--account=proj_1", "--qos=high", "--requeue",
                "--open-mode=append", "--output=/shared/poc/c1/slurm-serve/serve/slurm-%j.out",
                "--chdir=/shared/poc/c1/slurm-serve/serve", "--exclusive"):
        assert opt in heads, opt
    srun = next(ln for ln in text.splitlines() if ln.strip().startswith("srun "))
    assert srun.strip().endswith("&")
    assert ("python3 /shared/poc/c1/slurm-serve/serve/serve_model.py --ckpt-dir /shared/poc/c1/slurm-serve/ckpt "
            "--host \"$ADDR\" --port 0 --workload /shared/poc/c1/slurm-serve/ddp_train.py") in srun
    assert '--events-dir "$EVENTS"' in srun
    assert "MAX_RESTARTS=20" in text and "export POC_RUN_ID=slurm-serve" in text
    assert subprocess.run(["bash", "-n"], check=False, input=text, text=True, capture_output=True).returncode == 0


@pytest.mark.parametrize("container,mount", [
    ("pyxis", "--container-mounts=/shared/poc:/shared/poc,/lustre/ckpt:/lustre/ckpt "),
    ("apptainer", "--bind /shared/poc:/shared/poc --bind /lustre/ckpt:/lustre/ckpt "),
])
def test_a_server_in_a_container_sees_a_checkpoint_directory_outside_the_workdir(container, mount):
    cfg = make_cfg(container=container, container_image="/images/w.sqsh", checkpoint_dir="/lustre/ckpt")
    text = rs.render(make_spec(cfg), cfg.slurm, "/shared/poc/c1/slurm-serve", "/lustre/ckpt/c1/slurm-serve", 1)
    assert mount in text


def test_render_refuses_bad_values_and_quotes_paths():
    cfg = make_cfg()
    spec = make_spec(cfg)
    with pytest.raises(ValueError):
        rs.render(spec, cfg.slurm, "/shared/poc/c1/r", "/ck", 0, port=70000)
    text = rs.render(spec, cfg.slurm, "/shared/poc/c1/r", "/ck dir/$(x)", 0, port=8000)
    assert "--ckpt-dir '/ck dir/$(x)'" in text and "--port 8000" in text


def run_script(tmp_path: Path, srun_body: str, *, stand_ins: dict[str, str] | None = None, **kw):
    """The rendered script under bash, with a stand-in srun first on PATH (what it ran is logged), and a
    scontrol and getent that print what they printed on the local cluster's node c1 (recorded)."""
    cfg = make_cfg(workdir=str(tmp_path / "work"))
    spec = make_spec(cfg)
    rdir = f"{tmp_path}/work/c1/slurm-serve"
    os.makedirs(rs.serve_dir(rdir))
    text = rs.render(spec, cfg.slurm, rdir, f"{rdir}/ckpt", 0, **kw)
    bind = tmp_path / "bin"
    bind.mkdir()
    (bind / "srun").write_text(f"#!/bin/bash\necho \"$*\" >> {tmp_path}/srun.log\n{srun_body}\n")
    (bind / "srun").chmod(0o755)
    recorded = {"scontrol": f"cat {FIX / 'scontrol_show_node_c1.txt'}",
                "getent": f"cat {FIX / 'getent_ahostsv4_c1.txt'}"}
    for name, body in {**recorded, **(stand_ins or {})}.items():
        (bind / name).write_text(f"#!/bin/bash\necho \"$*\" >> {tmp_path}/{name}.log\n{body}\n")
        (bind / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bind}:{os.environ['PATH']}", "SLURM_JOB_ID": "42", "SLURMD_NODENAME": "c1"}
    return subprocess.Popen(["bash", "-c", text], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path), Path(rs.serve_dir(rdir))


def test_the_loop_restarts_a_killed_server_and_stops_when_the_checkpoint_is_unusable(tmp_path):
    # first start: killed (137, as after scancel --signal=KILL); second: exit 2 (unusable checkpoint)
    body = f'n=$(wc -l < {tmp_path}/srun.log); [ "$n" -eq 1 ] && exit 137; exit 2'
    p, sdir = run_script(tmp_path, body)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 2, (out, err)
    assert "restart 1 of 20" in out and "cannot load the checkpoint" in err
    clock = (sdir / "clock-42.txt").read_text().splitlines()
    assert [ln.split()[0] for ln in clock] == ["server_start", "server_exit", "server_start", "server_exit"]
    assert clock[1].endswith(" 0:137") and clock[3].endswith(" 1:2")
    runs = (tmp_path / "srun.log").read_text().splitlines()
    assert len(runs) == 2 and f"--events-dir {sdir}/events/42" in runs[0]
    assert (sdir / "events" / "42").is_dir()


def test_the_server_listens_on_the_nodes_address_only(tmp_path):
    p, _ = run_script(tmp_path, "exit 2")
    p.communicate(timeout=30)
    assert (tmp_path / "scontrol.log").read_text().split() == ["show", "node", "-o", "c1"]
    assert (tmp_path / "getent.log").read_text().split() == ["ahostsv4", "c1"]     # NodeAddr=c1, a name
    addr = fixture("getent_ahostsv4_c1.txt").split()[0]
    assert f" --host {addr} " in (tmp_path / "srun.log").read_text()


def test_a_node_without_an_address_ends_the_job_with_why(tmp_path):
    p, _ = run_script(tmp_path, "exit 0", stand_ins={"scontrol": "exit 1", "getent": "exit 2"})
    _, err = p.communicate(timeout=30)
    assert p.returncode == 1 and "no IPv4 address for node c1" in err
    assert not (tmp_path / "srun.log").exists()          # no server bound to every interface instead


def test_the_loop_is_bounded(tmp_path):
    p, _ = run_script(tmp_path, "exit 1", max_restarts=2)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 1 and "2 restarts used" in err
    assert len((tmp_path / "srun.log").read_text().splitlines()) == 3


def test_scancel_sigterm_ends_the_loop_instead_of_restarting(tmp_path):
    p, sdir = run_script(tmp_path, "exec sleep 30")
    clock = sdir / "clock-42.txt"
    end = time.monotonic() + 10
    while not (tmp_path / "srun.log").exists() and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(0.2)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=15)
    assert p.returncode == 0, (out, err)
    assert clock.read_text().count("server_start") == 1
    assert len((tmp_path / "srun.log").read_text().splitlines()) == 1


# ---------------------------------------------------------------- parsing recorded outputs
def test_parse_recorded_squeue_scontrol_getent():
    assert ss.parse_jobs(fixture("squeue_jobs_running.txt")) == {"10": {"state": "RUNNING", "node": "c1",
                                                                        "reason": "None"}}
    assert ss.parse_jobs(fixture("squeue_jobs_pending_after_node_loss.txt"))["10"]["node"] is None
    assert ss.current_step(fixture("squeue_steps_after_kill.txt"), "5") == "5.1"
    assert ss.current_step(fixture("squeue_steps_after_kill.txt"), "6") == "6.0"
    assert ss.current_step("5.batch\n5.extern\n", "5") is None
    assert ss.node_addr(fixture("scontrol_show_node_c1.txt")) == "c1"
    assert ss.first_ipv4(fixture("getent_ahostsv4_c1.txt")) == "172.18.0.6"
    assert ss.first_ipv4("") is None and ss.is_ip("172.18.0.6") and not ss.is_ip("c1")


def test_the_newest_listening_event_of_the_jobs_node_gives_the_port():
    evs = ss.event_files(fixture("event_files_after_kill.txt"))
    assert set(evs) == {"5", "6"}
    first, second = ss.listening(evs["5"], "c1"), ss.listening(evs["6"], "c1")
    assert first["port"] == 44799 and first["pid"] == 460      # the restarted server, not the killed one (40967)
    assert second["port"] != first["port"]
    assert ss.listening(evs["5"], "c2") is None and ss.listening(evs["5"], None) is None
    # after a lost node: the requeued job's server on c2; c1's old event is not where it listens now
    lost = ss.event_files(fixture("event_files_after_node_loss.txt"))["10"]
    now = ss.listening(lost, "c2")
    assert now["port"] == 42835 and now["restarts"]["slurm"] == 1
    assert ss.listening(lost, "c1")["port"] != now["port"]


# ---------------------------------------------------------------- SlurmServe over recorded answers
class Shell:
    """A transport answering each command from the recordings (text, or (rc, stdout, stderr)); what was
    asked is kept."""
    name = "ssh"

    def __init__(self, answers):
        self.answers, self.calls = answers, []

    def run(self, argv, *, input=None, env=None, timeout=60, check=True):
        self.calls.append(list(argv))
        key = next((k for k in self.answers if tuple(argv[:len(k)]) == k), None)
        out = self.answers[key] if key else ""
        out = out() if callable(out) else out
        rc, stdout, stderr = out if isinstance(out, tuple) else (0, out, "")
        return Result(list(argv), rc, stdout, stderr)


def fake_backend(shell, docker=None):
    cfg = make_cfg()
    runner = lambda argv, **kw: SimpleNamespace(  # noqa: E731
        returncode=0, stdout="poc-slurm\n" if argv[1] == "inspect" else "172.18.0.0/16 \n")
    return SimpleNamespace(t=shell, sched=SimpleNamespace(name="cli", calls=Counter()), cfg=cfg.slurm,
                           docker=docker, _docker_run=runner), cfg


def deployed(answers, docker=None):
    shell = Shell({("sbatch",): "5\n", **answers})
    b, cfg = fake_backend(shell, docker)
    s = ss.SlurmServe(b, cfg.serve)
    spec = make_spec(cfg)
    dep = s.deploy(Handle("slurm", spec.run_id, ["4"], 0.0, data={"run_dir": "/shared/poc/c1/slurm-serve"}), spec)
    return s, shell, dep


def test_deploy_discover_kill_and_teardown_ask_what_a_user_would():
    state = {"squeue": "5|RUNNING|c1|None\n"}
    answers = {("squeue", "-h", "-s"): fixture("squeue_steps_after_kill.txt"),
               ("squeue", "-h", "-j"): lambda: state["squeue"],
               ("sh", "-c", ss._EVENT_FILES): fixture("event_files_after_kill.txt"),
               ("scontrol", "show", "node"): fixture("scontrol_show_node_c1.txt"),
               ("getent",): fixture("getent_ahostsv4_c1.txt")}
    s, shell, dep = deployed(answers, docker={"nodes": {"c1": "poc-slurm-c1"}})
    assert dep["job_id"] == "5" and dep["ckpt_dir"] == "/shared/poc/c1/slurm-serve/ckpt"
    assert ["sbatch", "--parsable", "/shared/poc/c1/slurm-serve/serve/serve-0.sbatch"] in shell.calls
    assert s._endpoints() == ["172.18.0.6:44799"]
    s.discover()
    assert sum(c[0] == "getent" for c in shell.calls) == 1      # the node's address is asked once
    assert s.networks() == ["127.0.0.0/8", "172.18.0.0/16"]
    kill = s.kill_server()
    assert kill["argv"] == ["scancel", "--signal=KILL", "5.1"] and kill["node"] == "c1" and kill["pid"] == 460
    assert shell.calls[-1] == ["scancel", "--signal=KILL", "5.1"]
    state["squeue"] = "5|PENDING||BeginTime\n"                 # requeued after a lost node: no endpoint
    assert s._endpoints() == [] and s.replicas()[0]["endpoint"] is None
    state["squeue"] = ""
    td = s.teardown()
    assert ["scancel", "5"] in shell.calls and td == {"removed": ["job 5"], "errors": []}
    b = s.beyond()
    assert b["written"] and all(isinstance(v, int) and v > 20 for v in b["written"].values())


def test_sbatch_refusal_is_an_error_with_a_tip():
    from harness.errors import BackendError, CommandError

    class Refusing(Shell):
        def run(self, argv, **kw):
            if argv[0] == "sbatch":
                raise CommandError(list(argv), 1, "", "sbatch: error: invalid partition specified: gpu-typo")
            return super().run(argv, **kw)

    b, cfg = fake_backend(Refusing({}))
    s = ss.SlurmServe(b, cfg.serve)
    spec = make_spec(cfg)
    with pytest.raises(BackendError) as e:
        s.deploy(Handle("slurm", spec.run_id, ["4"], 0.0, data={"run_dir": "/shared/poc/c1/slurm-serve"}), spec)
    assert "invalid partition" in e.value.message and e.value.tip


def test_discovery_follows_a_requeue_and_keeps_its_last_answer_through_a_squeue_timeout():
    state = {"squeue": fixture("squeue_jobs_running.txt"), "events": fixture("event_files_after_kill.txt")}
    node = {"c1": "NodeAddr=c1 ", "c2": "NodeAddr=172.18.0.7 "}
    answers = {("squeue", "-h", "-j"): lambda: state["squeue"],
               ("sh", "-c", ss._EVENT_FILES): lambda: state["events"],
               ("scontrol", "show", "node", "-o", "c1"): node["c1"],
               ("scontrol", "show", "node", "-o", "c2"): node["c2"],
               ("getent",): fixture("getent_ahostsv4_c1.txt")}
    s, shell, _ = deployed({**answers, ("sbatch",): "10\n"})
    state["events"] = state["events"].replace("/events/5/", "/events/10/")   # job 10's own directory
    assert s._endpoints() == ["172.18.0.6:44799"]
    state["squeue"] = (1, "", fixture("squeue_jobs_timeout_during_node_loss.stderr"))
    assert s._endpoints() == ["172.18.0.6:44799"]          # the last answer, and the error noted
    assert "Socket timed out" in s._changes[-1]["error"]
    state["squeue"] = fixture("squeue_jobs_pending_after_node_loss.txt")
    assert s._endpoints() == []
    state["squeue"], state["events"] = "10|RUNNING|c2|None\n", fixture("event_files_after_node_loss.txt")
    assert s._endpoints() == ["172.18.0.7:42835"]          # NodeAddr an IP: no getent for c2
    assert not any(c[:2] == ["getent", "ahostsv4"] and c[-1] == "172.18.0.7" for c in shell.calls)
    assert [c.get("state") for c in s._changes] == ["RUNNING", None, "PENDING", "RUNNING"]


def test_lose_node_uses_the_backends_fault_and_the_training_handle_names_the_node_until_restored():
    from harness.backends.base import FaultRecord

    events = fixture("event_files_after_kill.txt").replace("/events/5/", "/events/10/")
    answers = {("squeue", "-h", "-j"): fixture("squeue_jobs_running.txt"), ("sh", "-c", ss._EVENT_FILES): events,
               ("scontrol", "show", "node"): fixture("scontrol_show_node_c1.txt"),
               ("getent",): fixture("getent_ahostsv4_c1.txt")}
    s, _, _ = deployed({**answers, ("sbatch",): "10\n"}, docker={"nodes": {"c1": "poc-slurm-c1"}})
    assert s.train.ids == ["4", "10"]          # the serving job is cancelled with the training run's handle
    seen = {}

    journalled: list[dict] = []

    def inject(h, kind, target):
        assert journalled, "the node loss acts before the training handle naming it is journalled"
        seen["inject"] = (h.data["job_id"], kind, target, list(s.train.data["lost_nodes"]))
        h.data["lost_nodes"].append(target["host"])
        return FaultRecord(kind, 123.0, target, {"how": "docker kill of the node's container"})

    def restore(h):
        seen["restore"] = list(h.data["lost_nodes"])
        h.data["lost_nodes"].clear()

    s.b.inject, s.b._restore_nodes = inject, restore
    rec = s.lose_node(journal=lambda: journalled.append(json.loads(json.dumps(s.train.data))))
    # written on the training handle and journalled before the node went, with the serving job's mark
    # (the reason the fault sets), so a crash's cancel() brings it back while that mark is on it
    assert seen["inject"] == ("10", "lose_node", {"host": "c1"}, ["c1"])
    assert journalled[0]["lost_nodes"] == ["c1"] and journalled[0]["lost_marks"] == {"c1": "poc-lose-node job 10"}
    assert journalled[0]["stopped_containers"] == {"c1": "poc-slurm-c1"}
    assert rec["t"] == 123.0 and rec["node"] == "c1" and "docker kill" in rec["how"]
    assert s.train.data["stopped_containers"] == {"c1": "poc-slurm-c1"}
    assert s.restore() == {"restored": ["c1"]} and seen["restore"] == ["c1"]
    assert s.train.data["lost_nodes"] == [] and s.train.data["stopped_containers"] == {}
    assert s.train.data["lost_marks"] == {}
    assert s._addr == {}                       # a node that came back may have a new address
