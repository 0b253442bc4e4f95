"""Megatron-Bridge's 26.06 NeMo Container pre-training rows the corpus did not have (docs/performance-summary-archive.md
@ 4ab94dfad366, "26.06 NeMo Container" > "Pre-Training Performance"; recipe settings from scripts/performance @
8f341b04f7b4; scripts/eval_cases_mbridge_2606.py writes them):

================  =========  =========  ====  ============  =================
model             system     precision  GPUs  tokens/s/GPU  model TFLOP/s/GPU
================  =========  =========  ====  ============  =================
LLAMA3.1_405B     DGX-GB300  FP8         256  1,048         2,646
LLAMA3.1_405B     DGX-GB300  MXFP8       256  952           2,403
LLAMA3.1_405B     DGX-GB300  NVFP4       256  1,413         3,575
LLAMA3.1_405B     DGX-GB200  FP8         256  843           2,129
LLAMA3.1_405B     DGX-GB200  MXFP8       256  783           1,976
LLAMA3.1_405B     DGX-GB200  NVFP4       256  1,166         2,944
LLAMA3.1_405B     DGX-H100   FP8        1024  326           822
DeepSeekV3        DGX-B300   MXFP8       256  3,541         920
GPT OSS 120B      DGX-B300   MXFP8        64  18,534        604
Qwen3_30B_a3B     DGX-B300   MXFP8         8  40,769        938
Qwen3_30B_a3B     DGX-H100   FP8          16  8,826         203
Nemotron_3_Nano   DGX-B300   MXFP8         8  37,316        831
Nemotron_3_Nano   DGX-H100   FP8          16  14,719        328
Nemotron_3_Super  DGX-B300   MXFP8        64  7,867         667
Kimi_K2           DGX-GB300  MXFP8       256  5,372         1,099
================  =========  =========  ====  ============  =================

Every row ran, so each must be predicted to fit in memory at the settings its performance recipe sets. The three
DGX-GB200 Llama 3.1 405B rows fit only with the recipe's account_for_embedding_in_pipeline_split /
account_for_loss_in_pipeline_split priced: the first pipeline rank then holds 7 layers + the embedding, not an even
7.9 + the embedding (171.7 / 159.0 / 174.9 GiB before, 152.9 / 141.6 / 155.8 now, against 155.9 GiB usable:
186 GB less the 10% headroom).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.runs.store import LocalRunStore
from knowledge.cost_settings import settings_for_run
from tests.published_cases import EVAL, assert_script_writes, predict_case

LLAMA = [f"mbridge-26.06-{chip}-llama31-405b-256gpu-{p}" for chip in ("gb300", "gb200")
         for p in ("fp8", "mxfp8", "nvfp4")] + ["mbridge-26.06-h100-llama31-405b-1024gpu-fp8"]
MOE = ["mbridge-26.06-b300-deepseek-v3-256gpu-mxfp8", "mbridge-26.06-b300-gpt-oss-120b-64gpu-mxfp8",
       "mbridge-26.06-b300-qwen3-30b-a3b-8gpu-mxfp8", "mbridge-26.06-h100-qwen3-30b-a3b-16gpu-fp8",
       "mbridge-26.06-b300-nemotron-3-nano-8gpu-mxfp8", "mbridge-26.06-h100-nemotron-3-nano-16gpu-fp8",
       "mbridge-26.06-b300-nemotron-3-super-64gpu-mxfp8", "mbridge-26.06-b300-nemotron-3-super-64gpu-nvfp4"]
KIMI = "mbridge-26.06-gb300-kimi-k2-256gpu-mxfp8"
CASES = LLAMA + MOE + [KIMI]

def test_the_committed_cases_are_what_the_script_writes(tmp_path: Path) -> None:
    assert_script_writes("eval_cases_mbridge_2606", CASES, tmp_path)


@pytest.mark.parametrize("case", CASES)
def test_each_published_row_is_predicted_to_fit_in_memory(case: str) -> None:
    pred = predict_case(case)
    assert pred.fits_memory, (f"{case}: {pred.memory_per_chip_bytes / 2**30:.1f} GiB per GPU of "
                              f"{pred.memory_capacity_bytes / 2**30:.1f} GiB")


@pytest.mark.parametrize("case", LLAMA + MOE)
def test_the_recipe_settings_are_read_from_each_case(case: str) -> None:
    """What every row's recipe sets: the distributed optimizer and BF16 gradient reduction; weights kept in fp8
    (fp8_cs / fp8_mx precision) or in NVFP4 (nvfp4). Llama 3.1 405B: sequence parallelism (TP > 1), TP overlap except
    for NVFP4 (llama31_llm_pretrain.py turns it off), the embedding and loss counted in the pipeline split. MoE rows:
    TP 1 without sequence parallelism, the flex dispatcher over HybridEP; expert all-to-all overlap and the
    whole-iteration CUDA graph only on Qwen3 30B-A3B B300 (its FP8_MX preset)."""
    s = settings_for_run(LocalRunStore(EVAL).get(case))
    assert s is not None
    nvfp4 = case.endswith("nvfp4")
    # Nemotron 3 Super's NVFP4 recipe turns NVFP4 parameter gathers off ("Disabled until MCore PR 4358 lands")
    fp4_params = False if nvfp4 and "nemotron-3-super" in case else (nvfp4 or None)
    assert (s.distributed_optimizer, s.grad_fp32, s.fp8_params, s.fp4_params) == (True, False, not nvfp4, fp4_params)
    assert s.fp8_recipe == (None if nvfp4 else "mxfp8" if case.endswith("mxfp8") else "tensorwise")
    if case in LLAMA:
        assert (s.sequence_parallel, s.tp_comm_overlap, s.remat_policy) == (True, not nvfp4, "none")
        assert s.uneven_pipeline == {"account_for_embedding_in_pipeline_split": True,
                                     "account_for_loss_in_pipeline_split": True}
        assert s.full_iteration_graph is False
    else:
        qwen_b300 = case == "mbridge-26.06-b300-qwen3-30b-a3b-8gpu-mxfp8"
        assert (s.sequence_parallel, s.ep_node_dedup, s.tp_comm_overlap) == (False, True, None)
        assert bool(s.ep_comm_overlap) is qwen_b300  # Nemotron 3 Super: unset, Megatron's default (off)
        assert s.full_iteration_graph is qwen_b300


def test_deepseek_v3_b300_runs_the_library_layout_for_pipeline_8() -> None:
    """DeepSeek-V3 B300: PP 8 without virtual stages; set_deepseek_v3_pipeline_model_parallel_layout's (8, 1) entry
    puts the embedding and 8 layers first, 8 on each middle rank, 5 with the MTP module and the loss last."""
    case = "mbridge-26.06-b300-deepseek-v3-256gpu-mxfp8"
    s = settings_for_run(LocalRunStore(EVAL).get(case))
    assert s is not None and s.pipeline_layout and len(s.pipeline_layout) == 8 and s.virtual_pipeline is None
    assert (s.remat_policy, s.recompute_modules) == ("selective", "mla_up_proj")
    pred = predict_case(case)
    assert any("8/8/8/8/8/8/8/6 decoder + MTP layers" in a for a in pred.assumptions)


def test_the_embedding_and_loss_slots_take_a_layer_off_the_first_and_last_ranks() -> None:
    """Llama 3.1 405B on 256 GB200 (PP 16 x VP 4): 126 layers + embedding + loss = 128 slots, 8 per rank. The first
    rank builds 7 layers and the embedding, the middle ranks 8, the last 7 and the output layer + loss; priced as an
    even split, the first rank held 7.9 layers and the last one carried the output layer on top of its 7.9."""
    case = "mbridge-26.06-gb200-llama31-405b-256gpu-fp8"
    slots = predict_case(case)
    even = predict_case(case, uneven_pipeline=None)
    assert slots.fits_memory and not even.fits_memory
    assert slots.memory_per_chip_bytes < even.memory_per_chip_bytes - 10 * 2**30
    # the middle ranks (8 layers) now set the step instead of the last (7.9 layers + the output layer)
    assert slots.step_time_ms < even.step_time_ms


def test_nemotron_3_super_on_b300_prices_its_expert_axis_inside_the_node() -> None:
    """EP 8 on eight-GPU DGX-B300 nodes (data parallel 8 over InfiniBand): the 512 latent experts split 64 per GPU.
    Priced with nothing fitted to the model, within 10% of the published 7,867 tokens/s/GPU."""
    pred = predict_case("mbridge-26.06-b300-nemotron-3-super-64gpu-mxfp8")
    measured_ms = 512 * 8192 / (7867 * 64) * 1000.0
    assert 0.9 < measured_ms / pred.step_time_ms < 1.1
    assert pred.mesh.size("expert") == 8 and pred.fits_memory


def test_kimi_k2_trains_with_distributed_muon_as_its_recipe_sets_it() -> None:
    """The table's note: 'Muon optimizer was used for pre-training Kimi-K2'. The library recipe runs dist_muon
    without Megatron's distributed optimizer, and set_kimi_k2_common_configs drops MXFP8's fp8 parameter gathers for
    it: the weights stay bf16, the optimizer state is master + one momentum, and the orthogonalizations are priced."""
    s = settings_for_run(LocalRunStore(EVAL).get(KIMI))
    assert s is not None
    assert (s.optimizer, s.distributed_optimizer, s.fp8_params, s.fp8_recipe) == ("dist_muon", False, False, "mxfp8")
    pred = predict_case(KIMI)
    assert pred.fits_memory and pred.breakdown_ms["optimizer_step"] > 0
    measured_ms = 4096 * 4096 / (5372 * 256) * 1000.0
    assert 0.85 < measured_ms / pred.step_time_ms < 1.25


def test_super_nvfp4_on_b300_reads_its_recipe_and_runs_a_little_faster_than_mxfp8() -> None:
    """26.06 DGX-B300: Nemotron 3 Super measures 8,131 tokens/s/GPU in NVFP4 against 7,867 in MXFP8 (archive lines
    166-167), 3% faster. With te_quant.cfg's BF16 / MXFP8 modules and the 14 BF16 layers read, NVFP4 is priced faster
    by a few percent and within 15% of the row (B300's calibration is x1.11)."""
    nv = predict_case("mbridge-26.06-b300-nemotron-3-super-64gpu-nvfp4")
    mx = predict_case("mbridge-26.06-b300-nemotron-3-super-64gpu-mxfp8")
    assert any("latent_fc1 100% bf16" in a for a in nv.assumptions)
    assert 0.9 < nv.step_time_ms / mx.step_time_ms < 0.99
    assert 0.95 < 512 * 8192 / 64 / 8131 * 1e3 / nv.step_time_ms < 1.15
