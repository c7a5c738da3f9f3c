"""`poc cluster up|down --slurm --emulated`: the emulated Slurm container, driven through a recording
runner (no Docker), sized by the same flags as the Kubernetes path, its files under the state directory."""
from __future__ import annotations

import subprocess

import pytest

from harness.cli import build_parser, main
from harness.cli.cluster_cmds import _emulated


class Recorder:
    """Answers like a Docker with no emulated container yet, whose nodes are idle as soon as asked."""

    def __init__(self, nodes: int = 0):
        self.calls: list[list[str]] = []
        self.nodes = nodes

    def __call__(self, argv, **_kw):
        argv = [str(a) for a in argv]
        self.calls.append(argv)
        if argv[:3] in (["docker", "container", "inspect"], ["docker", "network", "inspect"]):
            return subprocess.CompletedProcess(argv, 1, "", "No such object")
        out = "".join(f"e{i:04d} idle\n" for i in range(1, self.nodes + 1)) if "sinfo" in argv else ""
        return subprocess.CompletedProcess(argv, 0, out, "")


def _args(*argv: str):
    return build_parser().parse_args(["cluster", *argv])


def test_up_slurm_emulated_starts_only_the_emulated_container_with_the_shape_flags(tmp_path, monkeypatch):
    monkeypatch.setenv("POC_STATE_DIR", str(tmp_path))
    rec, said, built = Recorder(nodes=16), [], []
    args = _args("up", "--slurm", "--emulated", "16", "--gpus-per-node", "4", "--rack-size", "4",
                 "--racks-per-block", "2")
    results = _emulated(args, said.append, runner=rec,
                        ensure_image=lambda release, say: built.append(release) or "img:tag")
    assert built == ["trixie"]
    assert list(results) == ["slurm-emulated"]
    res = results["slurm-emulated"]
    assert (res["nodes"], res["gpus_per_node"], res["racks"], res["blocks"]) == (16, 4, 4, 2)
    etc = tmp_path / "slurm-emulated" / "etc"
    assert res["conf_dir"] == str(etc)
    run = next(c for c in rec.calls if c[:2] == ["docker", "run"])
    assert f"{etc}:/etc/slurm-poc:ro" in run and run[-2:] == ["img:tag", "e[0001-0016]"]
    assert "Gres=gpu:4" in (etc / "slurm.conf").read_text()
    assert (etc / "topology.conf").read_text().splitlines()[-1] == "SwitchName=top Switches=b[1-2]"
    # the Slurm-in-Docker cluster is neither started nor touched
    assert all(c[0] == "docker" and "poc-slurm-slurmctld" not in c and "compose" not in c for c in rec.calls)
    assert any("16 emulated nodes × 4 GPUs" in s for s in said)


def test_up_slurm_emulated_compresses_the_fair_share_half_life(tmp_path, monkeypatch):
    monkeypatch.setenv("POC_STATE_DIR", str(tmp_path))
    args = _args("up", "--slurm", "--emulated", "16", "--fairshare-half-life", "60")
    _emulated(args, print, runner=Recorder(nodes=16), ensure_image=lambda release, say: "img:tag")
    lines = (tmp_path / "slurm-emulated" / "etc" / "slurm.conf").read_text().splitlines()
    assert "PriorityDecayHalfLife=60" in lines and "PriorityMaxAge=60" in lines


def test_down_slurm_emulated_removes_only_its_container_and_network():
    rec = Recorder()
    results = _emulated(_args("down", "--slurm", "--emulated"), print, runner=rec)
    assert results == {"slurm-emulated": ["container poc-slurm-emulated", "network poc-slurm-emulated"]}
    assert rec.calls == [["docker", "rm", "-f", "poc-slurm-emulated"],
                         ["docker", "network", "rm", "poc-slurm-emulated"]]


@pytest.mark.parametrize("argv, words", [
    (["cluster", "up", "--slurm", "--emulated", "0"], "nodes must be at least 1"),
    (["cluster", "up", "--slurm", "--emulated", "8", "--gpus-per-node", "-1"], "GPUs per node"),
    (["cluster", "up", "--slurm", "--emulated", "8", "--racks-per-block", "0"], "racks per block"),
    (["cluster", "up", "--slurm", "--emulated", "60000"], "slurmd ports"),
])
def test_bad_slurm_emulated_shape_exits_2_with_a_tip_before_docker(capsys, argv, words):
    assert main(argv, env={}) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR ") and words in err and "\nTIP " in err and "Traceback" not in err
