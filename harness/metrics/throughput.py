"""Training throughput at the median step: samples/s (the MLP), tokens/s and MFU (the transformer).

Every figure divides by the run's median step time, the value of step_time_s (grouped by attempt and rank,
the first step of each dropped; a step's dur_s covers building the batch, forward, backward, the gradient
all-reduce and the optimizer step, not the checkpoint saves between steps). Ranks = the run's world size.
- samples_per_s (the MLP workload, the smoke model; train_start without `model` is it): per-rank batch
  x ranks / median step time.
- tokens_per_s (the transformer): per-rank batch x seq_len x ranks / median step time. seq_len is
  train_start's (the workload records it there), else process_start's --seq-len.
- mfu (the transformer): achieved model FLOP/s / peak FLOP/s.
    model FLOPs per token = 6 x params + 12 x layers x d_model x seq_len: PaLM's count (Chowdhery et al.
    2022, "PaLM: Scaling Language Modeling with Pathways", arXiv:2204.02311, appendix B: 6N + 12LHQT,
    H x Q = d_model): 6N for the matmuls every parameter takes part in (forward 2, backward 4; the tied
    embedding counted once is the output layer's matmul), 12 L d S for attention's QK^T and AV. The causal
    mask is not discounted and nothing is counted twice for recomputation, as is the convention.
    peak = the GPU's dense (no sparsity) BF16 tensor-core peak from PEAK_BF16_TFLOPS, by the name
    torch.cuda.get_device_name gave (torch_imported.device_name), x the job's GPUs (one a rank).
  Null with a note where it cannot be said: a CPU run ("no peak for a CPU"), a GPU not in the table, or a
  run not trained in bf16 (the table holds bf16 peaks; an fp32 run's would be a different peak).
A run without train_start or without steps has none of them; a CPU MLP run has samples_per_s only.
"""
from __future__ import annotations

import statistics

from .. import events as ev
from .common import _metric

# Dense BF16 Tensor Core peak per GPU, TFLOP/s (the datasheets print it with 2:4 sparsity: half that):
# H100 SXM 1,979 / NVL 1,671 / PCIe 1,513 with sparsity, NVIDIA H100 Tensor Core GPU datasheet,
#   https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet
# H200 SXM 1,979 with sparsity, https://www.nvidia.com/en-us/data-center/h200/
# A100 (40 GB and 80 GB, SXM and PCIe) 312 dense (624 with sparsity), NVIDIA A100 datasheet,
#   https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf
PEAK_BF16_TFLOPS = {
    "NVIDIA H100 80GB HBM3": 989.0,    # SXM5
    "NVIDIA H100 NVL": 835.0,
    "NVIDIA H100 PCIe": 756.0,
    "NVIDIA H200": 989.0,              # SXM
    "NVIDIA A100-SXM4-80GB": 312.0,
    "NVIDIA A100-SXM4-40GB": 312.0,
    "NVIDIA A100 80GB PCIe": 312.0,
    "NVIDIA A100-PCIE-40GB": 312.0,
}
NO_CPU_PEAK = "no peak for a CPU"
TENSOR_PRECISIONS = ("bf16",)


def flops_per_token(params: int, layers: int, d_model: int, seq_len: int) -> tuple[int, int]:
    """(6N, 12 L d S): the parameters' matmuls and attention's, per token, forward and backward (PaLM, app. B)."""
    return 6 * params, 12 * layers * d_model * seq_len


