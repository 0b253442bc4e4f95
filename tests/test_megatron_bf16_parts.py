"""The parts of a Megatron fp8 / fp4 run that stay in bf16: the output layer (LM head) and the edge layers
``first_last_layers_bf16`` keeps.

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

from bot.configs.detect import load_config, parse_config
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


# Megatron-Core's first_last_layers_bf16 (fp8_utils.py / fp4_utils.py is_first_last_bf16_layer @ d98e8a64dd): whole
# layers at the start and end of the stack stay in bf16. Megatron-Bridge's library preset for FP8 current scaling,
# bf16_with_fp8_current_scaling_mixed (src/megatron/bridge/training/mixed_precision.py @ 067f987df), keeps one at each
# end; its performance scripts turn that off, which is why the published rows run every layer in fp8.
LLAMA_8B_FP8 = "mbridge-25.09-b200-llama3-8b-8gpu"  # 32 layers, fp8 current scaling, DP 8 on one DGX-B200


def test_first_and_last_layers_in_bf16_cost_their_share_of_the_fp8_gain() -> None:
    all_fp8 = predict_case(LLAMA_8B_FP8)
    library_preset = predict_case(LLAMA_8B_FP8, bf16_layers=(1, 1))
    assert any("first 1 and last 1 of 32 layers" in a for a in library_preset.assumptions)
    extra = library_preset.breakdown_ms["compute"] / all_fp8.breakdown_ms["compute"] - 1.0
    # 2 of 32 layers' matmuls at the bf16 rate (half B200's fp8 peak): about 6% more matmul time, a little less of
    # the compute term, which also holds the attention core (bf16 either way) and the output layer
    assert 0.02 < extra < 0.0625
    off = predict_case(LLAMA_8B_FP8, bf16_layers=(0, 0))
    assert off.step_time_ms == pytest.approx(all_fp8.step_time_ms)
    assert not any("first_last_layers_bf16" in a for a in off.assumptions)


@pytest.mark.parametrize(("flags", "expected"), [
    ('"--first-last-layers-bf16"', (1, 1)),  # TransformerConfig's default counts
    ('"--first-last-layers-bf16" "--num-layers-at-start-in-bf16" 2 "--num-layers-at-end-in-bf16" 3', (2, 3)),
    ("", None),
])
def test_bf16_layers_are_read_from_a_megatron_launch(flags: str, expected: tuple[int, int] | None,
                                                     tmp_path: Path) -> None:
    """Megatron-LM's 8 x H100 fp8 example, switched to current scaling (Megatron refuses bf16 edge layers under its
    default delayed scaling: transformer_config.py) and given the flags."""
    real = Path(__file__).parent / "data" / "real" / "megatron" / "train_llama3_8b_h100_fp8.sh"
    text = real.read_text().replace('"--fp8-param-gather"', f'"--fp8-param-gather" "--fp8-recipe tensorwise" {flags}')
    (tmp_path / real.name).write_text(text)
    settings = settings_from_config(load_config(tmp_path / real.name, root=tmp_path))
    assert settings.bf16_layers == expected and settings.fp8_recipe == "tensorwise"


@pytest.mark.parametrize(("section", "expected"), [
    # Megatron-Bridge's MixedPrecisionConfig defaults both counts to 0: the flag alone keeps nothing in bf16
    ("mixed_precision:\n  first_last_layers_bf16: true\n  fp8_recipe: tensorwise\n", (0, 0)),
    ("mixed_precision:\n  first_last_layers_bf16: true\n  num_layers_at_start_in_bf16: 1\n"
     "  num_layers_at_end_in_bf16: 1\n  fp8_recipe: tensorwise\n", (1, 1)),
    # a config naming the library preset gets the preset's edge layers
    ("mixed_precision: bf16_with_fp8_current_scaling_mixed\n", (1, 1)),
    ("mixed_precision: nemotron_3_super_bf16_with_nvfp4_mixed\n", (0, 14)),
])
def test_bf16_layers_in_a_megatron_bridge_config(section: str, expected: tuple[int, int]) -> None:
    case = Path(__file__).parents[1] / "examples" / "eval" / LLAMA_8B_FP8 / "megatron.yaml"
    text = case.read_text()
    text = text[:text.index("mixed_precision:")] + section
    assert settings_from_config(parse_config(text, "megatron.yaml")).bf16_layers == expected


def _refusals(case: str, mesh_update: dict[str, int] | None = None, **update: object) -> list[str]:
    """The divisibility check's refusals for the published configuration with ``update`` on its settings."""
    from bot.configs.mesh import Mesh
    from bot.proposals.critic import critique
    from bot.proposals.engine import baseline_mesh
    from bot.runs.store import LocalRunStore
    from knowledge.cost_settings import settings_for_run
    from tests.published_cases import EVAL

    run = LocalRunStore(EVAL).get(case)
    mesh, _ = baseline_mesh(run, None)
    if mesh_update:
        mesh = Mesh(ici={**mesh.ici, **mesh_update}, dcn=mesh.dcn)
    settings = settings_for_run(run)
    assert settings is not None
    check = next(c for c in critique(run, mesh, settings=settings.model_copy(update=update)).checks
                 if c.name == "divisibility")
    return [] if check.passed else check.reason.split("; ")


def test_megatron_refusals_of_low_precision_settings_are_hard_failures() -> None:
    # transformer_config.py @ d98e8a64dd raises ValueError for each of these; the published run itself passes
    assert _refusals(LLAMA_8B_FP8) == []
    assert _refusals(LLAMA_8B_FP8, bf16_layers=(1, 1)) == []  # the library preset on current scaling: fine
    assert any("delayed fp8 scaling" in r for r in _refusals(LLAMA_8B_FP8, bf16_layers=(1, 1), fp8_recipe="delayed"))
    assert any("fp8_output_proj with fp8_recipe tensorwise" in r for r in _refusals(LLAMA_8B_FP8, fp8_output_proj=True))
    assert _refusals(GPT_OSS, fp8_output_proj=True) == []  # MXFP8: allowed
    # 32 layers over 8 stages hold 4 each: 5 bf16 layers at the end cannot fit on the last stage
    deep = _refusals(LLAMA_8B_FP8, {"data": 1, "pipeline": 8}, bf16_layers=(1, 5))
    assert any("num_layers_at_end_in_bf16=5 is more than the 4 layers" in r for r in deep)
