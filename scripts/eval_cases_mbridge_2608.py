"""Write the Megatron-Bridge 26.08 NeMo Container pre-training rows (DGX-GB300 and DGX-GB200, MXFP8) into the eval
corpus.

Run: ``.venv/bin/python scripts/eval_cases_mbridge_2608.py [examples/eval]`` (writes the case folders named below in
place; nothing else is touched).

Why: 26.08 re-measured the MoE models the corpus already prices (DeepSeek-V3, GPT-OSS 120B, Qwen3 30B-A3B and
235B-A22B, Nemotron 3 Nano) on Blackwell NVL72 systems with MXFP8, and measured Nemotron 3 Super (LatentMoE, hybrid
MTP modules) and Nemotron 3.5 Lightning (the Nano stack with hybrid MTP modules). The new recipes change more than speed: HybridEP dispatch, expert all-to-all overlap, BF16 gradient
reduction and FP8 parameter gathers on every row. The rows give two new tables (one per container and system, as the
corpus does): six rows on DGX-GB300 and six on DGX-GB200.

Source: NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary.md`` @ 4ab94dfad366 ("docs: update performance summary
for 26.08 (#5496)", 2026-08-11; the 26.08 section is the same at 067f987df03b), Apache-2.0, section "26.08 NeMo
Container" > "Pre-Training Performance". The table gives the system, GPUs, precision, batch and parallel sizes.
The settings it leaves out come from the flat performance recipes at the same commit
(``src/megatron/bridge/perf_recipes/<model>/<system>/*.py``, ``<model>/common.py`` and ``_common.py``), and from the
library recipes they start from (``src/megatron/bridge/recipes/...``). Each row is matched to the recipe function
whose parallel sizes, batch and precision are the row's. Each setting in a case's ``megatron.yaml`` names the file
and function that sets it. Model dimensions are the ones the corpus already records for these models (the
Megatron-Bridge 25.11 / 26.04.01 cases), given again here word for word.

Left out, with the reason (architectures ASAP does not price):

* DeepSeekV4 Flash: the DeepSeek-V4 stack (``src/megatron/bridge/models/deepseek/deepseek_v4_bridge.py``) has
  hyper-connections (HyperConnectionModule), compressed sparse / heavily compressed attention layers with a CSA
  indexer, and hash-routed MoE layers. ASAP's model shape has none of these.
* (none of Nemotron_3_Super's rows: its NVFP4 rows quantize per module from a Transformer Engine recipe file,
  perf_recipes/nemotronh/te_quant.cfg, and keep their last 14 layers in BF16 through
  nemotron_3_super_bf16_with_nvfp4_mixed; ASAP reads and prices both, so they are in beside the MXFP8 ones, the file
  written beside each case's megatron.yaml as ``model.quant_recipe``)
* Nemotron_3_Ultra: its dimensions are in Megatron-LM's argument file (tests/data/real/megatron), but its rows run
  Megatron-FSDP as HSDP (_apply_nemotron_3_ultra_fsdp_hsdp) with a CuteDSL fused grouped MLP, which ASAP's readers
  do not take from these recipes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/mbridge_cases.py
import mbridge_cases  # noqa: E402

REPO = "NVIDIA-NeMo/Megatron-Bridge"
COMMIT = "4ab94dfad36641cabdeb96452b21bf676aac4772"
C = COMMIT[:9]
URL = f"https://github.com/{REPO}/blob/{COMMIT}/docs/performance-summary.md"
COLUMNS, FOOTNOTE = mbridge_cases.COLUMNS, mbridge_cases.MOE_FOOTNOTE

# The rows exactly as the summary prints them (26.08 NeMo Container, Pre-Training Performance), with their line in
# docs/performance-summary.md @ COMMIT.
ROWS: dict[str, list[tuple[int, str]]] = {
    "DeepSeekV3": [
        (45, "| DGX-GB300 | 256 | MXFP8 | 4096 | 1 | 4096 | 1 | 2 | 1 | 8 | 32 | 6288 | 1635 |"),
        (46, "| DGX-GB200 | 256 | MXFP8 | 4096 | 1 | 4096 | 1 | 4 | 1 | 4 | 64 | 4912 | 1276 |"),
    ],
    "GPT OSS 120B": [
        (59, "| DGX-GB300 | 64 | MXFP8 | 1280 | 4 | 4096 | 1 | 1 | 1 | n/a | 16 | 33024 | 1077 |"),
        (60, "| DGX-GB200 | 64 | MXFP8 | 1280 | 4 | 4096 | 1 | 1 | 1 | n/a | 64 | 28672 | 934 |"),
    ],
    "Qwen3_30B_a3B": [
        (66, "| DGX-GB300 | 8 | MXFP8 | 512 | 8 | 4096 | 1 | 1 | 1 | n/a | 8 | 44544 | 1029 |"),
        (67, "| DGX-GB200 | 8 | MXFP8 | 512 | 4 | 4096 | 1 | 1 | 1 | n/a | 8 | 39936 | 923 |"),
    ],
    "Qwen3_235B_a22B": [
        (73, "| DGX-GB300 | 256 | MXFP8 | 8192 | 2 | 4096 | 1 | 4 | 1 | 12 | 32 | 8816 | 1306 |"),
        (74, "| DGX-GB200 | 256 | MXFP8 | 8192 | 1 | 4096 | 1 | 8 | 1 | 3 | 32 | 7280 | 1077 |"),
    ],
    "Nemotron_3_Nano": [
        (80, "| DGX-GB300 | 8 | MXFP8 | 512 | 4 | 8192 | 1 | 1 | 1 | n/a | 8 | 39936 | 901 |"),
    ],
    "Nemotron_3_5_Lightning": [
        (86, "| DGX-GB200 | 8 | MXFP8 | 512 | 2 | 8192 | 1 | 1 | 1 | n/a | 8 | 28672 | 807 |"),
    ],
    "Nemotron_3_Super": [
        (92, "| DGX-GB300 | 64 | MXFP8 | 512 | 1 | 8192 | 1 | 1 | 1 | n/a | 64 | 9856 | 831 |"),
        (94, "| DGX-GB200 | 64 | MXFP8 | 512 | 1 | 8192 | 2 | 1 | 1 | n/a | 64 | 7040 | 600 |"),
        (93, "| DGX-GB300 | 64 | NVFP4 | 512 | 1 | 8192 | 1 | 1 | 1 | n/a | 64 | 10240 | 864 |"),
        (95, "| DGX-GB200 | 64 | NVFP4 | 512 | 1 | 8192 | 2 | 1 | 1 | n/a | 64 | 7168 | 610 |"),
    ],
}
SUPER_LIB = ("src/megatron/bridge/recipes/nemotronh/h100/nemotron_3_super.py::"
             "nemotron_3_super_pretrain_16gpu_h100_bf16_config")
P = "src/megatron/bridge/perf_recipes"
NANO_GB200 = f"{P}/nemotronh/gb200/nemotronh.py::nemotron_3_nano_pretrain_8gpu_gb200_fp8mx_config"
LIGHTNING_GB200 = f"{P}/nemotronh/gb200/nemotronh.py::nemotron_3_5_lightning_pretrain_8gpu_gb200_fp8mx_config"
CHIP = {"DGX-GB300": "gb300", "DGX-GB200": "gb200"}
SLUG = {"DeepSeekV3": "deepseek-v3", "GPT OSS 120B": "gpt-oss-120b", "Qwen3_30B_a3B": "qwen3-30b-a3b",
        "Qwen3_235B_a22B": "qwen3-235b-a22b", "Nemotron_3_Nano": "nemotron-3-nano",
        "Nemotron_3_Super": "nemotron-3-super", "Nemotron_3_5_Lightning": "nemotron-3.5-lightning"}

# run.yaml model blocks, as the corpus's cases for the same models record them (mbridge-25.11-gb300-deepseek-v3-*,
# mbridge-26.04.01-h100-gpt-oss-120b-64gpu, mbridge-25.11-gb300-qwen3-*, mbridge-26.04.01-gb300-nemotron-3-nano-8gpu).
MODELS: dict[str, dict[str, Any]] = {
    "deepseek-v3": dict(name="deepseek-v3", vocab=129280, layers=61, d_model=7168, d_ff=2048, heads=128, experts=256,
                        experts_per_token=8, shared_experts=1, dense_layers=3, dense_d_ff=18432, mlp_matrices=3,
                        q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                        v_head_dim=128),
    "gpt-oss-120b": dict(name="gpt-oss-120b", layers=36, d_model=2880, d_ff=2880, heads=64, kv_heads=8, head_dim=64,
                         vocab=201088, mlp_matrices=3, experts=128, experts_per_token=4, sliding_window=128,
                         global_every=2),
    "qwen3-30b-a3b": dict(name="qwen3-30b-a3b", vocab=151936, layers=48, d_model=2048, d_ff=768, heads=32, kv_heads=4,
                          head_dim=128, experts=128, experts_per_token=8, mlp_matrices=3),
    "qwen3-235b-a22b": dict(name="qwen3-235b-a22b", vocab=151936, layers=94, d_model=4096, d_ff=1536, heads=64,
                            kv_heads=4, head_dim=128, experts=128, experts_per_token=8, mlp_matrices=3),
    "nemotron-3-nano": dict(
        name="nemotron-3-nano-30b-a3b", layer_pattern="MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
        d_model=2688, d_ff=1856, heads=32, kv_heads=2, head_dim=128, vocab=131072, mlp_matrices=2, experts=128,
        experts_per_token=6, shared_experts=2, mamba_heads=64, mamba_head_dim=64, mamba_state_dim=128,
        mamba_groups=8),
    # the Nano stack (Lightning's recipe starts from the Nano's) with the two MTP modules it adds ("/*E/*E")
    "nemotron-3.5-lightning": dict(
        name="nemotron-3.5-lightning-30b-a3b",
        layer_pattern="MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME/*E/*E",
        d_model=2688, d_ff=1856, heads=32, kv_heads=2, head_dim=128, vocab=131072, mlp_matrices=2, experts=128,
        experts_per_token=6, shared_experts=2, mamba_heads=64, mamba_head_dim=64, mamba_state_dim=128,
        mamba_groups=8),
    "nemotron-3-super": mbridge_cases.NEMOTRON_3_SUPER,
}
QWEN3_DIMS = (
    "model dimensions are Qwen3's published config.json (hidden 2048 / 4096, 48 / 94 layers, 32 / 64 query heads, 4 KV "
    "heads of 128, 128 experts of moe_intermediate_size 768 / 1536, top-8, vocabulary 151936), not stated in the "
    "table; every layer is MoE with no shared expert, which ASAP's MoE shape represents as is")
MODEL_ASSUMED: dict[str, list[str]] = {
    "deepseek-v3": [
        "model dimensions are DeepSeek-V3's own config (deepseek-ai/DeepSeek-V3 @ 9b4e9788e4a3 inference/configs/"
        "config_671B.json: dim 7168, 61 layers of which the first 3 dense with inter_dim 18432, 128 heads, MLA "
        "q_lora_rank 1536 / kv_lora_rank 512 / qk_nope 128 / qk_rope 64 / v 128, 256 routed experts of moe_inter_dim "
        "2048 top-8 plus 1 shared, vocabulary 129280), not stated in the table; with one MTP module (mtp_num_layers 1 "
        f"in the library recipe at {C}): the row does not say w/o MTP",
    ],
    "gpt-oss-120b": [
        "model dimensions are the Hugging Face config of openai/gpt-oss-120b, not stated in the table",
        "GPT-OSS's attention: the Hugging Face config (openai/gpt-oss-120b) alternates sliding_attention "
        "(sliding_window 128) and full_attention layers, recorded as model.sliding_window 128, global_every 2; its "
        "attention sinks are not modelled",
        "every layer is a MoE layer with no shared expert (GPT-OSS)",
    ],
    "qwen3-30b-a3b": [QWEN3_DIMS],
    "qwen3-235b-a22b": [QWEN3_DIMS],
    "nemotron-3-nano": [
        "model dimensions are the Megatron-Bridge recipe's HybridModelProvider for Nemotron 3 Nano "
        f"(src/megatron/bridge/recipes/nemotronh/h100/nemotron_3_nano.py @ {C}): pattern "
        "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME (23 Mamba-2, 23 MoE, 6 attention layers), not stated in "
        "the table",
        "the shared expert of width 3712 (moe_shared_expert_intermediate_size) written as shared_experts 2 of the "
        "routed width 1856: the same weights and FLOPs",
        "squared-ReLU experts (not gated): mlp_matrices 2",
    ],
    "nemotron-3.5-lightning": [
        f"model dimensions are the Nemotron 3 Nano stack: the performance recipe starts from the Nano's "
        f"({NANO_GB200.split('::')[1]}) and changes only the checkpoint it names (hf_model_id) and the MTP settings; "
        "the Nano's HybridModelProvider (src/megatron/bridge/recipes/nemotronh/h100/nemotron_3_nano.py) builds the "
        "model: pattern MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME (23 Mamba-2, 23 MoE, 6 attention), not "
        "stated in the table",
        "the shared expert of width 3712 written as shared_experts 2 of the routed width 1856: the same weights and "
        "FLOPs; squared-ReLU experts (not gated): mlp_matrices 2",
        f"multi-token prediction as the performance recipe sets it ({LIGHTNING_GB200.split('::')[1]}: mtp_num_layers "
        "2, mtp_hybrid_override_pattern *E), written as the pattern's MTP part /*E/*E; its mtp_use_repeated_layer "
        "(one set of MTP weights run twice) is not modelled: the second module's weights are counted too",
    ],
    "nemotron-3-super": mbridge_cases.nemotron_3_super_assumed(f"the library recipe the performance recipe starts from ({SUPER_LIB} @ {C})"),
}

BENCH = f"{P}/_common.py::_benchmark_common"
MXFP8 = "src/megatron/bridge/training/mixed_precision.py::bf16_with_mxfp8_mixed (_perf_precision('fp8_mx'))"
DSV3_LIB = "src/megatron/bridge/recipes/deepseek/h100/deepseek_v3.py::deepseek_v3_pretrain_1024gpu_h100_bf16_config"
DSV3_MX = f"{P}/deepseek/common.py::_enable_deepseek_full_iteration_mxfp8"
GPTOSS_LIB = "src/megatron/bridge/recipes/gpt_oss/h100/gpt_oss.py::gpt_oss_120b_pretrain_64gpu_h100_bf16_config"
GPTOSS_MX = f"{P}/gpt_oss/common.py::_apply_gpt_oss_120b_full_iter_fp8mx_configs"
QWEN_MX = f"{P}/qwen/common.py::_enable_hybridep_full_iteration_mxfp8"
QWEN30_LIB = "src/megatron/bridge/recipes/qwen/h100/qwen3_moe.py::qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config"
QWEN235_LIB = "src/megatron/bridge/recipes/qwen/h100/qwen3_moe.py::qwen3_235b_a22b_pretrain_256gpu_h100_bf16_config"
NANO_LIB = "src/megatron/bridge/recipes/nemotronh/h100/nemotron_3_nano.py::nemotron_3_nano_pretrain_8gpu_h100_bf16_config"
NANO_PERF = f"{P}/nemotronh/common.py::_apply_nemotron_3_nano_perf_defaults"
SUPER_PERF = f"{P}/nemotronh/common.py::_apply_nemotron_3_super_perf_defaults"

# One setting: (ConfigContainer section, key, value, where the recipe sets it).
Setting = tuple[str, str, Any, str]


def _common(lib: str) -> list[Setting]:
    """What every 26.08 MXFP8 recipe sets: the distributed optimizer (its library recipe), gradients reduced in BF16
    (_benchmark_common), the MXFP8 recipe and FP8 parameter gathers (bf16_with_mxfp8_mixed)."""
    return [("ddp", "use_distributed_optimizer", True, lib),
            ("ddp", "grad_reduce_in_fp32", False, BENCH),
            ("mixed_precision", "fp8_recipe", "mxfp8", MXFP8),
            ("mixed_precision", "fp8_param_gather", True, MXFP8)]


def _full_graph(src: str) -> list[Setting]:
    """The whole-iteration CUDA graph with MoE paged stashing that the MoE rows' recipes turn on (``src``)."""
    return [("model", "cuda_graph_impl", "full_iteration", src), ("model", "cuda_graph_scope", [], src)]


