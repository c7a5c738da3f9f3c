"""SshTransport's route: ssh_config Host aliases and ProxyJump, and what wins over them (no network)."""
from __future__ import annotations

import pytest

from harness import config
from harness.errors import TransportError
from harness.transports import Hop, SshTransport, resolve_route

CONF = """Host login
  HostName login01.cluster.example.org
  User alice
  Port 2200
  IdentityFile ~/.ssh/id_cluster
  ProxyJump bastion

Host bastion
  HostName bastion.example.org
  User bob

Host gw2
  HostName 10.0.0.2
  Port 2022
  IdentityFile /keys/gw2

Host *.direct
  ProxyJump none
"""


@pytest.fixture
def conf(tmp_path):
    p = tmp_path / "config"
    p.write_text(CONF)
    return str(p)


def test_alias_resolves_like_ssh(conf, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    route = resolve_route("login", ssh_config=conf)
    assert route == [Hop("bastion.example.org", 22, "bob", str(tmp_path / ".ssh" / "id_cluster")),
                     Hop("login01.cluster.example.org", 2200, "alice", str(tmp_path / ".ssh" / "id_cluster"))]


def test_given_values_win(conf):
    route = resolve_route("login", 22, "carol", "/k", ssh_config=conf, proxy_jump="dave@gw2:3022,gw2")
    assert route == [Hop("10.0.0.2", 3022, "dave", "/keys/gw2"), Hop("10.0.0.2", 2022, "carol", "/keys/gw2"),
                     Hop("login01.cluster.example.org", 22, "carol", "/k")]


def test_no_jump(conf):
    assert resolve_route("x.direct", 22, "u", ssh_config=conf) == [Hop("x.direct", 22, "u", None)]
    assert resolve_route("login", ssh_config=conf, proxy_jump="none")[0].host == "login01.cluster.example.org"


def test_missing_or_no_ssh_config(tmp_path):
    assert resolve_route("h", None, "u", ssh_config=str(tmp_path / "absent")) == [Hop("h", 22, "u", None)]
    assert resolve_route("h", 2222, ssh_config=None) == [Hop("h", 2222, None, None)]


def test_from_slurm_lets_ssh_config_port_apply_only_when_unset(conf):
    s = config.from_mapping({"platforms": ["slurm"], "slurm": {"host": "login", "ssh_config": conf}}).slurm
    t = SshTransport.from_slurm(s)
    assert (t.host, t.port, t.user) == ("login01.cluster.example.org", 2200, "alice")
    assert t.describe()["proxy_jump"] == ["bob@bastion.example.org:22"] and t.describe()["alias"] == "login"
    s = config.from_mapping({"platforms": ["slurm"], "slurm": {"host": "login", "port": 22, "ssh_config": conf,
                                                               "proxy_jump": "jump.example.org:2201"}}).slurm
    t = SshTransport.from_slurm(s)
    assert t.port == 22 and [h.label() for h in t.route[:-1]] == ["alice@jump.example.org:2201"]


@pytest.mark.parametrize("bad", ["a b", "a;b", "-oProxyCommand=x", "-oX", "a,,b", "$(x)"])
def test_config_refuses_odd_proxy_jumps(bad):
    with pytest.raises(config.ConfigError):
        config.from_mapping({"platforms": ["slurm"], "slurm": {"proxy_jump": bad}})


def test_config_takes_a_chain_of_jumps():
    s = config.from_mapping({"platforms": ["slurm"], "slurm": {"host": "login.example.org", "ssh_config": None,
                                                               "proxy_jump": "a@gw1:2201,gw2"}}).slurm
    assert [h.label() for h in SshTransport.from_slurm(s).route] == ["a@gw1:2201", "gw2:22", "login.example.org:22"]


def test_proxy_command_is_refused_not_ignored(tmp_path):
    p = tmp_path / "config"
    p.write_text("Host viacmd\n  ProxyCommand ssh -W %h:%p gw\n")
    with pytest.raises(TransportError, match="ProxyCommand"):
        resolve_route("viacmd", ssh_config=str(p))
    assert resolve_route("viacmd", ssh_config=str(p), proxy_jump="gw")[0].host == "gw"


def test_every_command_is_logged_at_debug_with_the_environment_by_name_only(caplog):
    """`poc -vv` shows each command the harness ran, its exit code and time; a value in env (a token) never."""
    from harness.transports import LocalTransport

    with caplog.at_level("DEBUG", logger="harness.transports"):
        res = LocalTransport().run(["sh", "-c", "exit 3"], env={"SLURM_JWT": "s3cret"}, check=False)
    assert res.returncode == 3
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith("local: sh -c 'exit 3' (env SLURM_JWT) -> exit 3 in ") and "s3cret" not in line
