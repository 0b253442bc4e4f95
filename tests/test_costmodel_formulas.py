"""Cost-model formulas checked against numbers worked out by hand (Llama-3-8B-like on TPU v5p-64)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bot.configs.mesh import Mesh
from bot.runs.record import RunRecord
from knowledge import cost_core
from knowledge.cost_core import evaluate
from knowledge.cost_shapes import resolve_shape
from knowledge.costmodel import mesh_arrays, predict
from knowledge.hardware import get_chip

# Llama-3-8B dimensions, written out so the hand arithmetic below is checkable.
L, D, F, H, KV, HD, VOCAB = 32, 4096, 14336, 32, 8, 128, 128256
ATTN_PER_LAYER = D * HD * (2 * H + 2 * KV)  # 41,943,040
MLP_PER_LAYER = 3 * D * F  # 176,160,768 (SwiGLU: 3 matrices)
P_LAYERS = L * (ATTN_PER_LAYER + MLP_PER_LAYER)  # 6,979,321,856
P = P_LAYERS + 2 * VOCAB * D  # 8,029,995,008


def llama8b(num_chips: int = 64, *, chip: str = "tpu-v5p", num_slices: int = 1, **training: object) -> RunRecord:
    train = {"global_batch": 64, "seq_len": 8192, "remat": "full", "micro_batch": 1}
    train.update(training)
    return RunRecord.model_validate(
        {
            "id": "llama8b",
            "framework": "maxtext",
            "chip": chip,
            "num_chips": num_chips,
            "num_slices": num_slices,
            "model": {"layers": L, "d_model": D, "d_ff": F, "heads": H, "kv_heads": KV, "vocab": VOCAB},
            "training": train,
        }
    )


def terms_for(run: RunRecord, mesh: Mesh):
    ici, dcn = mesh_arrays([mesh])
    return evaluate(resolve_shape(run), get_chip(run.chip), run.num_chips // mesh.num_slices, ici, dcn)


def test_parameter_count_matches_hand_arithmetic() -> None:
    assert P == 8_029_995_008
    assert resolve_shape(llama8b()).params_total == pytest.approx(P)


def test_fsdp64_memory_per_chip_by_hand() -> None:
    pred = predict(llama8b(), Mesh(ici={"fsdp": 64}))
    mem = pred.memory_breakdown_bytes
    # Model state sharded 64 ways (MaxText: fp32 parameters, fp32 gradients, two fp32 Adam moments).
    gathered_two_layers = 2 * 2 * P_LAYERS / L  # FSDP keeps the current and the prefetched layer gathered (bf16)
    assert mem["weights"] == pytest.approx(4 * P / 64 + gathered_two_layers)
    assert mem["gradients"] == pytest.approx(4 * P / 64)
    assert mem["optimizer"] == pytest.approx(8 * P / 64)
    # Activations, full remat, 1 sequence of 8192 tokens per chip: layer inputs 2·D per token for 32
    # layers, plus what one layer re-materializes during its backward (norm inputs/outputs 8D, q/k/v
    # 2·(H+2KV)·HD, attention output 2·H·HD, MLP 2·F·2 + 2·F, minus the saved input 2D), plus the bf16 logits
    # (2 B) per token per vocab entry: XLA on TPU fuses the fp32 softmax into the loss (Google's Ironwood gpt-oss
    # and gemma4 recipes could not run with it materialized), the band's high edge keeping the 6 B materialized.
    tokens = 8192
    layer = 8 * D + 2 * (H + 2 * KV) * HD + 2 * H * HD + 2 * F * 2 + 2 * F
    acts = 2 * D * tokens * L + (layer - 2 * D) * tokens + 2 * tokens * VOCAB
    assert mem["activations"] == pytest.approx(acts)
    assert pred.memory_per_chip_bytes == pytest.approx(sum(mem.values()))
    assert pred.memory_per_chip_bytes == pytest.approx(8.2e9, rel=0.01)  # 2.9 GB model state + 5.3 GB activations
    assert pred.memory_low_bytes < pred.memory_per_chip_bytes < pred.memory_high_bytes
    # the high edge holds the materialized fp32 softmax: 4 more bytes per logit than the point
    assert pred.memory_high_bytes > pred.memory_per_chip_bytes + 4 * tokens * VOCAB
    assert pred.fits_memory and pred.memory_capacity_bytes == 96e9


def test_fsdp_allgather_time_is_bytes_over_bandwidth() -> None:
    t = terms_for(llama8b(), Mesh(ici={"fsdp": 64}))
    # 64 chips = 4x4x4 with wraparound; fsdp=64 spans all three torus axes: 3 x 2 x 90 GB/s per chip.
    w = 3 * 2 * 9e10
    one_gather = 2 * P * (63 / 64) / w  # bf16 weights, ring all-gather V (n-1)/n / W
    assert one_gather == pytest.approx(0.0293, rel=0.01)
    # forward all-gather + backward all-gather + gradient reduce-scatter, one micro-batch per step
    assert t.comm_s["fsdp"][0] == pytest.approx(3 * one_gather)


def test_data_parallel_gradient_allreduce_is_2v_over_w() -> None:
    run = llama8b(16, global_batch=16)
    t = terms_for(run, Mesh(ici={"data": 4, "fsdp": 4}))
    # 16 chips (no wraparound below 64 chips): one link per direction; data=4 spans one torus axis.
    w = 9e10
    # MaxText reduces gradients in grad_dtype, base.yml float32 (its weights are fp32 too): 4 B per parameter
    grad_shard = 4 * P / 4  # fp32 gradients after the fsdp=4 reduce-scatter
    assert t.comm_s["data"][0] == pytest.approx(2 * grad_shard * (3 / 4) / w)
    run_other = run.model_copy(update={"framework": "other"})  # a PyTorch-style trainer reduces in bf16
    assert terms_for(run_other, Mesh(ici={"data": 4, "fsdp": 4})).comm_s["data"][0] == pytest.approx(
        2 * (2 * P / 4) * (3 / 4) / w)


def test_training_flops_are_6nt_plus_attention(monkeypatch: pytest.MonkeyPatch) -> None:
    run = llama8b()
    t = terms_for(run, Mesh(ici={"fsdp": 64}))
    tokens = 64 * 8192
    matmul_params = P - VOCAB * D  # the input embedding is a lookup
    expected = (6 * matmul_params * tokens + 12 * L * H * HD * 8192 * tokens) / 64
    assert t.model_flops_per_chip[0] == pytest.approx(expected)
    # Full remat re-runs each layer's forward in backward, except the MLP down projection, whose output
    # only feeds the residual sum (jax.checkpoint keeps/recomputes only what backward needs), and the
    # attention core: 2 FLOPs per re-run parameter per token, attention x 4/3.
    chip = get_chip("tpu-v5p")
    recompute = 2 * L * (ATTN_PER_LAYER + 2 * D * F) * tokens / 64
    attention = 12 * L * H * HD * 8192 * tokens / 64
    hardware = expected + recompute + attention / 3
    # Per-chip matmul shapes slow the matmuls by a factor in (0, 1]; with the shape term off the compute
    # time is exactly the hardware FLOPs at the base efficiency.
    eff = cost_core.chip_efficiency(chip)
    assert t.compute_s[0] > hardware / (chip.peak_bf16_flops * eff)
    monkeypatch.setattr(cost_core, "SHAPE_TILE", 0.0)
    flat = terms_for(run, Mesh(ici={"fsdp": 64}))
    assert flat.compute_s[0] == pytest.approx(hardware / (chip.peak_bf16_flops * eff))
    assert 1.2 < hardware / expected < 4 / 3  # [KOR §5]: full recompute costs up to ~1/3 more


def test_tensor_parallel_allreduces_per_layer() -> None:
    mesh = Mesh(ici={"fsdp": 16, "tensor": 4})
    base = terms_for(llama8b(remat="none"), mesh).comm_s["tensor"][0]
    full = terms_for(llama8b(remat="full"), mesh).comm_s["tensor"][0]
    # [MLM]: 2 all-reduces forward + 2 backward per layer; full remat replays the forward's 2.
    tokens = 64 / 16 * 8192  # 4 sequences per fsdp rank, one micro-batch (micro_batch=1 -> 4 micro-batches)
    tokens_mb = 8192
    w = 2 * 9e10  # tensor=4 is one torus axis of the 4x4x4 slice, with wraparound
    ar = 2 * (2 * tokens_mb * D) * (3 / 4) / w
    assert base == pytest.approx(4 * L * 4 * ar)  # 4 micro-batches x 32 layers x 4 all-reduces
    assert full == pytest.approx(6 / 4 * base)
    assert tokens == 4 * tokens_mb


def test_pipeline_bubble_fraction() -> None:
    run = llama8b(global_batch=64, micro_batch=1)
    t = terms_for(run, Mesh(ici={"fsdp": 8, "pipeline": 8}))
    m = 64 / 8  # 8 sequences per rank, micro_batch 1
    assert t.micro_batches[0] == pytest.approx(m)
    assert t.bubble_frac[0] == pytest.approx((8 - 1) / m)
    pred = predict(run, Mesh(ici={"fsdp": 8, "pipeline": 8}))
    assert pred.breakdown_ms["pipeline_bubble"] > 0.3 * pred.breakdown_ms["compute"]


def test_small_per_chip_batch_is_hbm_bound() -> None:
    # One 16-token sequence per chip: intensity ~16 FLOP/byte, ten times under v5p's ridge point
    # (4.59e14 / 2.8e12 = 164 FLOP/byte), so loading the weights from HBM dominates the matmuls.
    tiny = llama8b(global_batch=64, seq_len=16)
    t = terms_for(tiny, Mesh(ici={"fsdp": 64}))
    assert t.hbm_s[0] > 3 * t.compute_s[0]  # (a 16-row matmul also wastes most of a 256-wide tile: compute x2)
    big = terms_for(llama8b(global_batch=64, seq_len=8192), Mesh(ici={"fsdp": 64}))
    # 8192 tokens per chip: the matmuls are compute-bound; what HBM time remains is the elementwise work
    # (norms, activations, residuals: EW_BYTES x width per token per layer), a small share of the step.
    assert 0.0 < big.hbm_s[0] < 0.25 * big.compute_s[0]


def test_breakdown_sums_to_step_time() -> None:
    for mesh in (Mesh(ici={"fsdp": 16, "tensor": 4}), Mesh(ici={"fsdp": 8, "pipeline": 8}), Mesh(ici={"data": 64})):
        pred = predict(llama8b(), mesh)
        assert sum(pred.breakdown_ms.values()) == pytest.approx(pred.step_time_ms)
        assert pred.step_time_low_ms <= pred.step_time_ms <= pred.step_time_high_ms


def test_gpu_tensor_inside_nvlink_vs_across_nodes() -> None:
    run = llama8b(16, chip="h100", global_batch=16)
    inside = terms_for(run, Mesh(ici={"tensor": 8, "fsdp": 2})).comm_s["tensor"][0]
    across = terms_for(run, Mesh(ici={"tensor": 16})).comm_s["tensor"][0]
    # tensor=8 all on NVLink (450 GB/s); tensor=16 adds a ring over InfiniBand at 50 GB/s per GPU.
    # Both all-reduce one 8192-token micro-batch of activations, V = 2 B x 8192 x d_model, 6 times per
    # layer (full remat). tensor=8: all on NVLink, 2 V 7/8 / 450 GB/s. tensor=16: 8 GPUs on NVLink, then
    # 2 groups over InfiniBand with V/8 each at 50 GB/s. Micro-batches: 16/2 = 8 vs 16 per step.
    # Bandwidths are achieved, not datasheet: NCCL ring all-reduce reaches ~0.8 of NVLink and ~0.9 of the NIC.
    v = 2 * 8192 * D
    nvlink, ib = 4.5e11 * 0.8, 5e10 * 0.9
    per_inside = 2 * v * (7 / 8) / nvlink
    per_across = 2 * v * ((7 / 8) / nvlink + (1 / 8) * (1 / 2) / ib)
    assert inside == pytest.approx(8 * L * 6 * per_inside)
    assert across == pytest.approx(16 * L * 6 * per_across)


def test_dcn_axis_uses_dcn_bandwidth() -> None:
    run = llama8b(128, num_slices=2, global_batch=128)
    ici_only = terms_for(run.model_copy(update={"num_slices": 1}), Mesh(ici={"fsdp": 64, "data": 2}))
    over_dcn = terms_for(run, Mesh(ici={"fsdp": 64}, dcn={"data": 2}))
    grad_shard = 4 * P / 64  # MaxText's fp32 gradients (grad_dtype float32)
    # data=2 lies entirely on DCN: all-reduce 2 V (n-1)/n / W at 6.25 GB/s per chip.
    assert over_dcn.comm_s["data"][0] == pytest.approx(2 * grad_shard * (1 / 2) / 6.25e9)
    assert over_dcn.comm_s["data"][0] > 5 * ici_only.comm_s["data"][0]


def test_memory_shrinks_with_remat() -> None:
    mesh = Mesh(ici={"fsdp": 64})
    acts = {r: predict(llama8b(remat=r, micro_batch=None), mesh).memory_breakdown_bytes["activations"] for r in
            ("none", "dots", "minimal", "full")}
    assert acts["none"] > acts["dots"] > acts["minimal"] > acts["full"]
    assert math.isfinite(sum(acts.values()))


def test_moe_expert_alltoall_and_sharding() -> None:
    run = RunRecord.model_validate(
        {
            "id": "moe",
            "chip": "tpu-v5p",
            "num_chips": 64,
            "model": {"layers": 8, "d_model": 2048, "d_ff": 4096, "heads": 16, "vocab": 32000, "experts": 8,
                      "experts_per_token": 2},
            "training": {"global_batch": 64, "seq_len": 4096, "remat": "full"},
        }
    )
    no_ep = terms_for(run, Mesh(ici={"fsdp": 64}))
    ep = terms_for(run, Mesh(ici={"fsdp": 8, "expert": 8}))
    assert no_ep.comm_s["expert"][0] == 0.0
    assert ep.comm_s["expert"][0] > 0.0
    shape = resolve_shape(run)
    # Expert weights are sharded by expert x fsdp, dense weights by fsdp alone.
    w_shard = shape.params_dense / 8 + shape.params_expert / 64
    assert ep.memory["optimizer"][0] == pytest.approx(8 * w_shard)  # two fp32 Adam moments
    # Same FLOPs per chip; expert parallelism gives each local expert ne x more tokens: larger matmuls.
    assert np.all(ep.model_flops_per_chip == no_ep.model_flops_per_chip)
    assert np.all(ep.compute_s <= no_ep.compute_s)
