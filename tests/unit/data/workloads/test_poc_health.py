"""The health gate's facts and rules (workloads/poc_health.py), on outputs in the tools' own layouts: `nvidia-smi -q`
(drivers 535-570: "Clocks Event Reasons", "GPU Power Readings", "Remapped Rows"), `nvidia-smi nvlink -s`,
`nvidia-smi topo -m` (a DGX H100's 8 GPUs and 10 NICs), `ibstat`, `dcgmi diag -r 1` and the kernel's XID lines,
written from the tools' documented formats (tests/fixtures/calibration/health/). No GPU here: the rules are what a
GPU node's gate decides from these.
"""
from __future__ import annotations

import importlib.util

import pytest
from support.paths import FIXTURES, ROOT

HEALTH = FIXTURES / "calibration" / "health"
_spec = importlib.util.spec_from_file_location("poc_health_shipped",
                                               ROOT / "harness" / "data" / "workloads" / "poc_health.py")
h = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(h)


def read(name: str) -> str:
    return (HEALTH / name).read_text()


def test_nvidia_smi_q_is_read_gpu_by_gpu_in_its_own_words():
    gpus = [h.gpu_health(g) for g in h.parse_smi_q(read("nvidia-smi-q-h100.txt"))]
    assert [g["bus"] for g in gpus] == ["00000000:18:00.0", "00000000:2A:00.0"]
    ok, sick = gpus
    assert ok["name"] == "NVIDIA H100 80GB HBM3" and ok["mig"] == "Disabled" and ok["compute_mode"] == "Default"
    assert ok["reasons_active"] == [] and ok["power"] == {"limit_w": 700.0, "default_w": 700.0, "max_w": 700.0}
    assert ok["ecc_volatile_uncorrected"] == 0 and ok["remap_pending"] == "No" and ok["max_sm_clock_mhz"] == 1980
    # "Idle : Active" is not a slowdown; the nested HW Thermal Slowdown is read under its section
    assert sick["reasons_active"] == ["HW Slowdown", "HW Thermal Slowdown"]
    assert sick["power"]["limit_w"] == 500 and sick["app_clock_mhz"] == 1410 and sick["ecc_volatile_uncorrected"] == 2
    assert sick["remap_pending"] == "Yes" and sick["remap_failure"] == "No"


def test_a_sick_gpu_is_refused_for_every_reason_it_has():
    gpus = [h.gpu_health(g) for g in h.parse_smi_q(read("nvidia-smi-q-h100.txt"))]
    got = h.gpu_problems(gpus, 0.9)
    assert got == ["GPU 1 (00000000:2A:00.0) is slowed down now: HW Slowdown, HW Thermal Slowdown active",
                   "GPU 1 (00000000:2A:00.0) power limit 500 W is below 0.9 of its default 700 W",
                   "GPU 1 (00000000:2A:00.0) application clocks are set to 1410 MHz, below the default 1980 MHz",
                   "GPU 1 (00000000:2A:00.0) has 2 uncorrected (volatile) ECC errors",
                   "GPU 1 (00000000:2A:00.0) has a row remapping pending: it needs a GPU reset before use"]
    assert h.gpu_problems(gpus[:1], 0.9) == []
    assert h.gpu_problems([{**gpus[0], "mig": "Enabled", "remap_failure": "Yes", "compute_mode": "Prohibited"}],
                          0.9) == ["GPU 0 (00000000:18:00.0) has MIG enabled: the job would get a slice of it",
                                   "GPU 0 (00000000:18:00.0) compute mode is Prohibited",
                                   "GPU 0 (00000000:18:00.0) had a row remapping failure: the GPU needs service"]


def test_an_older_drivers_layout_is_read_alike():
    """Drivers before 535: "Clocks Throttle Reasons" and "Power Readings" with "Power Limit"."""
    text = (read("nvidia-smi-q-h100-healthy.txt").replace("Clocks Event Reasons", "Clocks Throttle Reasons")
            .replace("GPU Power Readings", "Power Readings").replace("Current Power Limit", "Power Limit")
            .replace("        HW Slowdown                       : Not Active",
                     "        HW Slowdown                       : Active"))
    (g,) = [h.gpu_health(x) for x in h.parse_smi_q(text)]
    assert g["reasons_active"] == ["HW Slowdown"] and g["power"]["limit_w"] == 700


def test_a_gpu_with_links_down_is_named():
    status = h.parse_nvlink_status(read("nvlink-s-h100.txt"))
    assert [s["gpu"] for s in status] == [0, 1] and len(status[0]["links"]) == 18
    assert status[1]["links"][3] is None and status[1]["links"][4] == pytest.approx(26.562)
    assert h.nvlink_problems(status) == ["GPU 1 has 16 of 18 NVLinks active"]
    assert h.nvlink_problems(status[:1]) == [] and h.nvlink_problems([]) == []


def test_topology_gives_each_gpus_cpus_numa_node_and_nics():
    topo = h.parse_topo(read("topo-m-h100.txt"))
    assert topo["gpus"][0] == {"cpus": "0-55,112-167", "numa": "0", "near_nics": ["mlx5_0"]}
    assert topo["gpus"][7] == {"cpus": "56-111,168-223", "numa": "1", "near_nics": ["mlx5_7"]}
    assert topo["nics"]["NIC9"] == "mlx5_9" and len(topo["gpus"]) == 8


def test_a_rank_outside_its_gpus_cpus_is_warned_of():
    topo = h.parse_topo(read("topo-m-h100.txt"))
    assert h.locality_warnings(topo, {0: "0-13", 4: "60-73"}) == []
    assert h.locality_warnings(topo, {4: "0-13"}) == [
        "local rank 4 runs on CPUs 0-13, 14 of them outside GPU 4's affinity 56-111,168-223"]


