"""slurm.ssh_config and slurm.proxy_jump for real, against the Slurm-in-Docker login node.

The login node's sshd is published on 127.0.0.1:PORT and listens on port 22 inside its container,
with TCP forwarding allowed: it serves as its own jump host (hop 1: 127.0.0.1:PORT from here; hop
2: a direct-tcpip channel to localhost:22 inside the container). SSH_CONNECTION then shows a
connection from 127.0.0.1 to port 22, which only the jump can produce (a direct login comes from
the Docker bridge). Host keys are checked on both hops against one known_hosts file.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness import config
from harness.backends.slurm.backend import SlurmBackend
from harness.clusters import slurm_docker
from harness.errors import TransportError
from harness.transports import SshTransport

pytestmark = [pytest.mark.integration, pytest.mark.slurm]
RELEASE = os.environ.get("POC_SLURM_RELEASE", "trixie")


@pytest.fixture(scope="module")
def login() -> dict:
    info = slurm_docker.up(release=RELEASE, timeout=300)   # cheap when it is running; left running
    return json.loads(Path(info.ssh_settings_path).read_text())


def write_files(tmp_path: Path, s: dict, *, jump_known: bool = True, target_known: bool = True) -> tuple[str, str]:
    """An ssh_config with a jump alias and a login alias behind it, and a known_hosts for them."""
    key = Path(s["known_hosts_path"]).read_text().split(None, 1)[1]   # "ssh-ed25519 AAAA...\n"
    conf = tmp_path / "ssh_config"
    conf.write_text(f"""Host poc-jump
  HostName {s['host']}
  Port {s['port']}
  User {s['user']}
  IdentityFile {s['key_path']}

Host poc-login
  HostName localhost
  User {s['user']}
  IdentityFile {s['key_path']}
  ProxyJump poc-jump
""")
    known = tmp_path / "known_hosts"
    known.write_text((f"[{s['host']}]:{s['port']} {key}" if jump_known else "")
                     + (f"localhost {key}" if target_known else ""))
    return str(conf), str(known)


def backend(**slurm) -> SlurmBackend:
    return SlurmBackend.from_config(config.from_mapping({"platforms": ["slurm"], "slurm": slurm}))


def origin(t) -> list[str]:
    return t.run(["sh", "-c", 'echo "$SSH_CONNECTION"']).stdout.split()


def test_host_alias_from_ssh_config(login, tmp_path):
    conf, known = write_files(tmp_path, login)
    b = backend(host="poc-jump", ssh_config=conf, known_hosts=known)   # HostName, Port, User, IdentityFile
    assert (b.t.host, b.t.port, b.t.user) == (login["host"], login["port"], login["user"])
    assert origin(b.t)[3] == "22" and origin(b.t)[0] != "127.0.0.1"   # direct: in from the Docker bridge
    assert b.t.run(["echo", "a b;c"]).stdout == "a b;c\n"
    b.t.close()


def test_proxy_jump_from_ssh_config(login, tmp_path):
    conf, known = write_files(tmp_path, login)
    b = backend(host="poc-login", ssh_config=conf, known_hosts=known)
    assert b.t.describe()["proxy_jump"] == [f"{login['user']}@{login['host']}:{login['port']}"]
    assert origin(b.t)[0] == "127.0.0.1" and origin(b.t)[3] == "22"   # through the jump
    assert b.t.run(["sinfo", "-h", "-o", "%G"]).stdout.strip() == "gpu:4"   # Slurm's tools work behind it
    b.t.close()


def test_proxy_jump_from_the_config_wins(login, tmp_path):
    """slurm.proxy_jump and the other slurm values win over ssh_config (here: it has no jump at all)."""
    _, known = write_files(tmp_path, login)
    conf = tmp_path / "other_config"
    conf.write_text("Host localhost\n  ProxyJump none\n  Port 2222\n  User nobody\n")
    b = backend(host="localhost", port=22, user=login["user"], key_file=login["key_path"], known_hosts=known,
                ssh_config=str(conf), proxy_jump=f"{login['user']}@{login['host']}:{login['port']}")
    assert origin(b.t)[0] == "127.0.0.1" and origin(b.t)[3] == "22"
    b.t.close()


@pytest.mark.parametrize("unknown", ["target", "jump"])
def test_unknown_host_is_refused_on_either_hop(login, tmp_path, unknown):
    conf, known = write_files(tmp_path, login, jump_known=unknown != "jump", target_known=unknown != "target")
    t = SshTransport("poc-login", None, known_hosts=known, ssh_config=conf, retries=0)
    name = "localhost:22" if unknown == "target" else f"{login['host']}:{login['port']}"
    with pytest.raises(TransportError, match=f"{name} is not in known_hosts"):
        t.run(["true"])
