"""The cost model on published rows whose framework settings decide the answer (issue 12's accuracy targets).

Every number here is a published measurement from a case in examples/eval (sources in each case's
expected.yaml and docs/eval.md): torchtitan's H100 tables (peak memory, allocator-reserved), its A100
activation-checkpointing rows, Megatron-Core's H100 weak-scaling table (--tp-comm-overlap) and Narayanan
et al. 2021 Table 1 (SC'21, interleaved stages, unfused attention).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from published_cases import predict_case as _predict

from bot.configs.detect import load_config
from bot.proposals.engine import baseline_mesh
from bot.proposals.eval_figures import measured_points
from bot.proposals.evaluate import load_expected
from bot.runs.store import LocalRunStore
from knowledge import costmodel
from knowledge.cost_remat import named_policy
from knowledge.cost_settings import settings_for_run, settings_from_config

EVAL = Path(__file__).resolve().parents[1] / "examples" / "eval"
GIB = 2**30


def test_megatron_overlap_and_interleaving_flags_are_read() -> None:
    # SC'21 145B: --num-layers-per-virtual-pipeline-stage 5 with 80 layers over PP 8 -> 2 chunks per stage.
    sc21 = settings_from_config(load_config(EVAL / "megatron-sc21-table1-gpt-145b" / "megatron.yaml"))
    assert sc21.virtual_pipeline == 2
    assert sc21.flash_attention is False  # use_flash_attn: false (2021, before FlashAttention)
    assert sc21.tp_comm_overlap is None  # not stated: the cost model prices TP exposed
    core = settings_from_config(load_config(EVAL / "megatron-core-h100-weak-scaling-gpt-32b" / "megatron.yaml"))
    assert core.tp_comm_overlap is True and core.sequence_parallel is True
    nemo = settings_from_config(load_config(EVAL / "nemo-24.07-h100-llama2-70b-64gpu" / "megatron.yaml"))
    assert nemo.virtual_pipeline == 20


@pytest.mark.parametrize("case,measured_gib", [
    ("torchtitan-h100-llama3-8b-fsdp8", 82.4),  # Table 1 row FSDP (selective op AC, local batch 2)
    ("torchtitan-h100-llama3-8b-fsdp8-cp1", 83.9),  # Table 2 FSDP 8, CP 1, 32k tokens, full AC
    ("torchtitan-h100-llama3-8b-fsdp1-cp8", 84.5),  # Table 2 FSDP 1, CP 8, 262k tokens
    ("torchtitan-h100-llama3-405b-fsdp8-tp8-pp8", 82.5),  # Table 5 1F1B, FSDP 8 TP 8 PP 8
    ("torchtitan-h100-llama3-405b-fsdp4-cp2", 75.9),  # Table 6 FSDP 4, CP 2
    ("torchtitan-h100-llama3-70b-fsdp32-tp8", 71.9),  # Table 4 2D, FSDP 32 TP 8, local batch 16 (loss_parallel)
])
def test_torchtitan_peak_memory_within_ten_percent(case: str, measured_gib: float) -> None:
    # The model of main before this change predicted 0.22-0.90 of these peaks: the eager loss's fp32 buffers,
    # FSDP2's gathered weights and unsharded fp32 gradients under pipelining and the allocator's reserve were
    # missing.
    pred = _predict(case).memory_per_chip_bytes / GIB
    assert pred / measured_gib == pytest.approx(1.0, abs=0.10), pred


def test_torchtitan_loss_parallel_buffers_are_counted_under_tensor_parallelism() -> None:
    # Table 4 (70B, FSDP 32 x TP 8, 16 x 8192 tokens per TP group, 71.9 GiB): torchtitan runs the loss under torch's
    # loss_parallel when TP > 1; its decomposed log-softmax backward holds 16 bytes per vocab-sharded logit, not
    # the fused kernels' 12. Counted at 12 the row was predicted at 0.80 of its peak.
    run = LocalRunStore(EVAL).get("torchtitan-h100-llama3-70b-fsdp32-tp8")
    mesh, _ = baseline_mesh(run, None)
    settings = settings_for_run(run)
    assert settings is not None
    on = costmodel.predict(run.record, mesh, settings=settings)
    off = costmodel.predict(run.record, mesh, settings=settings.model_copy(update={"loss_parallel": False}))
    logits = 16 * 8192 * 128256 / 8  # logit elements per chip: the TP group's tokens x the vocab shard
    assert on.memory_breakdown_bytes["activations"] - off.memory_breakdown_bytes["activations"] == pytest.approx(
        (16 - 12) * logits, rel=0.01)


def test_torchtitan_reduces_fsdp_gradients_in_fp32() -> None:
    # torchtitan's FSDP2 MixedPrecisionPolicy reduces in fp32 (parallelize_llama.py @04133643; a float32-only
    # choice since). The reduce-scatter moves twice the bf16 bytes: FSDP time 4/3 of a bf16 reduction.
    import dataclasses

    from knowledge.cost_shapes import resolve_shape
    from knowledge.costmodel import _evaluate_one
    from knowledge.hardware import get_chip

    run = LocalRunStore(EVAL).get("torchtitan-a100-llama2-70b-bs1-sel-op")
    mesh, _ = baseline_mesh(run, None)
    shape = resolve_shape(run.record, settings_for_run(run))
    assert shape.reduce_fp32
    chip = get_chip(run.record.chip)
    def bandwidth_s(s) -> float:  # type: ignore[no-untyped-def]  # FSDP's bytes; NCCL's ring latency is per call
        terms = _evaluate_one(run.record, s, chip, mesh)
        assert terms.stages is not None
        return float(terms.comm_s["fsdp"][0] - terms.stages["fsdp_ring_latency_s"][0])

    fp32, bf16 = bandwidth_s(shape), bandwidth_s(dataclasses.replace(shape, reduce_fp32=False))
    assert fp32 / bf16 == pytest.approx(4 / 3, rel=1e-6)
    # with it, the exposed FSDP time of this row (4.1k tokens per GPU, the most communication per FLOP of the
    # table) grows: its measured step (11.5 s) was predicted 12% short with the bf16 reduction, 9% with the fp32 one,
    # and within 5% since half of PyTorch FSDP's traffic is priced on the critical path (FSDP_EXPOSED_PYTORCH)
    step = _predict("torchtitan-a100-llama2-70b-bs1-sel-op").step_time_ms
    assert 11538.0 / step == pytest.approx(1.0, abs=0.05)


def test_torchtitan_selective_op_checkpointing_costs_recompute() -> None:
    # torchtitan docs/performance.md, Llama 2 13B on 64 A100, local batch 2: no AC 2,162 WPS vs selective op
    # 1,904 WPS: selective op is 13.5% slower per token (steps 3,789 vs 4,303 ms). Priced as no recompute
    # (remat 'dots'), the two rows were predicted equal.
    none = _predict("torchtitan-a100-llama2-13b-bs2-none").step_time_ms
    sel_op = _predict("torchtitan-a100-llama2-13b-bs2-sel-op").step_time_ms
    assert 1.05 < sel_op / none < 1.25


def test_selective_policies_recompute_between_none_and_full() -> None:
    op = named_policy("selective_op", source="test")
    layer = named_policy("selective_layer", source="test")
    assert op is not None and op.every_other_mm and not op.is_full and op.elementwise_recompute == 1.0
    assert layer is not None and layer.layer_every == 2 and layer.core_recompute_share == 0.5


def test_megatron_core_weak_scaling_rows_agree_once_tp_overlap_is_stated() -> None:
    # Megatron-LM README (Megatron-Core r0.8.0, H100): TP 1 (1.7B) to TP 8 PP 16 (462B), all with
    # --tp-comm-overlap (which requires sequence parallelism). Priced with TP exposed and replicated norms, the
    # TP 8 rows were predicted ~1.45x slower relative to the TP 1 row than measured (ratio spread 1.49).
    ratios = []
    for size in ("1.7b", "7.1b", "16b", "32b", "70b", "119b", "177b", "314b", "462b"):
        case = f"megatron-core-h100-weak-scaling-gpt-{size}"
        run = LocalRunStore(EVAL).get(case)
        mesh, _ = baseline_mesh(run, None)
        point = measured_points(run, load_expected(EVAL / case / "expected.yaml"), mesh)[0]
        assert point.measured_step_ms and point.predicted_step_ms
        ratios.append(point.measured_step_ms / point.predicted_step_ms)
    assert max(ratios) / min(ratios) < 1.25, ratios


_V4_22B_RUN = """\
id: maxtext-v4-22b-current
framework: maxtext
chip: tpu-v4
num_chips: 64
model: {name: maxtext-22b, layers: 48, d_model: 6144, d_ff: 24576, heads: 24, kv_heads: 24, head_dim: 128,
        vocab: 32000, mlp_matrices: 3}