def _dsv3(fn: str, modules: list[str], layout: str, layout_src: str) -> list[Setting]:
    return [
        ("model", "sequence_parallel", False, fn),
        ("model", "recompute_granularity", "selective", f"{P}/deepseek/common.py::_deepseek_v3_common"),
        ("model", "recompute_modules", modules, fn),
        ("model", "moe_token_dispatcher_type", "flex", DSV3_MX),
        ("model", "moe_flex_dispatcher_backend", "hybridep", DSV3_MX),
        ("model", "mtp_num_layers", 1, DSV3_LIB),
        ("model", "pipeline_model_parallel_layout", layout, layout_src),
        ("comm_overlap", "overlap_moe_expert_parallel_comm", True, DSV3_MX),
        *_full_graph(DSV3_MX),
        ("optimizer", "main_grads_dtype", "bf16", DSV3_LIB),
        ("optimizer", "main_params_dtype", "fp32", DSV3_LIB),
        ("optimizer", "exp_avg_dtype", "bf16", DSV3_LIB),
        ("optimizer", "exp_avg_sq_dtype", "bf16", DSV3_LIB),
    ] + _common(DSV3_LIB)


def _gpt_oss(fn: str, remat: list[Setting]) -> list[Setting]:
    return [("model", "sequence_parallel", False, fn), *remat,
            ("model", "moe_token_dispatcher_type", "flex", GPTOSS_MX),
            ("model", "moe_flex_dispatcher_backend", "hybridep", GPTOSS_MX),
            ("comm_overlap", "overlap_moe_expert_parallel_comm", True, GPTOSS_MX),
            *_full_graph(GPTOSS_MX)] + _common(GPTOSS_LIB)


