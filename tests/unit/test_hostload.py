"""The host's load around a run: read from a /proc tree (here a recorded one), attributed to the harness,
the clusters and everything else, summarised into the run record's host_load."""
from __future__ import annotations

import json

from support.fakes import ScriptedBackend, SimClock

from harness import hostload
from harness.config import from_mapping
from harness.pipeline import campaign
from harness.store import RunRecord, Store


def _proc(root, load, cpu, procs):
    """A /proc tree: loadavg, stat's cpu line, and per pid its stat (comm, ppid, utime, stime) and cgroup."""
    root.mkdir(exist_ok=True)
    (root / "loadavg").write_text(f"{load[0]} {load[1]} {load[2]} 3/480 999\n")
    (root / "stat").write_text("cpu  " + " ".join(str(cpu[k]) for k in
                                                  ("user", "nice", "system", "idle", "iowait", "irq", "softirq",
                                                   "steal")) + " 0 0\ncpu0 1 2 3\n")
    for pid, spec in procs.items():
        comm, ppid, ticks, cgroup, reaped = (*spec, 0)[:5]
        d = root / str(pid)
        d.mkdir(exist_ok=True)
        fields = ["S", str(ppid)] + ["0"] * 9 + [str(ticks), "0", str(reaped), "0"] + ["0"] * 3
        (d / "stat").write_text(f"{pid} ({comm}) " + " ".join(fields) + "\n")
        (d / "cgroup").write_text(cgroup + "\n")
    return root


def _cpu(busy, idle, steal=0, iowait=0):
    return {"user": busy, "nice": 0, "system": 0, "idle": idle, "iowait": iowait, "irq": 0, "softirq": 0,
            "steal": steal}


def test_a_runs_cpu_is_attributed_to_the_harness_the_clusters_and_everything_else(tmp_path):
    host = "0::/"
    first = _proc(tmp_path / "a", (1.0, 1.0, 1.0), _cpu(1000, 1000), {
        100: ("poc", 1, 50, host), 101: ("ssh", 100, 10, host),             # the harness and its child
        200: ("kube-apiserver", 1, 500, host), 300: ("python3", 290, 0, "4:memory:/docker/abc"),   # the lab
        400: ("cc1 (gcc)", 1, 0, host)})                                      # someone else's build
    last = _proc(tmp_path / "b", (6.5, 3.0, 1.5), _cpu(1000 + 1600, 1000 + 200, steal=200), {
        100: ("poc", 1, 150, host), 101: ("ssh", 100, 60, host),
        200: ("kube-apiserver", 1, 800, host), 300: ("python3", 290, 400, "4:memory:/docker/abc"),
        400: ("cc1 (gcc)", 1, 600, host), 500: ("pytest", 1, 100, host)})   # born during the run
    looks = iter([first, last])
    clock = iter([1000.0, 1020.0])
    s = hostload.Sampler(interval_s=3600, read=lambda: hostload.snapshot(next(looks), clock=lambda: next(clock)),
                         container=lambda pid: hostload.in_container(pid, tmp_path / "b"), own_pid=100, cpus=2,
                         ticks_per_s=100).start()
    out = s.stop()
    assert out["before"]["load1"] == 1.0 and out["after"]["load1"] == 6.5
    assert out["during"] == {"load1_median": 3.75, "load1_max": 6.5}
    assert out["cpu"] == {"wall_s": 20.0, "busy_share": 0.8, "steal_share": 0.1, "iowait_share": 0.0}
    # other: the host's 16 busy seconds less the harness's and the clusters' (the 7 s seen as processes among them)
    assert out["groups_cpu_s"] == {"harness": 1.5, "clusters": 7.0, "other": 7.5, "other_seen": 7.0}
    assert out["busiest"][0] == {"name": "cc1 (gcc)", "group": "other", "cpu_s": 6.0, "processes": 1}
    assert {b["name"]: b["group"] for b in out["busiest"]} == {
        "cc1 (gcc)": "other", "python3": "clusters", "kube-apiserver": "clusters", "poc": "harness",
        "pytest": "other", "ssh": "harness"}


