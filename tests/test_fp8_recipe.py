"""FP8 scaling recipes (knowledge.cost_fp8_recipe): read from every config form, and MXFP8 priced on published pairs.

Megatron-Bridge's 25.11 performance summary (docs/performance-summary-archive.md @ 067f987df0, "25.11 NeMo Container" >
"Pre-Training Performance") ran the same Llama configurations in FP8 current scaling and in MXFP8, the MXFP8 figures
in parentheses:

==========  =============  ======================  ===================
system      model          FP8-CS tokens/s/GPU     FP8-MX tokens/s/GPU
==========  =============  ======================  ===================
DGX-GB300   LLAMA3_8B      37,556                  36,108  (-3.9%)
DGX-GB200   LLAMA3_8B      31,508                  29,789  (-5.5%)
DGX-B200    LLAMA3_8B      30,624                  29,521  (-3.6%)
DGX-B200    LLAMA3.1_405B  661                     624     (-5.6%)
==========  =============  ======================  ===================

ASAP priced both recipes alike (one fp8 peak), so it could not rank a table's FP8 and MXFP8 rows: the 26.06 DGX-GB300
table (405B FP8 2,646, MXFP8 2,403 model TFLOP/s/GPU) ranked at Spearman 0.5.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot.configs.detect import load_config
from bot.configs.mesh import Mesh
from bot.runs.record import RunRecord
from knowledge import costmodel
from knowledge.cost_fp8_recipe import MXFP8_DENSE_GEMM_SLOWDOWN, fp8_recipe_stated
from knowledge.cost_settings import settings_from_config
from tests.published_cases import megatron_yaml_settings, predict_case, propose_case

PAIRS = [("mbridge-25.11-gb300-llama3-8b-8gpu", 37556, 36108), ("mbridge-25.11-gb200-llama3-8b-8gpu", 31508, 29789),
         ("mbridge-25.11-b200-llama3-8b-8gpu", 30624, 29521), ("mbridge-25.11-b200-llama31-405b-128gpu", 661, 624)]


@pytest.mark.parametrize(("yaml", "recipe"), [
    ("mixed_precision:\n  fp8: e4m3\n  fp8_recipe: mxfp8\n", "mxfp8"),  # Megatron-Bridge ConfigContainer
    ("mixed_precision:\n  fp8: hybrid\n  fp8_recipe: tensorwise\n", "tensorwise"),
    ("mixed_precision: bf16_with_mxfp8_mixed\n", "mxfp8"),  # a Bridge preset by name
    ("mixed_precision: bf16_with_fp8_current_scaling_mixed\n", "tensorwise"),
    ("mixed_precision: bf16_with_fp8_delayed_scaling_mixed\n", "delayed"),
    ("mixed_precision: bf16_with_fp8_subchannel_scaling_mixed\n", "blockwise"),
    ("model:\n  fp8: hybrid\n", None),  # fp8 on, recipe not stated
])
def test_the_recipe_is_read_from_bridge_yaml(tmp_path: Path, yaml: str, recipe: str | None) -> None:
    assert megatron_yaml_settings(tmp_path, yaml).fp8_recipe == recipe


@pytest.mark.parametrize(("flags", "recipe"), [
    ("--fp8-format e4m3 --fp8-recipe mxfp8", "mxfp8"),
    ("--fp8-format hybrid --fp8-recipe tensorwise", "tensorwise"),
    ("--fp8-format hybrid", None),
])
def test_the_recipe_is_read_from_megatron_lm_flags(tmp_path: Path, flags: str, recipe: str | None) -> None:
    sh = tmp_path / "train.sh"
    sh.write_text(f"torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2 {flags} "
                  "--seq-length 4096\n")
    assert settings_from_config(load_config(sh, root=tmp_path)).fp8_recipe == recipe


def test_recipe_names_outside_the_four_are_kept_as_written() -> None:
    assert fp8_recipe_stated("Custom") == "custom"
    assert fp8_recipe_stated(None, "bf16_mixed") is None
    assert fp8_recipe_stated("null", "bf16_with_mxfp8_mixed") == "mxfp8"  # an explicit null falls back to the preset


@pytest.mark.parametrize(("case", "cs_tokens", "mx_tokens"), PAIRS)
def test_an_mxfp8_twin_is_predicted_slower_by_about_the_published_gap(case: str, cs_tokens: int,
                                                                      mx_tokens: int) -> None:
    """Each published pair: MXFP8 predicted 2-6% slower than FP8-CS (measured 3.6-5.6%); before, equal."""
    cs, mx = predict_case(case), predict_case(f"{case}-fp8mx")
    assert cs.step_time_ms == pytest.approx(predict_case(case, fp8_recipe="tensorwise").step_time_ms)
    predicted_gap = mx.step_time_ms / cs.step_time_ms - 1.0
    measured_gap = cs_tokens / mx_tokens - 1.0
    assert 0.02 < predicted_gap < 0.06, f"{case}: predicted {100 * predicted_gap:.1f}%"
    assert predicted_gap < measured_gap + 0.01  # the kernel ratio is not fitted past what was measured
    assert any("MXFP8 (config: fp8_recipe mxfp8)" in a for a in mx.assumptions)


def test_expert_gemms_keep_the_fp8_rate() -> None:
    """A MoE run's MXFP8 cost is its dense GEMMs' only: Qwen3 30B-A3B (attention and output layer dense, experts
    grouped) moves less than a dense Llama 3 8B, whose every matmul is dense."""
    moe = "mbridge-26.08-gb300-qwen3-30b-a3b-8gpu-mxfp8"
    moe_gap = predict_case(moe).step_time_ms / predict_case(moe, fp8_recipe="tensorwise").step_time_ms - 1.0
    dense = "mbridge-25.11-gb300-llama3-8b-8gpu"
    dense_gap = predict_case(dense, fp8_recipe="mxfp8").step_time_ms / predict_case(dense).step_time_ms - 1.0
    assert 0.0 < moe_gap < dense_gap < MXFP8_DENSE_GEMM_SLOWDOWN - 1.0


def test_the_26_06_gb300_table_ranks_fp8_above_mxfp8() -> None:
    """405B on 256 GB300: FP8 2,646 and MXFP8 2,403 model TFLOP/s/GPU; ASAP now predicts the FP8 row faster."""
    fp8 = predict_case("mbridge-26.06-gb300-llama31-405b-256gpu-fp8")
    mx = predict_case("mbridge-26.06-gb300-llama31-405b-256gpu-mxfp8")
    assert fp8.step_time_ms < mx.step_time_ms


def _llama8b_fp8(chip: str, recipe: str | None) -> costmodel.Prediction:
    """Llama 3 8B in fp8 on 8 GPUs, data parallel, from run.yaml alone (no config)."""
    record = RunRecord.model_validate({
        "id": "r", "chip": chip, "num_chips": 8, "num_slices": 1, "framework": "megatron",
        "model": {"name": "llama3-8b", "layers": 32, "d_model": 4096, "d_ff": 14336, "heads": 32, "kv_heads": 8,
                  "vocab": 128256, "mlp_matrices": 3},
        "training": {"global_batch": 128, "seq_len": 8192, "micro_batch": 2, "dtype": "fp8", "fp8_recipe": recipe}})
    return costmodel.predict(record, Mesh(ici={"data": 8}))


def test_an_unstated_recipe_widens_the_band_where_mxfp8_runs() -> None:
    """run.yaml dtype fp8 on GB300 without a recipe: priced per-tensor, the band widened and the answer says so; on
    H100 (no block-scaled tensor cores) the recipe cannot be MXFP8 and nothing widens."""
    stated, unstated = _llama8b_fp8("gb300", "tensorwise"), _llama8b_fp8("gb300", None)
    assert unstated.step_time_ms == pytest.approx(stated.step_time_ms)
    assert unstated.uncertainty == pytest.approx(stated.uncertainty + MXFP8_DENSE_GEMM_SLOWDOWN - 1.0, abs=1e-3)
    assert any("fp8 recipe not stated" in a for a in unstated.assumptions)
    h100 = _llama8b_fp8("h100", None)
    assert h100.uncertainty == pytest.approx(_llama8b_fp8("h100", "tensorwise").uncertainty)
    assert not any("fp8 recipe not stated" in a for a in h100.assumptions)
    mx = _llama8b_fp8("gb300", "mxfp8")
    assert mx.step_time_ms > stated.step_time_ms and mx.uncertainty == pytest.approx(stated.uncertainty, abs=1e-3)


MX_ADVICE = "compute-dense-mxfp8"
MX_SECTION = "playbooks/bottlenecks.md#dense-layers-in-mxfp8"


def test_a_dense_mxfp8_run_is_told_what_per_tensor_scaling_measured(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The compute-bound 25.11 GB300 Llama 3 8B FP8-MX row gets the published FP8-CS gap as advice, cited."""
    monkeypatch.setenv("ASAP_STATE_DIR", str(tmp_path))
    ps = propose_case("mbridge-25.11-gb300-llama3-8b-8gpu-fp8mx")
    advice = [a for a in ps.advice if a.id == MX_ADVICE]
    assert advice and "3.7-5.9% faster" in advice[0].text and advice[0].citation == MX_SECTION