def test_hca_ports_down_slow_or_missing_are_named():
    ports = h.parse_ibstat(read("ibstat-3hca.txt"))
    assert [(p["ca"], p["port"], p["state"], p["rate_gbps"]) for p in ports] == [
        ("mlx5_0", 1, "Active", 400), ("mlx5_1", 1, "Down", 10), ("mlx5_2", 1, "Active", 200)]
    assert h.ib_problems(ports, "=mlx5_0,mlx5_2", 400) == [
        "mlx5_2 port 1 runs at 200 Gb/s, below the 400 Gb/s asked for"]
    assert h.ib_problems(ports, "=mlx5_0,mlx5_7", 0) == [
        "HCA mlx5_7 named in NCCL_IB_HCA is not on this node (ibstat: mlx5_0, mlx5_1, mlx5_2)"]
    # unset: every HCA is NCCL's, the down one included; an exclusion leaves it out
    assert h.ib_problems(ports, None, 0) == ["mlx5_1 port 1 is Down (Polling), not Active"]
    assert h.ib_problems(ports, "^=mlx5_1", 0) == []


@pytest.mark.parametrize("spec, want", [
    (None, ["mlx5_0", "mlx5_1", "mlx5_10"]), ("mlx5_1", ["mlx5_1", "mlx5_10"]), ("=mlx5_1", ["mlx5_1"]),
    ("=mlx5_0:1,mlx5_10:1", ["mlx5_0", "mlx5_10"]), ("^mlx5_1", ["mlx5_0"]), ("^=mlx5_1", ["mlx5_0", "mlx5_10"])])
def test_nccl_ib_hca_selects_as_nccl_reads_it(spec, want):
    assert h.selected_hcas(spec, ["mlx5_0", "mlx5_1", "mlx5_10"]) == want


def test_dcgm_diag_failures_refuse_and_passes_do_not():
    failed = h.parse_dcgmi_diag(read("dcgmi-diag-r1-fail.txt"))
    assert {"test": "Page Retirement/Row Remap", "result": "Fail"} in failed
    assert h.dcgm_problems(failed, 226) == ["dcgmi diag failed: Page Retirement/Row Remap (Fail)"]
    passed = h.parse_dcgmi_diag(read("dcgmi-diag-r1-pass.txt"))
    assert {"test": "GPU Memory", "result": "Pass - All"} in passed and h.dcgm_problems(passed, 0) == []
    assert h.dcgm_problems([], 1) == ["dcgmi diag could not run (exit 1)"]


def test_fatal_xids_refuse_an_applications_do_not():
    xids = h.parse_xids(read("dmesg-xid.txt"))
    assert xids == [{"pci": "0000:2a:00", "xid": 13}, {"pci": "0000:2a:00", "xid": 79}]
    assert h.xid_problems(xids) == ["Xid 79 on the GPU at 0000:2a:00 (GPU has fallen off the bus) since boot"]


def test_gpudirect_readiness_from_the_kernels_modules():
    mods = "nvidia_peermem 16384 0 - Live 0x0\nnvidia 54591488 7 nvidia_peermem, Live 0x0\nib_core 9 - Live\n"
    assert h.gdr_facts(mods, "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07")["peermem"] is True
    none = h.gdr_facts("nvidia 1 0 - Live\n", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07")
    assert none["peermem"] is False and none["dma_buf"] is False and none["open_driver"] is False


def fake_run(outputs: dict[str, tuple[int | None, str]]):
    def run(argv):
        rc, out = outputs.get(" ".join(argv[:2]), (None, ""))
        return {"argv": argv, "rc": rc, "out": out}
    return run


def test_a_gpu_node_gathered_and_judged_end_to_end():
    run = fake_run({"nvidia-smi -q": (0, read("nvidia-smi-q-h100.txt")),
                    "nvidia-smi nvlink": (0, read("nvlink-s-h100.txt")),
                    "nvidia-smi topo": (0, read("topo-m-h100.txt")), "ibstat": (0, read("ibstat-3hca.txt")),
                    "dcgmi diag": (226, read("dcgmi-diag-r1-fail.txt")),
                    "dmesg": (1, "dmesg: read kernel buffer failed: Operation not permitted")})
    facts = h.gather(run, 2, False, dcgm_level=1)
    assert facts["xids"] is None and facts["tools"]["dmesg"]["rc"] == 1      # not readable: a fact, no refusal
    got = h.node_problems(facts, {"gpus_per_node": 2, "min_power_ratio": 0.9, "nccl_ib_hca": "=mlx5_0,mlx5_1",
                                  "min_ib_rate_gbps": 400, "require_gdr": True})
    assert "GPU 1 has 16 of 18 NVLinks active" in got and "mlx5_1 port 1 is Down (Polling), not Active" in got
    assert "dcgmi diag failed: Page Retirement/Row Remap (Fail)" in got
    assert any(p.startswith("GPUDirect RDMA is not ready") for p in got)
    assert any("row remapping pending" in p for p in got)
    assert h.node_problems(facts, {"gpus_per_node": 4})[0] == "2 of 4 GPUs visible to nvidia-smi"


def test_no_nvidia_smi_on_a_gpu_node_refuses_it_and_a_cpu_node_needs_none():
    facts = h.gather(fake_run({}), 8, False)
    assert h.node_problems(facts, {"gpus_per_node": 8})[0] == "nvidia-smi is not on the PATH in the job's image"
    cpu = h.gather(fake_run({}), 0, False)
    assert "gpus" not in cpu and cpu["ib_ports"] is None and h.node_problems(cpu, {"gpus_per_node": 0}) == []
