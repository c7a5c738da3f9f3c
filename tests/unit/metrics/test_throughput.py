"""samples_per_s, tokens_per_s and mfu (harness/metrics/throughput.py).

The CPU figures from a committed smoke run's events (the MLP on two CPU ranks, a rank killed and restarted);
the transformer and GPU cases from events shaped as ddp_train.py emits them, the arithmetic done by hand
in each test's comments."""
from __future__ import annotations

import statistics

import pytest
from support.paths import RESULTS

from harness import metrics
from harness.metrics.throughput import NO_CPU_PEAK, PEAK_BF16_TFLOPS, flops_per_token, throughput
from harness.store import load_events, load_results

CAMPAIGN = RESULTS / "smoke-2026-12-05"
RUN = CAMPAIGN / "smoke-poc" / "runs" / "k8s-kill-rank-01"
PRICE = {"usd_per_hour": 1.0, "unit": "node"}


def _stored(run_id: str) -> dict:
    return next(r for r in load_results(CAMPAIGN) if r["run_id"] == run_id)


def test_a_committed_cpu_smoke_run_has_samples_per_s_from_its_median_step_and_no_token_figures():
    events = load_events(RUN)
    rec = _stored("k8s-kill-rank-01")
    m, _ = metrics.derive(events, rec["scheduler"]["stamps"], **rec["derive_inputs"], faults=rec["faults"])
    # the median step time is step_time_s's (the campaign stored it, to 1e-9 s): 64 a rank x 2 ranks / it
    med = statistics.median(metrics.step_times(events))
    assert med == pytest.approx(rec["metrics"]["step_time_s"]["value"], abs=1e-9)
    s = m["samples_per_s"]
    assert s["value"] == pytest.approx(64 * 2 / med, rel=1e-9) and s["unit"] == "samples/s"
    assert s["detail"]["model"] == "mlp" and s["detail"]["batch_per_rank"] == 64 and s["detail"]["ranks"] == 2
    assert s["lo"] == s["hi"] == s["value"] and s["uncertainty"] == 0   # perf_counter durations: exact inputs
    # the MLP on CPUs: no tokens, no MFU, not even a null record
    assert "tokens_per_s" not in m and "mfu" not in m


def test_an_old_train_start_without_a_model_is_the_mlp():
    """smoke-2026-12-02 predates --model: its train_start has no `model` field; the MLP was the only one."""
    run = RESULTS / "smoke-2026-12-02" / "smoke-poc" / "runs" / "local-clean-01"
    events = load_events(run)
    assert all("model" not in e for e in events if e["kind"] == "train_start")
    med = statistics.median(metrics.step_times(events))
    got = throughput(events, 2, med)
    assert set(got) == {"samples_per_s"} and got["samples_per_s"]["value"] == pytest.approx(64 * 2 / med)


# -- constructed events, as the workload emits them ------------------------------------------------------------

def _event(kind: str, t: float, rank: int = 0, attempt=(0, 0, 0), **data) -> dict:
    return {"v": 1, "kind": kind, "ts_ns": int(t * 1e9), "run_id": "r", "rank": rank, "local_rank": rank % 4,
            "world_size": 8, "host": f"node-{rank // 4}", "pid": 100 + rank, "attempt": list(attempt),
            "restarts": {"jobset": 0, "slurm": 0, "torchelastic": 0}, **data}


def transformer_run(device_name: str = "NVIDIA H100 80GB HBM3", device: str = "cuda:0", precision: str = "bf16",
                    world: int = 8, dur: float = 0.5, seq_in_train_start: bool = True) -> list[dict]:
    """8 ranks (2 nodes x 4 GPUs), a 1e9-parameter transformer, 24 layers, d_model 2048, seq_len 2048, batch 8
    a rank; every step 0.5 s after a slow first one."""
    out = []
    for r in range(world):
        out.append(_event("process_start", 100.0, r, argv=["--model", "transformer", "--seq-len", "2048",
                                                           "--batch", "8"]))
        out.append(_event("torch_imported", 101.0, r, device=device if device == "cpu" else f"cuda:{r % 4}",
                          device_name=device_name, gpus=0 if device == "cpu" else 4))
        facts = {"d_model": 2048, "heads": 32, "seq_len": 2048, "vocab_size": 32000, "tokens_per_step": 8 * 2048}
        out.append(_event("train_start", 110.0, r, start_step=0, steps=5, params=1_000_000_000, width=2048,
                          layers=24, batch=8, model="transformer", precision=precision,
                          device=device if device == "cpu" else f"cuda:{r % 4}",
                          **(facts if seq_in_train_start else {})))
        t = 110.0
        for step in range(1, 6):
            t += 3.0 if step == 1 else dur
            out.append(_event("step", t, r, step=step, dur_s=3.0 if step == 1 else dur, loss=1.0))
    return out


