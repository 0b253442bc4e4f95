"""Per-module precision recipes (Megatron ``--te-precision-config-file``, Megatron-Core ``quant_recipe``).

Fixture: Megatron-Bridge's Nemotron 3 Super NVFP4 recipe file, ``te_quant.cfg`` (tests/data/real/README.md): the
attention projections, LatentMoE's projections and the MTP modules in BF16, Mamba's output projection in MXFP8, every
other linear layer at the run's NVFP4. Megatron's reading rules are from megatron/core/quantization/quant_config.py and
extensions/transformer_engine.py (TEQuantizationRecipe) @ d98e8a64dd.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.configs.detect import load_config
from bot.configs.precision_recipe import precision_of, read_rules
from bot.errors import ConfigError
from knowledge.cost_settings import settings_from_config

REAL = Path(__file__).parent / "data" / "real"
TE_QUANT = REAL / "megatron_bridge" / "te_quant.cfg"
NVFP4 = "fp4:nvfp4"


def test_super_recipe_moves_the_modules_it_names_and_leaves_the_rest() -> None:
    rules, notes = read_rules(TE_QUANT.read_text(), str(TE_QUANT))
    assert len(rules) == 5 and notes == []
    want = {
        "decoder.layers.5.self_attention.linear_qkv": "bf16",
        "decoder.layers.5.self_attention.linear_proj": "bf16",
        "decoder.layers.1.mlp.fc1_latent_proj": "bf16",
        "decoder.layers.1.mlp.fc2_latent_proj": "bf16",
        "mtp.layers.0.transformer_layer.mlp.experts.linear_fc1": "bf16",
        "decoder.layers.0.mixer.out_proj": "fp8:mxfp8",
        "decoder.layers.0.mixer.in_proj": NVFP4,  # no matcher: the run's precision
        "decoder.layers.1.mlp.experts.linear_fc1": NVFP4,
        "decoder.layers.1.mlp.shared_experts.linear_fc2": NVFP4,
    }
    assert {p: precision_of(p, rules, NVFP4) for p in want} == want


def _recipe(tmp_path: Path, body: str) -> tuple[list, list[str]]:
    f = tmp_path / "recipe.yaml"
    f.write_text(body)
    return read_rules(f.read_text(), str(f))


BF16_CFG = "configs:\n  bf16: {transformer_engine_config_type: TEQuantizationParams, training_recipe: {}}\n"
FP8_CFG = ("configs:\n  mx: {transformer_engine_config_type: TEQuantizationParams, training_recipe: "
           "{fp8_quantization_recipe: mxfp8%s}}\n")


def test_megatrons_reading_rules(tmp_path: Path) -> None:
    # a matcher is off unless enabled: true (quant_config.py: matcher.get("enabled", False))
    rules, _ = _recipe(tmp_path, BF16_CFG + "matchers:\n  a: {config: bf16, type: glob, pattern: '*'}\n")
    assert rules == []
    # the first enabled match wins
    rules, _ = _recipe(tmp_path, BF16_CFG + FP8_CFG.replace("configs:\n", "") % "" + (
        "matchers:\n  a: {config: mx, type: glob, pattern: '*fc1', enabled: true}\n"
        "  b: {config: bf16, type: glob, pattern: '*', enabled: true}\n"))
    assert precision_of("decoder.layers.0.mlp.linear_fc1", rules, NVFP4) == "fp8:mxfp8"
    assert precision_of("decoder.layers.0.mlp.linear_fc2", rules, NVFP4) == "bf16"
    # a recipe quantizes a bf16 module only with override_nonquantized_autocast
    rules, _ = _recipe(tmp_path, FP8_CFG % "" + "matchers:\n  a: {config: mx, type: glob, pattern: '*', enabled: true}\n")
    assert precision_of("decoder.layers.0.mlp.linear_fc1", rules, "bf16") == "bf16"
    rules, _ = _recipe(tmp_path, FP8_CFG % ", override_nonquantized_autocast: true" +
                       "matchers:\n  a: {config: mx, type: glob, pattern: '*', enabled: true}\n")
    assert precision_of("decoder.layers.0.mlp.linear_fc1", rules, "bf16") == "fp8:mxfp8"


@pytest.mark.parametrize(("body", "field", "what"), [
    ("configs: [1, 2]\n", "configs", "dictionary"),
    (BF16_CFG + "matchers:\n  a: {config: fp4, type: glob, pattern: '*', enabled: true}\n", "matchers.a.config",
     "does not define"),
    ("configs:\n  x: {transformer_engine_config_type: TEQuantizationParams, training_recipe: {fp8_recipe: mxfp8}}\n",
     "configs.x.training_recipe.fp8_recipe", "Extra inputs"),
    (BF16_CFG + "matchers:\n  a: {config: bf16, type: regex, pattern: '.*', enabled: true}\n", "matchers.a.type",
     "glob"),
    ("configs:\n  x: {transformer_engine_config_type: TEQuantizationParams, training_recipe: "
     "{fp8_quantization_recipe: mxfp8, fp4_quantization_recipe: nvfp4}}\n", "configs.x.training_recipe",
     "mutually exclusive"),
])
def test_a_file_that_is_not_a_recipe_is_an_error_naming_the_field(tmp_path: Path, body: str, field: str,
                                                                    what: str) -> None:
    with pytest.raises(ConfigError) as err:
        _recipe(tmp_path, body)
    assert err.value.field == field and what in err.value.render()


def test_alias_bomb_and_non_yaml_are_refused_whole(tmp_path: Path) -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8))
    for body in (bomb, "configs: {a: [}\n"):
        with pytest.raises(ConfigError) as err:
            _recipe(tmp_path, body)
        assert "recipe.yaml" in err.value.render()


def test_configs_asap_cannot_price_are_named_not_guessed(tmp_path: Path) -> None:
    rules, notes = _recipe(tmp_path, "configs:\n  k: {kitchen_config_type: QLinearParams, recipe_idx: 3}\n"
                                     "matchers:\n  a: {config: k, type: glob, pattern: '*fc1', enabled: true}\n")
    assert precision_of("decoder.layers.0.mlp.linear_fc1", rules, NVFP4) == NVFP4
    assert any("not a Transformer Engine config" in n for n in notes)


def _launch(tmp_path: Path, flag: str) -> object:
    """Megatron-LM's 8 x H100 fp8 example (tests/data/real/megatron, d98e8a64) with a precision recipe flag."""
    real = REAL / "megatron" / "train_llama3_8b_h100_fp8.sh"
    (tmp_path / ".git").mkdir()  # the repository the launch's files must sit in
    (tmp_path / "te_quant.cfg").write_text(TE_QUANT.read_text())
    text = real.read_text().replace('"--fp8-param-gather"', f'"--fp8-param-gather" {flag}')
    (tmp_path / real.name).write_text(text)
    return load_config(tmp_path / real.name)


