import json
import shlex

from harness.cli import main


def test_render_local_is_printable_and_pure(capsys):
    assert main(["render", "--platform", "local"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("#!/usr/bin/env bash")
    lines = [l for l in out.splitlines() if "torch.distributed.run" in l]
    assert len(lines) == 2  # one torchrun agent per node
    argv = shlex.split(lines[0].rstrip(" &"))
    assert "--nnodes=2" in argv and "--rdzv_backend=c10d" in argv and "--max_restarts=3" in argv
    assert argv[argv.index("--steps") + 1] == "40"
    assert main(["render", "--platform", "local"]) == 0
    assert capsys.readouterr().out == out  # same input, same output


def test_render_out_dir(tmp_path, capsys):
    assert main(["render", "--platform", "local", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "launch.sh").read_text().startswith("#!/usr/bin/env bash")


def test_unknown_platform(capsys):
    assert main(["render", "--platform", "openshift"]) == 2
    err = capsys.readouterr().err
    assert "ERROR unknown platform 'openshift'" in err and "TIP" in err


def test_validate_json(capsys):
    assert main(["validate", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


def test_bad_campaign_name(capsys, tmp_path):
    assert main(["run", "--campaign", "Bad Name!", "--results", str(tmp_path)]) == 2
    assert "ERROR --campaign" in capsys.readouterr().err
