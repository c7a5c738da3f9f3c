"""The emulated Slurm cluster's rendered configuration (pure) and its driver's argv, with a recording runner."""
from __future__ import annotations

import subprocess

import pytest

from harness.clusters.slurm import emulated
from harness.clusters.slurm.emulated import EmulatedShape
from harness.errors import ClusterError, ConfigError


def _lines(text: str, prefix: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(prefix)]


def test_node_names_sort_as_numbers_and_widen_past_9999():
    assert EmulatedShape(nodes=64).node(7) == "e0007"
    assert EmulatedShape(nodes=12_000, base_port=20_000).node(7) == "e00007"
    assert emulated.hostlist("e", 1, 1, 4) == "e0001"
    assert emulated.hostlist("r", 2, 9, 1) == "r[2-9]"


def test_slurm_conf_one_node_line_with_a_port_each_and_the_real_scheduler():
    text = emulated.render_slurm_conf(EmulatedShape(nodes=64, gpus_per_node=8))
    assert _lines(text, "NodeName=") == [
        "NodeName=e[0001-0064] NodeHostname=emu NodeAddr=127.0.0.1 Port=[17001-17064] "
        "CPUs=64 RealMemory=512000 Gres=gpu:8 State=UNKNOWN"]
    assert _lines(text, "PartitionName=") == [
        "PartitionName=emu Nodes=e[0001-0064] Default=YES MaxTime=INFINITE State=UP"]
    for setting in ("SelectType=select/cons_tres", "SchedulerType=sched/backfill",
                    "PriorityType=priority/multifactor", "TopologyPlugin=topology/tree",
                    "SlurmdSpoolDir=/var/spool/slurmd/%n", "SlurmdPidFile=/run/slurmd-%n.pid",
                    "SlurmdLogFile=/var/log/slurm/slurmd-%n.log", "SlurmdParameters=config_overrides"):
        assert setting in text.splitlines()


def test_slurm_conf_enforces_slurmdbd_associations_and_weighs_fair_share_and_age():
    lines = emulated.render_slurm_conf(EmulatedShape(nodes=4)).splitlines()
    for setting in ("AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=localhost",
                    "AccountingStorageEnforce=associations,limits,qos", "AccountingStorageTRES=gres/gpu",
                    "PriorityWeightFairshare=10000", "PriorityWeightAge=1000",
                    "PriorityDecayHalfLife=10080", "PriorityMaxAge=10080", "PriorityCalcPeriod=1",
                    # the replay reads the job completion log, slurmdbd or not
                    "JobCompType=jobcomp/filetxt"):
        assert setting in lines


def test_a_compressed_replay_compresses_the_half_life_in_whole_minutes():
    shape = EmulatedShape(nodes=4, priority_decay_half_life_min=60, priority_max_age_min=30,
                          priority_calc_period_min=2, priority_weight_fairshare=500, priority_weight_age=0)
    lines = emulated.render_slurm_conf(shape).splitlines()
    for setting in ("PriorityDecayHalfLife=60", "PriorityMaxAge=30", "PriorityCalcPeriod=2",
                    "PriorityWeightFairshare=500", "PriorityWeightAge=0"):
        assert setting in lines
    assert emulated.config_id(shape, "img") != emulated.config_id(EmulatedShape(nodes=4), "img")


def test_slurmdbd_conf_is_local_and_holds_no_password():
    text = emulated.render_slurmdbd_conf()
    lines = text.splitlines()
    for setting in ("DbdHost=localhost", "SlurmUser=slurm", "StorageType=accounting_storage/mysql",
                    "StorageHost=localhost", "StorageUser=slurm", "StorageLoc=slurm_acct_db"):
        assert setting in lines
    assert "StoragePass" not in text     # the entrypoint makes one per start, inside the container


def test_slurm_conf_without_gpus_has_no_gres_on_nodes():
    text = emulated.render_slurm_conf(EmulatedShape(nodes=1, gpus_per_node=0))
    assert _lines(text, "NodeName=") == [
        "NodeName=e0001 NodeHostname=emu NodeAddr=127.0.0.1 Port=17001 CPUs=64 RealMemory=512000 State=UNKNOWN"]


