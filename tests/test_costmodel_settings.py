"""The cost model reads what the config really ran (remat, batch split, optimizer sharding, sequence
parallelism) and its memory figures are realistic: published expert configurations fit, the bundled
sample's measured peak lies in the band, remat policies keep what MaxText / Megatron document."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.configs.detect import load_config, parse_config
from bot.configs.mesh import Mesh
from bot.proposals.critic import critique
from bot.runs.record import RunRecord
from bot.runs.store import LocalRunStore
from knowledge.cost_remat import MAXTEXT_POLICIES, megatron_policy, named_policy
from knowledge.cost_settings import settings_from_config
from knowledge.cost_shapes import resolve_shape
from knowledge.costmodel import predict

REPO = Path(__file__).resolve().parents[1]
EVAL = REPO / "examples" / "eval"
PUBLISHED = ["maxtext-llama2-70b-v5p-512", "maxtext-llama2-7b-v5p-512", "megatron-llama3-70b-h100-32gpu-16k",
             "megatron-llama3-8b-h100-2gpu"]


def _case(name: str):  # type: ignore[no-untyped-def]
    run = LocalRunStore(EVAL).get(name)
    cfg = load_config(run.path(run.record.config, field="config"))
    return run, cfg, settings_from_config(cfg)


def test_settings_are_read_from_each_config_format() -> None:
    _, _, mt = _case("maxtext-llama2-70b-v5p-512")
    assert (mt.remat_policy, mt.per_device_batch, mt.seq_len) == ("save_dot_except_mlpwi", 4.0, 4096)
    _, _, mg = _case("megatron-llama3-70b-h100-32gpu-16k")
    assert mg.distributed_optimizer is True and mg.sequence_parallel is True and mg.micro_batch == 1
    assert mg.remat_policy == "none" and mg.fused_cross_entropy is True and mg.grad_fp32 is True
    _, _, plain = _case("sample-618")
    assert plain.remat_policy == "save_qkv_and_mlp_outputs" and plain.remat_key == "train.remat"
    assert plain.global_batch == 256 and plain.grad_accum == 1
    nemo = settings_from_config(load_config(REPO / "examples" / "runs" / "204" / "megatron.yaml"))
    assert nemo.flash_attention is False and nemo.dropout is True and nemo.distributed_optimizer is False


@pytest.mark.parametrize("name", PUBLISHED)
def test_published_expert_configs_pass_the_memory_check_uncalibrated(name: str) -> None:
    run, _, settings = _case(name)
    mesh = load_config(run.path(run.record.config, field="config")).mesh(run.record.num_chips, run.record.num_slices)
    pred = predict(run.record, mesh, settings=settings)
    # never more than the chip's HBM, and within the band of the headroom line
    assert pred.memory_per_chip_bytes <= pred.memory_capacity_bytes
    assert pred.memory_low_bytes is not None and pred.memory_low_bytes <= 0.9 * pred.memory_capacity_bytes
    result = critique(run, mesh)  # reads the same settings from the run's config
    mem = result.check("memory")
    assert mem is not None and (mem.passed or not mem.hard), mem.reason
    assert result.ok


def test_maxtext_70b_on_v5p_fits_with_headroom_and_stores_what_save_dot_except_mlpwi_names() -> None:
    run, _, settings = _case("maxtext-llama2-70b-v5p-512")
    pred = predict(run.record, Mesh(ici={"fsdp": 256}), settings=settings)
    assert pred.fits_memory
    # layer input + q (64 x 128) + k, v (8 x 128 each) + out_proj, bf16, per token per layer; mlpwo is not a
    # backward residual. 4 x 4096 tokens per chip x 80 layers.
    saved = 2 * (8192 + 8192 + 1024 + 1024 + 8192)
    assert pred.memory_breakdown_bytes["activations"] > saved * 16384 * 80
    assert pred.memory_breakdown_bytes["activations"] < saved * 16384 * 80 * 1.15


def test_the_same_model_without_the_configs_settings_would_not_fit() -> None:
    # What the model said before it read the config: remat 'dots' from run.yaml keeps every matmul output.
    run, _, _ = _case("maxtext-llama2-70b-v5p-512")
    dots = predict(run.record, Mesh(ici={"fsdp": 256}))
    assert not dots.fits_memory


def test_megatron_distributed_optimizer_from_the_config_shards_over_data_and_context() -> None:
    run, cfg, settings = _case("megatron-llama3-8b-h100-2gpu")
    mesh = cfg.mesh(run.record.num_chips, run.record.num_slices)  # cp=2, dp=8
    sharded = predict(run.record, mesh, settings=settings)
    plain = predict(run.record, mesh, settings=settings.model_copy(update={"distributed_optimizer": False}))
    assert sharded.memory_breakdown_bytes["optimizer"] == pytest.approx(plain.memory_breakdown_bytes["optimizer"] / 16)
    # bf16 weights, fp32 main gradients: 6 + 12/d bytes per parameter (Megatron-Core distributed optimizer docs)
    p = resolve_shape(run.record, settings).params_total
    state = sum(sharded.memory_breakdown_bytes[k] for k in ("weights", "gradients", "optimizer"))
    assert state == pytest.approx(p * (6 + 12 / 16), rel=0.01)


def test_optimizer_precision_settings_change_state_bytes() -> None:
    text = (EVAL / "megatron-llama3-8b-h100-2gpu" / "megatron.yaml").read_text()
    low = text.replace("exp_avg_dtype: float32", "exp_avg_dtype: bfloat16").replace(
        "exp_avg_sq_dtype: float32", "exp_avg_sq_dtype: bfloat16")
    run, cfg, settings = _case("megatron-llama3-8b-h100-2gpu")
    mesh = cfg.mesh(16, 2)
    a = predict(run.record, mesh, settings=settings)
    b = predict(run.record, mesh, settings=settings_from_config(parse_config(low, "low.yaml")))
    assert b.memory_breakdown_bytes["optimizer"] == pytest.approx(a.memory_breakdown_bytes["optimizer"] * 8 / 12)
    # bf16 main gradients with the fp32 reduction this config states: the buffer stays fp32 (the precision-aware
    # optimizer reads its shard in place); with the reduction unstated, main_grads_dtype decides (Megatron-LM's
    # arguments.py), and stated in bf16 the buffer halves whatever main_grads_dtype says
    bf16_main = text.replace("main_grads_dtype: float32", "main_grads_dtype: bfloat16")
    unstated = bf16_main.replace("  grad_reduce_in_fp32: true\n", "")
    bf16_reduce = text.replace("grad_reduce_in_fp32: true", "grad_reduce_in_fp32: false")
    grads = {name: predict(run.record, mesh, settings=settings_from_config(parse_config(t, f"{name}.yaml")))
             .memory_breakdown_bytes["gradients"] for name, t in
             (("bf16_main", bf16_main), ("unstated", unstated), ("bf16_reduce", bf16_reduce))}
    full = a.memory_breakdown_bytes["gradients"]
    assert grads["bf16_main"] == pytest.approx(full)
    assert grads["unstated"] == pytest.approx(full / 2)
    assert grads["bf16_reduce"] == pytest.approx(full / 2)


def test_sample_618_measured_peak_is_inside_the_uncalibrated_band() -> None:
    run = LocalRunStore(REPO / "examples" / "runs").get("618")
    cfg = load_config(run.path(run.record.config, field="config"))
    pred = predict(run.record, cfg.mesh(128, 1), settings=settings_from_config(cfg))
    measured = run.record.measured.hbm_peak_bytes  # type: ignore[union-attr]
    assert pred.memory_low_bytes <= measured <= pred.memory_high_bytes  # type: ignore[operator]
    assert pred.fits_memory


def _llama8b(framework: str = "maxtext") -> RunRecord:
    return RunRecord.model_validate({
        "id": "x", "framework": framework, "chip": "tpu-v5p", "num_chips": 64,
        "model": {"layers": 32, "d_model": 4096, "d_ff": 14336, "heads": 32, "kv_heads": 8, "vocab": 128256},
        "training": {"global_batch": 64, "seq_len": 8192, "micro_batch": 1},
    })


def _maxtext(policy: str):  # type: ignore[no-untyped-def]
    return settings_from_config(parse_config(f"remat_policy: {policy}\nici_fsdp_parallelism: -1\n", "m.yml"))


def test_maxtext_policies_order_memory_and_recompute_as_documented() -> None:
    run, mesh = _llama8b(), Mesh(ici={"fsdp": 64})
    ladder = ["none", "minimal_with_context", "minimal", "save_dot_with_context_except_mlp", "save_dot_except_mlpwi",
              "save_qkv_proj", "full"]
    preds = {p: predict(run, mesh, settings=_maxtext(p)) for p in ladder + ["save_dot_except_mlp",
                                                                            "qkv_proj_offloaded", "minimal_offloaded"]}
    acts = [preds[p].memory_breakdown_bytes["activations"] for p in ladder]
    assert acts == sorted(acts, reverse=True)
    steps = [preds[p].breakdown_ms["compute"] for p in ladder]
    assert steps == sorted(steps)  # less kept, more recomputed
    # mlpwo only feeds the residual sum: saving it costs nothing
    assert preds["save_dot_except_mlpwi"].memory_per_chip_bytes == pytest.approx(
        preds["save_dot_except_mlp"].memory_per_chip_bytes)
    # offloaded residuals leave HBM but are not recomputed
    for off, kept in (("qkv_proj_offloaded", "save_qkv_proj"), ("minimal_offloaded", "minimal")):
        assert preds[off].memory_breakdown_bytes["activations"] < preds[kept].memory_breakdown_bytes["activations"]
        assert preds[off].breakdown_ms["compute"] == pytest.approx(preds[kept].breakdown_ms["compute"])


def test_in_house_policy_names_are_read_by_their_words_and_marked_inexact() -> None:
    spec = named_policy("save_qkv_and_mlp_outputs", source="t")
    assert spec is not None and spec.saved == {"q", "k", "v", "mlpwo"} and not spec.exact
    assert named_policy("nothing_saveable", source="t").is_full  # type: ignore[union-attr]
    assert named_policy("dots_with_no_batch_dims_saveable", source="t").saved == MAXTEXT_POLICIES["minimal"][0]  # type: ignore[union-attr]
    assert named_policy("gibberish_policy", source="t") is None


def _megatron(tp: int, sp: bool, granularity: str | None, method: str = "uniform", layers: int = 1):  # type: ignore[no-untyped-def]
    text = (f"tensor_model_parallel_size: {tp}\nsequence_parallel: {str(sp).lower()}\nhidden_dropout: 0.1\n"
            f"use_flash_attention: false\nrecompute_granularity: {granularity or 'null'}\n"
            f"recompute_method: {method}\nrecompute_num_layers: {layers}\n")
    return settings_from_config(parse_config(text, "m.yaml"))


def _gpt() -> RunRecord:
    # GPT-3-like layer (d_ff = 4h, plain MLP, MHA), as in Korthikanti et al. Table 2
    return RunRecord.model_validate({
        "id": "g", "framework": "megatron", "chip": "h100", "num_chips": 8,
        "model": {"layers": 24, "d_model": 2048, "d_ff": 8192, "heads": 16, "vocab": 50304, "mlp_matrices": 2},
        "training": {"global_batch": 8, "seq_len": 2048, "micro_batch": 1},
    })


def _acts(run: RunRecord, mesh: Mesh, settings) -> float:  # type: ignore[no-untyped-def]
    logits = 6.0 * 2048 * 50304 / mesh.size("tensor")
    return predict(run, mesh, settings=settings).memory_breakdown_bytes["activations"] - logits


def test_megatron_activations_follow_korthikanti_table_2() -> None:
    run, h, s, a, L = _gpt(), 2048, 2048, 16, 24
    t = 8
    mesh = Mesh(ici={"tensor": t})
    # no recompute, no sequence parallelism: sbh(10 + 24/t + 5as/(ht)) per layer
    no_sp = _acts(run, mesh, _megatron(t, False, None))
    assert no_sp == pytest.approx(s * L * (h * (10 + 24 / t) + 5 * a * s / t), rel=1e-6)
    # sequence parallelism divides everything by t
    sp = _acts(run, mesh, _megatron(t, True, None))
    assert sp == pytest.approx(s * L * (34 * h + 5 * a * s) / t, rel=1e-6)
    # selective recompute: the 5as term is gone (one layer's scores while it is recomputed)
    sel = _acts(run, mesh, _megatron(t, True, "selective"))
    assert sel == pytest.approx(s * (L * 34 * h + 5 * a * s) / t, rel=1e-6)
    # full recompute: the 2sbh input per layer (divided by t with SP) + one layer re-materialized
    full = _acts(run, mesh, _megatron(t, True, "full"))
    assert full == pytest.approx(s * (L * 2 * h + 34 * h + 5 * a * s) / t, rel=1e-6)
    assert megatron_policy("full", "block", 4, source="t").megatron_method == "block"


def test_megatron_block_recompute_keeps_the_other_layers_whole() -> None:
    run, mesh = _gpt(), Mesh(ici={"tensor": 8})
    block = _acts(run, mesh, _megatron(8, True, "full", "block", 6))
    none = _acts(run, mesh, _megatron(8, True, None))
    full = _acts(run, mesh, _megatron(8, True, "full", "uniform", 1))
    assert full < block < none