def throughput(events: list[dict], world: int, median_step: float | None) -> dict[str, dict]:
    """samples_per_s, or tokens_per_s and mfu, by name; {} without train_start or a median step time."""
    train = sorted(ev.of_kind(events, "train_start"), key=lambda e: e["ts_ns"])
    if not train or not median_step or median_step <= 0:
        return {}
    ts = train[0]
    model = ts.get("model") or "mlp"   # the MLP was the only model before the transformer came (issue 11)
    batch = ts.get("batch")
    src = {"train_start": ts["ts_ns"] / 1e9}
    base = {"model": model, "batch_per_rank": batch, "ranks": world, "median_step_s": median_step}
    if model == "mlp":
        value = batch * world / median_step if batch else None
        return {"samples_per_s": _metric("samples_per_s", value, src, **base,
                                         **({} if batch else {"note": "train_start has no batch"}))}
    if model != "transformer":
        return {}
    seq_len, seq_from = _seq_len(events, ts)
    base.update(seq_len=seq_len, seq_len_from=seq_from)
    if not (batch and seq_len):
        note = "train_start has no batch" if not batch else "no seq_len in train_start or process_start"
        return {"tokens_per_s": _metric("tokens_per_s", None, src, **base, note=note),
                "mfu": _metric("mfu", None, {}, note=note)}
    tokens_per_step = batch * seq_len * world
    tps = tokens_per_step / median_step
    return {"tokens_per_s": _metric("tokens_per_s", tps, src, **base, tokens_per_step=tokens_per_step),
            "mfu": _mfu(events, ts, world, seq_len, tps)}


def _seq_len(events: list[dict], ts: dict) -> tuple[int | None, str | None]:
    if isinstance(ts.get("seq_len"), int):
        return ts["seq_len"], "train_start"
    for e in sorted(ev.of_kind(events, "process_start"), key=lambda e: e["ts_ns"]):
        argv = [str(a) for a in e.get("argv") or []]
        for a, nxt in zip(argv, [*argv[1:], ""], strict=True):
            v = nxt if a == "--seq-len" else a.removeprefix("--seq-len=") if a.startswith("--seq-len=") else ""
            if v.isdigit():
                return int(v), "process_start argv"
    return None, None


def _mfu(events: list[dict], ts: dict, world: int, seq_len: int, tokens_per_s: float) -> dict:
    names = _device_names(events)
    device = str(ts.get("device") or next((e.get("device") for e in ev.of_kind(events, "torch_imported")), "") or "")
    detail: dict = {"device": device, "device_name": sorted(set(names.values())) or None}
    if not device.startswith("cuda"):
        return _metric("mfu", None, {}, **detail, note=NO_CPU_PEAK)
    params, layers, width = ts.get("params"), ts.get("layers"), ts.get("d_model") or ts.get("width")
    if not (params and layers and width):
        return _metric("mfu", None, {}, **detail, note="train_start lacks params, layers or the model width")
    dense, attention = flops_per_token(params, layers, width, seq_len)
    detail.update(flops_per_token=dense + attention, flops_6n_per_token=dense, flops_attention_per_token=attention,
                  achieved_tflops=tokens_per_s * (dense + attention) / 1e12, precision=ts.get("precision"))
    unknown = sorted({n for n in names.values() if n not in PEAK_BF16_TFLOPS})
    if not names or unknown:
        what = ", ".join(repr(n) for n in unknown) if unknown else "no device name (torch_imported)"
        return _metric("mfu", None, {}, **detail,
                       note=f"no peak for {what}: not in the table of dense bf16 peaks (metrics/throughput.py)")
    if ts.get("precision") not in TENSOR_PRECISIONS:
        return _metric("mfu", None, {}, **detail, note=f"trained in {ts.get('precision')}: the table holds dense "
                                                      "bf16 peaks, which are not this run's")
    per_gpu = [PEAK_BF16_TFLOPS[n] for n in names.values()]
    # one GPU a rank (the workload puts rank r on cuda:local_rank); a rank without a torch_imported event
    # counts at the others' mean peak
    peak = statistics.fmean(per_gpu) * world
    detail.update(gpus=world, peak_tflops_per_gpu=sorted(set(per_gpu)), peak_tflops=peak)
    return _metric("mfu", detail["achieved_tflops"] / peak, {}, **detail)


def _device_names(events: list[dict]) -> dict[int, str]:
    """Each rank's device name, from its first torch_imported event."""
    out: dict[int, str] = {}
    for e in sorted(ev.of_kind(events, "torch_imported"), key=lambda e: e["ts_ns"]):
        if e.get("device_name") and e.get("rank") is not None:
            out.setdefault(e["rank"], str(e["device_name"]))
    return out
