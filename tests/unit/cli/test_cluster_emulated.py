"""`poc cluster up|down --emulated`: bad input is an ERROR with a TIP, before any cluster is touched."""
from __future__ import annotations

import pytest

from harness.cli import main


@pytest.mark.parametrize("argv, words", [
    (["cluster", "up", "--k8s", "--emulated", "0"], "nodes must be at least 1"),
    (["cluster", "up", "--k8s", "--emulated", "16", "--gpus-per-node", "-1"], "GPUs per node"),
    (["cluster", "up", "--k8s", "--emulated", "16", "--rack-size", "0"], "rack size"),
    (["cluster", "up", "--k8s", "--emulated", "10000"], "at most 9999"),
    (["cluster", "up", "--slurm", "--k8s", "--provider", "kind", "--emulated", "16"], "native Kubernetes cluster"),
    (["cluster", "up", "--k8s", "--provider", "kind", "--emulated", "16"], "native Kubernetes cluster"),
    (["cluster", "down", "--k8s", "--provider", "kind", "--emulated"], "native Kubernetes cluster"),
])
def test_bad_emulated_input_exits_2_with_a_tip(capsys, argv, words):
    assert main(argv, env={}) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR ") and words in err and "\nTIP " in err and "Traceback" not in err