training: {global_batch: 832, seq_len: 2048, dtype: bf16, remat: full}
config: mesh.yml
"""
# src/maxtext/configs/tpu/v4/22b.sh @ e591f30cbb: the launch's overrides (the model: its base_* dimensions on that
# commit's base.yml, head_dim 128, SwiGLU, vocab_size 32000)
_V4_22B_MESH = """\
per_device_batch_size: 13
max_target_length: 2048
remat_policy: full
num_vocab_tiling: 8
ici_fsdp_parallelism: 64
ici_tensor_parallelism: 1
dcn_data_parallelism: -1
"""


def test_maxtext_vocab_tiling_keeps_one_chunk_of_logits_and_the_v4_22b_recipe_is_not_called_oom(tmp_path: Path) -> None:
    """MaxText's current v4 22B recipe (src/maxtext/configs/tpu/v4/22b.sh @ e591f30cbb: per_device_batch_size=13,
    num_vocab_tiling=8) is the retuned successor of the run whose 156 TFLOP/s/chip the v4 README reports. Its 13 x 2048
    tokens per chip x 32,000 vocabulary make 1.7 GB of bf16 logits untiled (XLA on TPU fuses the fp32 softmax into the
    loss; 5.1 GB materialized); tiled in 8, one chunk is live. Without reading num_vocab_tiling the Critic called the recipe out of memory (34.9 GB on a 32 GB
    chip)."""
    from bot.proposals.critic import critique

    case = tmp_path / "maxtext-v4-22b-current"
    case.mkdir()
    (case / "run.yaml").write_text(_V4_22B_RUN)
    (case / "mesh.yml").write_text(_V4_22B_MESH)
    run = LocalRunStore(tmp_path).get(case.name)
    settings = settings_for_run(run)
    assert settings is not None and settings.vocab_tiling == 8
    mesh, _ = baseline_mesh(run, None)
    tiled = costmodel.predict(run.record, mesh, settings=settings)
    whole = costmodel.predict(run.record, mesh, settings=settings.model_copy(update={"vocab_tiling": None}))
    saved = whole.memory_per_chip_bytes - tiled.memory_per_chip_bytes
    assert saved == pytest.approx(7 / 8 * 2.0 * 13 * 2048 * 32000, rel=0.01)  # 7/8 of the untiled bf16 logits
    memory = critique(run, mesh, settings=settings).check("memory")
    assert memory is not None and "out of memory" not in memory.reason


def test_xla_fused_loss_is_the_point_on_tpu_so_a_working_gemma_recipe_fits() -> None:
    """MaxText's v6e Gemma 2 9B recipe (src/maxtext/configs/tpu/v6e/gemma2_9b.sh @ e591f30cbb: "This config will work
    out of the box for any number of trillium-256 slices"; 3 x 8192 tokens per chip, 256,128-token vocabulary) holds
    24,576 x 256,128 logits per chip: 12.6 GB in bf16, 37.8 GB with an fp32 softmax beside them. XLA on TPU fuses the
    softmax into the loss (recipes that ran could not hold it materialized: Ironwood's gpt-oss-120b and gemma4-26b),
    so the point takes the fused figure and the band's high edge the materialized one: fits, on a 33.5 GB chip.
    The model comes from the recipe (model_name gemma2-9b), not from run.yaml."""
    from bot.proposals.critic import critique

    run = LocalRunStore(EVAL).get("maxtext-v6e-gemma2-9b-1x256")
    assert run.record.model is None  # run.yaml names no model
    settings = settings_for_run(run)
    mesh, _ = baseline_mesh(run, None)
    pred = costmodel.predict(run.record, mesh, settings=settings)
    note = next(a for a in pred.assumptions if a.startswith("loss buffers"))
    assert "12.6 GB at 2 bytes per logit" in note and "it would be 37.8 GB" in note
    assert pred.memory_high_bytes is not None and pred.memory_high_bytes > pred.memory_capacity_bytes
    memory = critique(run, mesh, settings=settings).check("memory")
    assert memory is not None and memory.passed and memory.reason.startswith("fits:")


def test_xla_prefetch_depth_widens_the_band_so_the_gpt3_175b_v6e_recipe_is_tight_not_oom() -> None:
    """MaxText's v6e GPT-3 175B recipe (src/maxtext/configs/tpu/v6e/gpt3_175b.sh @ e591f30cbb: "This config will work
    out of the box for any number of trillium-256 slices"; FSDP 256, per_device_batch_size 3, remat full) gathers
    one 1.8B-parameter layer at a time: 3.6 GB in bf16 per chip. Two gathered layers (in use + prefetched) are
    priced; how far ahead XLA's scheduler gathers is not in the config, so the band's low edge takes one:
    tight, not out of memory. PyTorch FSDP documents its prefetch, so its band keeps both."""
    from bot.proposals.critic import critique

    run = LocalRunStore(EVAL).get("maxtext-v6e-gpt3-175b-1x256")
    settings = settings_for_run(run)
    mesh, _ = baseline_mesh(run, None)
    pred = costmodel.predict(run.record, mesh, settings=settings)
    note = next(a for a in pred.assumptions if a.startswith("gathered weights"))
    assert "two layers priced (7.2 GB" in note and "takes one (3.6 GB)" in note
    memory = critique(run, mesh, settings=settings).check("memory")
    assert memory is not None and memory.reason.startswith("tight:") and not memory.hard
    titan = _predict("torchtitan-a100-llama2-70b-bs1-sel-op")  # torchtitan FSDP2 over 64 A100s
    assert not any(a.startswith("gathered weights") for a in titan.assumptions)


def test_the_memory_band_stays_positive_when_a_measured_peak_scales_activations_down() -> None:
    """The loss-buffer saving on the band's low edge is an activation: a measured peak that scales activations down
    scales it too (it used to be subtracted unscaled, and the band's low edge went negative)."""
    run = LocalRunStore(EVAL).get("maxtext-v6e-gemma2-9b-1x256")
    settings = settings_for_run(run)
    mesh, _ = baseline_mesh(run, None)
    small = costmodel.calibrate_memory(run.record, mesh, 8e9, settings=settings)  # a peak far under the estimate
    pred = costmodel.predict(run.record, mesh, calibration=small, settings=settings)
    assert pred.memory_low_bytes is not None and 0 < pred.memory_low_bytes <= pred.memory_per_chip_bytes
