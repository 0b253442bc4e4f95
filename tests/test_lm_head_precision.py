"""The output layer (LM head) keeps its own precision under fp8 / fp4 linear layers.

Megatron-Core builds the LM head as a plain ``tensor_parallel.ColumnParallelLinear``, outside Transformer Engine, so
an fp8 or NVFP4 run still computes the logits in bf16; only ``fp8_output_proj`` with the MXFP8 recipe makes it a
``TELMHeadColumnParallelLinear`` (Megatron-LM megatron/core/models/gpt/gpt_model.py and fp8_utils.py
``is_mxfp8_output_proj_active`` @ d98e8a64dd). GPT-OSS 120B's 201,088-token vocabulary makes that matmul about a tenth
of its FLOPs: the published Megatron-Bridge 26.08 DGX-GB300 MXFP8 row (docs/performance-summary.md @ 4ab94dfad366,
33,024 tokens/s/GPU) is the case used here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.configs.detect import load_config
from knowledge.cost_settings import settings_from_config
from tests.published_cases import predict_case

GPT_OSS = "mbridge-26.08-gb300-gpt-oss-120b-64gpu-mxfp8"
NOTE = "output layer (LM head) priced in bf16"


def test_megatron_mxfp8_run_prices_its_lm_head_in_bf16_and_says_so() -> None:
    as_run = predict_case(GPT_OSS)
    assert any(NOTE in a for a in as_run.assumptions)
    opted_in = predict_case(GPT_OSS, fp8_output_proj=True)  # TransformerConfig.fp8_output_proj: the head in MXFP8
    assert not any(NOTE in a for a in opted_in.assumptions)
    saved = as_run.breakdown_ms["compute"] - opted_in.breakdown_ms["compute"]
    # a 2,880 x 201,088 head over 1280 x 4096 tokens on 64 GPUs: 6 x 579M x 5.2M / 64 = 283 TFLOP per GPU, run at the
    # bf16 rate instead of the fp8 one: some tens of ms of a ~3 s step, never nothing and never most of it
    assert 0.005 * as_run.step_time_ms < saved < 0.1 * as_run.step_time_ms


def test_bf16_runs_have_no_lm_head_note() -> None:
    pred = predict_case("mbridge-26.04.01-gb300-gpt-oss-120b-64gpu-bf16")
    assert not any(NOTE in a for a in pred.assumptions)


@pytest.mark.parametrize(("flag", "expected"), [('"--fp8-output-proj"', True), ("", None)])
def test_fp8_output_proj_is_read_from_a_megatron_launch(flag: str, expected: bool | None, tmp_path: Path) -> None:
    """Megatron-LM's own 8 x H100 fp8 example (tests/data/real/megatron, d98e8a64), with and without the flag."""
    real = Path(__file__).parent / "data" / "real" / "megatron" / "train_llama3_8b_h100_fp8.sh"
    text = real.read_text().replace('"--fp8-param-gather"', f'"--fp8-param-gather" {flag}')
    (tmp_path / real.name).write_text(text)
    assert settings_from_config(load_config(tmp_path / real.name, root=tmp_path)).fp8_output_proj is expected