def _qwen(fn: str, lib: str, uneven: bool) -> list[Setting]:
    out: list[Setting] = [("model", "sequence_parallel", False, fn), ("model", "recompute_granularity", None, fn),
                          ("model", "moe_token_dispatcher_type", "flex", fn),
                          ("model", "moe_flex_dispatcher_backend", "hybridep", fn)]
    if uneven:  # 94 layers + embedding + loss = 96 slots over the pipeline x virtual stages
        out += [("model", "account_for_embedding_in_pipeline_split", True, lib),
                ("model", "account_for_loss_in_pipeline_split", True, lib)]
    return out + [("comm_overlap", "overlap_moe_expert_parallel_comm", True, QWEN_MX), *_full_graph(QWEN_MX)] + _common(lib)


def _nano(fn: str) -> list[Setting]:
    return [("model", "sequence_parallel", False, fn), ("model", "recompute_granularity", None, NANO_PERF),
            ("model", "moe_token_dispatcher_type", "flex", NANO_LIB),
            ("model", "moe_flex_dispatcher_backend", "hybridep", fn),
            ("comm_overlap", "overlap_moe_expert_parallel_comm", False, NANO_LIB)] + _common(NANO_LIB)


def _super(fn: str, sequence_parallel: bool, nvfp4: bool = False) -> list[Setting]:
    """Nemotron 3 Super's rows: the library recipe's distributed optimizer and (no) recompute, the perf defaults' BF16
    gradient reduction with overlapped collectives and FP32 optimizer state, HybridEP; MXFP8, or NVFP4 as
    _nemotron_3_super_nvfp4_precision sets it (nemotron_3_super_bf16_with_nvfp4_mixed: the last 14 layers in BF16;
    NVFP4 parameter gathers off) with the recipe's per-module file te_quant.cfg."""
    out: list[Setting] = [
        ("model", "sequence_parallel", sequence_parallel, fn), ("model", "recompute_granularity", None, SUPER_LIB),
        ("model", "moe_token_dispatcher_type", "flex", fn),
        ("model", "moe_flex_dispatcher_backend", "hybridep", fn),
        ("ddp", "overlap_grad_reduce", True, SUPER_PERF), ("ddp", "overlap_param_gather", True, SUPER_PERF),
        ("optimizer", "use_precision_aware_optimizer", False, SUPER_PERF)]
    if not nvfp4:
        return out + _common(SUPER_LIB)
    return out + [
        ("ddp", "use_distributed_optimizer", True, SUPER_LIB), ("ddp", "grad_reduce_in_fp32", False, SUPER_PERF),
        *mbridge_cases.super_nvfp4_settings(
            f"{fn} (load_quantization_recipe of {P}/nemotronh/te_quant.cfg, written beside this file)", SUPER_NVFP4,
            f"{SUPER_NVFP4} ('Disabled until MCore PR 4358 lands')")]


