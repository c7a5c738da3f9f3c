"""The Slurm-in-Docker cluster, for real: sinfo, SSH to the login node, a 2-node torchrun job with a
gloo all_reduce across c1 and c2, accounting in sacct, and state that survives a controller restart.

Needs Docker (and, the first time, debootstrap + the Debian mirror to build the images).
Environment:
  POC_SLURM_RELEASE=trixie|bookworm    which Debian/Slurm release to run (default trixie)
  POC_KEEP_CLUSTER=1                   leave the cluster up after the session (faster reruns)
  POC_RECORD_FIXTURES=1                (re)write tests/fixtures/slurm/<release>/ from real output
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from harness.clusters import slurm_docker

pytestmark = [pytest.mark.integration, pytest.mark.slurm]

RELEASE = os.environ.get("POC_SLURM_RELEASE", "trixie")
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / RELEASE
RECORD = os.environ.get("POC_RECORD_FIXTURES") == "1"

ALLREDUCE = textwrap.dedent("""\
    import os, socket, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    r, n = dist.get_rank(), dist.get_world_size()
    t = torch.full((1024,), float(r + 1))
    dist.all_reduce(t)
    expected = n * (n + 1) / 2
    assert torch.allclose(t, torch.full_like(t, expected)), t[:4]
    print(f"ALLREDUCE_OK rank={r} world={n} host={socket.gethostname()} value={t[0].item()}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
""")

JOB = textwrap.dedent("""\
    #!/bin/bash
    #SBATCH --job-name=poc-itest-allreduce
    #SBATCH --nodes=2
    #SBATCH --ntasks-per-node=1
    #SBATCH --nodelist=c1,c2
    #SBATCH --time=00:05:00
    #SBATCH --output=/shared/itest/%j.out
    #SBATCH --open-mode=append
    set -euo pipefail
    head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
    # each node maps its host name (cN.poc.lab) to 127.0.1.1, as Ubuntu and DGX OS do: gloo must be told its
    # interface, or it binds loopback and sends its peers to themselves (the harness's workload does this itself)
    export GLOO_SOCKET_IFNAME=eth0
    # underscore spellings: torch 1.13 (bookworm) knows no others
    srun --kill-on-bad-exit=1 torchrun --nnodes=2 --nproc_per_node=1 \\
      --rdzv_backend=c10d --rdzv_endpoint="$head:29511" --rdzv_id="$SLURM_JOB_ID" \\
      /shared/itest/allreduce.py
""")


def login(argv, *, check=True, env=None, timeout=60, input=None):
    cmd = ["docker", "exec", "-i", "-u", "poc"]
    for k, v in (env or {}).items():
        cmd += ["-e", f"{k}={v}"]
    cmd += [slurm_docker.LOGIN_CONTAINER, *argv]
    res = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout, input=input)
    if check and res.returncode != 0:
        raise AssertionError(f"{argv} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    return res


def write_shared(path: str, text: str, mode: str = "644") -> None:
    login(["sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1" && chmod "$2" "$1"', "sh", path, mode],
          input=text)


def record(name: str, text: str) -> None:
    if RECORD:
        FIXTURES.mkdir(parents=True, exist_ok=True)
        (FIXTURES / name).write_text(text)


def wait_job_state(job_id: str, states: set[str], timeout: float = 240) -> str:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        res = login(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"], check=False)
        last = res.stdout.strip().split("\n")[0].split()[0] if res.stdout.strip() else ""
        if last in states:
            return last
        time.sleep(2)
    raise AssertionError(f"job {job_id} did not reach {states} in {timeout}s (last {last!r})")


@pytest.fixture(scope="session")
def cluster():
    t0 = time.monotonic()
    info = slurm_docker.up(release=RELEASE, timeout=300)
    print(f"\nslurm cluster up in {time.monotonic() - t0:.1f}s: {info.timings_s}")
    yield info
    if os.environ.get("POC_KEEP_CLUSTER") != "1":
        slurm_docker.down()


def test_status_lists_every_container(cluster):
    st = slurm_docker.status()
    for name in ("mariadb", "slurmdbd", "slurmctld", "c1", "c2", "c3", "login"):
        assert st.get(f"poc-slurm-{name}") == "running", st


def test_sinfo_shows_three_idle_nodes(cluster):
    out = login(["sinfo", "-h", "-N", "-o", "%N %T"]).stdout.split("\n")
    states = dict(line.split() for line in out if line.strip())
    assert states == {"c1": "idle", "c2": "idle", "c3": "idle"}


def test_ssh_login_with_key_and_known_hosts(cluster):
    paramiko = pytest.importorskip("paramiko")
    s = json.loads(Path(cluster.ssh_settings_path).read_text())
    assert s["host"] == "127.0.0.1" and s["user"] == "poc"
    assert os.stat(s["key_path"]).st_mode & 0o077 == 0, "private key must be 0600"
    client = paramiko.SSHClient()
    client.load_host_keys(s["known_hosts_path"])
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(s["host"], port=s["port"], username=s["user"], key_filename=s["key_path"],
                   look_for_keys=False, allow_agent=False, timeout=10)
    try:
        _, out, _ = client.exec_command("sinfo --version && id -un")
        text = out.read().decode()
    finally:
        client.close()
    assert re.search(r"slurm(-wlm)? \d+\.\d+", text) and "poc" in text


def test_ssh_rejects_unknown_host_key(cluster, tmp_path):
    paramiko = pytest.importorskip("paramiko")
    s = json.loads(Path(cluster.ssh_settings_path).read_text())
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    with pytest.raises(paramiko.SSHException):
        client.connect(s["host"], port=s["port"], username=s["user"], key_filename=s["key_path"],
                       look_for_keys=False, allow_agent=False, timeout=10)
    client.close()


@pytest.fixture(scope="session")
def allreduce_job(cluster):
    write_shared("/shared/itest/allreduce.py", ALLREDUCE)
    write_shared("/shared/itest/job.sh", JOB, "755")
    job_id = login(["sbatch", "--parsable", "/shared/itest/job.sh"]).stdout.strip().split(";")[0]
    state = wait_job_state(job_id, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
                                    "OUT_OF_MEMORY"})
    out = login(["cat", f"/shared/itest/{job_id}.out"], check=False).stdout
    return job_id, state, out


def test_two_node_torchrun_gloo_allreduce(allreduce_job):
    _job_id, state, out = allreduce_job
    assert state == "COMPLETED", out[-3000:]
    oks = re.findall(r"ALLREDUCE_OK rank=(\d) world=2 host=(c\d)\.poc\.lab value=3.0", out)   # host name: an FQDN
    assert sorted(oks) == [("0", "c1"), ("1", "c2")] or sorted(oks) == [("0", "c2"), ("1", "c1")], out


def test_sacct_records_the_job(allreduce_job):
    job_id, _, _ = allreduce_job
    env = {"SLURM_TIME_FORMAT": "%s"}
    res = login(["sacct", "-D", "-X", "-P", "-j", job_id, "-o",
                 "JobID,JobName,State,ExitCode,NNodes,NodeList,Submit,Eligible,Start,End"],
                env=env)
    record("sacct_D_X_P.txt", res.stdout)
    lines = res.stdout.strip().splitlines()
    assert lines[0].startswith("JobID|JobName|State")
    row = dict(zip(lines[0].split("|"), lines[1].split("|"), strict=True))
    assert row["JobID"] == job_id and row["State"] == "COMPLETED" and row["NNodes"] == "2"
    assert row["NodeList"] in ("c[1-2]", "c1,c2")
    submit, start, end = int(row["Submit"]), int(row["Start"]), int(row["End"])
    assert submit <= start <= end and end - submit < 600
    js = login(["sacct", "--json", "-j", job_id]).stdout
    record("sacct.json", js)
    doc = json.loads(js)
    assert any(str(j.get("job_id")) == job_id for j in doc["jobs"])


def test_squeue_json_and_config(cluster):
    res = login(["squeue", "--json"])
    json.loads(res.stdout)
    cfg = login(["scontrol", "show", "config"]).stdout
    record("scontrol_show_config.txt", cfg)
    assert re.search(r"SchedulerParameters\s*=\s*bf_interval=5,sched_interval=5", cfg)
    assert re.search(r"AuthInfo\s*=\s*cred_expire=10", cfg)
    assert re.search(r"ProctrackType\s*=\s*proctrack/linuxproc", cfg)
    record("sinfo.json", login(["sinfo", "--json"]).stdout)


def test_state_survives_controller_restart(cluster, allreduce_job):
    done_id, _, _ = allreduce_job
    write_shared("/shared/itest/sleep.sh", "#!/bin/bash\nsleep 300\n", "755")
    job_id = login(["sbatch", "--parsable", "-N1", "-w", "c3", "--job-name=poc-itest-sleep",
                    "-o", "/shared/itest/%j.out", "/shared/itest/sleep.sh"]).stdout.strip().split(";")[0]
    try:
        wait_job_state(job_id, {"RUNNING"}, timeout=60)
        sq = login(["squeue", "--json"]).stdout
        record("squeue.json", sq)
        assert any(str(j.get("job_id")) == job_id for j in json.loads(sq)["jobs"])
        record("squeue_running.txt", login(["squeue", "-h", "-o", "%i|%T|%N|%V|%S"],
                                           env={"SLURM_TIME_FORMAT": "%s"}).stdout)

        subprocess.run(["docker", "stop", "-t", "10", slurm_docker.CTLD_CONTAINER], check=True,
                       capture_output=True, timeout=60)
        assert login(["scontrol", "ping"], check=False).stdout.count("DOWN") >= 1
        subprocess.run(["docker", "start", slurm_docker.CTLD_CONTAINER], check=True,
                       capture_output=True, timeout=60)
        deadline = time.monotonic() + 60
        while "UP" not in login(["scontrol", "ping"], check=False).stdout:
            assert time.monotonic() < deadline, "slurmctld did not come back"
            time.sleep(1)

        # The running job and the finished one are still known to the controller (state files)...
        shown = login(["scontrol", "show", "job", job_id]).stdout
        assert "JobState=RUNNING" in shown and "NodeList=c3" in shown, shown
        done = login(["scontrol", "show", "job", done_id], check=False).stdout
        assert "JobState=COMPLETED" in done, done
        # ...and to accounting.
        acct = login(["sacct", "-n", "-X", "-P", "-j", f"{done_id},{job_id}", "-o", "JobID,State"]).stdout
        assert f"{done_id}|COMPLETED" in acct and f"{job_id}|RUNNING" in acct, acct
    finally:
        login(["scancel", job_id], check=False)


def test_requeue_gives_one_sacct_row_per_attempt(cluster):
    write_shared("/shared/itest/sleep.sh", "#!/bin/bash\nsleep 300\n", "755")
    job_id = login(["sbatch", "--parsable", "--requeue", "-N1", "--job-name=poc-itest-requeue",
                    "-o", "/shared/itest/%j.out", "--open-mode=append", "/shared/itest/sleep.sh"]
                   ).stdout.strip().split(";")[0]
    try:
        wait_job_state(job_id, {"RUNNING"}, timeout=60)
        t0 = time.monotonic()
        login(["scontrol", "requeue", job_id])
        time.sleep(3)
        wait_job_state(job_id, {"RUNNING"}, timeout=120)
        print(f"\nrequeue -> running again in {time.monotonic() - t0:.1f}s")
        sq = login(["squeue", "--json", f"--jobs={job_id}"]).stdout
        record("squeue_requeued.json", sq)
        res = login(["sacct", "-D", "-X", "-P", "-j", job_id, "-o",
                     "JobID,JobName,State,ExitCode,NNodes,NodeList,Submit,Eligible,Start,End,Comment"],
                    env={"SLURM_TIME_FORMAT": "%s"})
        record("sacct_D_requeue.txt", res.stdout)
        rows = res.stdout.strip().splitlines()[1:]
        assert [r.split("|")[2] for r in rows] == ["REQUEUED", "RUNNING"], res.stdout
    finally:
        login(["scancel", job_id], check=False)