def test_gres_conf_points_every_node_at_the_same_fake_devices():
    assert emulated.render_gres_conf(EmulatedShape(nodes=256, gpus_per_node=8)) == (
        "AutoDetect=off\nNodeName=e[0001-0256] Name=gpu File=/dev/fakegpu/nvidia[0-7]\n")
    one = emulated.render_gres_conf(EmulatedShape(nodes=2, gpus_per_node=1))
    assert one.endswith("File=/dev/fakegpu/nvidia0\n")
    assert emulated.render_gres_conf(EmulatedShape(nodes=2, gpus_per_node=0)) == "AutoDetect=off\n"


def test_topology_racks_blocks_and_a_root_with_a_short_last_rack():
    text = emulated.render_topology_conf(EmulatedShape(nodes=40, rack_size=16, racks_per_block=2))
    assert text.splitlines() == [
        "SwitchName=r1 Nodes=e[0001-0016]",
        "SwitchName=r2 Nodes=e[0017-0032]",
        "SwitchName=r3 Nodes=e[0033-0040]",
        "SwitchName=b1 Switches=r[1-2]",
        "SwitchName=b2 Switches=r3",
        "SwitchName=top Switches=b[1-2]",
    ]


def test_topology_one_block_has_no_root():
    text = emulated.render_topology_conf(EmulatedShape(nodes=32, rack_size=16, racks_per_block=4))
    assert text.splitlines()[-1] == "SwitchName=b1 Switches=r[1-2]"


def test_topology_covers_every_node_once_at_1000():
    shape = EmulatedShape(nodes=1000, rack_size=16)
    leaves = _lines(emulated.render_topology_conf(shape), "SwitchName=r")
    assert len(leaves) == shape.racks == 63
    assert leaves[0] == "SwitchName=r01 Nodes=e[0001-0016]"
    assert leaves[-1] == "SwitchName=r63 Nodes=e[0993-1000]"


@pytest.mark.parametrize("kwargs", [{"nodes": 0}, {"nodes": 4, "gpus_per_node": -1},
                                    {"nodes": 4, "rack_size": 0}, {"nodes": 60_000},
                                    {"nodes": 4, "priority_decay_half_life_min": 0},
                                    {"nodes": 4, "priority_calc_period_min": 0},
                                    {"nodes": 4, "priority_weight_fairshare": -1}])
def test_shape_refuses_impossible_values_with_a_tip(kwargs):
    with pytest.raises(ConfigError) as err:
        EmulatedShape(**kwargs)
    assert err.value.message.startswith("emulated Slurm: ") and err.value.tip


def test_write_config_writes_the_four_files_slurmdbd_conf_private(tmp_path):
    emulated.write_config(EmulatedShape(nodes=4, gpus_per_node=2), tmp_path / "etc")
    names = sorted(p.relative_to(tmp_path / "etc").as_posix() for p in (tmp_path / "etc").rglob("*"))
    assert names == ["gres.conf", "slurm.conf", "slurmdbd.conf", "topology.conf"]
    assert (tmp_path / "etc" / "slurmdbd.conf").stat().st_mode & 0o777 == 0o600


def test_parsers():
    assert emulated.parse_node_states("e0001 idle\ne0002 idle\ne0003 allocated\n\n") == {"idle": 2, "allocated": 1}
    assert emulated.parse_mem("1.5GiB / 23.4GiB") == 1536
    assert emulated.parse_mem("812KiB / 1GiB") == pytest.approx(0.79, abs=0.01)


class Recorder:
    def __init__(self, answers: dict[str, str]):
        self.calls: list[list[str]] = []
        self.answers = answers

    def __call__(self, argv, **_kw):
        self.calls.append(list(argv))
        key = next((k for k in self.answers if k in argv), None)
        rc = 0 if key else 1
        return subprocess.CompletedProcess(argv, rc, self.answers.get(key, ""), "")