DSV3_GB300 = f"{P}/deepseek/gb300/deepseek_v3.py::deepseek_v3_pretrain_256gpu_gb300_fp8mx_config"
DSV3_GB200 = f"{P}/deepseek/gb200/deepseek_v3.py::deepseek_v3_pretrain_256gpu_gb200_fp8mx_config"
GPTOSS_GB300 = f"{P}/gpt_oss/gb300/gpt_oss.py::gpt_oss_120b_pretrain_64gpu_gb300_fp8mx_config"
GPTOSS_GB200 = f"{P}/gpt_oss/gb200/gpt_oss.py::gpt_oss_120b_pretrain_64gpu_gb200_fp8mx_config"
QWEN30_GB300 = f"{P}/qwen/gb300/qwen3_moe.py::qwen3_30b_a3b_pretrain_8gpu_gb300_fp8mx_config"
QWEN30_GB200 = f"{P}/qwen/gb200/qwen3_moe.py::qwen3_30b_a3b_pretrain_8gpu_gb200_fp8mx_config"
QWEN235_GB300 = f"{P}/qwen/gb300/qwen3_moe.py::qwen3_235b_a22b_pretrain_256gpu_gb300_fp8mx_config"
QWEN235_GB200 = f"{P}/qwen/gb200/qwen3_moe.py::qwen3_235b_a22b_pretrain_256gpu_gb200_fp8mx_config"
NANO_GB300 = f"{P}/nemotronh/gb300/nemotronh.py::nemotron_3_nano_pretrain_8gpu_gb300_fp8mx_config"
SUPER_GB300 = f"{P}/nemotronh/gb300/nemotronh.py::nemotron_3_super_pretrain_64gpu_gb300_fp8mx_config"
SUPER_GB200 = f"{P}/nemotronh/gb200/nemotronh.py::nemotron_3_super_pretrain_64gpu_gb200_fp8mx_config"
SUPER_GB300_NVFP4 = f"{P}/nemotronh/gb300/nemotronh.py::nemotron_3_super_pretrain_64gpu_gb300_nvfp4_config"
SUPER_GB200_NVFP4 = f"{P}/nemotronh/gb200/nemotronh.py::nemotron_3_super_pretrain_64gpu_gb200_nvfp4_config"
SUPER_NVFP4 = (f"{P}/nemotronh/common.py::_nemotron_3_super_nvfp4_precision (src/megatron/bridge/training/"
               "mixed_precision.py::nemotron_3_super_bf16_with_nvfp4_mixed)")