@pytest.mark.parametrize("case", ["mbridge-25.11-gb300-llama3-8b-8gpu",  # its FP8-CS twin
                                  "mbridge-26.08-gb300-qwen3-30b-a3b-8gpu-mxfp8"])  # MoE: experts as fast in MXFP8
def test_the_mxfp8_advice_and_section_stay_away_from_other_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 case: str) -> None:
    monkeypatch.setenv("ASAP_STATE_DIR", str(tmp_path))
    ps = propose_case(case)
    assert not any(a.id == MX_ADVICE for a in ps.advice)
    # retrieval matched the section's words (Llama 3 8B, GB300) for the FP8-CS twin before it carried fp8_recipe=mxfp8
    assert not any(c.ref == MX_SECTION for p in ps.proposals for c in p.citations)


REAL = Path(__file__).parent / "data" / "real" / "megatron"
GUIDE = "deepseek_v3_gb200_reproduce_guide_launch.sh"


def test_the_guides_unquoted_layer_freq_is_named_not_silently_cut(tmp_path: Path) -> None:
    """Megatron-LM's DeepSeek-V3 GB200 guide prints ``--moe-layer-freq ([0]*3+[1]*58)`` unquoted. Bash refuses that
    line; ASAP used to stop reading there and silently dropped the 60 flags after it (recompute, CUDA graphs, the
    MXFP8 recipe, the precision-aware optimizer). Now the answer names the line and the fix."""
    from bot.errors import ConfigError

    shutil.copyfile(REAL / GUIDE, tmp_path / GUIDE)
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / GUIDE, root=tmp_path)
    assert "unquoted '(' after '--moe-layer-freq' (line 65)" in str(err.value)
    assert '--moe-layer-freq "([0]*3+[1]*58)"' in str(err.value)


