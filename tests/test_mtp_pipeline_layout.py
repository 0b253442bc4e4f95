"""Multi-token prediction (MTP) modules and Megatron-Core's custom pipeline layout, as ASAP reads and prices them.

Sources:
* DeepSeek-V3's config (deepseek-ai/DeepSeek-V3 @ 9b4e9788e4a3, config_671B.json) and its Hugging Face card: "685B,
  which includes 671B of the Main Model weights and 14B of the Multi-Token Prediction (MTP) Module weights" (the
  checkpoint's MTP layer carries its own copies of the embedding and output head, which training shares).
* Megatron-Bridge docs/performance-summary-archive.md @ 067f987df03b, 25.11 container: DGX-B200 "DeepSeekV3 (w/ MTP)"
  2139 tokens/s/GPU, 557 model TFLOP/s/GPU; DGX-GB200 "DeepSeekV3 (w/o MTP)" 3139 tokens/s/GPU, 782 TFLOP/s/GPU
  (both 4096-token sequences).
* Megatron-Core's layout grammar and its own docstring example (megatron/core/transformer/
  pipeline_parallel_layer_layout.py @ d98e8a64dd); Megatron-LM's DeepSeek-V3 proxy functional test, which states
  ``--pipeline-model-parallel-layout: Et*2|(tt|)*5t|tmL`` and ``--mtp-num-layers: 1`` (tests/data/real/README.md).
* Megatron-Bridge's DeepSeek-V3 GB200 performance recipe at 21d102f5e (the commit that published the 26.04.01 rows):
  ``pp_layout="Et*4|(t*4|)*14tmL"``, ``mtp_num_layers = 1``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.analysis.kpis import model_flops_per_step
from bot.configs.detect import load_config
from bot.configs.model_dims import read_model_dims
from bot.configs.pipeline_layout import check_layout, parse_pipeline_layout, rank_layers
from bot.errors import AsapError
from bot.runs.record import ModelSpec, RunRecord, TrainingSpec
from knowledge import costmodel
from knowledge.cost_settings import settings_for_run, settings_from_config
from tests.published_cases import EVAL, predict_case

PROXY = Path(__file__).parent / "data" / "real" / "megatron" / "deepseekv3_proxy_flex_tp1pp4emp16etp1cp1.model_config.yaml"
V3 = dict(layers=61, d_model=7168, d_ff=2048, heads=128, vocab=129280, experts=256, experts_per_token=8,
          shared_experts=1, dense_layers=3, dense_d_ff=18432, q_lora_rank=1536, kv_lora_rank=512,
          qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)
MBRIDGE_LAYOUT = "Et*4|(t*4|)*14tmL"
DSV3_GB200 = "mbridge-26.04.01-gb200-deepseek-v3-256gpu-mxfp8"


# ------------------------------------------------------------------------------------------------ the layout
def test_megatron_docstring_example_parses_as_megatron_does() -> None:
    stages = parse_pipeline_layout("Ettt|(tt|)*29,m|L")
    assert stages == ("Ettt",) + ("tt",) * 29 + ("m", "L")


def test_proxy_layout_gives_each_rank_its_layers() -> None:
    stages = parse_pipeline_layout("Et*2|(tt|)*5t|tmL")
    assert len(stages) == 8  # pipeline 4 x 2 virtual stages
    ranks = rank_layers(stages, 4)
    assert [r.decoder for r in ranks] == [4, 4, 3, 3]
    assert ranks[0].embedding and ranks[3].loss and ranks[3].mtp == 1
    assert check_layout(stages, 14, 1) == []
    assert check_layout(stages, 61, 1) == ["it places 14 decoder layers (t), the model has 61"]


def test_mbridge_layout_balances_61_layers_over_4_ranks() -> None:
    ranks = rank_layers(parse_pipeline_layout(MBRIDGE_LAYOUT), 4)
    assert [(r.decoder, r.mtp) for r in ranks] == [(16, 0), (16, 0), (16, 0), (13, 1)]


@pytest.mark.parametrize(("text", "why"), [
    ("(t*99999)*99999", "unrolls to more than"),
    ("t" * 5000, "at most 4,000"),
    ("Ett|tx|L", "'x'"),
])
def test_bad_layouts_are_refused_by_name_and_fast(text: str, why: str) -> None:
    start = time.perf_counter()
    with pytest.raises(ValueError, match=why):
        parse_pipeline_layout(text)
    assert time.perf_counter() - start < 1.0  # refused before anything is unrolled


# ------------------------------------------------------------------------------------------------ MTP modules
def test_mtp_module_size_matches_deepseek_v3_card() -> None:
    main = ModelSpec(**V3)
    with_mtp = ModelSpec(**V3, mtp_layers=1)
    assert main.derived_params() == pytest.approx(671e9, rel=0.005)
    mtp = with_mtp.derived_params() - main.derived_params()  # type: ignore[operator]
    # the card's 14B counts the checkpoint's own embedding and output head copies (2 x vocab x d_model)
    assert mtp + 2 * 129280 * 7168 == pytest.approx(14e9, rel=0.05)


def test_mtp_flops_explain_megatron_bridge_published_flops_per_token() -> None:
    """Megatron-Bridge's two DeepSeekV3 rows differ only in MTP: 557e12/2139 vs 782e12/3139 FLOPs per token, 4.5% more
    with MTP. ASAP's model FLOPs must carry that difference (without MTP pricing the ratio would be 1.000)."""
    def per_token(mtp: int) -> float:
        run = RunRecord(id="v3", chip="b200", num_chips=256, model=ModelSpec(**V3, mtp_layers=mtp),
                        training=TrainingSpec(global_batch=1, seq_len=4096))
        return model_flops_per_step(run).per_step / 4096  # type: ignore[operator]
    published = (557e12 / 2139) / (782e12 / 3139)
    assert per_token(1) / per_token(0) == pytest.approx(published, abs=0.01)


