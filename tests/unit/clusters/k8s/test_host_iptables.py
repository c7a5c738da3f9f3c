"""The native cluster's FORWARD rule for pod traffic (clusters/k8s/host.py), on a simulated iptables that
keeps the FORWARD chain's rules in order as the real one does for -A, -I, -D, -C and -S."""
from __future__ import annotations

import subprocess

from harness.clusters.k8s.host import ensure_forward_accept, ensure_local_route

DOCKER = ["-A FORWARD -j DOCKER-USER", "-A FORWARD -j DOCKER-ISOLATION-STAGE-1", "-A FORWARD -o docker0 -j DOCKER"]


class Iptables:
    def __init__(self, forward: list[str]):
        self.forward = list(forward)
        self.chains: set[str] = set()

    def __call__(self, argv, check=True, **_):
        a = argv[2:]          # after "iptables -w"
        out, rc = "", 0
        if a[0] == "-S":
            out = "-P FORWARD DROP\n" + "".join(r + "\n" for r in self.forward)
        elif a[0] in ("-N", "-F") or (a[0] == "-A" and a[1] != "FORWARD"):
            self.chains.add(a[1])
        elif a[0] == "-L":
            rc = 0 if a[-1] in self.chains else 1
        elif a[1] == "FORWARD":
            rule = "-A FORWARD " + " ".join(a[2:] if a[0] != "-I" else a[3:])
            if a[0] == "-A":
                self.forward.append(rule)
            elif a[0] == "-I":
                self.forward.insert(int(a[2]) - 1, rule)
            elif a[0] == "-D":
                self.forward.remove(rule)
            elif a[0] == "-C":
                rc = 0 if rule in self.forward else 1
        return subprocess.CompletedProcess(argv, rc, out.encode(), b"")


def test_the_pod_traffic_jump_comes_after_docker_user():
    ipt = Iptables(DOCKER)
    ensure_forward_accept("POC-NATIVE-K8S", "10.200.0.0/16", run=ipt)
    assert ipt.forward == [*DOCKER, "-A FORWARD -j POC-NATIVE-K8S"]
    ensure_forward_accept("POC-NATIVE-K8S", "10.200.0.0/16", run=ipt)          # again: nothing moves
    assert ipt.forward == [*DOCKER, "-A FORWARD -j POC-NATIVE-K8S"]


def test_a_jump_at_the_top_moves_after_docker_user_without_a_gap():
    ipt = Iptables(["-A FORWARD -j POC-NATIVE-K8S", *DOCKER])        # where earlier versions put it
    seen = []
    real = ipt.__call__

    def watching(argv, **kw):
        res = real(argv, **kw)
        seen.append(sum(r == "-A FORWARD -j POC-NATIVE-K8S" for r in ipt.forward))
        return res
    ensure_forward_accept("POC-NATIVE-K8S", "10.200.0.0/16", run=watching)
    assert ipt.forward == [*DOCKER, "-A FORWARD -j POC-NATIVE-K8S"]
    assert min(seen) >= 1            # some jump to the chain at every moment


def test_the_service_range_is_routed_to_a_local_device():
    calls = []
    ensure_local_route("10.96.0.0/16", "pocdns0", run=lambda argv, **_: calls.append(argv))
    assert calls == [["ip", "route", "replace", "10.96.0.0/16", "dev", "pocdns0"]]   # replace: idempotent
