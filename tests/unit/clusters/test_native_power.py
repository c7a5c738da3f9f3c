"""The native cluster's power loss (clusters/native_power.py) keeps the lost node's addresses on this
machine: a blackhole route for its pod network is in place before its bridge goes down and removed after
it is back up. The commands are recorded by a runner that answers `ip addr` as pocbr1 did (recorded)."""
from __future__ import annotations

import subprocess

import pytest

from harness.clusters import native_power as npw
from harness.errors import ClusterError

ADDR = "326: pocbr1    inet 10.244.1.1/24 scope global pocbr1\\       valid_lft forever preferred_lft forever\n"


class Ip:
    def __init__(self, addr: str = ADDR, fail: str | None = None):
        self.calls: list[list[str]] = []
        self.addr, self.fail = addr, fail

    def __call__(self, argv, **_):
        self.calls.append(list(argv))
        if self.fail and self.fail in argv:
            return subprocess.CompletedProcess(argv, 2, "", "RTNETLINK answers: Operation not permitted")
        return subprocess.CompletedProcess(argv, 0, self.addr if argv[1:3] == ["-o", "-4"] else "", "")


@pytest.fixture
def node(monkeypatch):
    done = []
    monkeypatch.setattr(npw.native_k8s, "stop_kubelet", lambda n: done.append(("kubelet", n)) or 4242)
    monkeypatch.setattr(npw.host, "kill_cgroup_tree", lambda cg: done.append(("pods", cg)) or [1, 2])
    return done


def test_the_blackhole_is_in_place_before_the_bridge_goes_down(node):
    ip = Ip()
    out = npw.power_off("poc-n1", "pocbr1", runner=ip)
    hole = ["ip", "route", "replace", "blackhole", "10.244.1.0/24", "metric", str(npw.BLACKHOLE_METRIC)]
    assert ip.calls.index(hole) < ip.calls.index(["ip", "link", "set", "pocbr1", "down"])
    assert out["blackholed"] == "10.244.1.0/24" and [k for k, _ in node] == ["kubelet", "pods"]


def test_without_the_blackhole_the_node_is_not_taken_down(node):
    ip = Ip(fail="blackhole")
    with pytest.raises(ClusterError, match=r"blackhole 10\.244\.1\.0/24"):
        npw.power_off("poc-n1", "pocbr1", runner=ip)
    assert ["ip", "link", "set", "pocbr1", "down"] not in ip.calls and node == []
    with pytest.raises(ClusterError, match="no IPv4 network on pocbr1"):
        npw.power_off("poc-n1", "pocbr1", runner=Ip(addr=""))


def test_power_on_removes_the_blackhole_once_the_bridge_is_up(monkeypatch):
    monkeypatch.setattr(npw.native_k8s, "start_kubelet", lambda n: None)
    monkeypatch.setattr(npw.gpu_shape, "apply", lambda *a: None)
    ip = Ip()
    npw.power_on(["poc-n1"], ["pocbr1"], runner=ip)
    up = ip.calls.index(["ip", "link", "set", "pocbr1", "up"])
    assert ip.calls.index(npw.blackhole_argv("del", "10.244.1.0/24")) > up
