"""The one free-port helper (harness/netutil.py)."""
from __future__ import annotations

import socket

from harness.netutil import free_port


def test_free_port_is_bindable():
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", port))
