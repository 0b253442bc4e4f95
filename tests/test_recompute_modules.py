"""Megatron-Core selective ``recompute_modules`` (NVIDIA/Megatron-LM megatron/core/transformer/transformer_config.py:
"core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts", ...; default ["core_attn"]).

Published case: Megatron-Bridge's GPT-OSS 120B on 64 H100 (docs/performance-summary-archive.md @ 067f987df03b,
26.04.01 and 25.11 NeMo containers, DGX-H100 rows: 5824 and 5630 tokens/s per GPU, so both ran on 80 GB GPUs). Its
performance recipe (src/megatron/bridge/perf_recipes/gpt_oss/h100/gpt_oss.py @ 067f987df03b) sets
``recompute_granularity = "selective"`` with ``recompute_modules = ["layernorm", "moe_act"]``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from published_cases import predict_case as _predict

from bot.configs.detect import load_config
from knowledge.cost_remat import megatron_policy
from knowledge.cost_settings import settings_from_config

EVAL = Path(__file__).resolve().parents[1] / "examples" / "eval"
GPT_OSS = "mbridge-26.04.01-h100-gpt-oss-120b-64gpu"


def test_the_recipes_modules_are_read_from_yaml_and_from_a_launch_line(tmp_path: Path) -> None:
    y = tmp_path / "m.yaml"
    y.write_text("model:\n  tensor_model_parallel_size: 1\n  recompute_granularity: selective\n"
                 "  recompute_modules: [layernorm, moe_act]\n")
    assert settings_from_config(load_config(y, root=tmp_path)).recompute_modules == "layernorm,moe_act"
    sh = tmp_path / "train.sh"
    sh.write_text("torchrun --nproc_per_node 8 pretrain_gpt.py --recompute-granularity selective "
                  "--recompute-modules moe_act layernorm --micro-batch-size 1\n")
    s = settings_from_config(load_config(sh, root=tmp_path))
    assert s.recompute_modules == "moe_act,layernorm"
    assert s.micro_batch == 1  # the words after the list are still read as their own flags


def test_discarded_activations_leave_the_memory_estimate_of_a_run_that_ran() -> None:
    recipe = _predict(GPT_OSS)
    default = _predict(GPT_OSS, recompute_modules=None)  # Megatron's default: core_attn only
    acts, acts_default = (p.memory_breakdown_bytes["activations"] for p in (recipe, default))
    # layernorm drops the two norm outputs, moe_act the experts' activation output: about 30% of GPT-OSS's
    # per-token layer activations (d_model 2880, 4 experts of 2880 per token)
    assert acts == pytest.approx(0.70 * acts_default, rel=0.05)
    # both discard elementwise outputs only, and core_attn is not listed: nothing is re-run, as with no recompute
    stored = _predict(GPT_OSS, remat_policy="none")
    assert recipe.breakdown_ms["compute"] == pytest.approx(stored.breakdown_ms["compute"], rel=1e-6)
    assert recipe.breakdown_ms["compute"] < default.breakdown_ms["compute"]  # the default re-runs the attention core
    assert recipe.memory_per_chip_bytes < default.memory_per_chip_bytes


def test_the_25_11_row_that_ran_is_not_called_out_of_memory(tmp_path: Path) -> None:
    import shutil

    from bot.proposals.evaluate import run_eval

    case_id = "mbridge-25.11-h100-gpt-oss-120b-64gpu"
    shutil.copytree(EVAL / case_id, tmp_path / case_id)
    (case,) = run_eval(tmp_path).cases
    assert case.points and all(p.predicted_oom is False for p in case.points)
    assert all(p.critic_rejects is False for p in case.points)


def test_module_recompute_of_the_mlp_reruns_its_matmuls() -> None:
    spec = megatron_policy("selective", source="t", modules="mlp")
    assert not spec.recompute_attention_core  # core_attn not listed: the attention core is not re-run
    assert spec.label == "selective (mlp)"
    default = _predict(GPT_OSS, recompute_modules=None)
    moe = _predict(GPT_OSS, recompute_modules="moe")
    # re-running the routed experts' forward adds a third of their matmul work and frees their activations
    assert moe.breakdown_ms["compute"] > default.breakdown_ms["compute"] * 1.1
    assert moe.memory_breakdown_bytes["activations"] < 0.6 * default.memory_breakdown_bytes["activations"]


def test_an_unknown_module_is_named_not_guessed() -> None:
    spec = megatron_policy("selective", source="t", modules=["moe_act", "attention_everything"])
    assert spec.megatron_modules == frozenset({"moe_act"})
    assert any("attention_everything" in n and "not a Megatron-Core module" in n for n in spec.notes)
    unpriced = megatron_policy("selective", source="t", modules=["mla_up_proj"])
    assert any("mla_up_proj" in n and "priced as stored" in n for n in unpriced.notes)
