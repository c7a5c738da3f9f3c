import importlib.util
from pathlib import Path

import pytest

from harness import metrics

spec = importlib.util.spec_from_file_location("ddp_train", Path(__file__).parents[2] / "workloads" / "ddp_train.py")
ddp_train = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ddp_train)


@pytest.mark.parametrize("n, factor", [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75)])
def test_busbw_factor_is_nccl_tests(n, factor):
    assert metrics.busbw_factor(n) == pytest.approx(factor)


def test_busbw_from_algbw():
    # nccl-tests: 1 GB all-reduced in 0.1 s on 8 ranks -> algbw 10 GB/s, busbw 17.5 GB/s
    algbw = 1e9 / 0.1 / 1e9
    assert metrics.busbw(algbw, 8) == pytest.approx(17.5)


def test_sweep_sizes():
    assert ddp_train.sweep_sizes("1K:8K") == [1024, 2048, 4096, 8192]
    assert ddp_train.sweep_sizes("1K,1M") == [1024, 1024**2]
    assert ddp_train.sweep_sizes("1K:256M")[-1] == 256 * 1024**2
    with pytest.raises(ValueError):
        ddp_train.parse_size("12Q")


def test_restart_counts_read_every_layer(monkeypatch):
    monkeypatch.setenv("SLURM_RESTART_COUNT", "2")
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    monkeypatch.delenv("JOBSET_RESTART_ATTEMPT", raising=False)
    assert ddp_train.restart_counts() == {"jobset": 0, "slurm": 2, "torchelastic": 1}