def test_the_flag_reads_the_file_beside_the_launch(tmp_path: Path) -> None:
    cfg = _launch(tmp_path, '"--te-precision-config-file te_quant.cfg"')
    settings = settings_from_config(cfg)  # type: ignore[arg-type]
    assert settings.precision_rules is not None and len(settings.precision_rules) == 5
    assert any("per-module precision recipe read from" in n for n in cfg.reading)  # type: ignore[attr-defined]


def test_a_recipe_outside_the_repository_is_not_read(tmp_path: Path) -> None:
    cfg = _launch(tmp_path, '"--te-precision-config-file /etc/passwd"')
    assert settings_from_config(cfg).precision_rules is None  # type: ignore[arg-type]
    assert any("was not found inside the repository" in n for n in cfg.reading)  # type: ignore[attr-defined]


def _rules(tmp_path: Path, body: str) -> list:
    return _recipe(tmp_path, body)[0]


LLAMA_NVFP4 = "mbridge-26.04.01-gb300-llama3-70b-64gpu-nvfp4"  # Llama 3 70B, NVFP4 on 64 GB300 (published row)


def test_recipe_prices_each_class_at_its_precision(tmp_path: Path) -> None:
    from tests.published_cases import predict_case

    rules, _ = read_rules(TE_QUANT.read_text(), str(TE_QUANT))
    base, moved = predict_case(LLAMA_NVFP4), predict_case(LLAMA_NVFP4, precision_rules=rules)
    # only the attention projections move (the model has no LatentMoE, Mamba or MTP), and the answer says so
    note = next(a for a in moved.assumptions if "per-module precision" in a)
    assert "attn_qkv 100% bf16" in note and "attn_proj 100% bf16" in note and "mamba" not in note
    # 70B: q/k/v/o are 151M of a layer's 856M matmul parameters (18%); at bf16 they run 6x slower than at GB300's
    # dense fp4 peak (2.5 vs 15 PFLOP/s): the layers' matmul time rises by about 0.18 x 5 = 0.9x, less the attention
    # core and the LM head that were bf16 before
    extra = moved.breakdown_ms["compute"] / base.breakdown_ms["compute"] - 1.0
    assert 0.3 < extra < 0.9
    # a recipe that names the run's own precision for every module changes nothing
    same = _rules(tmp_path, "configs:\n  f: {transformer_engine_config_type: TEQuantizationParams, training_recipe: "
                            "{fp4_quantization_recipe: nvfp4}}\nmatchers:\n  a: {config: f, type: glob, pattern: '*', "
                            "enabled: true}\n")
    assert predict_case(LLAMA_NVFP4, precision_rules=same).step_time_ms == pytest.approx(base.step_time_ms)


def test_mxfp8_modules_in_an_mxfp8_run_keep_the_kernel_ratio(tmp_path: Path) -> None:
    """Moving a module to the MXFP8 recipe the run already uses changes nothing; moving it to bf16 costs time."""
    from tests.published_cases import predict_case

    case = "mbridge-26.08-gb300-nemotron-3-super-64gpu-mxfp8"
    mx = _rules(tmp_path, FP8_CFG % "" + "matchers:\n  a: {config: mx, type: glob, pattern: '*', enabled: true}\n")
    base = predict_case(case)
    assert predict_case(case, precision_rules=mx).step_time_ms == pytest.approx(base.step_time_ms)
    bf16 = _rules(tmp_path, BF16_CFG + "matchers:\n  a: {config: bf16, type: glob, pattern: '*experts*', "
                            "enabled: true}\n")
    assert predict_case(case, precision_rules=bf16).breakdown_ms["compute"] > 1.1 * base.breakdown_ms["compute"]