def test_the_guides_launch_quoted_is_read_in_full(tmp_path: Path) -> None:
    text = (REAL / GUIDE).read_text().replace("--moe-layer-freq ([0]*3+[1]*58)", '--moe-layer-freq "([0]*3+[1]*58)"')
    (tmp_path / GUIDE).write_text(text)
    cfg = load_config(tmp_path / GUIDE, root=tmp_path)
    s = settings_from_config(cfg)
    assert cfg.mesh(256, 4).normalized().model_dump(exclude_defaults=True) == {
        "ici": {"expert": 32, "pipeline": 2}, "dcn": {"pipeline": 4}}
    assert (s.fp8, s.fp8_recipe, s.fp8_params) == (True, "mxfp8", True)
    assert s.full_iteration_graph is False  # a partial Transformer Engine capture
    assert (s.remat_policy, s.recompute_modules) == ("selective", "moe_act,mlp")
    # --use-precision-aware-optimizer with bf16 moments: read from the launch line, as from Bridge YAML
    assert (s.grad_dtype, s.master_dtype, s.moment_dtype) == ("fp32", "fp32", "bf16")


def test_state_dtypes_without_the_precision_aware_optimizer_are_inert(tmp_path: Path) -> None:
    sh = tmp_path / "train.sh"
    sh.write_text("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2 "
                  "--use-distributed-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 --seq-length 4096\n")
    cfg = load_config(sh, root=tmp_path)
    assert settings_from_config(cfg).moment_dtype is None  # Megatron-LM keeps fp32 states without the flag
    assert any("--use-precision-aware-optimizer" in n for n in cfg.reading)  # what the answer says it read
    yaml = "optimizer:\n  use_precision_aware_optimizer: false\n  exp_avg_dtype: bf16\n"
    assert megatron_yaml_settings(tmp_path, yaml).moment_dtype is None


def test_megatron_lms_own_fp8_example_states_no_recipe() -> None:
    """examples/llama/train_llama3_8b_h100_fp8.sh: --fp8-format hybrid without --fp8-recipe (Megatron-LM's default,
    delayed scaling, applies): read as unstated, which on H100 moves neither the price nor the band."""
    s = settings_from_config(load_config(REAL / "train_llama3_8b_h100_fp8.sh", root=REAL))
    assert s.fp8 is True and s.fp8_recipe is None

