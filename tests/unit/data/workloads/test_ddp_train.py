"""The workload's models, precision and GPU placement: the transformer's size planned
without building it, a tiny one trained on CPU in fp32 and bf16, GPUs asked for but missing (an
error, never gloo instead), and simulated GPUs recorded as such."""
from __future__ import annotations

import importlib.util
import json
import math
import signal
import socket
from pathlib import Path
from types import SimpleNamespace

import pytest

# torch is a test dependency: without it these tests fail, never skip (the USR1 and SIGTERM checkpoints among them)
import torch
from support.paths import ROOT

SHIPPED = ROOT / "harness" / "data" / "workloads" / "ddp_train.py"     # what the harness ships
_spec = importlib.util.spec_from_file_location("ddp_train_shipped", SHIPPED)
ddp_train = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ddp_train)

TINY = {"model_params": "200K", "layers": 2, "vocab_size": 256, "seq_len": 16}


@pytest.mark.parametrize("size", ["1M", "5M", "50M", "125M", "350M", "1G", "2G"])
@pytest.mark.parametrize("layers, vocab, seq_len", [(2, 32000, 512), (4, 32000, 512), (24, 32000, 2048),
                                                    (12, 50304, 1024)])
def test_transformer_size_is_within_10_percent(size, layers, vocab, seq_len):
    want = ddp_train.parse_size(size)
    dims = ddp_train.transformer_dims(want, layers, vocab, seq_len)
    d, heads = dims["d_model"], dims["heads"]
    assert abs(dims["params"] - want) / want < 0.10
    assert dims["params"] == ddp_train.transformer_params(d, layers, vocab, seq_len)
    assert d % heads == 0 and heads <= max(1, d // 64)
    if d >= 1100:
        assert d % 64 == 0 and heads == d // 64      # head dim 64, as large models have


def test_the_1g_model_is_wide_and_planned_without_memory():
    dims = ddp_train.transformer_dims(ddp_train.parse_size("1G"), 24, 32000, 2048)
    assert dims["d_model"] == 1856 and dims["heads"] == 29
    # fp32 weights + gradients + AdamW's two moments: the ~16 GB a rank holds at this size
    assert 15e9 < dims["params"] * 16 < 19e9


@pytest.mark.parametrize("size, layers, vocab, seq_len", [("1M", 2, 32000, 64), ("3M", 4, 1000, 128),
                                                          ("200K", 1, 256, 16)])
def test_the_built_model_has_the_planned_count(size, layers, vocab, seq_len):
    dims = ddp_train.transformer_dims(ddp_train.parse_size(size), layers, vocab, seq_len)
    model = ddp_train.build_transformer(torch, dims)
    assert sum(p.numel() for p in model.parameters()) == dims["params"]


def tiny_dims():
    return ddp_train.transformer_dims(ddp_train.parse_size(TINY["model_params"]), TINY["layers"],
                                      TINY["vocab_size"], TINY["seq_len"])


@pytest.mark.parametrize("precision, logits_dtype", [("fp32", torch.float32), ("bf16", torch.bfloat16)])
def test_tiny_transformer_trains_on_cpu(precision, logits_dtype):
    torch.manual_seed(0)
    dims = tiny_dims()
    model = ddp_train.build_transformer(torch, dims)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(1)
    device = torch.device("cpu")
    losses = []
    for _ in range(8):
        tokens = ddp_train.token_batch(torch, gen, 8, dims["seq_len"], dims["vocab_size"])
        assert tokens.shape == (8, dims["seq_len"] + 1) and int(tokens.max()) < dims["vocab_size"]
        opt.zero_grad()
        with ddp_train.autocast(torch, device, precision):
            logits = model(tokens[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, dims["vocab_size"]),
                                                     tokens[:, 1:].reshape(-1))
        assert logits.dtype == logits_dtype and logits.shape == (8, dims["seq_len"], dims["vocab_size"])
        loss.backward()
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
        opt.step()
        losses.append(loss.item())
    assert math.isfinite(losses[-1]) and losses[-1] < losses[0]      # learnable data: the loss falls
    assert abs(losses[0] - math.log(dims["vocab_size"])) < 1.0        # small init: ~uniform at first


def test_attention_is_causal():
    torch.manual_seed(0)
    model = ddp_train.build_transformer(torch, tiny_dims()).eval()
    a = torch.randint(0, 256, (1, 16))
    b = a.clone()
    b[0, 10:] = (b[0, 10:] + 1) % 256                   # change only the future of position 9
    with torch.no_grad():
        assert torch.equal(model(a)[0, :10], model(b)[0, :10])


def test_precision_auto_is_bf16_on_gpus_fp32_on_cpus():
    cpu = torch.device("cpu")
    assert ddp_train.pick_precision("auto", cpu, torch) == "fp32"
    assert ddp_train.pick_precision("bf16", cpu, torch) == "bf16"
    assert ddp_train.pick_precision("fp32", cpu, torch) == "fp32"
    fake = SimpleNamespace(cuda=SimpleNamespace(is_bf16_supported=lambda: True))
    assert ddp_train.pick_precision("auto", torch.device("cuda", 0), fake) == "bf16"


# ------------------------------------------------------------------ placement (fake torch: pure logic)
def fake_torch(devices: int, cuda_build: str | None = "12.4"):
    return SimpleNamespace(__version__="2.4.0", version=SimpleNamespace(cuda=cuda_build), device=torch.device,
                           cuda=SimpleNamespace(is_available=lambda: devices > 0, device_count=lambda: devices))


def args_of(**kw):
    return SimpleNamespace(**{"gpus_per_node": 0, "simulated_gpus": False, "backend": "auto", **kw})


def test_gpus_asked_for_use_nccl_and_the_local_rank_device():
    assert ddp_train.place(args_of(gpus_per_node=8), fake_torch(8), 5, 8) == ("nccl", torch.device("cuda", 5))


@pytest.mark.parametrize("devices, build, backend, words", [
    (0, None, "auto", ["8 GPUs per node were requested (8 ranks on this node)", "torch sees 0 CUDA devices",
                       "CPU-only build", "simulated_gpus: true only on clusters without GPUs"]),
    (4, "12.4", "auto", ["torch sees 4 CUDA devices", "CUDA_VISIBLE_DEVICES=0,1,2,3"]),
    (8, "12.4", "gloo", ["--backend is gloo"]),
])
def test_gpus_asked_for_and_unusable_is_an_error_not_gloo(monkeypatch, devices, build, backend, words):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    with pytest.raises(ddp_train.GpuError) as exc:
        ddp_train.place(args_of(gpus_per_node=8, backend=backend), fake_torch(devices, build), 0, 8)
    for w in words:
        assert w in str(exc.value)


def test_simulated_gpus_train_on_cpu_with_gloo():
    assert ddp_train.place(args_of(gpus_per_node=4, simulated_gpus=True), fake_torch(0), 3, 4) == (
        "gloo", torch.device("cpu"))
    with pytest.raises(ddp_train.GpuError, match="nccl"):
        ddp_train.place(args_of(gpus_per_node=4, simulated_gpus=True, backend="nccl"), fake_torch(0), 0, 4)


def test_no_gpus_asked_for_keeps_the_old_choice():
    assert ddp_train.place(args_of(), fake_torch(0), 0, 1) == ("gloo", torch.device("cpu"))
    assert ddp_train.place(args_of(), fake_torch(2), 1, 2) == ("nccl", torch.device("cuda", 1))


# ------------------------------------------------------------------ main, in this process (world size 1)
def read_events(events_dir: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(events_dir.glob("*.jsonl")) for line in f.read_text().splitlines()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def single_rank(monkeypatch):
    for k, v in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "RANK": "0", "WORLD_SIZE": "1",
                 "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}.items():
        monkeypatch.setenv(k, v)
    saved = signal.getsignal(signal.SIGUSR1)
    yield
    signal.signal(signal.SIGUSR1, saved)


def test_main_without_the_gpus_it_was_given_exits_at_once(single_rank, tmp_path, monkeypatch, capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA devices")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def no_rendezvous(*a, **kw):
        raise AssertionError("the process group must not start")
    monkeypatch.setattr(torch.distributed, "init_process_group", no_rendezvous)
    rc = ddp_train.main(["--gpus-per-node", "2", "--sweep", "", "--steps", "1", "--events-dir", str(tmp_path)])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["poc-workload: ERROR 2 GPUs per node were requested (1 rank on this node) but torch sees 0 CUDA "
                   "devices (CUDA_VISIBLE_DEVICES=<unset>); set workload.simulated_gpus: true only on clusters "
                   "without GPUs"]
    kinds = [e["kind"] for e in read_events(tmp_path)]
    assert kinds == ["process_start", "workload_error"]
    bad = read_events(tmp_path)[-1]
    assert bad["error"] == "gpus" and bad["gpus"] == 0 and bad["gpus_per_node"] == 2 and not bad["simulated_gpus"]


def test_main_with_simulated_gpus_records_them(single_rank, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_GPUS_ON_NODE", "2")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    argv = ["--gpus-per-node", "2", "--simulated-gpus", "--model", "transformer", "--model-params",
            TINY["model_params"], "--layers", str(TINY["layers"]), "--vocab-size", str(TINY["vocab_size"]),
            "--seq-len", str(TINY["seq_len"]), "--batch", "2", "--steps", "2", "--sweep", "",
            "--events-dir", str(tmp_path / "ev"), "--ckpt-dir", str(tmp_path / "ck"), "--ckpt-every", "1"]
    assert ddp_train.main(argv) == 0
    events = read_events(tmp_path / "ev")
    by = {e["kind"]: e for e in events}
    imported, start = by["torch_imported"], by["train_start"]
    assert imported["simulated_gpus"] is True and imported["backend"] == "gloo" and imported["device"] == "cpu"
    assert imported["gpu_env"] == {"CUDA_VISIBLE_DEVICES": "", "SLURM_GPUS_ON_NODE": "2"}
    assert imported["gpus_per_node"] == 2
    dims = tiny_dims()
    assert start["simulated_gpus"] is True and start["model"] == "transformer" and start["precision"] == "fp32"
    assert start["params"] == dims["params"] and start["d_model"] == dims["d_model"]
    assert start["heads"] == dims["heads"] and start["seq_len"] == TINY["seq_len"]
    assert start["grad_bytes"] == 4 * dims["params"] and start["optimizer"] == "AdamW"
    assert [e["step"] for e in events if e["kind"] == "step"] == [1, 2]
    assert by["checkpoint_saved"]["step"] == 1 and by["done"]["max_rss_bytes"] > 0
    saved = torch.load(tmp_path / "ck" / "ckpt-1.pt")
    assert set(saved) == {"model", "opt", "step", "model_kind", "dims"} and saved["dims"] == dims
    assert "exp_avg" in next(iter(saved["opt"]["state"].values()))    # AdamW's moments travel with it

    monkeypatch.setenv("MASTER_PORT", str(free_port()))               # resumed: model and AdamW from ckpt-1
    assert ddp_train.main([*argv[:argv.index("--steps") + 1], "3", *argv[argv.index("--steps") + 2:]]) == 0
    again = [e for e in read_events(tmp_path / "ev") if e["ts_ns"] > events[-1]["ts_ns"]]
    loaded = next(e for e in again if e["kind"] == "checkpoint_loaded")
    assert loaded["step"] == 1 and loaded["path"].endswith("ckpt-1.pt")
    assert [e["step"] for e in again if e["kind"] == "step"] == [2, 3]
    first_step2 = next(e for e in events if e["kind"] == "step" and e["step"] == 2)
    resumed_step2 = next(e for e in again if e["kind"] == "step" and e["step"] == 2)
    assert resumed_step2["loss"] == pytest.approx(first_step2["loss"], rel=1e-5)   # the same state, the same data


def test_the_owner_mark_is_written_once_and_never_over_another(tmp_path):
    mark = tmp_path / "run" / ".poc-owner"
    ddp_train.write_owner_mark(str(mark), "aa11")
    assert mark.read_text() == "aa11"
    ddp_train.write_owner_mark(str(mark), "bb22")          # another campaign's pod on the same directory
    assert mark.read_text() == "aa11"
    ddp_train.write_owner_mark("", "aa11")
    ddp_train.write_owner_mark(str(tmp_path / "none"), "")  # outside a campaign: no mark
    assert not (tmp_path / "none").exists()
