"""LoRA fine-tuning is priced as what it is: a frozen base with trainable adapters (knowledge/cost_peft.py).

Checked on Megatron-Bridge's published 26.06 fine-tuning rows (docs/performance-summary.md @ 63b08b397a3e, "LoRA
Performance" and "SFT Performance", LLAMA3_70B; scripts/eval_cases_mbridge_finetune.py writes them):

* LoRA, DGX-H100, 8 GPUs, FP8, GBS 32, MBS 1, 4,096 tokens, TP 2 PP 4 VP 20: 2,643 tokens/s/GPU, 735 model TFLOP/s/GPU.
  Llama 3 70B pre-trained on the same 8 GPUs would need ~190 GB per GPU of weights, gradients and Adam state; the row
  ran because LoRA trains 0.03% of the weights.
* The row's own two figures give Megatron-Bridge's FLOP count for LoRA: 735e12 / 2,643 = 278 GFLOP per token, about
  4 x 70B (the frozen model's 6N x 2/3, flop_utils.py), not 6 x 70B = 423.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.analysis.kpis import model_flops_per_step
from bot.errors import AsapError
from bot.runs.store import LocalRunStore
from tests.published_cases import EVAL, assert_script_writes, megatron_yaml_settings, predict_case

H100_LORA = "mbridge-26.06-h100-llama3-70b-lora-8gpu-fp8"
WRITTEN = [f"mbridge-26.06-{c}-llama3-70b-{task}-{n}gpu-{p}" for task, n in (("sft", 32), ("lora", 8))
           for c, p in (("gb300", "fp8"), ("gb300", "mxfp8"), ("gb200", "fp8"), ("gb200", "mxfp8"), ("h100", "fp8"))]


def test_the_committed_cases_are_what_the_script_writes(tmp_path: Path) -> None:
    assert_script_writes("eval_cases_mbridge_finetune", WRITTEN, tmp_path)


def test_the_published_lora_row_fits_on_8_h100_and_full_training_would_not() -> None:
    lora = predict_case(H100_LORA)
    assert lora.fits_memory, lora.memory_per_chip_bytes / 2**30
    # the frozen base holds no gradients or optimizer state: only the 23.6M adapters do (bytes per chip, < 0.1 GB)
    assert lora.memory_breakdown_bytes["gradients"] < 0.1e9 and lora.memory_breakdown_bytes["optimizer"] < 0.2e9
    full = predict_case(H100_LORA, peft="none")
    assert not full.fits_memory and full.memory_per_chip_bytes > 2 * lora.memory_per_chip_bytes
    assert any("LoRA fine-tuning (rank 16 on linear_qkv)" in a for a in lora.assumptions)


def test_the_lora_step_is_predicted_near_the_published_figure_and_below_full_training() -> None:
    measured_s = 32 * 4096 / (2643 * 8)  # tokens per step / (tokens/s/GPU x GPUs) = 6.20 s
    lora = predict_case(H100_LORA)
    assert abs(lora.step_time_ms / 1000.0 / measured_s - 1.0) < 0.15
    # no weight-gradient GEMMs for the frozen base: the linear layers' work drops by a third, attention does not
    full = predict_case(H100_LORA, peft="none")
    assert 0.6 < lora.step_time_ms / full.step_time_ms < 0.85


def test_model_flops_count_lora_as_megatron_bridge_does() -> None:
    record = LocalRunStore(EVAL).get(H100_LORA).record
    per_token = model_flops_per_step(record).per_step / (32 * 4096)
    published = 735e12 / 2643  # the row's TFLOP/s over its tokens/s: 278 GFLOP
    # ASAP counts attention over the whole 4,096-token sequence (6·L·S·H·2hd per token, 32 GFLOP); Megatron-Bridge
    # counts it within each packed SQuAD sample (flop_utils avg_seqlen2), next to nothing. The rest is the frozen
    # model at 4 FLOPs per parameter per token on both sides.
    attention = 6.0 * 80 * 4096 * 64 * 2 * 128
    assert abs((per_token - attention) / published - 1.0) < 0.03
    full = record.model_copy(update={"training": record.training.model_copy(update={
        "peft": "none", "lora_rank": None, "lora_targets": None})})
    assert model_flops_per_step(full).per_step / model_flops_per_step(record).per_step > 1.4


def test_the_megatron_bridge_peft_block_is_read(tmp_path: Path) -> None:
    s = megatron_yaml_settings(tmp_path, "peft:\n  _target_: megatron.bridge.peft.lora.LoRA\n  dim: 8\n  alpha: 16\n"
                            "  target_modules: ['*.linear_qkv', linear_fc1]\n")
    assert (s.peft, s.lora_rank, s.lora_targets, s.peft_problem) == ("lora", 8, ("linear_qkv", "linear_fc1"), None)
    # a dim elsewhere in the file is not the adapter rank
    s = megatron_yaml_settings(tmp_path, "dim: 4096\npeft: lora\n")
    assert (s.peft, s.lora_rank) == ("lora", None)
    assert megatron_yaml_settings(tmp_path, "peft: null\n").peft == "none"
    assert megatron_yaml_settings(tmp_path, "").peft is None


def test_schemes_and_targets_asap_does_not_price_are_named(tmp_path: Path) -> None:
    s = megatron_yaml_settings(tmp_path, "peft_scheme: dora\n")
    assert s.peft == "lora" and "'dora' priced as LoRA" in (s.peft_problem or "")
    s = megatron_yaml_settings(tmp_path, "peft_scheme: ia3\n")
    assert s.peft == "none" and "'ia3' is not priced" in (s.peft_problem or "")
    s = megatron_yaml_settings(tmp_path, "peft:\n  _target_: megatron.bridge.peft.lora.LoRA\n  target_modules: [linear_q_proj]\n")
    assert s.lora_targets is None and "linear_q_proj not recognised" in (s.peft_problem or "")


def test_lora_fields_without_peft_lora_are_refused_by_name(tmp_path: Path) -> None:
    case = tmp_path / "r1"
    case.mkdir()
    run = yaml.safe_load((EVAL / H100_LORA / "run.yaml").read_text())
    run.update(id="r1", config=None)
    run["training"]["peft"] = "none"
    (case / "run.yaml").write_text(yaml.safe_dump(run))
    with pytest.raises(AsapError) as err:
        LocalRunStore(tmp_path).get("r1")
    assert "lora_rank" in str(err.value) and "peft" in str(err.value)