def test_the_harness_counts_its_calls_and_other_is_what_the_host_ran_beside(tmp_path):
    """The harness's calls (ssh, kubectl) end between looks: their time is its cutime. An agent's shell runs short
    test processes and an orphan's whole life lands in PID 1's cutime: neither is added to a parent (it would count
    the orphan's time before the run, and twice), so 'other' is the rest of the host's busy time, never above it."""
    host = "0::/"
    first = _proc(tmp_path / "a", (1.0, 1.0, 1.0), _cpu(0, 1000), {
        1: ("init", 0, 0, host, 0), 100: ("poc", 1, 0, host, 0), 500: ("bash", 1, 10, host, 40),
        501: ("pytest", 500, 30, host)})
    last = _proc(tmp_path / "b", (1.0, 1.0, 1.0), _cpu(900, 1100), {
        1: ("init", 0, 0, host, 5000),                       # an orphan of 50 s, most of it before the run
        100: ("poc", 1, 20, host, 130), 500: ("bash", 1, 20, host, 40 + 230 + 400)})
    looks, clock = iter([first, last]), iter([0.0, 10.0])
    s = hostload.Sampler(interval_s=3600, read=lambda: hostload.snapshot(next(looks), clock=lambda: next(clock)),
                         container=lambda pid: False, own_pid=100, cpus=2, ticks_per_s=100).start()
    out = s.stop()
    # the harness: its own 0.2 s and its calls' 1.3 s; other: the host's 9 s less that
    assert out["groups_cpu_s"] == {"harness": 1.5, "clusters": 0.0, "other": 7.5, "other_seen": 0.1}
    assert sum(v for k, v in out["groups_cpu_s"].items() if k != "other_seen") <= 9.0


def test_without_a_proc_tree_the_record_says_why():
    out = hostload.Sampler(read=lambda: hostload.snapshot(__import__("pathlib").Path("/nonexistent"))).start().stop()
    assert out["version"] == hostload.VERSION and "FileNotFoundError" in out["unavailable"]


def test_the_host_is_looked_at_while_the_run_goes_on(tmp_path):
    root = _proc(tmp_path / "p", (2.0, 1.0, 1.0), _cpu(10, 10), {})
    s = hostload.Sampler(interval_s=0.01, read=lambda: hostload.snapshot(root), cpus=2).start()
    __import__("time").sleep(0.2)
    out = s.stop()
    assert out["samples"] >= 5 and out["during"]["load1_max"] == 2.0


class _Recorded:
    """A sampler that returns a fixed summary: what the pipeline stores is what the sampler gave."""
    started = stopped = 0

    def start(self):
        type(self).started += 1
        return self

    def stop(self):
        type(self).stopped += 1
        return {"version": 1, "during": {"load1_max": 7.5}}

    def close(self):
        pass


def test_every_executed_run_record_carries_the_hosts_load(tmp_path):
    cfg = from_mapping({"platforms": ["local"], "repetitions": 2, "faults": [], "workload": {"steps": 2}})
    clock = SimClock()
    recs = campaign(cfg, ["local"], Store(tmp_path, cfg.campaign), lambda p: ScriptedBackend(clock=clock),
                    resume=False, poll_s=0.01, clock=clock, sleep=clock.sleep, host_sampler=_Recorded)
    assert [r["host_load"] for r in recs] == [{"version": 1, "during": {"load1_max": 7.5}}] * 2
    assert _Recorded.started == _Recorded.stopped == 2
    lines = (tmp_path / cfg.campaign / "runs.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["host_load"]["during"]["load1_max"] == 7.5


def test_a_record_from_before_host_load_reads_and_writes_back_as_it_was():
    line = {"schema": 1, "run_id": "r", "campaign": "c", "platform": "slurm", "scenario": "clean",
            "config_hash": "h", "started_at": 1.0, "status": "ok", "stages": []}
    rec = RunRecord.from_json(line)
    assert rec.host_load is None and rec.to_json() == line
    rec.host_load = {"version": 1}
    assert rec.to_json()["host_load"] == {"version": 1}


def test_a_process_is_placed_when_first_seen_alive_not_after_it_ended(tmp_path):
    """A pod's rank ends before the run's last look, and its cgroup file with it: placed when first seen, it
    counts for the clusters, not for 'other'."""
    host, pod = "0::/", "4:cpu:/poc-native-k8s/poc-n1/kubepods/besteffort/pod1/abc"
    first = _proc(tmp_path / "a", (1.0, 1.0, 1.0), _cpu(0, 1000), {
        100: ("poc", 1, 0, host), 300: ("pt_elastic", 290, 0, pod)})
    mid = _proc(tmp_path / "m", (1.0, 1.0, 1.0), _cpu(300, 1050), {
        100: ("poc", 1, 0, host), 300: ("pt_elastic", 290, 250, pod)})
    last = _proc(tmp_path / "b", (1.0, 1.0, 1.0), _cpu(400, 1100), {100: ("poc", 1, 0, host)})
    live = {"tree": first}
    looks = iter([first, mid, last])

    def read():
        live["tree"] = next(looks)
        return hostload.snapshot(live["tree"])
    s = hostload.Sampler(interval_s=3600, read=read, container=lambda pid: hostload.in_container(pid, live["tree"]),
                         own_pid=100, cpus=2, ticks_per_s=100).start()
    s._take(s.read())   # the look in the middle, as the sampling thread takes it
    out = s.stop()
    assert out["groups_cpu_s"]["clusters"] == 2.5
    assert {b["name"]: b["group"] for b in out["busiest"]} == {"pt_elastic": "clusters"}
