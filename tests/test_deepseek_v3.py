"""DeepSeek-V3-style MoE (shared experts, leading dense layers, multi-head latent attention) as the model
describes and prices it.

Numbers: DeepSeek-V3's own config (deepseek-ai/DeepSeek-V3 @ 9b4e9788e4a3, inference/configs/config_671B.json) and its
technical report (arXiv 2412.19437, abstract and §2: "671B total parameters with 37B activated for each token", MTP
module excluded). Launch: Megatron-LM's DeepSeek-V3 proxy functional test (tests/data/real/README.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.configs.detect import load_config
from bot.configs.model_dims import moe_layer_pattern, read_model_dims
from bot.runs.record import ModelSpec, RunRecord, TrainingSpec
from knowledge.cost_shapes import resolve_shape

PROXY = Path(__file__).parent / "data" / "real" / "megatron" / "deepseekv3_proxy_flex_tp1pp4emp16etp1cp1.model_config.yaml"

V3 = dict(layers=61, d_model=7168, d_ff=2048, heads=128, vocab=129280, experts=256, experts_per_token=8,
          shared_experts=1, dense_layers=3, dense_d_ff=18432, q_lora_rank=1536, kv_lora_rank=512,
          qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)


def test_deepseek_v3_totals_match_the_report() -> None:
    m = ModelSpec(**V3)
    assert m.derived_params() == pytest.approx(671e9, rel=0.005)  # report: 671B total
    assert m.active_params() == pytest.approx(37e9, rel=0.02)  # report: 37B activated per token


def test_as_plain_moe_with_mha_the_counts_are_far_off() -> None:
    """What the model said before these fields: every layer MoE, no shared expert, standard attention."""
    plain = ModelSpec(layers=61, d_model=7168, d_ff=2048, heads=128, head_dim=128, vocab=129280, experts=256,
                      experts_per_token=8)
    assert abs(plain.active_params() - 37e9) / 37e9 > 0.05  # type: ignore[operator]


def test_shared_experts_and_dense_layers_are_dense_weights() -> None:
    run = RunRecord(id="ds", chip="h100", num_chips=8, framework="megatron", model=ModelSpec(**V3),
                    training=TrainingSpec(global_batch=8, seq_len=4096))
    shape = resolve_shape(run)
    routed = 58 * 3 * 7168 * 2048 * 256
    assert shape.params_expert == routed  # only routed experts shard over the expert axis
    assert shape.moe_layers == 58
    assert shape.head_dim == 192 and shape.v_dim == 128 and shape.kv_heads == 128
    assert any("multi-head latent attention" in a for a in shape.assumptions)


def test_bad_layout_is_a_clear_error() -> None:
    with pytest.raises(ValidationError, match="dense_layers 61 must be fewer than layers 61"):
        ModelSpec(layers=61, dense_layers=61, experts=8)
    with pytest.raises(ValidationError, match="needs qk_nope_head_dim"):
        ModelSpec(kv_lora_rank=512)


def test_megatron_proxy_launch_states_the_deepseek_layout() -> None:
    dims = read_model_dims(load_config(PROXY))
    assert dims is not None
    got = dims.stated()
    assert got["layers"] == 14 and got["experts"] == 64 and got["experts_per_token"] == 8
    assert got["d_ff"] == 2048 and got["dense_d_ff"] == 18432  # --moe-ffn-hidden-size / --ffn-hidden-size
    assert got["shared_experts"] == 1 and got["dense_layers"] == 3  # ([0]*3+[1]*11)
    assert (got["q_lora_rank"], got["kv_lora_rank"], got["qk_nope_head_dim"], got["qk_rope_head_dim"],
            got["v_head_dim"]) == (1536, 512, 128, 64, 128)
    assert "moe_layer_freq" in dims.origin["dense_layers"]


def test_moe_layer_freq_forms() -> None:
    assert moe_layer_pattern("([0]*3+[1]*58)", 61) == [0] * 3 + [1] * 58
    assert moe_layer_pattern(2, 4) == [1, 0, 1, 0]
    assert moe_layer_pattern("[1]*3", 4) is None  # wrong length
    assert moe_layer_pattern("__import__('os')", 4) is None  # never evaluated