def test_mtp_with_a_hybrid_pattern_is_refused_by_name() -> None:
    with pytest.raises(ValidationError, match="mtp_layers does not apply with layer_pattern"):
        ModelSpec(layer_pattern="M*M-", d_model=1024, d_ff=4096, heads=8, mtp_layers=1)


def test_proxy_launch_states_mtp_and_the_layout() -> None:
    config = load_config(PROXY)
    dims = read_model_dims(config)
    assert dims is not None and dims.mtp_layers == 1
    assert "mtp_num_layers" in dims.origin["mtp_layers"]
    settings = settings_from_config(config)
    assert settings.pipeline_layout == parse_pipeline_layout("Et*2|(tt|)*5t|tmL")
    assert settings.virtual_pipeline == 2  # 8 stages over --pipeline-model-parallel-size 4, as Megatron-Core derives
    assert "pipeline_model_parallel_layout" in (settings.uneven_pipeline or {})  # the Critic lets 61 % 4 stand


# ------------------------------------------------------------------------------------------------ pricing
def _dsv3_run(tmp_path: Path, extra: str) -> tuple[RunRecord, object]:
    """The 26.04.01 GB200 DeepSeek-V3 case with its megatron.yaml's MTP / layout lines replaced by ``extra``."""
    from bot.runs.store import LocalRunStore

    src = EVAL / DSV3_GB200
    dst = tmp_path / DSV3_GB200
    dst.mkdir(parents=True)
    for f in src.iterdir():
        dst.joinpath(f.name).write_text(f.read_text())
    cfg = dst / "megatron.yaml"
    kept = [ln for ln in cfg.read_text().splitlines() if "mtp_num_layers" not in ln and "layout" not in ln]
    cfg.write_text("\n".join(kept) + "\n" + extra)
    return LocalRunStore(tmp_path).get(DSV3_GB200)


def _predict(run: object) -> costmodel.Prediction:
    from bot.proposals.engine import baseline_mesh

    mesh, _ = baseline_mesh(run, None)  # type: ignore[arg-type]
    return costmodel.predict(run.record, mesh, settings=settings_for_run(run))  # type: ignore[attr-defined]


def test_published_dsv3_row_is_priced_with_its_recipe_mtp_and_layout() -> None:
    """The 26.04.01 GB200 row (4256 tokens/s/GPU) ran Megatron-Bridge's recipe with one MTP module and the layout
    above; both are read from the case's config and named in the answer."""
    pred = predict_case(DSV3_GB200)
    said = " ".join(pred.assumptions)
    assert "1 multi-token-prediction module" in said
    assert "the ranks hold 16/16/16/14 decoder + MTP layers" in said
    measured_ms = 4096 * 4096 / (4256 * 256) * 1e3
    assert 0.9 < measured_ms / pred.step_time_ms < 1.1


