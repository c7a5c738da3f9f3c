"""harness/backends/slurm/gpus.py: a GPU request against the nodes' gres (sinfo %G), no cluster."""
from __future__ import annotations

import pytest

from harness.backends.slurm import gpus
from harness.errors import BackendError, CommandError, SubmitError
from harness.transports import Result


class Sinfo:
    """A transport that answers sinfo %G with fixed text (or fails), and records what it was asked."""

    def __init__(self, text: str | None):
        self.text, self.asked = text, []

    def run(self, argv, **_kw):
        self.asked.append(list(argv))
        if self.text is None:
            raise CommandError(list(argv), 1, "", "sinfo: error: Unable to contact slurm controller")
        return Result(tuple(argv), 0, self.text, "")


@pytest.mark.parametrize("text, typ, want", [
    ("gpu:4\n", None, [4]),
    ("gpu:a100:8(S:0-1)\n(null)\n", None, [8, 0]),
    ("gpu:a100:4,gpu:h100:2,nvme:1\n", "h100", [2]),
    ("gpu:a100:4\n", "h100", [0]),
    ("nvme:1\n(null)\n", None, [0, 0]),
    ("gpus:4\nmps:100\n", None, [0, 0]),
])
def test_per_node(text, typ, want):
    assert gpus.per_node(text, typ) == want


def test_preflight_refuses_gpus_where_no_node_has_any():
    t = Sinfo("(null)\nnvme:1\n")
    with pytest.raises(BackendError, match="no node of partition 'cpu' has a gpu gres") as exc:
        gpus.preflight_check(t, 4, None, "cpu")
    assert "resources.gpus_per_node: 0" in exc.value.tip
    assert t.asked == [["sinfo", "-h", "-o", "%G", "-p", "cpu"]]
    with pytest.raises(BackendError, match="gpu:h100 gres"):
        gpus.preflight_check(Sinfo("gpu:a100:4\n"), 4, "h100", None)


def test_preflight_leaves_counts_to_sbatch_and_asks_nothing_for_cpu_runs():
    assert gpus.preflight_check(Sinfo("gpu:4\n"), 8, None, None) == "gpu:4"
    t = Sinfo("(null)\n")
    assert gpus.preflight_check(t, 0, None, None) is None and t.asked == []
    assert gpus.preflight_check(Sinfo(None), 4, None, None) is None    # sinfo unavailable: say nothing


def test_refusal_names_the_gpus_per_node():
    exc = SubmitError("sbatch refused the job: sbatch: error: Batch job submission failed: Requested node "
                      "configuration is not available", tip="check partition, account, qos")
    out = gpus.explain_refusal(exc, Sinfo("gpu:4\n"), 8, None, None)
    assert "has more than 4" in out.message and "Requested node configuration is not available" in out.message
    assert "to 4 or less" in out.tip
    # a refusal the GPU count does not explain keeps its message, with what the nodes have in the tip
    out = gpus.explain_refusal(exc, Sinfo("gpu:4\n"), 2, None, None)
    assert out.message == exc.message and "gpu:4" in out.tip
    other = SubmitError("sbatch refused the job: Invalid account", tip="t")
    assert gpus.explain_refusal(other, Sinfo("gpu:4\n"), 2, None, None) is other
    assert gpus.explain_refusal(exc, Sinfo("gpu:4\n"), 0, None, None) is exc
    assert gpus.explain_refusal(exc, Sinfo(None), 8, None, None) is exc