def _derive(events: list[dict], world: int = 8) -> dict:
    return metrics.derive(events, {}, world=world, nodes=2, gpus_per_node=4, steps=5, price=PRICE, faults=[])[0]


def test_tokens_per_s_and_mfu_of_a_transformer_on_h100s_by_hand():
    m = _derive(transformer_run())
    # tokens a step: 8 a rank x 2048 x 8 ranks = 131,072; the median step 0.5 s (the 3 s first steps dropped)
    assert m["step_time_s"]["value"] == 0.5
    assert m["tokens_per_s"]["value"] == pytest.approx(262_144.0)
    assert m["tokens_per_s"]["unit"] == "tokens/s" and m["tokens_per_s"]["detail"]["tokens_per_step"] == 131_072
    # FLOPs a token: 6 x 1e9 = 6e9, plus attention 12 x 24 x 2048 x 2048 = 1,207,959,552: 7,207,959,552
    assert flops_per_token(1_000_000_000, 24, 2048, 2048) == (6_000_000_000, 1_207_959_552)
    mfu = m["mfu"]
    assert mfu["detail"]["flops_per_token"] == 7_207_959_552
    # achieved 262,144 x 7,207,959,552 = 1,889,523,348,799,488 FLOP/s = 1889.52 TFLOP/s;
    # peak 989 TFLOP/s (H100 SXM, dense bf16) x 8 GPUs = 7912 TFLOP/s; 1889.523... / 7912 = 0.238817...
    assert mfu["detail"]["achieved_tflops"] == pytest.approx(1889.523348799488)
    assert mfu["detail"]["peak_tflops"] == pytest.approx(7912.0) and mfu["detail"]["gpus"] == 8
    assert mfu["value"] == pytest.approx(0.2388174101, rel=1e-9) and mfu["unit"] == "ratio"
    assert "samples_per_s" not in m


def test_mfu_on_a100s_uses_their_peak():
    m = _derive(transformer_run(device_name="NVIDIA A100-SXM4-80GB"))
    # the same achieved rate over 312 x 8 = 2496 TFLOP/s
    assert m["mfu"]["value"] == pytest.approx(1889.523348799488 / 2496, rel=1e-9)
    assert PEAK_BF16_TFLOPS["NVIDIA A100-SXM4-80GB"] == 312.0 and PEAK_BF16_TFLOPS["NVIDIA H100 80GB HBM3"] == 989.0


def test_a_gpu_not_in_the_table_gives_a_null_mfu_naming_it():
    m = _derive(transformer_run(device_name="NVIDIA GeForce RTX 4090"))
    assert m["tokens_per_s"]["value"] == pytest.approx(262_144.0)
    assert m["mfu"]["value"] is None and "'NVIDIA GeForce RTX 4090'" in m["mfu"]["detail"]["note"]


def test_a_cpu_transformer_has_tokens_per_s_and_no_peak():
    m = _derive(transformer_run(device_name="AMD EPYC 7B13", device="cpu"))
    assert m["tokens_per_s"]["value"] == pytest.approx(262_144.0)
    assert m["mfu"]["value"] is None and m["mfu"]["detail"]["note"] == NO_CPU_PEAK


def test_a_gpu_run_in_fp32_gets_no_mfu_against_a_bf16_peak():
    m = _derive(transformer_run(precision="fp32"))
    assert m["mfu"]["value"] is None and "fp32" in m["mfu"]["detail"]["note"]
    assert m["mfu"]["detail"]["achieved_tflops"] == pytest.approx(1889.523348799488)   # still said


def test_seq_len_from_the_command_line_when_train_start_lacks_it():
    m = _derive(transformer_run(seq_in_train_start=False))
    assert m["tokens_per_s"]["value"] == pytest.approx(262_144.0)
    assert m["tokens_per_s"]["detail"]["seq_len_from"] == "process_start argv"


def test_no_train_start_or_no_steps_gives_no_throughput():
    events = [e for e in transformer_run() if e["kind"] != "train_start"]
    assert throughput(events, 8, 0.5) == {}
    assert throughput(transformer_run(), 8, None) == {}