SUPER_UNMODELLED = ("CUDA graphs (Transformer Engine, over the attention / Mamba / router / MoE-preprocess scopes in "
                    "the recipe) and moe_router_padding_for_quantization are not modelled")

# Per row: the recipe function whose sizes, batch and precision are the row's; the settings ASAP reads that the
# recipe sets; and what the recipe does beyond them that ASAP does not model.
DSV3_UNMODELLED = ("the full-iteration CUDA graph is read (cuda_graph_impl); its MoE paged stashing "
                   "(moe_expert_rank_capacity_factor 1.5), delayed weight-gradient compute (delay_wgrad_compute) and "
                   "the fused grouped MLP "
                   f"({DSV3_MX.split('::')[1]}) are not modelled")
QWEN_UNMODELLED = ("the full-iteration CUDA graph is read (cuda_graph_impl); its MoE paged stashing "
                   "(moe_expert_rank_capacity_factor 1.5), FP8 dot-product attention and delayed weight-gradient "
                   "compute (_enable_hybridep_full_iteration_mxfp8) "
                   "are not modelled; its tp_comm_overlap True does nothing at TP 1 (Megatron-Bridge comm_overlap.py "
                   "turns it off below TP 2), so it is not written")
GPTOSS_UNMODELLED = ("the full-iteration CUDA graph is read (cuda_graph_impl); its MoE paged stashing "
                     "(moe_expert_rank_capacity_factor 1.5), FP8 dot-product attention, FP8 output projection and "
                     "delayed weight-gradient compute "
                     "(_apply_gpt_oss_120b_full_iter_fp8mx_configs) are not modelled")
