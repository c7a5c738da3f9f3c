"""`poc render` and `poc validate` on the command line (harness/cli/config_cmds.py): what render prints
or writes, a contention run and its blocker, an unknown platform, validate's JSON."""
import json
import shlex

from harness.cli import main


def test_render_local_is_printable_and_pure(capsys):
    assert main(["render", "--platform", "local"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("#!/usr/bin/env bash")
    lines = [line for line in out.splitlines() if "torch.distributed.run" in line]
    assert len(lines) == 2  # one torchrun agent per node
    argv = shlex.split(lines[0].rstrip(" &"))
    assert "--nnodes=2" in argv and "--rdzv_backend=c10d" in argv and "--max_restarts=3" in argv
    assert argv[argv.index("--steps") + 1] == "40"
    assert main(["render", "--platform", "local"]) == 0
    assert capsys.readouterr().out == out  # same input, same output


def test_render_out_dir(tmp_path, capsys):
    assert main(["render", "--platform", "local", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "launch.sh").read_text().startswith("#!/usr/bin/env bash")


def test_render_a_contention_run_and_its_blocker(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("platforms: [slurm]\nfaults: []\ncontention: {runs: 1, blocker_steps: 500}\n")
    assert main(["render", "--platform", "slurm", "--config", str(cfg), "--run-id", "slurm-contention-01"]) == 0
    measured = capsys.readouterr().out
    assert "#SBATCH --job-name=poc-slurm-contention-01\n" in measured and "--exclusive" not in measured
    assert main(["render", "--platform", "slurm", "--config", str(cfg), "--run-id", "slurm-contention-01-blocker"]) == 0
    blocker = capsys.readouterr().out
    assert "#SBATCH --job-name=poc-slurm-contention-01-blocker\n" in blocker and "#SBATCH --exclusive\n" in blocker
    assert "--steps 500" in blocker
    assert main(["render", "--platform", "slurm", "--config", str(cfg), "--run-id", "my-run"]) == 0
    assert "#SBATCH --job-name=poc-my-run\n" in capsys.readouterr().out


def test_unknown_platform(capsys):
    assert main(["render", "--platform", "openshift"]) == 2
    err = capsys.readouterr().err
    assert "ERROR unknown platform 'openshift'" in err and "TIP" in err


def test_validate_json(capsys):
    assert main(["validate", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


def test_validate_says_the_baseline_takes_fewer_runs_where_local_rounds_caps_it(capsys):
    assert main(["validate", "--set", "local.rounds=2", "--set", "repetitions=3"]) == 0
    out = capsys.readouterr().out
    assert "3 clean run(s) + 1 fault(s) per platform (the local baseline at most 2 of each)" in out
    assert main(["validate", "--set", "repetitions=3"]) == 0
    assert "the local baseline at most" not in capsys.readouterr().out