def test_layout_moves_the_slowest_stage(tmp_path: Path) -> None:
    """Without the layout 61 layers split 15.25 per rank with MTP and the loss on the last; the recipe's layout gives
    the last rank three fewer layers, so a middle rank with 16 MoE layers sets the step: more MoE-layer time, less
    output-layer time on the slowest rank than an even split with MTP would say."""
    even = _predict(_dsv3_run(tmp_path / "a", "  mtp_num_layers: 1\n"))
    laid = _predict(_dsv3_run(tmp_path / "b", f"  mtp_num_layers: 1\n  pipeline_model_parallel_layout: {MBRIDGE_LAYOUT}\n"))
    assert laid.breakdown_ms["moe_layer_overhead"] > even.breakdown_ms["moe_layer_overhead"]
    assert laid.breakdown_ms["compute"] < even.breakdown_ms["compute"]
    assert laid.step_time_ms < even.step_time_ms


def test_mtp_costs_time_and_last_stage_memory(tmp_path: Path) -> None:
    without = _predict(_dsv3_run(tmp_path / "a", ""))
    with_mtp = _predict(_dsv3_run(tmp_path / "b", "  mtp_num_layers: 1\n"))
    assert with_mtp.step_time_ms > without.step_time_ms * 1.02  # a 62nd layer and a second output pass, on one stage
    assert with_mtp.memory_per_chip_bytes >= without.memory_per_chip_bytes


def test_layout_that_does_not_fit_the_model_is_refused_by_name(tmp_path: Path) -> None:
    run = _dsv3_run(tmp_path, "  mtp_num_layers: 1\n  pipeline_model_parallel_layout: Et*2|(tt|)*5t|tmL\n")
    with pytest.raises(AsapError, match="pipeline_model_parallel_layout does not fit the model: it places 14 decoder"):
        _predict(run)


def test_unreadable_layout_is_named_and_priced_evenly(tmp_path: Path) -> None:
    run = _dsv3_run(tmp_path, "  mtp_num_layers: 1\n  pipeline_model_parallel_layout: Et*4|x\n")
    said = " ".join(_predict(run).assumptions)
    assert "pipeline_model_parallel_layout" in said and "'x'" in said and "even split" in said


def test_first_and_last_stage_sizes_are_priced_as_the_split_they_build(tmp_path: Path) -> None:
    """Megatron-LM's other way to balance a pipeline: explicit first / last stage sizes
    (--decoder-first-pipeline-num-layers, --decoder-last-pipeline-num-layers; Megatron-Bridge
    num_layers_in_first/last_pipeline_stage). DeepSeek-V3's 61 layers over PP 4 with 16 first and 13 last leave 32
    for the two middle ranks: 16/16/16/13, the MTP module and the loss last, the same ranks as the recipe's layout
    Et*4|(t*4|)*14tmL at VP 4, so the step is the layout's, not the even split's."""
    run = _dsv3_run(tmp_path / "a", "  mtp_num_layers: 1\n  decoder_first_pipeline_num_layers: 16\n"
                    "  decoder_last_pipeline_num_layers: 13\n")
    cfg = tmp_path / "a" / DSV3_GB200 / "megatron.yaml"
    cfg.write_text("\n".join(ln for ln in cfg.read_text().splitlines() if "virtual_pipeline" not in ln) + "\n")
    from bot.runs.store import LocalRunStore

    run = LocalRunStore(tmp_path / "a").get(DSV3_GB200)
    edges = _predict(run)
    said = " ".join(edges.assumptions)
    assert "pipeline first / last stage sizes from the config (4 stages = pipeline 4 x 1 virtual)" in said
    assert "the ranks hold 16/16/16/14 decoder + MTP layers" in said
    even = _predict(_dsv3_run(tmp_path / "b", "  mtp_num_layers: 1\n"))
    assert edges.breakdown_ms["moe_layer_overhead"] > even.breakdown_ms["moe_layer_overhead"]
    # sizes that do not split are a start-up error elsewhere; here they leave the even split, said so
    cfg.write_text(cfg.read_text().replace("decoder_last_pipeline_num_layers: 13", "decoder_last_pipeline_num_layers: 12"))
    odd = _predict(LocalRunStore(tmp_path / "a").get(DSV3_GB200))
    assert not any("first / last stage sizes from the config" in a for a in odd.assumptions)
    assert any("sizes (16 / 12) do not split 61 layers over pipeline 4" in a for a in odd.assumptions)


def test_first_and_last_stage_sizes_with_virtual_stages_are_named_not_priced(tmp_path: Path) -> None:
    run = _dsv3_run(tmp_path, "  mtp_num_layers: 1\n  decoder_first_pipeline_num_layers: 16\n"
                    "  decoder_last_pipeline_num_layers: 13\n")  # the case keeps its virtual_pipeline 4
    said = " ".join(_predict(run).assumptions)
    assert "first / last pipeline-stage sizes (16 / 13) with 4 virtual stages are not priced" in said
    assert "even split" in said