RECIPES: dict[tuple[str, str], tuple[str, list[Setting], list[str]]] = {
    ("DeepSeekV3", "DGX-GB300"): (DSV3_GB300, _dsv3(DSV3_GB300, [], "Et*4|(t*4|)*14tmL", DSV3_GB300), [
        "recompute_granularity selective with recompute_modules [] (the recipe's pair): nothing is recomputed",
        "FP8 dot-product attention and the FP8 output projection "
        "(_enable_deepseek_full_iteration_mxfp8(fp8_dot_product_attention=True, fp8_output_proj=True)) are not "
        "modelled", DSV3_UNMODELLED]),
    ("DeepSeekV3", "DGX-GB200"): (DSV3_GB200, _dsv3(
        DSV3_GB200, ["mla_up_proj"], "Et*4|(t*4|)*14tmL",
        "src/megatron/bridge/recipes/deepseek/h100/deepseek_v3.py::_get_deepseek_v3_pipeline_layout (PP 4, VP 4, "
        "one MTP layer), set by set_deepseek_v3_pipeline_model_parallel_layout(cfg.model)"), [
        "the FP8 output projection (_enable_deepseek_full_iteration_mxfp8(fp8_output_proj=True)) is not modelled",
        DSV3_UNMODELLED]),
    ("GPT OSS 120B", "DGX-GB300"): (GPTOSS_GB300, _gpt_oss(GPTOSS_GB300, [
        ("model", "recompute_granularity", None, GPTOSS_LIB)]), [GPTOSS_UNMODELLED]),
    ("GPT OSS 120B", "DGX-GB200"): (GPTOSS_GB200, _gpt_oss(GPTOSS_GB200, [
        ("model", "recompute_granularity", "selective", GPTOSS_GB200),
        ("model", "recompute_modules", [], GPTOSS_GB200)]), [
        "recompute_granularity selective with recompute_modules [] (set after _apply_gpt_oss_120b_full_iter_fp8mx_"
        "configs): nothing is recomputed", GPTOSS_UNMODELLED]),
    ("Qwen3_30B_a3B", "DGX-GB300"): (QWEN30_GB300, _qwen(QWEN30_GB300, QWEN30_LIB, False), [QWEN_UNMODELLED]),
    ("Qwen3_30B_a3B", "DGX-GB200"): (QWEN30_GB200, _qwen(QWEN30_GB200, QWEN30_LIB, False), [QWEN_UNMODELLED]),
    ("Qwen3_235B_a22B", "DGX-GB300"): (QWEN235_GB300, _qwen(QWEN235_GB300, QWEN235_LIB, True), [
        "account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split (library recipe): 94 layers "
        "+ embedding + loss = 96 slots, 2 per each of the 4 x 12 pipeline stages", QWEN_UNMODELLED]),
    ("Qwen3_235B_a22B", "DGX-GB200"): (QWEN235_GB200, _qwen(QWEN235_GB200, QWEN235_LIB, True), [
        "account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split (library recipe): 94 layers "
        "+ embedding + loss = 96 slots, 4 per each of the 8 x 3 pipeline stages", QWEN_UNMODELLED]),
    ("Nemotron_3_Nano", "DGX-GB300"): (NANO_GB300, _nano(NANO_GB300), [
        "CUDA graphs (TE, over the attention / Mamba / router scopes in the recipe) are not modelled; its "
        "tp_comm_overlap True does nothing at TP 1 (Megatron-Bridge comm_overlap.py turns it off below TP 2), so it "
        "is not written"]),
    ("Nemotron_3_5_Lightning", "DGX-GB200"): (LIGHTNING_GB200, _nano(NANO_GB200), [
        "CUDA graphs (TE, over the attention / Mamba / router scopes of the Nano recipe it starts from) are not "
        "modelled; that recipe's tp_comm_overlap True does nothing at TP 1, so it is not written"]),
    ("Nemotron_3_Super", "DGX-GB300"): (SUPER_GB300, _super(SUPER_GB300, False), [SUPER_UNMODELLED]),
    ("Nemotron_3_Super", "DGX-GB200"): (SUPER_GB200, _super(SUPER_GB200, True), [SUPER_UNMODELLED]),
}
NVFP4_RECIPES: dict[str, tuple[str, list[Setting], list[str]]] = {
    "DGX-GB300": (SUPER_GB300_NVFP4, _super(SUPER_GB300_NVFP4, False, nvfp4=True), [SUPER_UNMODELLED]),
    "DGX-GB200": (SUPER_GB200_NVFP4, _super(SUPER_GB200_NVFP4, True, nvfp4=True), [SUPER_UNMODELLED]),
}
NVFP4_ASSUMED = [
    f"settings the table does not state are the performance recipe's at {C} (the commit that published the table): "
    "the recipe function whose parallel sizes, batch and precision are the row's. Each setting in megatron.yaml "
    "names the file and function that sets it",
    "NVFP4 recorded as dtype fp4: the linear layers priced at the catalog's dense fp4 peak, except where the "
    "per-module recipe te_quant.cfg (read: attention projections, LatentMoE's projections and the MTP modules in BF16, "
    "Mamba's output projection in MXFP8) and the 14 BF16 layers at the end of nemotron_3_super_bf16_with_nvfp4_mixed "
    "(first_last_layers_bf16, read) keep them; the attention core and elementwise work in bf16",
    "NVFP4 parameter gathers are off (_nemotron_3_super_nvfp4_precision: 'Disabled until MCore PR 4358 lands'): "
    "weights held and gathered in bf16",
    "the footnote: MoE benchmarks force-balance the token distribution among experts and are token-dropless, as ASAP "
    "prices routed tokens (evenly spread)",
]