def test_up_starts_one_container_on_its_own_network_and_waits_for_idle(tmp_path):
    rec = Recorder({"run": "cid", "create": "", "rm": "", "sinfo": "e0001 idle\ne0002 idle\n"})
    cluster = emulated.EmulatedSlurm(EmulatedShape(nodes=2), tmp_path / "etc", "img:tag", runner=rec)
    started = cluster.up(idle_timeout=5)
    assert started["reused"] is False and started["idle_s"] >= 0
    run = next(c for c in rec.calls if c[:2] == ["docker", "run"])
    assert run[run.index("--network") + 1] == "poc-slurm-emulated"
    assert run[-2:] == ["img:tag", "e[0001-0002]"]
    # mounted beside /etc/slurm: the entrypoint copies the files there, slurmdbd.conf as slurm's, mode 600
    assert f"{tmp_path / 'etc'}:/etc/slurm-poc:ro" in run
    config_id = emulated.config_id(EmulatedShape(nodes=2), "img:tag")
    assert f"{emulated.CONFIG_LABEL}={config_id}" in run
    assert "POC_FAKE_GPUS=8" in run    # the entrypoint makes the devices gres.conf names
    assert (tmp_path / "etc" / "slurm.conf").read_text() == emulated.render_slurm_conf(EmulatedShape(nodes=2))
    assert not any("poc-slurm-slurmctld" in " ".join(c) for c in rec.calls)
    assert cluster.down() == ["container poc-slurm-emulated", "network poc-slurm-emulated"]
    assert rec.calls[-2:] == [["docker", "rm", "-f", "poc-slurm-emulated"],
                              ["docker", "network", "rm", "poc-slurm-emulated"]]


def test_up_keeps_a_container_started_with_the_same_config(tmp_path):
    shape = EmulatedShape(nodes=2)
    rec = Recorder({"inspect": emulated.config_id(shape, "img:tag") + "\n", "sinfo": "e0001 idle\ne0002 idle\n"})
    started = emulated.EmulatedSlurm(shape, tmp_path / "etc", "img:tag", runner=rec).up(idle_timeout=5)
    assert started["reused"] is True
    assert not any(c[:2] == ["docker", "run"] for c in rec.calls)


def test_up_refuses_to_replace_a_container_of_another_shape(tmp_path):
    rec = Recorder({"inspect": emulated.config_id(EmulatedShape(nodes=64), "img:tag") + "\n"})
    with pytest.raises(ClusterError) as err:
        emulated.EmulatedSlurm(EmulatedShape(nodes=2), tmp_path / "etc", "img:tag", runner=rec).up(idle_timeout=5)
    assert "poc cluster down --slurm --emulated" in err.value.tip
    assert not any(c[:2] in (["docker", "run"], ["docker", "rm"]) for c in rec.calls)


def test_wait_idle_gives_up_with_the_states_and_the_controller_log(tmp_path):
    rec = Recorder({"sinfo": "e0001 idle\ne0002 down\n", "tail": "error: something\n"})
    cluster = emulated.EmulatedSlurm(EmulatedShape(nodes=2), tmp_path / "etc", "img:tag", runner=rec)
    with pytest.raises(ClusterError) as err:
        cluster.wait_idle(timeout=0.01)
    assert "{'idle': 1, 'down': 1}" in err.value.message and "error: something" in err.value.message


def test_wait_idle_fails_at_once_when_the_container_stopped(tmp_path):
    rec = Recorder({"logs": "slurmd: error: Error binding slurm stream socket: Address already in use\n"})
    cluster = emulated.EmulatedSlurm(EmulatedShape(nodes=2), tmp_path / "etc", "img:tag", runner=rec)
    with pytest.raises(ClusterError) as err:
        cluster.wait_idle(timeout=60)
    assert "stopped before its nodes were idle" in err.value.message and "Address already in use" in err.value.message
    assert "docker cp poc-slurm-emulated:/var/log/slurm" in err.value.tip


def test_memory_sums_rss_and_pss_per_daemon(tmp_path):
    ps = "poc-emulated 3504 661\nslurmd 6000 1500\nslurmd 6000 1572\nslurmctld 8544 8544\nsleep 2028 239\n"
    rec = Recorder({"sh": ps, "stats": "19.6MiB / 23.5GiB\n"})
    mem = emulated.EmulatedSlurm(EmulatedShape(nodes=2), tmp_path / "etc", "img:tag", runner=rec).memory()
    assert mem["slurmd_count"] == 2 and mem["slurmd_pss_mib"] == 3.0 and mem["slurmd_pss_mib_each"] == 1.5
    assert mem["slurmctld_rss_mib"] == 8.3 and mem["slurmstepd_count"] == 0
    assert mem["container_mib"] == 19.6
