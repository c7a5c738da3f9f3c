"""gloo's interface defaulted from NCCL_SOCKET_IFNAME: only where the value names one interface, never over
the user's own GLOO_SOCKET_IFNAME (harness/render/gloo_ifname.py)."""
from __future__ import annotations

import pytest

from harness.render.gloo_ifname import gloo_ifname_default, with_gloo_default


@pytest.mark.parametrize("env, want", [
    ({"NCCL_SOCKET_IFNAME": "ib0"}, "ib0"),
    ({"NCCL_SOCKET_IFNAME": "enp65s0f0"}, "enp65s0f0"),
    ({"NCCL_SOCKET_IFNAME": "=bond0"}, "bond0"),
    ({"NCCL_SOCKET_IFNAME": "=ib"}, "ib"),                       # exact in NCCL too
    ({"NCCL_SOCKET_IFNAME": "ib"}, None),                        # a prefix: every ib* to NCCL
    ({"NCCL_SOCKET_IFNAME": "ib0,eth0"}, None),                  # alternatives: gloo would need both on every node
    ({"NCCL_SOCKET_IFNAME": "=ib0,eth0"}, None),
    ({"NCCL_SOCKET_IFNAME": "^docker,lo"}, None),                # an exclusion names no interface
    ({"NCCL_SOCKET_IFNAME": ""}, None),
    ({}, None),
    ({"NCCL_SOCKET_IFNAME": "ib0", "GLOO_SOCKET_IFNAME": "eth1"}, None),   # the user's own wins
])
def test_gloo_gets_the_one_interface_nccl_was_told(env, want):
    assert gloo_ifname_default(env) == ({"GLOO_SOCKET_IFNAME": want} if want else {})


def test_the_default_is_added_last_and_nothing_else_changes():
    env = {"OMP_NUM_THREADS": "4", "NCCL_SOCKET_IFNAME": "ib0"}
    assert list(with_gloo_default(env).items()) == [*env.items(), ("GLOO_SOCKET_IFNAME", "ib0")]
    own = {"NCCL_SOCKET_IFNAME": "ib0", "GLOO_SOCKET_IFNAME": "eth1"}
    assert with_gloo_default(own) == own
