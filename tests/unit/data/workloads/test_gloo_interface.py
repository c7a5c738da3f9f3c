"""Which interface gloo binds (ddp_train.py: default_gloo_ifname), where the host name maps to 127.0.1.1 (Ubuntu's
and DGX OS's /etc/hosts, inherited by enroot containers and hostNetwork pods): gloo would bind loopback and send
its peers to themselves. GLOO_SOCKET_IFNAME defaults from NCCL_SOCKET_IFNAME (NCCL's syntax), else, where the host
name resolves to loopback, to the default route's interface. On the lab's Slurm cluster, whose nodes map their
host names to 127.0.1.1, tests/integration/test_calibration.py runs the whole job with it.
"""
from __future__ import annotations

import importlib.util

import pytest
from support.paths import ROOT

WORKLOADS = ROOT / "harness" / "data" / "workloads"
_spec = importlib.util.spec_from_file_location("ddp_train_gloo", WORKLOADS / "ddp_train.py")
w = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(w)

NAMES = ["lo", "eth0", "eth1", "ib0", "ib1", "docker0", "bond0"]


def has_ipv4(name: str) -> bool:
    return name != "eth1"      # eth1 is down: no address


@pytest.mark.parametrize("spec, want", [
    ("ib", ["ib0", "ib1"]), ("=ib1", ["ib1"]), ("eth0,bond", ["eth0", "bond0"]),
    ("^docker,lo", ["eth0", "eth1", "ib0", "ib1", "bond0"]), ("^=eth0", ["eth1", "ib0", "ib1", "docker0", "bond0"]),
    ("=lo", ["lo"]), ("l", [])])
def test_nccl_socket_ifname_selects_as_nccl_reads_it(spec, want):
    assert w.nccl_ifname_match(spec, NAMES) == want


@pytest.mark.parametrize("env, loopback, route, want", [
    ({"GLOO_SOCKET_IFNAME": "eth7"}, True, "eth0", ("eth7", "GLOO_SOCKET_IFNAME")),
    ({"NCCL_SOCKET_IFNAME": "eth"}, False, "eth0", ("eth0", "from NCCL_SOCKET_IFNAME=eth")),
    ({"NCCL_SOCKET_IFNAME": "=eth1,ib0"}, False, None, ("ib0", "from NCCL_SOCKET_IFNAME==eth1,ib0")),
    ({}, True, "bond0", ("bond0", "the host name resolves to a loopback address: the default route's interface")),
    ({}, False, "bond0", (None, "gloo default")),
    ({}, True, None, (None, "gloo default")),
])
def test_gloo_gets_an_interface_where_its_own_choice_would_be_loopback(env, loopback, route, want):
    assert w.gloo_ifname(env, NAMES, has_ipv4, loopback, route) == want


def test_a_socket_ifname_naming_nothing_here_says_so():
    name, why = w.gloo_ifname({"NCCL_SOCKET_IFNAME": "=ib9"}, NAMES, has_ipv4, True, "eth0")
    assert name is None and why.startswith("NCCL_SOCKET_IFNAME==ib9 selects no interface with an IPv4 address here")


def test_the_default_route_is_read_from_the_kernels_table(tmp_path):
    table = tmp_path / "route"
    table.write_text("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
                     "eth0\t0013A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
                     "bond0\t00000000\t0113A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n")
    assert w.default_route_ifname(str(table)) == "bond0"
    assert w.default_route_ifname(str(tmp_path / "missing")) is None


def test_the_default_is_set_in_the_environment_and_said(monkeypatch):
    env = {"NCCL_SOCKET_IFNAME": "=lo"}
    got = w.default_gloo_ifname(env)
    assert got == {"name": "lo", "why": "from NCCL_SOCKET_IFNAME==lo"} and env["GLOO_SOCKET_IFNAME"] == "lo"
    kept = {"GLOO_SOCKET_IFNAME": "eth9"}
    assert w.default_gloo_ifname(kept)["name"] == "eth9" and kept == {"GLOO_SOCKET_IFNAME": "eth9"}


def test_every_event_names_the_node_as_its_scheduler_does(monkeypatch, tmp_path, capsys):
    """A fault aimed at a rank's node takes Slurm's NodeName (srun --nodelist), which need not be the host name."""
    monkeypatch.setenv("SLURMD_NODENAME", "c2")
    ev = w.Events("r", None)
    ev.emit("step", step=1)
    line = capsys.readouterr().out.strip()
    assert '"node":"c2"' in line and f'"host":"{ev.host}"' in line
    monkeypatch.delenv("SLURMD_NODENAME")
    monkeypatch.setenv("POC_NODE_NAME", "worker-7")
    assert w.Events("r", None).node == "worker-7"
    monkeypatch.delenv("POC_NODE_NAME")
    assert w.Events("r", None).node is None
