"""Google's TPU v5p MaxText mixture-of-experts recipes with the step each README logged (AI-Hypercomputer/tpu-recipes
@ c8cfe2f, training/v5p/*/README.md; scripts/eval_cases_tpu_recipes_v5p.py writes them), and the MoE layout MaxText's
own model files give them (models/deepseek3-671b.yml, llama4-17b-128e.yml, llama4-17b-16e.yml, gemma4-26b.yml):

=====================  =======  ===========================  ================  ===========
recipe                 chips    workload                     per-chip batch    step (s)
=====================  =======  ===========================  ================  ===========
DeepSeek-V3 671B       512      deepseek3_671b_v5p_1024      6 x 8,192         90.7
Llama 4 Maverick       128      llama4_maverick_dropless...  4 x 8,192         24.8
Llama 4 Scout          512      llama4_scout_dropless...     8 x 8,192         31.7
=====================  =======  ===========================  ================  ===========
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.proposals.critic import critique
from bot.proposals.engine import baseline_mesh
from bot.runs.store import LocalRunStore
from knowledge.cost_settings import settings_for_run
from knowledge.cost_shapes import resolve_shape
from tests.published_cases import EVAL, assert_script_writes, predict_case

STEPS = {"tpu-recipes-v5p-deepseek3-671b-512": 90668.0, "tpu-recipes-v5p-llama4-17b-128e-128": 24792.0,
         "tpu-recipes-v5p-llama4-17b-16e-512": 31652.0}


def test_the_committed_cases_are_what_the_script_writes(tmp_path: Path) -> None:
    assert_script_writes("eval_cases_tpu_recipes_v5p", list(STEPS), tmp_path)


@pytest.mark.parametrize("case", list(STEPS))
def test_every_recipe_ran_and_is_not_called_out_of_memory(case: str) -> None:
    """Each recipe ran on 95 GB v5p chips. Maverick was called out of memory (130 GB per chip) while ASAP read its
    48 layers as all MoE: MaxText's file makes every second layer dense (interleave_moe_layer_step 2)."""
    stored = LocalRunStore(EVAL).get(case)
    mesh, _ = baseline_mesh(stored, None)
    check = critique(stored, mesh, settings=settings_for_run(stored))
    assert not [c for c in check.failures if c.hard]
    pred = predict_case(case)
    assert pred.step_time_low_ms <= STEPS[case] <= pred.step_time_high_ms


@pytest.mark.parametrize(("case", "total", "active", "dense", "dense_ff", "shared"), [
    # DeepSeek-V3: 3 dense layers of 18,432, one shared expert, MLA; the published 671B total / 37B active
    ("tpu-recipes-v5p-deepseek3-671b-512", 671e9, 37e9, 3, 18432, 1),
    # Llama 4 Maverick: every second layer MoE (128 experts, top-1, one shared), the others dense 16,384: 400B / 17B
    ("tpu-recipes-v5p-llama4-17b-128e-128", 400e9, 17e9, 24, 16384, 1),
    # Llama 4 Scout: every layer MoE (16 experts, top-1, one shared): 109B with its vision tower, 17B active
    ("tpu-recipes-v5p-llama4-17b-16e-512", 108e9, 17e9, 0, 0, 1),
    # Gemma 4 26B-A4B: the shared expert is base_mlp_dim (2,112) wide, three routed experts' width (704)
    ("tpu-recipes-tpu7x-gemma4-26b-64-4k-bf16", 25e9, 3.8e9, 0, 0, 3),
])
def test_maxtext_model_files_give_the_moe_layout(case: str, total: float, active: float, dense: int, dense_ff: int,
                                                 shared: int) -> None:
    run = LocalRunStore(EVAL).get(case)
    shape = resolve_shape(run.record, settings_for_run(run))
    assert shape.params_total == pytest.approx(total, rel=0.03)
    assert shape.params_active == pytest.approx(active, rel=0.05)
    assert (shape.dense_layers, shape.dense_d_ff, shape.shared_experts) == (dense, dense_ff, shared)
    assert not any("approximates" in a for a in shape.assumptions)


def test_deepseek_attention_is_read_as_mla() -> None:
    run = LocalRunStore(EVAL).get("tpu-recipes-tpu7x-deepseek-v3-128-4k-bf16")
    shape = resolve_shape(run.record, settings_for_run(run))
    # qk = nope 128 + rope 64, v 128; the compressed latents q_lora 1536 + kv_lora 512 + the shared rope key 64
    assert (shape.head_dim, shape.v_head_dim, shape.mla_latent) == (192, 128, 1536 + 512 + 64)
