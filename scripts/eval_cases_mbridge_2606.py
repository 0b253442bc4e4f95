"""Write the Megatron-Bridge 26.06 NeMo Container pre-training rows the corpus does not have yet (DGX-B300 and DGX-H100
MoE rows; Llama 3.1 405B on DGX-GB300, DGX-GB200 and DGX-H100) into the eval corpus.

Run: ``.venv/bin/python scripts/eval_cases_mbridge_2606.py [examples/eval]`` (writes the case folders named below in
place; nothing else is touched).

Why: 26.06 measured the MoE models the corpus prices (DeepSeek-V3, GPT-OSS 120B, Qwen3 30B-A3B, Nemotron 3 Nano and
Super) on DGX-B300, Kimi K2 (1T, trained with Muon) on DGX-GB300, eight GPUs per node over InfiniBand, where the corpus has only the Nemotron 3 Nano 26.04.01 row; on DGX-H100 it
re-measured Qwen3 30B-A3B and Nemotron 3 Nano; and it measured Llama 3.1 405B in FP8, MXFP8 and NVFP4 on GB300 (which
the corpus has no 405B row for) and GB200 with new parallel layouts. The rows give four tables (one per container and
system, as the corpus does): five on DGX-B300, three on DGX-H100, four on DGX-GB300 and three on DGX-GB200.

Source: NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary-archive.md`` @ 4ab94dfad366 ("docs: update performance
summary for 26.08 (#5496)", 2026-08-11), Apache-2.0, section "26.06 NeMo Container" > "Pre-Training Performance". The
table gives the system, GPUs, precision, batch and parallel sizes. The same rows were the current summary
(``docs/performance-summary.md``, newest section "26.06 NeMo Container") last at 8f341b04f7b4 ("perf summary b300 26.06
(#4435)", 2026-06-22; the next change, 381d0b825, made 26.06.01 the newest). The settings the table leaves out come from
the performance scripts at that commit (there is no ``src/megatron/bridge/perf_recipes`` there):
``scripts/performance/configs/<family>/<family>_llm_pretrain.py`` (one function per model and system, taking the
precision and a config variant; ``scripts/performance/argument_parser.py`` defaults the variant to v2, falling back to
v1 where a model has no v2), the workload presets in ``<family>_workload_base_configs.py`` that the function applies
through ``scripts/performance/utils/overrides.py::set_workload_base_configs``, the precision
``scripts/performance/utils/precision.py::get_precision_config`` builds, and the library recipes the functions start
from (``src/megatron/bridge/recipes/...``). Each row is matched to the function and preset whose parallel sizes, batch
and precision are the row's. Each setting in a case's ``megatron.yaml`` names the file and function (or preset) that
sets it. Model dimensions are the ones the corpus already records for these models (the Megatron-Bridge 26.08 /
26.04.01 cases), given again here word for word.

Left out, with the reason:

* Nemotron_3_Super's DGX-GB300 and DGX-GB200 rows fall under the next item. Its DGX-B300 rows are in: MXFP8, and NVFP4
  with the recipe's per-module precision file (scripts/performance/configs/nemotronh/te_quant.cfg, written beside the
  case's megatron.yaml as model.quant_recipe; read by bot/configs/precision_recipe.py) and its 14 BF16 layers.
* The DGX-GB300 and DGX-GB200 rows of DeepSeekV3, GPT OSS 120B, Qwen3_30B_a3B, Qwen3_235B_a22B, Nemotron_3_Nano and
  Nemotron_3_Super:
  the corpus already holds these models on these systems at the same parallel sizes and batch, re-measured with the
  26.08 recipes (``scripts/eval_cases_mbridge_2608.py``; the GB200 Nemotron_3_Nano row's sizes are the corpus's
  26.04.01 GB200 case). The DeepSeekV3 GB300 row at GBS 15360 is the GBS 4096 row's recipe with a larger batch.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/mbridge_cases.py
import mbridge_cases  # noqa: E402

REPO = "NVIDIA-NeMo/Megatron-Bridge"
COMMIT = "4ab94dfad36641cabdeb96452b21bf676aac4772"  # the archive that prints the rows
C = COMMIT[:9]
RECIPE_COMMIT = "8f341b04f7b44af14ffc79a0b97a679b4dd633d8"  # the last commit with 26.06 as the current summary
R = RECIPE_COMMIT[:9]
URL = f"https://github.com/{REPO}/blob/{COMMIT}/docs/performance-summary-archive.md"
COLUMNS, FOOTNOTE = mbridge_cases.COLUMNS, mbridge_cases.MOE_FOOTNOTE

# The rows exactly as the archive prints them (26.06 NeMo Container, Pre-Training Performance), with their line in
# docs/performance-summary-archive.md @ COMMIT.
ROWS: dict[str, list[tuple[int, str]]] = {
    "LLAMA3.1_405B": [
        (100, "| DGX-GB300 | 256 | FP8 | 1536 | 1 | 8192 | 4 | 8 | 1 | 4 | n/a | 1048 | 2646 |"),
        (101, "| DGX-GB300 | 256 | MXFP8 | 1536 | 1 | 8192 | 2 | 8 | 2 | 4 | n/a | 952 | 2403 |"),
        (102, "| DGX-GB300 | 256 | NVFP4 | 1536 | 1 | 8192 | 4 | 8 | 1 | 4 | n/a | 1413 | 3575 |"),
        (103, "| DGX-GB200 | 256 | FP8 | 1536 | 1 | 8192 | 4 | 16 | 1 | 4 | n/a | 843 | 2129 |"),
        (104, "| DGX-GB200 | 256 | MXFP8 | 1536 | 1 | 8192 | 4 | 16 | 1 | 8 | n/a | 783 | 1976 |"),
        (105, "| DGX-GB200 | 256 | NVFP4 | 1536 | 1 | 8192 | 4 | 16 | 1 | 8 | n/a | 1166 | 2944 |"),
        (106, "| DGX-H100 | 1024 | FP8 | 1536 | 1 | 8192 | 8 | 8 | 2 | 8 | n/a | 326 | 822 |"),
    ],
    "DeepSeekV3": [
        (115, "| DGX-B300 | 256 | MXFP8 | 4096 | 2 | 4096 | 1 | 8 | 1 | n/a | 8 | 3541 | 920 |"),
    ],
    "GPT OSS 120B": [
        (123, "| DGX-B300 | 64 | MXFP8 | 1280 | 4 | 4096 | 1 | 1 | 1 | n/a | 8 | 18534 | 604 |"),
    ],
    "Qwen3_30B_a3B": [
        (131, "| DGX-B300 | 8 | MXFP8 | 512 | 8 | 4096 | 1 | 1 | 1 | n/a | 8 | 40769 | 938 |"),
        (132, "| DGX-H100 | 16 | FP8 | 1024 | 1 | 4096 | 1 | 1 | 1 | n/a | 16 | 8826 | 203 |"),
    ],
    "Nemotron_3_Nano": [
        (155, "| DGX-B300 | 8 | MXFP8 | 512 | 4 | 8192 | 1 | 1 | 1 | n/a | 8 | 37316 | 831 |"),
        (156, "| DGX-H100 | 16 | FP8 | 1024 | 1 | 8192 | 1 | 1 | 1 | n/a | 8 | 14719 | 328 |"),
    ],
    "Kimi_K2": [
        (145, "| DGX-GB300 | 256 | MXFP8 | 4096 | 2 | 4096 | 1 | 4 | 1 | 4 | 64 | 5372 | 1099 |"),
    ],
    "Nemotron_3_Super": [
        (166, "| DGX-B300 | 64 | MXFP8 | 512 | 1 | 8192 | 1 | 1 | 1 | n/a | 8 | 7867 | 667 |"),
        (167, "| DGX-B300 | 64 | NVFP4 | 512 | 1 | 8192 | 1 | 1 | 1 | n/a | 8 | 8131 | 689 |"),
    ],
}

CHIP = {"DGX-GB300": "gb300", "DGX-GB200": "gb200", "DGX-B300": "b300", "DGX-H100": "h100"}
NVL72 = ("DGX-GB300", "DGX-GB200")
SLUG = {"LLAMA3.1_405B": "llama31-405b", "DeepSeekV3": "deepseek-v3", "GPT OSS 120B": "gpt-oss-120b",
        "Qwen3_30B_a3B": "qwen3-30b-a3b", "Nemotron_3_Nano": "nemotron-3-nano", "Nemotron_3_Super": "nemotron-3-super",
        "Kimi_K2": "kimi-k2"}
DENSE = ("llama31-405b",)

# run.yaml model blocks, as the corpus's cases for the same models record them (mbridge-26.04.01-gb200-llama31-405b-*,
# mbridge-26.08-*-deepseek-v3-*, -gpt-oss-120b-*, -qwen3-30b-a3b-*, -nemotron-3-nano-*).
MODELS: dict[str, dict[str, Any]] = {
    "llama31-405b": dict(name="llama3.1-405b", vocab=128256, layers=126, d_model=16384, d_ff=53248, heads=128,
                         kv_heads=8, mlp_matrices=3),
    "deepseek-v3": dict(name="deepseek-v3", vocab=129280, layers=61, d_model=7168, d_ff=2048, heads=128, experts=256,
                        experts_per_token=8, shared_experts=1, dense_layers=3, dense_d_ff=18432, mlp_matrices=3,
                        q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                        v_head_dim=128),
    "gpt-oss-120b": dict(name="gpt-oss-120b", layers=36, d_model=2880, d_ff=2880, heads=64, kv_heads=8, head_dim=64,
                         vocab=201088, mlp_matrices=3, experts=128, experts_per_token=4, sliding_window=128,
                         global_every=2),
    "qwen3-30b-a3b": dict(name="qwen3-30b-a3b", vocab=151936, layers=48, d_model=2048, d_ff=768, heads=32, kv_heads=4,
                          head_dim=128, experts=128, experts_per_token=8, mlp_matrices=3),
    "nemotron-3-nano": dict(
        name="nemotron-3-nano-30b-a3b", layer_pattern="MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
        d_model=2688, d_ff=1856, heads=32, kv_heads=2, head_dim=128, vocab=131072, mlp_matrices=2, experts=128,
        experts_per_token=6, shared_experts=2, mamba_heads=64, mamba_head_dim=64, mamba_state_dim=128,
        mamba_groups=8),
    "kimi-k2": mbridge_cases.KIMI_K2,
    "nemotron-3-super": mbridge_cases.NEMOTRON_3_SUPER,
}
MODEL_ASSUMED: dict[str, list[str]] = {
    "llama31-405b": [
        "model dimensions are the published Llama 3.1 405B architecture (meta-llama/Meta-Llama-3.1-405B, the model "
        f"the library recipe llama31_405b_pretrain_config builds at {R}: hidden 16384, 126 layers, 128 query heads "
        "and 8 KV heads, FFN 53248, vocabulary 128256), not stated in the table",
    ],
    "deepseek-v3": [
        "model dimensions are DeepSeek-V3's own config (deepseek-ai/DeepSeek-V3 @ 9b4e9788e4a3 inference/configs/"
        "config_671B.json: dim 7168, 61 layers of which the first 3 dense with inter_dim 18432, 128 heads, MLA "
        "q_lora_rank 1536 / kv_lora_rank 512 / qk_nope 128 / qk_rope 64 / v 128, 256 routed experts of moe_inter_dim "
        "2048 top-8 plus 1 shared, vocabulary 129280), not stated in the table; with one MTP module (mtp_num_layers 1 "
        f"in the library recipe at {R}): the row does not say w/o MTP",
    ],
    "gpt-oss-120b": [
        "model dimensions are the Hugging Face config of openai/gpt-oss-120b, not stated in the table",
        "GPT-OSS's attention: the Hugging Face config (openai/gpt-oss-120b) alternates sliding_attention "
        "(sliding_window 128) and full_attention layers, recorded as model.sliding_window 128, global_every 2; its "
        "attention sinks are not modelled",
        "every layer is a MoE layer with no shared expert (GPT-OSS)",
    ],
    "qwen3-30b-a3b": [
        "model dimensions are Qwen3's published config.json (hidden 2048, 48 layers, 32 query heads, 4 KV heads of "
        "128, 128 experts of moe_intermediate_size 768, top-8, vocabulary 151936), not stated in the table; every "
        "layer is MoE with no shared expert, which ASAP's MoE shape represents as is",
    ],
    "nemotron-3-nano": [
        "model dimensions are the Megatron-Bridge recipe's MambaModelProvider for Nemotron 3 Nano "
        f"(src/megatron/bridge/recipes/nemotronh/nemotron_3_nano.py::nemotron_3_nano_pretrain_config @ {R}): pattern "
        "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME (23 Mamba-2, 23 MoE, 6 attention layers), not stated in "
        "the table",
        "the shared expert of width 3712 (moe_shared_expert_intermediate_size) written as shared_experts 2 of the "
        "routed width 1856: the same weights and FLOPs",
        "squared-ReLU experts (not gated): mlp_matrices 2",
    ],
    "kimi-k2": mbridge_cases.kimi_k2_assumed(R),
    "nemotron-3-super": mbridge_cases.nemotron_3_super_assumed(
        f"the library recipe (src/megatron/bridge/recipes/nemotronh/nemotron_3_super.py::nemotron_3_super_pretrain_config @ {R})"),
}

S = "scripts/performance"
OV = f"{S}/utils/overrides.py"
WORKLOAD = f"{OV}::set_workload_base_configs"  # applies a preset's sizes, batch, sequence_parallel (TP > 1), dispatcher
RECOMPUTE = f"{OV}::_set_recompute_overrides"  # a preset's recompute_modules, made selective
GRAPH = f"{OV}::_set_cuda_graph_overrides"  # a preset's cuda_graph_impl / scope; an impl of none empties the scope
A2A = f"{OV}::_set_moe_a2a_overlap_overrides"  # a preset's moe_a2a_overlap
L = "src/megatron/bridge/recipes"
PRECISION = "src/megatron/bridge/training/mixed_precision.py"
FP8CS = f"{PRECISION}::bf16_with_fp8_current_scaling_mixed ({S}/utils/precision.py::get_precision_config('fp8_cs'))"
MXFP8 = f"{PRECISION}::bf16_with_mxfp8_mixed ({S}/utils/precision.py::get_precision_config('fp8_mx'))"
NVFP4 = f"{PRECISION}::bf16_with_nvfp4_mixed ({S}/utils/precision.py::get_precision_config('nvfp4'))"
PRECISION_SRC = {"FP8": FP8CS, "MXFP8": MXFP8, "NVFP4": NVFP4}
COMPUTE_DTYPE = {"FP8": "fp8_cs", "MXFP8": "fp8_mx", "NVFP4": "nvfp4"}

LLAMA = f"{S}/configs/llama/llama31_llm_pretrain.py"
LLAMA_PRESETS = f"{S}/configs/llama/llama31_workload_base_configs.py"
LLAMA_LIB = f"{L}/llama/llama3.py::llama31_405b_pretrain_config"
DS = f"{S}/configs/deepseek/deepseek_llm_pretrain.py"
DS_PRESETS = f"{S}/configs/deepseek/deepseek_workload_base_configs.py"
DS_LIB = f"{L}/deepseek/deepseek_v3.py::deepseek_v3_pretrain_config"
KIMI = f"{S}/configs/kimi/kimi_llm_pretrain.py"
KIMI_PRESETS = f"{S}/configs/kimi/kimi_workload_base_configs.py"
KIMI_LIB = f"{L}/kimi/kimi_k2.py::kimi_k2_pretrain_config"
GPTOSS = f"{S}/configs/gpt_oss/gpt_oss_llm_pretrain.py"
GPTOSS_PRESETS = f"{S}/configs/gpt_oss/gpt_oss_workload_base_configs.py"
GPTOSS_LIB = f"{L}/gpt_oss/gpt_oss.py::gpt_oss_120b_pretrain_config"
QWEN = f"{S}/configs/qwen/qwen3_llm_pretrain.py"
QWEN_PRESETS = f"{S}/configs/qwen/qwen3_workload_base_configs.py"
QWEN_LIB = f"{L}/qwen/qwen3_moe.py::qwen3_30b_a3b_pretrain_config"
NANO = f"{S}/configs/nemotronh/nemotron_3_llm_pretrain.py"
NANO_PRESETS = f"{S}/configs/nemotronh/nemotron_3_workload_base_configs.py"
NANO_LIB = f"{L}/nemotronh/nemotron_3_nano.py::nemotron_3_nano_pretrain_config"
SUPER_LIB = f"{L}/nemotronh/nemotron_3_super.py::nemotron_3_super_pretrain_config"

# One setting: (ConfigContainer section, key, value, where the recipe sets it).
Setting = tuple[str, str, Any, str]


def _via(preset: str, helper: str) -> str:
    return f"{preset} (applied by {helper})"


def _precision(precision: str) -> list[Setting]:
    """The fp8 recipe and parameter-gather settings of the row's precision (get_precision_config): FP8 scales per
    tensor (tensorwise), MXFP8 per 1x32 block; both keep the weights in fp8; NVFP4 keeps them in NVFP4, not fp8."""
    src = PRECISION_SRC[precision]
    if precision == "NVFP4":
        return [("mixed_precision", "fp8_param_gather", False, src), ("mixed_precision", "fp4_param_gather", True, src)]
    recipe = "mxfp8" if precision == "MXFP8" else "tensorwise"  # the preset's fp8_recipe
    return [("mixed_precision", "fp8_recipe", recipe, src), ("mixed_precision", "fp8_param_gather", True, src)]


def _common(lib: str, grad: str, precision: str) -> list[Setting]:
    """What every row's recipe sets: the distributed optimizer (its library recipe), gradients reduced in BF16 (the
    family's common-configs helper sets mixed_precision and ddp grad_reduce_in_fp32 False), the precision's gathers."""
    return [("ddp", "use_distributed_optimizer", True, lib), ("ddp", "grad_reduce_in_fp32", False, grad),
            *_precision(precision)]


def _graph(impl: str, scope: list[str], src: str) -> list[Setting]:
    return [("model", "cuda_graph_impl", impl, src), ("model", "cuda_graph_scope", scope, src)]


def _moe(preset: str, dispatcher_src: str) -> list[Setting]:
    """TP 1 (sequence_parallel False, the preset's TP > 1 property) and the flex dispatcher over HybridEP
    (the preset's moe_flex_dispatcher_backend through apply_flex_dispatcher_backend)."""
    return [("model", "sequence_parallel", False, _via(preset, WORKLOAD)),
            ("model", "moe_token_dispatcher_type", "flex", dispatcher_src),
            ("model", "moe_flex_dispatcher_backend", "hybridep", dispatcher_src)]


def _llama(system: str, precision: str) -> tuple[str, str, list[Setting]]:
    gpu = system[4:].lower()
    fn = f"{LLAMA}::llama31_405b_pretrain_config_{gpu}"
    preset = f"{LLAMA_PRESETS}::LLAMA31_405B_PRETRAIN_CONFIG_{gpu.upper()}_{COMPUTE_DTYPE[precision].upper()}_V2"
    tp_overlap: Setting = (("comm_overlap", "tp_comm_overlap", False, f"{fn} (False for nvfp4)")
                           if precision == "NVFP4" else
                           ("comm_overlap", "tp_comm_overlap", True, f"{LLAMA_LIB} (CommOverlapConfig)"))
    graph = (_graph("none", [], _via(preset, GRAPH)) if precision == "NVFP4" else
             _graph("none", [], f"{LLAMA_LIB} (cuda_graph_impl none); {GRAPH} (scope emptied for none)"))
    settings: list[Setting] = [
        ("model", "sequence_parallel", True, _via(preset, WORKLOAD)),
        ("model", "recompute_granularity", None, LLAMA_LIB),
        ("model", "account_for_embedding_in_pipeline_split", True, LLAMA_LIB),
        ("model", "account_for_loss_in_pipeline_split", True, LLAMA_LIB),
        *graph, tp_overlap,
        *_common(LLAMA_LIB, f"{LLAMA}::set_llama31_common_configs", precision)]
    return fn, preset, settings


def _dsv3() -> tuple[str, str, list[Setting]]:
    fn = f"{DS}::deepseek_v3_pretrain_config_b300"
    preset = f"{DS_PRESETS}::DEEPSEEK_V3_PRETRAIN_CONFIG_B300_FP8_MX_V2"
    layout = (f"{L}/deepseek/deepseek_v3.py::set_deepseek_v3_pipeline_model_parallel_layout (PP 8, VP 1, one MTP "
              f"layer), called by {fn.split('::')[1]}")
    settings: list[Setting] = [
        *_moe(preset, _via(preset, WORKLOAD)),
        ("model", "recompute_granularity", "selective", f"{DS}::set_deepseek_v3_common_configs"),
        ("model", "recompute_modules", ["mla_up_proj"], _via(preset, RECOMPUTE)),
        ("model", "mtp_num_layers", 1, DS_LIB),
        ("model", "pipeline_model_parallel_layout", "Et*8|(t*8|)*6t*5mL", layout),
        ("comm_overlap", "overlap_moe_expert_parallel_comm", False, DS_LIB),
        *_graph("transformer_engine", ["attn", "moe_router", "moe_preprocess"], _via(preset, GRAPH)),
        ("optimizer", "main_grads_dtype", "bf16", DS_LIB),
        ("optimizer", "main_params_dtype", "fp32", DS_LIB),
        ("optimizer", "exp_avg_dtype", "bf16", DS_LIB),
        ("optimizer", "exp_avg_sq_dtype", "bf16", DS_LIB),
        *_common(DS_LIB, f"{DS}::set_deepseek_v3_common_configs", "MXFP8")]
    return fn, preset, settings


def _gpt_oss() -> tuple[str, str, list[Setting]]:
    fn = f"{GPTOSS}::gpt_oss_120b_pretrain_config_b300"
    preset = f"{GPTOSS_PRESETS}::GPT_OSS_120B_PRETRAIN_CONFIG_B300_FP8_MX_V2"
    settings: list[Setting] = [
        *_moe(preset, f"{_via(preset, WORKLOAD)}; also {fn} (apply_flex_dispatcher_backend)"),
        ("model", "recompute_granularity", None, GPTOSS_LIB),
        ("comm_overlap", "overlap_moe_expert_parallel_comm", False,
         f"{L}/common.py::_pretrain_common (comm_overlap None; the preset's moe_a2a_overlap False adds none)"),
        *_graph("transformer_engine", ["attn", "moe_router", "moe_preprocess"], _via(preset, GRAPH)),
        *_common(GPTOSS_LIB, f"{GPTOSS}::set_gpt_oss_common_configs", "MXFP8")]
    return fn, preset, settings


def _qwen(system: str) -> tuple[str, str, list[Setting]]:
    gpu = system[4:].lower()
    fn = f"{QWEN}::qwen3_30b_a3b_pretrain_config_{gpu}"
    mx = gpu == "b300"
    preset = f"{QWEN_PRESETS}::QWEN3_30B_A3B_PRETRAIN_CONFIG_{gpu.upper()}_{'FP8_MX' if mx else 'FP8_CS'}_V1"
    dispatcher = f"{fn} (moe_token_dispatcher_type flex, the preset's backend); {_via(preset, WORKLOAD)}"
    overlap: Setting = (("comm_overlap", "overlap_moe_expert_parallel_comm", True, _via(preset, A2A)) if mx else
                        ("comm_overlap", "overlap_moe_expert_parallel_comm", False,
                         f"{fn} (CommOverlapConfig(tp_comm_overlap=True) leaves it unset: off, "
                         "src/megatron/bridge/training/comm_overlap.py; the preset's moe_a2a_overlap False)"))
    graph = (_graph("full_iteration", [], _via(preset, GRAPH)) if mx else
             _graph("none", [], f"{QWEN_LIB} (cuda_graph_impl none); {GRAPH} (scope emptied for none)"))
    settings: list[Setting] = [
        *_moe(preset, dispatcher),
        ("model", "recompute_granularity", None, f"{QWEN}::set_qwen3_common_configs"),
        overlap, *graph,
        *_common(QWEN_LIB, f"{QWEN}::set_qwen3_common_configs", "MXFP8" if mx else "FP8")]
    return fn, preset, settings


def _nano(system: str) -> tuple[str, str, list[Setting]]:
    gpu = system[4:].lower()
    fn = f"{NANO}::nemotron_3_nano_pretrain_config_{gpu}"
    mx = gpu == "b300"
    preset = f"{NANO_PRESETS}::NEMOTRON_3_NANO_PRETRAIN_CONFIG_{gpu.upper()}_{'FP8_MX' if mx else 'FP8_CS'}_V1"
    remat: list[Setting] = ([("model", "recompute_granularity", None, NANO_LIB)] if mx else
                            [("model", "recompute_granularity", "selective", _via(preset, RECOMPUTE)),
                             ("model", "recompute_modules", ["moe", "layernorm", "core_attn", "moe_act"],
                              _via(preset, RECOMPUTE))])
    scope = ["attn", "mamba", "moe_router", "moe_preprocess"] if mx else ["mamba"]
    settings: list[Setting] = [
        *_moe(preset, f"{_via(preset, WORKLOAD)}; backend set again by {fn.split('::')[1]}"),
        *remat,
        ("comm_overlap", "overlap_moe_expert_parallel_comm", False, NANO_LIB),
        *_graph("transformer_engine", scope, _via(preset, GRAPH)),
        *_common(NANO_LIB, f"{NANO}::set_nemotron_3_nano_common_configs", "MXFP8" if mx else "FP8")]
    return fn, preset, settings


def _kimi() -> tuple[str, str, list[Setting]]:
    """Kimi K2's MXFP8 GB300 row: distributed Muon (the library recipe's default optimizer_type), which runs without
    Megatron's distributed optimizer and, with MXFP8, without fp8 parameter gathers (set_kimi_k2_common_configs'
    work-around); the library recipe's PP x VP layout for (4, 4); selective recompute of the MLA up-projections."""
    fn = f"{KIMI}::kimi_k2_pretrain_config_gb300"
    preset = f"{KIMI_PRESETS}::KIMI_K2_PRETRAIN_CONFIG_GB300_FP8_MX"
    common = f"{KIMI}::set_kimi_k2_common_configs"
    layout = f"{L}/kimi/kimi_k2.py::_get_kimi_k2_pipeline_layout (PP 4, VP 4), called by {fn.split('::')[1]}"
    settings: list[Setting] = [
        *_moe(preset, f"{_via(preset, WORKLOAD)}; also {fn} (apply_flex_dispatcher_backend)"),
        ("model", "recompute_granularity", "selective", common),
        ("model", "recompute_modules", ["mla_up_proj"], _via(preset, RECOMPUTE)),
        ("model", "pipeline_model_parallel_layout", "Et*4|(t*4|)*14tL", layout),
        ("comm_overlap", "overlap_moe_expert_parallel_comm", False, _via(preset, A2A)),
        *_graph("none", [], f"{KIMI_LIB} (cuda_graph_impl none); {GRAPH} (scope emptied for none)"),
        ("optimizer", "optimizer", "dist_muon", f"{KIMI_LIB} (distributed_muon_with_cosine_annealing)"),
        ("ddp", "use_distributed_optimizer", False, f"{KIMI_LIB} (\"Muon needs this to be False\")"),
        ("ddp", "overlap_grad_reduce", True, fn),
        ("ddp", "grad_reduce_in_fp32", False, common),
        ("mixed_precision", "fp8_recipe", "mxfp8", MXFP8),
        ("mixed_precision", "fp8_param_gather", False, f"{common} (Muon + MXFP8 work-around)")]
    return fn, preset, settings


def _super(system: str, precision: str = "MXFP8") -> tuple[str, str, list[Setting]]:
    """Nemotron 3 Super's rows: the preset's sizes over HybridEP, the library recipe's overlapped collectives and
    distributed optimizer, BF16 gradient reduction (set_nemotron_3_super_common_configs), Transformer Engine graphs over
    the preset's scopes. MXFP8: no recompute (the V1 MXFP8 preset sets none). NVFP4 (B300): the preset is the BF16 one
    (recompute of moe_act and layernorm); set_nemotron_3_super_common_configs swaps in nemotron_3_super_bf16_with_nvfp4_mixed
    (the last 14 layers in BF16), turns NVFP4 parameter gathers off and loads te_quant.cfg as model.quant_recipe."""
    gpu = system[4:].lower()
    fn = f"{NANO}::nemotron_3_super_pretrain_config_{gpu}"
    nvfp4 = precision == "NVFP4"
    preset = f"{NANO_PRESETS}::NEMOTRON_3_SUPER_PRETRAIN_CONFIG_{gpu.upper()}_{'NVFP4' if nvfp4 else 'FP8_MX'}_V1"
    common = f"{NANO}::set_nemotron_3_super_common_configs"
    remat: list[Setting] = ([("model", "recompute_granularity", "selective", _via(preset, RECOMPUTE)),
                             ("model", "recompute_modules", ["moe_act", "layernorm"], _via(preset, RECOMPUTE))]
                            if nvfp4 else [("model", "recompute_granularity", None, SUPER_LIB)])
    settings: list[Setting] = [
        *_moe(preset, f"{_via(preset, WORKLOAD)}; backend set again by {fn.split('::')[1]}"),
        *remat,
        ("ddp", "overlap_grad_reduce", True, SUPER_LIB), ("ddp", "overlap_param_gather", True, SUPER_LIB),
        *_graph("transformer_engine", ["attn", "mamba", "moe_router", "moe_preprocess"], _via(preset, GRAPH))]
    if not nvfp4:
        return fn, preset, settings + _common(SUPER_LIB, common, "MXFP8")
    mixed = ("src/megatron/bridge/training/mixed_precision.py::nemotron_3_super_bf16_with_nvfp4_mixed "
             f"({common.split('::')[1]} for 'nvfp4')")
    return fn, preset, settings + [
        ("ddp", "use_distributed_optimizer", True, SUPER_LIB), ("ddp", "grad_reduce_in_fp32", False, common),
        *mbridge_cases.super_nvfp4_settings(
            f"{common} (load_quantization_recipe of scripts/performance/configs/nemotronh/te_quant.cfg, written "
            "beside this file)", mixed, f"{common} ('Disabled until MCore PR 4358 lands')")]


TP1_OVERLAP = ("its tp_comm_overlap True does nothing at TP 1 (Megatron-Bridge comm_overlap.py turns it off below "
               "TP 2), so it is not written")
SUPER_NVFP4_ASSUMED = (
    "NVFP4 recorded as dtype fp4: the linear layers priced at the catalog's dense fp4 peak, except where the per-module "
    "recipe te_quant.cfg (read: attention projections, LatentMoE's projections and the MTP modules in BF16, Mamba's "
    "output projection in MXFP8) and the 14 BF16 layers at the end of nemotron_3_super_bf16_with_nvfp4_mixed "
    "(first_last_layers_bf16, read) keep them; NVFP4 parameter gathers off (weights held and gathered in bf16)")
TE_GRAPHS = ("Transformer Engine CUDA graphs over part of each layer (cuda_graph_impl transformer_engine) are read as "
             "not whole-iteration: the host launches and token-count syncs between the captured pieces stay priced")


def _notes(model: str, system: str, precision: str) -> list[str]:
    """What the recipe does beyond the settings written that ASAP does not model, or that a reader should know."""
    if model == "LLAMA3.1_405B":
        out = ["account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split (library recipe): 126 "
               "layers + embedding + loss = 128 slots, spread evenly over the pipeline x virtual stages"]
        if precision == "NVFP4":
            out.append("tp_comm_overlap False: the recipe function turns TP overlap off for nvfp4")
        else:
            out.append("TP overlap runs with the recipe's userbuffers configuration (tp_comm_overlap_cfg "
                       "userbuffers_fp8_*_h16384_*), whose per-GEMM split and SM counts are not modelled")
        if precision == "FP8" and system in NVL72:
            out.append("the V2 preset turns off the V1 preset's Megatron-FSDP and activation offloading "
                       "(use_megatron_fsdp False, cpu_offloading_num_layers None): neither is written")
        if precision == "NVFP4" and system == "DGX-GB200":
            out.append("parameter-gather overlap is off (llama31_llm_pretrain.py::disable_param_gather_overlap, nvfp4 "
                       "and config variant v2): the gathers may be less hidden than priced")
        if precision == "FP8":
            out.append("overlap_param_gather_with_optimizer_step (utils/overrides.py::set_post_overrides, DP, PP and "
                       "VP > 1 and not fp8_mx / nvfp4) is not modelled")
        return out
    if model == "DeepSeekV3":
        return ["recompute_granularity selective (set_deepseek_v3_common_configs) with recompute_modules "
                "[mla_up_proj] (the preset)",
                "the library recipe's pipeline layout for PP 8 x VP 1 is a list of stages ([embedding + 8 decoder], "
                "6 x [8 decoder], [5 decoder + mtp + loss]); written as the same layout in Megatron-Core's string form",
                "the precision-aware optimizer (use_precision_aware_optimizer True in the library recipe) keeps main "
                "gradients and Adam moments in bf16, master weights in fp32",
                f"{TE_GRAPHS}; expert all-to-all overlap is off (the preset's moe_a2a_overlap False)"]
    if model == "GPT OSS 120B":
        return [f"{TE_GRAPHS}; expert all-to-all overlap is off (the preset's moe_a2a_overlap False)"]
    if model == "Qwen3_30B_a3B" and system == "DGX-B300":
        return ["the full-iteration CUDA graph is read (cuda_graph_impl); its MoE paged stashing "
                "(qwen3_llm_pretrain.py::set_full_iter_cg_configs: moe_expert_rank_capacity_factor 1.5), the fused "
                "grouped MLP (cutedsl_fused_grouped_mlp), FP8 dot-product attention and delayed weight-gradient "
                "compute (_set_moe_a2a_overlap_overrides) are not modelled", TP1_OVERLAP]
    if model == "Kimi_K2":
        return ["the table's note: 'Muon optimizer was used for pre-training Kimi-K2' (optimizer dist_muon, priced: "
                "knowledge.cost_muon); the library recipe keeps the optimizer state in fp32 "
                "(use_precision_aware_optimizer False)",
                "the library recipe's layout for PP 4 x VP 4 is a list of stages ([embedding + 4 decoder], 14 x [4 "
                "decoder], [decoder + loss]); written as the same layout in Megatron-Core's string form",
                "qk_clip off and moe_router_fusion (set_kimi_k2_common_configs) are not modelled; no CUDA graphs; "
                "expert all-to-all overlap off (the preset's moe_a2a_overlap False)"]
    if model == "Nemotron_3_Super" and precision == "NVFP4":
        return [TE_GRAPHS + " (scopes: the preset's)", SUPER_NVFP4_ASSUMED,
                "moe_router_padding_for_quantization (set_nemotron_3_super_common_configs, NVFP4) is not modelled; "
                "expert all-to-all overlap is off (neither the library recipe nor the preset sets it)"]
    if model == "Nemotron_3_Super":
        return [TE_GRAPHS + " (scopes: the preset's)",
                "moe_router_padding_for_quantization (set_nemotron_3_super_common_configs, MXFP8) is not modelled; "
                "expert all-to-all overlap is off (neither the library recipe nor the preset sets it)"]
    if model == "Qwen3_30B_a3B":
        return ["no CUDA graphs (the H100 FP8 preset sets none; the library recipe's cuda_graph_impl none)",
                TP1_OVERLAP]
    return [TE_GRAPHS + " (scopes: the preset's)", TP1_OVERLAP + " (the library recipe's CommOverlapConfig)"]


def _recipe(model: str, system: str, precision: str) -> tuple[str, str, list[Setting]]:
    if model == "LLAMA3.1_405B":
        return _llama(system, precision)
    if model == "DeepSeekV3":
        return _dsv3()
    if model == "GPT OSS 120B":
        return _gpt_oss()
    if model == "Qwen3_30B_a3B":
        return _qwen(system)
    if model == "Nemotron_3_Super":
        return _super(system, precision)
    if model == "Kimi_K2":
        return _kimi()
    return _nano(system)


COMMON_ASSUMED = [
    f"settings the table does not state are the performance scripts' at {R} (the last commit at which "
    "docs/performance-summary.md showed 26.06 as the current container): the recipe function and workload preset "
    "whose parallel sizes, batch and precision are the row's (config variant v2, or v1 where the model has no v2, "
    "as scripts/performance/argument_parser.py defaults it). Each setting in megatron.yaml names the file and "
    "function or preset that sets it",
    "the recipes other than DeepSeek-V3's leave the precision-aware optimizer off (use_precision_aware_optimizer "
    "False), so their optimizer dtype fields are inert and not written",
]
PRECISION_ASSUMED = {
    "FP8": "FP8 recorded as dtype fp8 with fp8_recipe tensorwise: the performance scripts' fp8_cs, bf16_with_fp8_current_scaling_mixed "
           "(per-tensor current scaling) with its BF16 first and last layers turned off (first_last_layers_bf16 "
           "False in get_precision_config); fp8_param_gather as that recipe sets it (weights held and gathered in "
           "fp8)",
    "MXFP8": "MXFP8 recorded as dtype fp8 with fp8_recipe mxfp8 (the chip's fp8 peak, dense GEMMs at MXFP8's kernel "
             "rate: knowledge.cost_fp8_recipe); fp8_param_gather as bf16_with_mxfp8_mixed sets it. "
             "With MXFP8, Megatron-Core gathers parameters through the gradient buffer "
             "(reuse_grad_buf_for_mxfp8_param_ag, also set there). ASAP prices the weights at 1 byte each, and how "
             "much that layout really holds per weight is not determined here",
    "NVFP4": "NVFP4 recorded as dtype fp4: the linear layers priced at the catalog's dense fp4 peak, the attention "
             "core and elementwise work at bf16. bf16_with_nvfp4_mixed: fp4 e2m1, the NVFP4 recipe, "
             "fp8_param_gather False and fp4_param_gather True (weights held and gathered in NVFP4, read)",
}
KIMI_MXFP8 = ("MXFP8 recorded as dtype fp8 with fp8_recipe mxfp8 (the chip's fp8 peak, dense GEMMs at MXFP8's kernel "
              "rate); fp8_param_gather False as set_kimi_k2_common_configs turns it off for Muon: weights held in bf16")
MOE_ASSUMED = ("the footnote: MoE benchmarks force-balance the token distribution among experts and are token-dropless, "
               "as ASAP prices routed tokens (evenly spread)")


def _slices(system: str, gpus: int) -> int:
    """Nodes the run spans as ASAP counts them: eight-GPU DGX nodes (B300, H100), or NVLink domains on NVL72: Megatron-
    Bridge's launcher (scripts/performance/utils/executors.py @ RECIPE_COMMIT) asks Slurm for segments of at most 18
    four-GPU trays, the largest dividing the tray count."""
    return mbridge_cases.nvl72_segments(gpus) if system in NVL72 else max(1, gpus // 8)


def _node_note(system: str, gpus: int) -> str:
    return mbridge_cases.node_note(system, gpus, system in NVL72, R)


def _config(model: str, lineno: int, row: dict[str, str], gpus: int) -> tuple[str, list[str]]:
    """The megatron.yaml the case runs, and the recipe notes its expected.yaml adds."""
    system, precision = row["System"], row["Precision"]
    fn, preset, settings = _recipe(model, system, precision)
    doc, cites, dp = mbridge_cases.megatron_doc(row, gpus, _slices(system, gpus), settings)
    dtype, short = COMPUTE_DTYPE[precision], preset.split("::")[1]
    header = mbridge_cases.recipe_header(
        f"Megatron-Bridge docs/performance-summary-archive.md line {lineno} @ {C}, 26.06 NeMo container, "
        f"Pre-Training Performance, model {model}, {system} {precision} row ({URL})", row, gpus, dp,
        f"{fn}('{dtype}') with the preset {short} @ {R}", cites)
    assumed = [mbridge_cases.recipe_assumed(settings, f"{fn.split('::')[1]}('{dtype}') with the preset {short} at {R}"),
               *_notes(model, system, precision)]
    return header + mbridge_cases.dump(doc), assumed


def write_case(root: Path, model: str, lineno: int, line: str) -> str:
    """Write one case folder; returns its id."""
    row = mbridge_cases.parse_row(line)
    system, precision = row["System"], row["Precision"]
    chip, gpus = CHIP[system], int(row["#-GPUs"])
    slug, slices = SLUG[model], _slices(system, gpus)
    moe = slug not in DENSE
    cid = f"mbridge-26.06-{chip}-{slug}-{gpus}gpu-{precision.lower()}"
    super_nvfp4 = model == "Nemotron_3_Super" and precision == "NVFP4"
    text, recipe_assumed = _config(model, lineno, row, gpus)
    run = mbridge_cases.run_doc(
        cid, f"Megatron-Bridge 26.06 {model} pre-training on {gpus} {chip.upper()} ({precision})",
        f"Megatron-Bridge performance summary archive, 26.06 NeMo container, {model}, {system} {precision} row. "
        "No profile.", chip=chip, gpus=gpus, slices=slices, model=MODELS[slug], row=row,
        dtype="fp4" if precision == "NVFP4" else "fp8",
        tags=(["moe"] if moe else []) + (["hybrid"] if "layer_pattern" in MODELS[slug] else []))
    cited = {
        "source": f"{REPO} docs/performance-summary-archive.md @ {COMMIT[:10]}, '26.06 NeMo Container' > "
                  f"'Pre-Training Performance' > 'Model: {model}', line {lineno}, row {system} {precision}; "
                  f"recipe settings from scripts/performance @ {RECIPE_COMMIT[:10]}",
        "url": URL, "table": f"mbridge-26.06-{system.lower()}", "row": f"{model} {precision}",
        "stated": [f"26.06 NeMo Container, Pre-Training Performance, Model: {model}, row: {line}",
                   f"columns: {COLUMNS}"] + ([FOOTNOTE] if moe else []),
        "assumed": (MODEL_ASSUMED[slug] + recipe_assumed + COMMON_ASSUMED
                    + ([] if super_nvfp4 else [KIMI_MXFP8 if model == "Kimi_K2" else PRECISION_ASSUMED[precision]])
                    + ([MOE_ASSUMED] if moe else []) + [_node_note(system, gpus)]),
    }
    if super_nvfp4:
        mbridge_cases.write_te_quant(root / cid)
    mbridge_cases.write_case_files(root / cid, text, run, cited,
                                   mbridge_cases.measured(row, f"{system} row {model} {precision}"))
    return cid


def main(argv: list[str]) -> int:
    return mbridge_cases.run(argv, lambda root: (write_case(root, model, lineno, line)
                                                 for model, lines in ROWS.items() for lineno, line in lines))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