COMMON_ASSUMED = [
    f"settings the table does not state are the performance recipe's at {C} (the commit that published the table): "
    "the recipe function whose parallel sizes, batch and precision are the row's. Each setting in megatron.yaml "
    "names the file and function that sets it",
    "MXFP8 recorded as dtype fp8 with fp8_recipe mxfp8 (the chip's fp8 peak; dense GEMMs at MXFP8's kernel rate)",
    "fp8_param_gather as bf16_with_mxfp8_mixed sets it. With MXFP8, Megatron-Core gathers parameters through the "
    "gradient buffer (reuse_grad_buf_for_mxfp8_param_ag, also set there). ASAP prices the weights at 1 byte each, "
    "and how much that layout really holds per weight is not determined here",
    "the footnote: MoE benchmarks force-balance the token distribution among experts and are token-dropless, as ASAP "
    "prices routed tokens (evenly spread)",
]


def _segment_note(system: str, gpus: int) -> str:
    return mbridge_cases.node_note(system, gpus, True, C)


def _config(model: str, lineno: int, row: dict[str, str], gpus: int) -> tuple[str, list[str]]:
    """The megatron.yaml the case runs, and the recipe notes its expected.yaml adds."""
    fn, settings, notes = (NVFP4_RECIPES[row["System"]] if row["Precision"] == "NVFP4" else
                           RECIPES[(model, row["System"])])
    tp, pp, cp, ep = (int(row[k]) for k in ("TP", "PP", "CP", "EP"))
    mbs, gbs = int(row["MBS"]), int(row["GBS"])
    doc, cites, dp = mbridge_cases.megatron_doc(row, gpus, mbridge_cases.nvl72_segments(gpus), settings)
    header = (f"# Megatron-Bridge docs/performance-summary.md line {lineno} @ {C}, 26.08 NeMo container, Pre-Training "
              f"Performance, model {model}, {row['System']} {row['Precision']} row ({URL})\n"
              f"# TP={tp} PP={pp} CP={cp} VP={row['VP']} EP={ep} GBS={gbs} MBS={mbs} GA={gbs // (mbs * dp)}; data "
              f"parallel = {gpus}/(TP*PP*CP) = {dp}\n"
              f"# parallel sizes and batch from the row; the other settings from the performance recipe {fn} @ {C} "
              "(the table does not state them), each set where named:\n" + "\n".join(cites) + "\n")
    assumed = [f"{', '.join(k for _, k, _, _ in settings)} as the performance recipe {fn.split('::')[1]} at {C} "
               "sets them (directly or through the helpers and library recipe named in megatron.yaml)", *notes]
    return header + mbridge_cases.dump(doc), assumed


