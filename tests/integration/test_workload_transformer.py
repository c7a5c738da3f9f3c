"""The transformer workload trained by 2 real torchrun processes on CPU (gloo): DDP's gradient
all-reduce, the events the harness reads, rank 0's checkpoint. About 15 s (a resume is tested in
one process: tests/unit/data/workloads/test_ddp_train.py)."""
import subprocess
import sys
from pathlib import Path

import pytest

from harness import events as ev

pytestmark = [pytest.mark.integration, pytest.mark.local]

SCRIPT = Path(__file__).resolve().parents[2] / "harness" / "data" / "workloads" / "ddp_train.py"
ARGS = ["--model", "transformer", "--model-params", "5M", "--layers", "2", "--seq-len", "64", "--batch", "4",
        "--sweep", "", "--ckpt-every", "2"]


def torchrun(tmp: Path, steps: int) -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone",
                           str(SCRIPT), *ARGS, "--steps", str(steps), "--events-dir", str(tmp / "ev"),
                           "--ckpt-dir", str(tmp / "ck")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return ev.parse_lines(proc.stdout.splitlines())


def test_two_ranks_train_the_transformer(tmp_path):
    events = torchrun(tmp_path, 4)
    starts = ev.of_kind(events, "train_start")
    assert sorted(e["rank"] for e in starts) == [0, 1]
    s = starts[0]
    assert s["model"] == "transformer" and s["precision"] == "fp32" and s["optimizer"] == "AdamW"
    assert abs(s["params"] - s["params_requested"]) / s["params_requested"] < 0.10
    assert s["grad_bytes"] == 4 * s["params"] and s["d_model"] % s["heads"] == 0 and s["seq_len"] == 64
    steps = ev.of_kind(events, "step")
    assert sorted((e["rank"], e["step"]) for e in steps) == [(r, i) for r in (0, 1) for i in range(1, 5)]
    assert all(e["dur_s"] > 0 and 0 < e["loss"] < 20 for e in steps)
    assert [e["step"] for e in ev.of_kind(events, "checkpoint_saved")] == [2]     # rank 0 writes, alone
    assert {e["rank"] for e in ev.of_kind(events, "done")} == {0, 1}
    assert all(e["backend"] == "gloo" and e["simulated_gpus"] is False for e in ev.of_kind(events, "torch_imported"))