def write_case(root: Path, model: str, lineno: int, line: str) -> str:
    """Write one case folder; returns its id."""
    row = mbridge_cases.parse_row(line)
    system, precision = row["System"], row["Precision"]
    chip, gpus = CHIP[system], int(row["#-GPUs"])
    slug, slices = SLUG[model], mbridge_cases.nvl72_segments(gpus)
    nvfp4 = precision == "NVFP4"
    cid = f"mbridge-26.08-{chip}-{slug}-{gpus}gpu-{precision.lower()}"
    text, recipe_assumed = _config(model, lineno, row, gpus)
    run = mbridge_cases.run_doc(
        cid, f"Megatron-Bridge 26.08 {model} pre-training on {gpus} {chip.upper()} ({precision})",
        f"Megatron-Bridge performance summary, 26.08 NeMo container, {model}, {system} {precision} row. No profile.",
        chip=chip, gpus=gpus, slices=slices, model=MODELS[slug], row=row, dtype="fp4" if nvfp4 else "fp8",
        tags=["moe"] + (["hybrid"] if "layer_pattern" in MODELS[slug] else []))
    cited = {
        "source": f"{REPO} docs/performance-summary.md @ {COMMIT[:10]}, '26.08 NeMo Container' > 'Pre-Training "
                  f"Performance' > 'Model: {model}', line {lineno}, row {system} {precision}",
        "url": URL, "table": f"mbridge-26.08-{system.lower()}", "row": f"{model} NVFP4" if nvfp4 else model,
        "stated": [f"26.08 NeMo Container, Pre-Training Performance, Model: {model}, row: {line}",
                   f"columns: {COLUMNS}", FOOTNOTE],
        "assumed": MODEL_ASSUMED[slug] + recipe_assumed + (NVFP4_ASSUMED if nvfp4 else COMMON_ASSUMED)
                   + [_segment_note(system, gpus)],
    }
    if nvfp4:
        mbridge_cases.write_te_quant(root / cid)
    mbridge_cases.write_case_files(root / cid, text, run, cited,
                                   mbridge_cases.measured(row, f"{system} row {model} {precision}"))
    return cid


def main(argv: list[str]) -> int:
    return mbridge_cases.run(argv, lambda root: (write_case(root, model, lineno, line)
                                                 for model, lines in ROWS.items() for lineno, line in lines))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
