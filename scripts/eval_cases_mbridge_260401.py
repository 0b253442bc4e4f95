"""Write Megatron-Bridge's 26.04.01 Blackwell pre-training rows the eval corpus did not hold into it: Nemotron 3 Super's
four MXFP8 and four NVFP4 rows and Kimi K2's MXFP8 row (the rows ASAP could not price before LatentMoE, hybrid MTP modules and Muon
were modelled), and the other DGX-GB300 / GB200 / B300 / B200 rows of the section: Llama 3 70B and Llama 3.1 405B on
GB300 (FP8, MXFP8, NVFP4), DeepSeek-V3 on GB300, B300 and B200 (MXFP8), GPT-OSS 120B on all four systems (BF16), and
Qwen3 30B-A3B and 235B-A22B on all four systems (MXFP8). Out-of-sample checks: nothing in ASAP is tuned to them.

Run: ``.venv/bin/python scripts/eval_cases_mbridge_260401.py [examples/eval]`` (writes the case folders named below in
place; nothing else is touched).

Why: Nemotron 3 Super runs its 512 routed experts in a 1024-wide latent (``moe_latent_size``) and trains two hybrid
multi-token-prediction modules (``*E``); ASAP prices both (``model.moe_latent_size``, the pattern's ``/*E/*E``). The
26.04.01 container measured it on four systems with three expert layouts: EP 64 inside one NVLink domain (GB300; GB200
with TP 2), EP 8 inside eight-GPU DGX-B300 nodes (data parallel 8 over InfiniBand), and EP 64 across eight DGX-B200
nodes over InfiniBand. Kimi K2 (1T, DeepSeek-V3's architecture) trains with distributed Muon (``dist_muon``), which
ASAP prices (``knowledge/cost_muon.py``); its row is the 26.06 one's recipe (``scripts/eval_cases_mbridge_2606.py``,
the same presets and helpers at both commits). The other rows put the corpus's dense and MoE models on the same four
systems in one container: Megatron-FSDP with activation offloading (Llama 3 70B FP8) beside pipelined layouts, EP 64
in an NVLink domain beside EP 8 per node over InfiniBand, HybridEP, DeepEP and plain all-to-all dispatch, and BF16
beside MXFP8 / NVFP4. The rows join the 26.04.01 tables the corpus already has (one per system).

Source: NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary-archive.md`` @ 067f987df03b (Apache-2.0), section
"26.04.01 NeMo Container" > "Pre-Training Performance": Nemotron_3_Super lines 282-288, Kimi_K2 line 264, LLAMA3_70B
201-203, LLAMA3.1_405B 213-215, DeepSeekV3 225 and 227-228, GPT OSS 120B 234-237, Qwen3_30B_a3B 244-247,
Qwen3_235B_a22B 254-257. The rows first appear in ``docs/performance-summary.md`` at 21d102f5e
("26.04.01_perf_summary", 2026-05-27); the performance scripts at that commit give the settings the table omits: per
model ``scripts/performance/configs/<family>/<family>_llm_pretrain.py`` (one function per model and system), the
workload preset it applies (``<family>_workload_base_configs.py``: config variant v2, falling back to v1 where a model
has no v2, as ``scripts/performance/argument_parser.py`` and ``utils/utils.py::get_workload_base_config`` choose it;
each row's sizes and batch are checked against its preset's, ``PRESET_SIZES``), ``utils/overrides.py`` (the preset's
recompute, CUDA graphs, expert all-to-all overlap, dispatcher, Megatron-FSDP, offloading; ``set_post_overrides``),
``utils/precision.py::get_precision_config`` and the library recipes under ``src/megatron/bridge/recipes/``. Where the
26.06 script's helper builds exactly the 21d102f5e settings (Llama 3.1 405B on GB300, DeepSeek-V3 on B300, Kimi K2:
the same functions, presets and library recipes at both commits) it is reused; the others are written here. Each
setting in a case's ``megatron.yaml`` names the file and function or preset that sets it. Nemotron 3 Super's
dimensions are Megatron-LM's argument file for the model (tests/data/real/megatron/NVIDIA-Nemotron-3-Super-120B-A12B-BF16.sh);
the other models' are the ones the corpus already records for them.

Super's NVFP4 rows (lines 283-289) quantize per module from a Transformer Engine recipe file, ``te_quant.cfg``
(written beside each case's megatron.yaml as ``model.quant_recipe``; ASAP reads and prices it:
bot/configs/precision_recipe.py), and keep their last 14 layers in BF16 (nemotron_3_super_bf16_with_nvfp4_mixed,
first_last_layers_bf16). Left out, with the reason: the 26.04 and 26.02.01 containers' Super rows of the same layouts
(the same recipes, re-measured within 5%). None of the other rows listed above uses a per-layer
quantization file or another setting ASAP cannot read. The section's DGX-H100 rows (scripts/eval_cases_mbridge_h100.py),
its Nemotron_3_Nano rows (scripts/eval_cases_mbridge_nemotron.py) and its DGX-GB200 Llama and DeepSeek-V3 rows (written
by hand) are in the corpus already, not written here.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/mbridge_cases.py
import eval_cases_mbridge_2606 as r2606  # noqa: E402  (recipes whose files are the same at both commits)
import eval_cases_mbridge_2608 as r2608  # noqa: E402  (Qwen3 235B-A22B's model block)
import mbridge_cases  # noqa: E402

REPO = mbridge_cases.REPO
ARCHIVE_COMMIT = "067f987df03b8355b03192d88d70f1709fedf51a"
RECIPE_COMMIT = "21d102f5e"
URL = f"https://github.com/{REPO}/blob/{ARCHIVE_COMMIT}/docs/performance-summary-archive.md"
COLUMNS = mbridge_cases.COLUMNS_FSDP

# The rows exactly as the archive prints them, with their line (26.04.01 NeMo Container, Model: Nemotron_3_Super).
ROWS = [
    (264, "| DGX-GB300 | 256 | MXFP8 | 4096 | 2 | 4096 | 0 | 1 | 4 | 1 | 4 | 64 | 5328 | 1088 |"),
    (282, "| DGX-GB300 | 64 | MXFP8 | 512 | 1 | 8192 | 0 | 1 | 1 | 1 | n/a | 64 | 9344 | 795 |"),
    (284, "| DGX-GB200 | 64 | MXFP8 | 512 | 1 | 8192 | 0 | 2 | 1 | 1 | n/a | 64 | 6656 | 564 |"),
    (286, "| DGX-B300 | 64 | MXFP8 | 512 | 1 | 8192 | 0 | 1 | 1 | 1 | n/a | 8 | 7296 | 623 |"),
    (288, "| DGX-B200 | 64 | MXFP8 | 512 | 1 | 8192 | 0 | 1 | 1 | 1 | n/a | 64 | 6400 | 542 |"),
    # the NVFP4 rows: Transformer Engine's per-module recipe te_quant.cfg and 14 BF16 layers at the end (read and
    # priced: bot.configs.precision_recipe, knowledge.cost_module_precision, first_last_layers_bf16)
    (283, "| DGX-GB300 | 64 | NVFP4 | 512 | 1 | 8192 | 0 | 1 | 1 | 1 | n/a | 64 | 9600 | 817 |"),
    (285, "| DGX-GB200 | 64 | NVFP4 | 512 | 1 | 8192 | 0 | 2 | 1 | 1 | n/a | 64 | 6784 | 574 |"),
    (287, "| DGX-B300 | 64 | NVFP4 | 512 | 1 | 8192 | 0 | 1 | 1 | 1 | n/a | 8 | 7424 | 634 |"),
    (289, "| DGX-B200 | 64 | NVFP4 | 512 | 1 | 8192 | 0 | 2 | 1 | 1 | n/a | 64 | 5632 | "
          "475[^nemotron-3-super-b200-nvfp4-note] |"),
]
B200_NVFP4_NOTE = ("[^nemotron-3-super-b200-nvfp4-note]: Mapping used for MXFP8 precision could not fit for  NVFP4 "
                   "precision for this model. We expect to achieve better performance for NVFP4 precision in future when "
                   "NVFP4 param gather is supported.")
CHIP = {"DGX-GB300": "gb300", "DGX-GB200": "gb200", "DGX-B300": "b300", "DGX-B200": "b200"}
NVL72 = ("DGX-GB300", "DGX-GB200")

MODEL: dict[str, Any] = mbridge_cases.NEMOTRON_3_SUPER

S = "scripts/performance/configs/nemotronh"
FN = f"{S}/nemotron_3_llm_pretrain.py"
PRESETS = f"{S}/nemotron_3_workload_base_configs.py"
LIB = "src/megatron/bridge/recipes/nemotronh/nemotron_3_super.py::nemotron_3_super_pretrain_config"
COMMON = f"{FN}::set_nemotron_3_super_common_configs"
WORKLOAD = "scripts/performance/utils/overrides.py::set_workload_base_configs"
MXFP8 = ("src/megatron/bridge/training/mixed_precision.py::bf16_with_mxfp8_mixed "
         "(scripts/performance/utils/precision.py::get_precision_config('fp8_mx'))")

COMMON_ASSUMED = [
    f"settings the table does not state are the performance scripts' at {RECIPE_COMMIT}: the recipe function and "
    "preset of the row's model, system and precision. Each setting in megatron.yaml names the file and function or "
    "preset that sets it",
    "the archive's footnote: MoE benchmarks force-balance the token distribution among experts and are token-dropless, "
    "as ASAP prices routed tokens (evenly spread)",
]
ASSUMED = mbridge_cases.nemotron_3_super_assumed(f"the library recipe ({LIB} @ {RECIPE_COMMIT})") + [
    "MXFP8 recorded as dtype fp8 with fp8_recipe mxfp8 (the chip's fp8 peak; dense GEMMs at MXFP8's kernel rate); "
    "fp8_param_gather as bf16_with_mxfp8_mixed sets it (ASAP prices the weights at 1 byte each)",
    "moe_router_padding_for_quantization (set_nemotron_3_super_common_configs, MXFP8) is not modelled; expert "
    "all-to-all overlap is off (neither the library recipe nor the preset sets it)",
] + COMMON_ASSUMED

Setting = tuple[str, str, Any, str]


NVFP4_PRECISION = ("src/megatron/bridge/training/mixed_precision.py::nemotron_3_super_bf16_with_nvfp4_mixed "
                   "(set_nemotron_3_super_common_configs for 'nvfp4')")


def _preset(system: str, precision: str) -> str:
    """The row's preset: the NVFP4 one on B300 is the BF16 preset (recompute of moe_act and layernorm), on B200 its own
    (TP 2, Transformer Engine graphs, no recompute); elsewhere the MXFP8 one's sizes and graphs."""
    return (f"{PRESETS}::NEMOTRON_3_SUPER_PRETRAIN_CONFIG_{system[4:].upper()}_"
            f"{'NVFP4' if precision == 'NVFP4' else 'FP8_MX'}_V1")


def _precision_settings(precision: str) -> list[Setting]:
    """MXFP8 with fp8 parameter gathers; or NVFP4 as set_nemotron_3_super_common_configs sets it: the preset
    nemotron_3_super_bf16_with_nvfp4_mixed (the last 14 layers in BF16), NVFP4 parameter gathers off ('Disabled until
    MCore PR 4358 lands'), and the per-module recipe te_quant.cfg beside the config (model.quant_recipe)."""
    if precision != "NVFP4":
        return [("mixed_precision", "fp8_recipe", "mxfp8", MXFP8), ("mixed_precision", "fp8_param_gather", True, MXFP8)]
    return mbridge_cases.super_nvfp4_settings(
        f"{COMMON} (load_quantization_recipe of {S}/te_quant.cfg, written beside this file)", NVFP4_PRECISION,
        f"{COMMON} (fp4_param_gather False)")


def _settings(system: str, tp: int, precision: str = "MXFP8") -> list[Setting]:
    """What the row's recipe sets beyond its sizes: HybridEP (preset), the library recipe's distributed optimizer and
    overlapped collectives, BF16 gradient reduction, the precision's settings; CUDA graphs and recompute as the
    system's preset sets them (B200 MXFP8: no graphs, selective recompute of moe_act and layernorm; B300 NVFP4:
    graphs and that recompute)."""
    preset = f"{_preset(system, precision)} (applied by {WORKLOAD})"
    no_graph = system == "DGX-B200" and precision != "NVFP4"
    recompute = no_graph or (system == "DGX-B300" and precision == "NVFP4")
    remat: list[Setting] = ([("model", "recompute_granularity", "selective", preset),
                             ("model", "recompute_modules", ["moe_act", "layernorm"], preset)] if recompute else
                            [("model", "recompute_granularity", None, LIB)])
    scope = ["mamba", "attn", "moe_router", "moe_preprocess"] if system == "DGX-B200" else \
        ["attn", "mamba", "moe_router", "moe_preprocess"]
    graph: list[Setting] = ([("model", "cuda_graph_impl", "none", preset), ("model", "cuda_graph_scope", [], preset)]
                            if no_graph else
                            [("model", "cuda_graph_impl", "transformer_engine", preset),
                             ("model", "cuda_graph_scope", scope, preset)])
    return [("model", "sequence_parallel", tp > 1, f"{preset} (TP > 1)"),
            ("model", "moe_token_dispatcher_type", "flex", f"{preset} (apply_flex_dispatcher_backend)"),
            ("model", "moe_flex_dispatcher_backend", "hybridep", preset),
            *remat, *graph,
            ("ddp", "use_distributed_optimizer", True, LIB),
            ("ddp", "overlap_grad_reduce", True, LIB), ("ddp", "overlap_param_gather", True, LIB),
            ("ddp", "grad_reduce_in_fp32", False, COMMON),
            *_precision_settings(precision)]


def _slices(system: str, gpus: int) -> int:
    return mbridge_cases.nvl72_segments(gpus) if system in NVL72 else max(1, gpus // 8)


def _node_note(system: str, gpus: int) -> str:
    slices = _slices(system, gpus)
    if system in NVL72:
        domains = "one NVLink domain" if slices == 1 else f"{slices} NVLink domains of {gpus // slices}"
        return (f"{system[4:]} NVL72: {gpus} GPUs in {domains} (Megatron-Bridge's launcher asks Slurm for segments of at "
                f"most 18 four-GPU trays, the largest dividing the tray count); num_slices {slices}")
    return (f"{system}: 8 GPUs per node on NVLink, {slices} nodes joined by InfiniBand (num_slices {slices}); "
            "Megatron's rank order tp-cp-ep-dp-pp places EP inside a node first")


NVFP4_ASSUMED = mbridge_cases.nemotron_3_super_assumed(f"the library recipe ({LIB} @ {RECIPE_COMMIT})") + [
    "NVFP4 recorded as dtype fp4: the linear layers priced at the catalog's dense fp4 peak, except where the "
    "per-module recipe te_quant.cfg (read: attention projections, LatentMoE's projections and the MTP modules in BF16, "
    "Mamba's output projection in MXFP8) and the 14 BF16 layers at the end of nemotron_3_super_bf16_with_nvfp4_mixed "
    "(first_last_layers_bf16, read) keep them; the attention core and elementwise work in bf16",
    "NVFP4 parameter gathers are off (set_nemotron_3_super_common_configs: 'Disabled until MCore PR 4358 lands'): "
    "weights held and gathered in bf16",
    "moe_router_padding_for_quantization (set_nemotron_3_super_common_configs, NVFP4) is not modelled; expert "
    "all-to-all overlap is off (neither the library recipe nor the preset sets it)",
] + COMMON_ASSUMED


def _recipe(model: str, system: str, tp: int, precision: str = "MXFP8",
            ) -> tuple[str, str, list[Setting], list[str], dict[str, Any], list[str]]:
    """The row's recipe function and preset, its settings, the notes they need, the model and its provenance."""
    if model == "Kimi_K2":
        fn, preset, settings = r2606._kimi()
        return (fn, preset, settings, r2606._notes(model, system, "MXFP8") + [r2606.KIMI_MXFP8], mbridge_cases.KIMI_K2,
                mbridge_cases.kimi_k2_assumed(RECIPE_COMMIT) + COMMON_ASSUMED)
    fn = f"{FN}::nemotron_3_super_pretrain_config_{system[4:].lower()}"
    assumed = NVFP4_ASSUMED if precision == "NVFP4" else ASSUMED
    return fn, _preset(system, precision), _settings(system, tp, precision), [], MODEL, assumed


def write_case(root: Path, lineno: int, line: str) -> str:
    """Write one case folder; returns its id."""
    row = mbridge_cases.parse_row(line, COLUMNS)
    system, gpus = row["System"], int(row["#-GPUs"])
    chip, slices, tp = CHIP[system], _slices(system, gpus), int(row["TP"])
    model = "Kimi_K2" if gpus == 256 else "Nemotron_3_Super"
    slug = "kimi-k2" if model == "Kimi_K2" else "nemotron-3-super"
    precision = row["Precision"]
    nvfp4 = precision == "NVFP4"
    cid = f"mbridge-26.04.01-{chip}-{slug}-{gpus}gpu-{precision.lower()}"
    fn, preset, settings, notes, spec, assumed = _recipe(model, system, tp, precision)
    doc, cites, dp = mbridge_cases.megatron_doc(row, gpus, slices, settings)
    header = (f"# Megatron-Bridge docs/performance-summary-archive.md line {lineno} @ {ARCHIVE_COMMIT[:9]}, 26.04.01 NeMo "
              f"container, Pre-Training Performance, model {model}, {system} {precision} row ({URL})\n"
              f"# TP={tp} PP={row['PP']} CP=1 VP={row['VP']} EP={row['EP']} GBS={row['GBS']} MBS={row['MBS']}; data "
              f"parallel = {gpus}/(TP*PP) = {dp}\n# parallel sizes and batch from the row; the other settings from the "
              f"performance recipe {fn}('{'nvfp4' if nvfp4 else 'fp8_mx'}') with the preset {preset.split('::')[1]} @ "
              f"{RECIPE_COMMIT} (the table does not state them), each set where named:\n" + "\n".join(cites) + "\n")
    run = mbridge_cases.run_doc(
        cid, f"Megatron-Bridge 26.04.01 {model} pre-training on {gpus} {chip.upper()} ({precision})",
        f"Megatron-Bridge performance summary archive, 26.04.01 NeMo container, {model}, {system} {precision} row. "
        "No profile.", chip=chip, gpus=gpus, slices=slices, model=spec, row=row, dtype="fp4" if nvfp4 else "fp8",
        tags=["moe"] + (["hybrid"] if "layer_pattern" in spec else []))
    stated = [f"26.04.01 NeMo Container, Pre-Training Performance, Model: {model}, row: {line}",
              f"columns: {COLUMNS}", mbridge_cases.MOE_FOOTNOTE] + ([B200_NVFP4_NOTE] if "note]" in line else [])
    cited = {
        "source": f"{REPO} docs/performance-summary-archive.md @ {ARCHIVE_COMMIT[:10]}, '26.04.01 NeMo Container' > "
                  f"'Pre-Training Performance' > 'Model: {model}', line {lineno}, row {system} {precision}; recipe "
                  f"settings from scripts/performance @ {RECIPE_COMMIT}",
        "url": URL, "table": f"mbridge-26.04.01-{system.lower()}", "row": f"{model} {precision}",
        "stated": stated,
        "assumed": assumed + notes + [_node_note(system, gpus)],
    }
    if nvfp4:
        mbridge_cases.write_te_quant(root / cid)
    mbridge_cases.write_case_files(root / cid, header + mbridge_cases.dump(doc), run, cited,
                                   mbridge_cases.measured(row, f"{system} row {model} {precision}"))
    return cid


# ---------------------------------------------------------------------------------------------------------------------
# The other 26.04.01 Blackwell rows (docs/performance-summary-archive.md @ ARCHIVE_COMMIT, "26.04.01 NeMo Container" >
# "Pre-Training Performance"): the ones the corpus did not hold yet, each with its recipe at RECIPE_COMMIT.
# ---------------------------------------------------------------------------------------------------------------------

MORE_ROWS: dict[str, list[tuple[int, str]]] = {
    "LLAMA3_70B": [
        (201, "| DGX-GB300 | 64 | FP8 | 256 | 2 | 8192 | 64 | 1 | 1 | 1 | n/a | n/a | 5248 | 2348 |"),
        (202, "| DGX-GB300 | 64 | MXFP8 | 256 | 1 | 8192 | 0 | 1 | 4 | 1 | 5 | n/a | 4864 | 2186 |"),
        (203, "| DGX-GB300 | 64 | NVFP4 | 256 | 1 | 8192 | 0 | 1 | 4 | 1 | 5 | n/a | 7296 | 3253 |"),
    ],
    "LLAMA3.1_405B": [
        (213, "| DGX-GB300 | 256 | FP8 | 1536 | 1 | 8192 | 0 | 4 | 8 | 1 | 4 | n/a | 1024 | 2617 |"),
        (214, "| DGX-GB300 | 256 | MXFP8 | 1536 | 1 | 8192 | 0 | 2 | 8 | 2 | 4 | n/a | 960 | 2453 |"),
        (215, "| DGX-GB300 | 256 | NVFP4 | 1536 | 1 | 8192 | 0 | 4 | 8 | 1 | 4 | n/a | 1440 | 3653 |"),
    ],
    "DeepSeekV3": [
        (225, "| DGX-GB300 | 256 | MXFP8 | 4096 | 2 | 4096 | 0 | 1 | 2 | 1 | 8 | 32 | 4992 | 1298 |"),
        (227, "| DGX-B300 | 256 | MXFP8 | 4096 | 2 | 4096 | 0 | 1 | 8 | 1 | n/a | 8 | 3456 | 898 |"),
        (228, "| DGX-B200 | 256 | MXFP8 | 4096 | 1 | 4096 | 0 | 1 | 8 | 1 | 2 | 32 | 3328 | 864 |"),
    ],
    "GPT OSS 120B": [
        (234, "| DGX-GB300 | 64 | BF16 | 1280 | 4 | 4096 | 0 | 1 | 1 | 1 | n/a | 64 | 19200 | 523 |"),
        (235, "| DGX-GB200 | 64 | BF16 | 1280 | 4 | 4096 | 0 | 1 | 1 | 1 | n/a | 64 | 16640 | 452 |"),
        (236, "| DGX-B300 | 64 | BF16 | 1280 | 4 | 4096 | 0 | 1 | 1 | 1 | n/a | 8 | 15232 | 414 |"),
        (237, "| DGX-B200 | 64 | BF16 | 1280 | 4 | 4096 | 0 | 1 | 1 | 1 | n/a | 8 | 13568 | 369 |"),
    ],
    "Qwen3_30B_a3B": [
        (244, "| DGX-GB300 | 8 | MXFP8 | 512 | 8 | 4096 | 0 | 1 | 1 | 1 | n/a | 8 | 31744 | 729 |"),
        (245, "| DGX-GB200 | 8 | MXFP8 | 512 | 4 | 4096 | 0 | 1 | 1 | 1 | n/a | 8 | 26112 | 599 |"),
        (246, "| DGX-B300 | 8 | MXFP8 | 512 | 8 | 4096 | 0 | 1 | 1 | 1 | n/a | 8 | 30720 | 704 |"),
        (247, "| DGX-B200 | 8 | MXFP8 | 512 | 4 | 4096 | 0 | 1 | 1 | 1 | n/a | 8 | 27136 | 619 |"),
    ],
    "Qwen3_235B_a22B": [
        (254, "| DGX-GB300 | 256 | MXFP8 | 8192 | 2 | 4096 | 0 | 1 | 4 | 1 | 12 | 32 | 6944 | 1029 |"),
        (255, "| DGX-GB200 | 256 | MXFP8 | 8192 | 1 | 4096 | 0 | 1 | 8 | 1 | 3 | 32 | 5680 | 840 |"),
        (256, "| DGX-B300 | 256 | MXFP8 | 8192 | 2 | 4096 | 0 | 1 | 8 | 1 | n/a | 8 | 5936 | 878 |"),
        (257, "| DGX-B200 | 256 | MXFP8 | 8192 | 1 | 4096 | 0 | 1 | 8 | 1 | n/a | 8 | 3776 | 560 |"),
    ],
}
SLUG = {"LLAMA3_70B": "llama3-70b", "LLAMA3.1_405B": "llama31-405b", "DeepSeekV3": "deepseek-v3",
        "GPT OSS 120B": "gpt-oss-120b", "Qwen3_30B_a3B": "qwen3-30b-a3b", "Qwen3_235B_a22B": "qwen3-235b-a22b"}
DENSE = ("llama3-70b", "llama31-405b")

# The preset each row's recipe applies at RECIPE_COMMIT (config variant v2, or v1 where the model has none:
# scripts/performance/argument_parser.py --config_variant defaults to v2, utils/utils.py::get_workload_base_config falls
# back to v1), with its sizes and batch as that file sets them (the base preset's values where it leaves one unset):
# checked against the row before a case is written.
PRESET_SIZES: dict[tuple[str, str], dict[str, Any]] = {
    ("LLAMA3_70B", "FP8"): dict(tp=1, pp=1, cp=1, vp=None, ep=None, gbs=256, mbs=2, fsdp=True),
    ("LLAMA3_70B", "MXFP8"): dict(tp=1, pp=4, cp=1, vp=5, ep=None, gbs=256, mbs=1, fsdp=False),
    ("LLAMA3_70B", "NVFP4"): dict(tp=1, pp=4, cp=1, vp=5, ep=None, gbs=256, mbs=1, fsdp=False),
    ("LLAMA3.1_405B", "FP8"): dict(tp=4, pp=8, cp=1, vp=4, ep=None, gbs=1536, mbs=1, fsdp=False),
    ("LLAMA3.1_405B", "MXFP8"): dict(tp=2, pp=8, cp=2, vp=4, ep=None, gbs=1536, mbs=1, fsdp=False),
    ("LLAMA3.1_405B", "NVFP4"): dict(tp=4, pp=8, cp=1, vp=4, ep=None, gbs=1536, mbs=1, fsdp=False),
    ("DeepSeekV3", "DGX-GB300"): dict(tp=1, pp=2, cp=1, vp=8, ep=32, gbs=4096, mbs=2, fsdp=False),
    ("DeepSeekV3", "DGX-B300"): dict(tp=1, pp=8, cp=1, vp=None, ep=8, gbs=4096, mbs=2, fsdp=False),
    ("DeepSeekV3", "DGX-B200"): dict(tp=1, pp=8, cp=1, vp=2, ep=32, gbs=4096, mbs=1, fsdp=False),
    ("GPT OSS 120B", "DGX-GB300"): dict(tp=1, pp=1, cp=1, vp=None, ep=64, gbs=1280, mbs=4, fsdp=False),
    ("GPT OSS 120B", "DGX-GB200"): dict(tp=1, pp=1, cp=1, vp=None, ep=64, gbs=1280, mbs=4, fsdp=False),
    ("GPT OSS 120B", "DGX-B300"): dict(tp=1, pp=1, cp=1, vp=None, ep=8, gbs=1280, mbs=4, fsdp=False),
    ("GPT OSS 120B", "DGX-B200"): dict(tp=1, pp=1, cp=1, vp=None, ep=8, gbs=1280, mbs=4, fsdp=False),
    ("Qwen3_30B_a3B", "DGX-GB300"): dict(tp=1, pp=1, cp=1, vp=None, ep=8, gbs=512, mbs=8, fsdp=False),
    ("Qwen3_30B_a3B", "DGX-GB200"): dict(tp=1, pp=1, cp=1, vp=None, ep=8, gbs=512, mbs=4, fsdp=False),
    ("Qwen3_30B_a3B", "DGX-B300"): dict(tp=1, pp=1, cp=1, vp=None, ep=8, gbs=512, mbs=8, fsdp=False),
    ("Qwen3_30B_a3B", "DGX-B200"): dict(tp=1, pp=1, cp=1, vp=None, ep=8, gbs=512, mbs=4, fsdp=False),
    ("Qwen3_235B_a22B", "DGX-GB300"): dict(tp=1, pp=4, cp=1, vp=12, ep=32, gbs=8192, mbs=2, fsdp=False),
    ("Qwen3_235B_a22B", "DGX-GB200"): dict(tp=1, pp=8, cp=1, vp=3, ep=32, gbs=8192, mbs=1, fsdp=False),
    ("Qwen3_235B_a22B", "DGX-B300"): dict(tp=1, pp=8, cp=1, vp=None, ep=8, gbs=8192, mbs=2, fsdp=False),
    ("Qwen3_235B_a22B", "DGX-B200"): dict(tp=1, pp=8, cp=1, vp=None, ep=8, gbs=8192, mbs=1, fsdp=False),
}

LLAMA3_MODEL: dict[str, Any] = dict(name="llama3-70b", vocab=128256, layers=80, d_model=8192, d_ff=28672, heads=64,
                                    kv_heads=8, mlp_matrices=3)
# run.yaml model blocks, as the corpus's cases for the same models record them (mbridge-26.04.01-gb200-llama3-70b-*,
# the 26.06 and 26.08 scripts' blocks for the others)
MODELS: dict[str, dict[str, Any]] = {"llama3-70b": LLAMA3_MODEL, **r2606.MODELS,
                                     "qwen3-235b-a22b": r2608.MODELS["qwen3-235b-a22b"]}
MODEL_ASSUMED: dict[str, list[str]] = {
    "llama3-70b": [
        "model dimensions are the published Llama 3 70B architecture (meta-llama/Meta-Llama-3-70B, the model the library "
        f"recipe llama3_70b_pretrain_config builds through AutoBridge at {RECIPE_COMMIT}: hidden 8192, 80 layers, 64 "
        "query heads and 8 KV heads, FFN 28672; vocabulary 128256 as set_llama3_common_configs sets it), not stated in "
        "the table",
    ],
    "llama31-405b": [
        "model dimensions are the published Llama 3.1 405B architecture (meta-llama/Meta-Llama-3.1-405B, the model "
        f"the library recipe llama31_405b_pretrain_config builds at {RECIPE_COMMIT}: hidden 16384, 126 layers, 128 "
        "query heads and 8 KV heads, FFN 53248, vocabulary 128256), not stated in the table",
    ],
    "deepseek-v3": [
        "model dimensions are DeepSeek-V3's own config (deepseek-ai/DeepSeek-V3 @ 9b4e9788e4a3 inference/configs/"
        "config_671B.json: dim 7168, 61 layers of which the first 3 dense with inter_dim 18432, 128 heads, MLA "
        "q_lora_rank 1536 / kv_lora_rank 512 / qk_nope 128 / qk_rope 64 / v 128, 256 routed experts of moe_inter_dim "
        "2048 top-8 plus 1 shared, vocabulary 129280), not stated in the table; with one MTP module (mtp_num_layers 1 "
        f"in the library recipe at {RECIPE_COMMIT}): the row does not say w/o MTP",
    ],
    "gpt-oss-120b": r2606.MODEL_ASSUMED["gpt-oss-120b"],
    "qwen3-30b-a3b": r2606.MODEL_ASSUMED["qwen3-30b-a3b"],
    "qwen3-235b-a22b": [r2608.QWEN3_DIMS],
}

R = RECIPE_COMMIT
PERF = "scripts/performance"
OV = f"{PERF}/utils/overrides.py"
FSDP_OV = f"{OV}::_set_megatron_fsdp_overrides"
POST = f"{OV}::set_post_overrides"
LLAMA3 = f"{PERF}/configs/llama/llama3_llm_pretrain.py"
LLAMA3_PRESETS = f"{PERF}/configs/llama/llama3_workload_base_configs.py"
LLAMA3_LIB = f"{r2606.L}/llama/llama3.py::llama3_70b_pretrain_config"
QWEN235_LIB = f"{r2606.L}/qwen/qwen3_moe.py::qwen3_235b_a22b_pretrain_config"
COMPUTE_DTYPE = {**r2606.COMPUTE_DTYPE, "BF16": "bf16"}
_via, _graph, _moe, _common = r2606._via, r2606._graph, r2606._moe, r2606._common
WORKLOAD_, RECOMPUTE, GRAPH, A2A = r2606.WORKLOAD, r2606.RECOMPUTE, r2606.GRAPH, r2606.A2A


def _llama70b(precision: str) -> tuple[str, str, list[Setting]]:
    """Llama 3 70B on GB300: FP8 on Megatron-FSDP over all 64 GPUs with 20 layers' activations offloaded (the V2 FP8
    preset); MXFP8 and NVFP4 at PP 4 x VP 5. No CUDA graphs, no recompute."""
    fn = f"{LLAMA3}::llama3_70b_pretrain_config_gb300"
    preset = f"{LLAMA3_PRESETS}::LLAMA3_70B_PRETRAIN_CONFIG_GB300_{COMPUTE_DTYPE[precision].upper()}_V2"
    graph = (_graph("none", [], _via(preset, GRAPH)) if precision == "NVFP4" else
             _graph("none", [], f"{LLAMA3_LIB} (cuda_graph_impl none); {GRAPH} (scope emptied for none)"))
    out: list[Setting] = [("model", "sequence_parallel", False, _via(preset, WORKLOAD_)),
                          ("model", "recompute_granularity", None, LLAMA3_LIB)]
    if precision == "FP8":
        offload = _via(preset, f"{OV}::_set_recompute_overrides")
        out += [("model", "cpu_offloading", True, offload), ("model", "cpu_offloading_weights", False, offload),
                ("model", "cpu_offloading_num_layers", 20, offload)]
    out += graph
    if precision == "FP8":
        out += [("ddp", "use_megatron_fsdp", True, _via(preset, FSDP_OV)),
                ("ddp", "data_parallel_sharding_strategy", "optim_grads_params", FSDP_OV)]
    return fn, preset, out + _common(LLAMA3_LIB, f"{LLAMA3}::set_llama3_common_configs", precision)


def _dsv3_260401(system: str) -> tuple[str, str, list[Setting]]:
    """DeepSeek-V3 MXFP8. B300: the 26.06 row's recipe (the same function, preset DEEPSEEK_V3_PRETRAIN_CONFIG_B300_V2
    and library recipe at both commits: scripts/eval_cases_mbridge_2606.py::_dsv3). GB300: PP 2 x VP 8 with the
    preset's layout, HybridEP, recompute of the MLA up-projections, no CUDA graphs (the preset empties the scope, the
    library recipe's cuda_graph_impl is none). B200: PP 8 x VP 2 over DeepEP with expert all-to-all overlap, recompute
    of the MLA up-projections and the dense MLPs, Transformer Engine graphs."""
    if system == "DGX-B300":
        return r2606._dsv3()
    gpu = system[4:].lower()
    fn = f"{r2606.DS}::deepseek_v3_pretrain_config_{gpu}"
    preset = f"{r2606.DS_PRESETS}::DEEPSEEK_V3_PRETRAIN_CONFIG_{gpu.upper()}_FP8_MX_V2"
    common = f"{r2606.DS}::set_deepseek_v3_common_configs"
    dispatcher = f"{fn} (the preset's moe_flex_dispatcher_backend); {_via(preset, WORKLOAD_)}"
    if system == "DGX-GB300":
        specific: list[Setting] = [
            *_moe(preset, dispatcher),
            ("model", "recompute_granularity", "selective", common),
            ("model", "recompute_modules", ["mla_up_proj"], _via(preset, RECOMPUTE)),
            ("model", "mtp_num_layers", 1, r2606.DS_LIB),
            ("model", "pipeline_model_parallel_layout", "Et*4|(t*4|)*14tmL", f"{preset} (pp_layout, set by {fn})"),
            ("comm_overlap", "overlap_moe_expert_parallel_comm", False, f"{r2606.DS_LIB}; the preset's moe_a2a_overlap False"),
            *_graph("none", [], f"{r2606.DS_LIB} (cuda_graph_impl none); {_via(preset, GRAPH)} (cuda_graph_scope [])")]
    else:
        layout = (f"{r2606.L}/deepseek/deepseek_v3.py::set_deepseek_v3_pipeline_model_parallel_layout (PP 8, VP 2, one "
                  f"MTP layer), called by {fn.split('::')[1]}")
        specific = [
            ("model", "sequence_parallel", False, _via(preset, WORKLOAD_)),
            ("model", "moe_token_dispatcher_type", "flex", dispatcher),
            ("model", "moe_flex_dispatcher_backend", "deepep", dispatcher),
            ("model", "recompute_granularity", "selective", common),
            ("model", "recompute_modules", ["mla_up_proj", "mlp"], _via(preset, RECOMPUTE)),
            ("model", "mtp_num_layers", 1, r2606.DS_LIB),
            ("model", "pipeline_model_parallel_layout", "Et*4|(t*4|)*14tmL", layout),
            ("comm_overlap", "overlap_moe_expert_parallel_comm", True, _via(preset, A2A)),
            *_graph("transformer_engine", ["attn", "moe_router", "moe_preprocess"], _via(preset, GRAPH))]
    settings = specific + [
        ("optimizer", "main_grads_dtype", "bf16", r2606.DS_LIB),
        ("optimizer", "main_params_dtype", "fp32", r2606.DS_LIB),
        ("optimizer", "exp_avg_dtype", "bf16", r2606.DS_LIB),
        ("optimizer", "exp_avg_sq_dtype", "bf16", r2606.DS_LIB),
        *_common(r2606.DS_LIB, common, "MXFP8")]
    return fn, preset, settings


def _gpt_oss_bf16(system: str) -> tuple[str, str, list[Setting]]:
    """GPT-OSS 120B in BF16 with no pipeline: EP 64 over the NVL72 domain (GB300, GB200) or EP 8 per node (B300,
    B200). GB300 and B300 run Transformer Engine graphs; GB200 and B200 recompute layernorm and the expert activation;
    only B300's preset names a flex backend (HybridEP), the others dispatch with all-to-all; GB200 overlaps the expert
    all-to-all. The BF16 run turns on the precision-aware optimizer (set_post_overrides), with fp32 states."""
    gpu = system[4:].lower()
    fn = f"{r2606.GPTOSS}::gpt_oss_120b_pretrain_config_{gpu}"
    preset = f"{r2606.GPTOSS_PRESETS}::GPT_OSS_120B_PRETRAIN_CONFIG_{gpu.upper()}_BF16_V2"
    lib = r2606.GPTOSS_LIB
    dispatch: list[Setting] = (
        [*_moe(preset, f"{_via(preset, WORKLOAD_)}; also {fn} (apply_flex_dispatcher_backend)")]
        if system == "DGX-B300" else
        [("model", "sequence_parallel", False, _via(preset, WORKLOAD_)),
         ("model", "moe_token_dispatcher_type", "alltoall",
          f"{_via(preset, WORKLOAD_)} (the preset names no moe_flex_dispatcher_backend: alltoall)")])
    remat: list[Setting] = ([("model", "recompute_granularity", "selective", _via(preset, RECOMPUTE)),
                             ("model", "recompute_modules", ["layernorm", "moe_act"], _via(preset, RECOMPUTE))]
                            if system in ("DGX-GB200", "DGX-B200") else
                            [("model", "recompute_granularity", None, lib)])
    overlap: Setting = (
        ("comm_overlap", "overlap_moe_expert_parallel_comm", True,
         f"{_via(preset, A2A)}, on {fn.split('::')[1]}'s CommOverlapConfig(tp_comm_overlap=False)")
        if system == "DGX-GB200" else
        ("comm_overlap", "overlap_moe_expert_parallel_comm", False,
         f"{r2606.L}/common.py::_pretrain_common (comm_overlap None; the preset's moe_a2a_overlap False adds none)"))
    graph = (_graph("transformer_engine", ["attn", "moe_router", "moe_preprocess"], _via(preset, GRAPH))
             if system in ("DGX-GB300", "DGX-B300") else
             _graph("none", [], f"{lib} (cuda_graph_impl none); {GRAPH} (scope emptied for none)"))
    post = f"{POST} (compute dtype bf16 with the adam optimizer)"
    settings: list[Setting] = [
        *dispatch, *remat, overlap, *graph,
        ("optimizer", "use_precision_aware_optimizer", True, post),
        ("optimizer", "main_grads_dtype", "fp32", lib), ("optimizer", "main_params_dtype", "fp32", lib),
        ("optimizer", "exp_avg_dtype", "fp32", lib), ("optimizer", "exp_avg_sq_dtype", "fp32", lib),
        ("ddp", "use_distributed_optimizer", True, lib),
        ("ddp", "grad_reduce_in_fp32", False, f"{r2606.GPTOSS}::set_gpt_oss_common_configs")]
    return fn, preset, settings


# The Transformer Engine graph scopes of the Qwen3 MXFP8 presets at RECIPE_COMMIT (235B on B300 / B200: none)
QWEN_GRAPH_SCOPES: dict[tuple[str, str], list[str]] = {
    ("Qwen3_30B_a3B", "DGX-GB300"): ["moe_router", "moe_preprocess"],
    ("Qwen3_30B_a3B", "DGX-GB200"): ["moe_router", "moe_preprocess"],
    ("Qwen3_30B_a3B", "DGX-B300"): ["moe_router", "moe_preprocess"],
    ("Qwen3_30B_a3B", "DGX-B200"): ["attn", "moe_router", "moe_preprocess"],
    ("Qwen3_235B_a22B", "DGX-GB300"): ["attn", "moe_router", "moe_preprocess"],
    ("Qwen3_235B_a22B", "DGX-GB200"): ["attn", "moe_router", "moe_preprocess"],
}


def _qwen_260401(model: str, system: str) -> tuple[str, str, list[Setting]]:
    """Qwen3 30B-A3B (V1 presets: the model has no V2) and 235B-A22B (V2) in MXFP8: HybridEP (235B on B200: all-to-all),
    no recompute (set_qwen3_common_configs), no expert all-to-all overlap, Transformer Engine graphs over the preset's
    scopes (235B on B300 and B200: none)."""
    gpu = system[4:].lower()
    big = model == "Qwen3_235B_a22B"
    size = "235b_a22b" if big else "30b_a3b"
    fn = f"{r2606.QWEN}::qwen3_{size}_pretrain_config_{gpu}"
    preset = f"{r2606.QWEN_PRESETS}::QWEN3_{size.upper()}_PRETRAIN_CONFIG_{gpu.upper()}_FP8_MX_{'V2' if big else 'V1'}"
    lib = QWEN235_LIB if big else r2606.QWEN_LIB
    common = f"{r2606.QWEN}::set_qwen3_common_configs"
    if big and system == "DGX-B200":
        dispatch: list[Setting] = [
            ("model", "sequence_parallel", False, _via(preset, WORKLOAD_)),
            ("model", "moe_token_dispatcher_type", "alltoall",
             f"{fn} (moe_token_dispatcher_type alltoall); {_via(preset, WORKLOAD_)} (no flex backend in the preset)")]
    else:
        dispatch = _moe(preset, f"{fn} (moe_token_dispatcher_type flex, the preset's backend); {_via(preset, WORKLOAD_)}")
    split: list[Setting] = ([("model", "account_for_embedding_in_pipeline_split", True, lib),
                             ("model", "account_for_loss_in_pipeline_split", True, lib)] if big else [])
    scope = QWEN_GRAPH_SCOPES.get((model, system))
    graph = (_graph("transformer_engine", scope, _via(preset, GRAPH)) if scope is not None else
             _graph("none", [], f"{lib} (cuda_graph_impl none); {GRAPH} (scope emptied for none)"))
    settings: list[Setting] = [
        *dispatch,
        ("model", "recompute_granularity", None, common),
        *split,
        ("comm_overlap", "overlap_moe_expert_parallel_comm", False,
         f"{fn} (CommOverlapConfig(tp_comm_overlap=True) leaves it unset: off, "
         "src/megatron/bridge/training/comm_overlap.py; the preset's moe_a2a_overlap False)"),
        *graph,
        *_common(lib, common, "MXFP8")]
    return fn, preset, settings


def _more_recipe(model: str, system: str, precision: str) -> tuple[str, str, list[Setting]]:
    if model == "LLAMA3_70B":
        return _llama70b(precision)
    if model == "LLAMA3.1_405B":  # the 26.06 rows' recipe: the same files at both commits
        return r2606._llama(system, precision)
    if model == "DeepSeekV3":
        return _dsv3_260401(system)
    if model == "GPT OSS 120B":
        return _gpt_oss_bf16(system)
    return _qwen_260401(model, system)


def _more_notes(model: str, system: str, precision: str) -> list[str]:
    """What the recipe does beyond the settings written that ASAP does not model, or that a reader should know."""
    if model == "LLAMA3.1_405B" or (model == "DeepSeekV3" and system == "DGX-B300"):
        return r2606._notes(model, system, precision)
    if model == "LLAMA3_70B":
        out = [r2606.TP1_OVERLAP + " (the library recipe's CommOverlapConfig" + (
            "; llama3_70b_pretrain_config_gb300 turns it off for nvfp4)" if precision == "NVFP4" else ")"),
               "80 layers over PP 4 x VP 5 = 20 virtual stages of 4 layers" if precision != "FP8" else
               "Megatron-FSDP (FSDP column 64 = the data-parallel size) with data_parallel_sharding_strategy "
               "optim_grads_params (_set_megatron_fsdp_overrides): parameters, gradients and optimizer state sharded, "
               "priced as ZeRO stage 3; llama3_70b_pretrain_config_gb300 also sets fsdp_double_buffer True, "
               "gradient_accumulation_fusion False and suggested_communication_unit_size 800000000, and "
               "_set_megatron_fsdp_overrides keep_fp8_transpose_cache False and average_in_collective False: not "
               "modelled"]
        if precision == "FP8":
            out.append("activation offloading of 20 of the 80 layers (the preset's cpu_offloading_num_layers 20 "
                       "through _set_recompute_overrides: cpu_offloading True, cpu_offloading_weights False, activations "
                       "only)")
        if precision == "NVFP4":
            out.append("the preset's cuda_graph_scope full_iteration is dropped: its cuda_graph_impl none empties the "
                       "scope (_set_cuda_graph_overrides)")
        return out
    if model == "DeepSeekV3":
        out = ["the precision-aware optimizer (use_precision_aware_optimizer True in the library recipe) keeps main "
               "gradients and Adam moments in bf16, master weights in fp32",
               "moe_router_fusion (set_deepseek_v3_common_configs)" + (
                   " and moe_hybridep_num_sms 32 (_set_common_perf_overrides) are" if system == "DGX-GB300" else " is")
               + " not modelled"]
        if system == "DGX-GB300":
            out += ["recompute_granularity selective (set_deepseek_v3_common_configs) with recompute_modules "
                    "[mla_up_proj] (the preset)",
                    "the layout is the preset's pp_layout (deepseek_v3_pretrain_config_gb300 applies it when set): 61 "
                    "layers over PP 2 x VP 8 = 16 virtual stages, MTP and loss on the last",
                    "no CUDA graphs (the preset sets only cuda_graph_scope []; the library recipe's cuda_graph_impl "
                    "none); expert all-to-all overlap off (the preset's moe_a2a_overlap False)"]
        else:
            out += ["recompute_granularity selective (set_deepseek_v3_common_configs) with recompute_modules "
                    "[mla_up_proj, mlp] (the preset): mlp recomputes the three dense layers' MLPs",
                    "deepseek_v3_pretrain_config_b200 does not read the preset's pp_layout: the library recipe's layout "
                    "for PP 8 x VP 2 is a list of stages ([embedding + 4 decoder], 14 x [4 decoder], [decoder + mtp + "
                    "loss]), the same as the preset's string; written in Megatron-Core's string form",
                    "the preset's moe_a2a_overlap True also sets delay_wgrad_compute True and moe_shared_expert_overlap "
                    "False (_set_moe_a2a_overlap_overrides): delayed weight gradients are not modelled",
                    r2606.TE_GRAPHS]
        return out
    if model == "GPT OSS 120B":
        out = ["BF16: use_precision_aware_optimizer True (set_post_overrides turns it on for compute dtype bf16 with "
               "adam) with the library recipe's fp32 main gradients, master weights and moments. ASAP prices the "
               "gradients at main_grads_dtype (fp32, 4 B per parameter) although grad_reduce_in_fp32 False reduces "
               "them in bf16; whether Megatron-Core holds a full fp32 gradient copy in this layout is not determined "
               "here. Storing only the fp32 master weights' low 16 bits beside the bf16 weights (Transformer Engine's "
               "FusedAdam store_param_remainders, where it applies) is not modelled",
               "moe_router_fusion (set_gpt_oss_common_configs) is not modelled"]
        if system in ("DGX-GB300", "DGX-B300"):
            out.append(r2606.TE_GRAPHS + " (scopes: the preset's)")
        if system == "DGX-GB200":
            out.append("the preset's moe_a2a_overlap True also sets delay_wgrad_compute True "
                       "(_set_moe_a2a_overlap_overrides): delayed weight gradients are not modelled")
        if system != "DGX-B300":
            out.append("the library recipe names moe_flex_dispatcher_backend deepep but keeps moe_token_dispatcher_type "
                       "alltoall, which set_workload_base_configs sets again (the preset names no backend): the "
                       "backend is inert and not written")
        return out + ["no TP overlap: gpt_oss_120b_pretrain_config_gb200 sets CommOverlapConfig(tp_comm_overlap=False) "
                      "at TP 1" if system == "DGX-GB200" else
                      "no TP overlap (the library recipe's comm_overlap is None; TP 1)"]
    # Qwen3
    out = []
    if model == "Qwen3_235B_a22B":
        pp, vp = (4, 12) if system == "DGX-GB300" else (8, 3) if system == "DGX-GB200" else (8, 1)
        out.append(f"account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split (library recipe): 94 "
                   f"layers + embedding + loss = 96 slots, {96 // (pp * vp)} per each of the {pp} x {vp} pipeline "
                   "stages")
    if system in ("DGX-B300", "DGX-B200") and model == "Qwen3_235B_a22B":
        out.append("no CUDA graphs (the preset sets none; the library recipe's cuda_graph_impl none)")
    else:
        out.append(r2606.TE_GRAPHS + " (scopes: the preset's)")
    hybridep = "" if (model, system) == ("Qwen3_235B_a22B", "DGX-B200") else \
        " and moe_hybridep_num_sms 32 (_set_common_perf_overrides)"
    return out + [f"moe_router_fusion and bias_activation_fusion (set_qwen3_common_configs){hybridep} are not modelled",
                  r2606.TP1_OVERLAP + " (the recipe function's CommOverlapConfig)"]


MORE_COMMON_ASSUMED = [
    f"settings the table does not state are the performance scripts' at {R} ('26.04.01_perf_summary', the commit that "
    "published the 26.04.01 rows): the recipe function and workload preset whose parallel sizes, batch and precision "
    "are the row's (config variant v2, or v1 where the model has no v2, as scripts/performance/argument_parser.py "
    "defaults it and utils/utils.py::get_workload_base_config falls back). Each setting in megatron.yaml names the file "
    "and function or preset that sets it",
]
OPTIMIZER_OFF = ("the recipe leaves the precision-aware optimizer off (use_precision_aware_optimizer False in its library "
                 "recipe; set_post_overrides turns it on only for bf16), so its optimizer dtype fields are inert and not "
                 "written")
PRECISION_ASSUMED = {**r2606.PRECISION_ASSUMED,
                     "BF16": "BF16 recorded as dtype bf16: get_precision_config('bf16') is bf16_mixed, no fp8 or fp4 "
                             "layers and no fp8 parameter gathers"}


def _more_node_note(system: str, gpus: int) -> str:
    return mbridge_cases.node_note(system, gpus, system in NVL72, R)


def _check_preset(model: str, row: dict[str, str]) -> None:
    """The row's sizes and batch are its preset's (PRESET_SIZES); the FSDP column is 0 or the data-parallel size."""
    key = (model, row["Precision"]) if model.startswith("LLAMA") else (model, row["System"])
    want = PRESET_SIZES[key]
    num = {k: None if row[c] == "n/a" else int(row[c])
           for k, c in (("tp", "TP"), ("pp", "PP"), ("cp", "CP"), ("vp", "VP"), ("ep", "EP"), ("gbs", "GBS"),
                        ("mbs", "MBS"))}
    got = {**num, "fsdp": int(row["FSDP"]) > 0}
    assert got == want, f"{model} {row['System']} {row['Precision']}: row {got} is not its preset {want}"
    dp = int(row["#-GPUs"]) // (int(row["TP"]) * int(row["PP"]) * int(row["CP"]))
    assert int(row["FSDP"]) in (0, dp)


def write_more_case(root: Path, model: str, lineno: int, line: str) -> str:
    """Write one of MORE_ROWS's case folders; returns its id."""
    row = mbridge_cases.parse_row(line, COLUMNS)
    _check_preset(model, row)
    system, precision = row["System"], row["Precision"]
    chip, gpus = CHIP[system], int(row["#-GPUs"])
    slug, slices = SLUG[model], _slices(system, gpus)
    moe = slug not in DENSE
    cid = f"mbridge-26.04.01-{chip}-{slug}-{gpus}gpu-{precision.lower()}"
    fn, preset, settings = _more_recipe(model, system, precision)
    doc, cites, dp = mbridge_cases.megatron_doc(row, gpus, slices, settings)
    dtype = COMPUTE_DTYPE[precision]
    header = mbridge_cases.recipe_header(
        f"Megatron-Bridge docs/performance-summary-archive.md line {lineno} @ {ARCHIVE_COMMIT[:9]}, 26.04.01 NeMo "
        f"container, Pre-Training Performance, model {model}, {system} {precision} row ({URL})", row, gpus, dp,
        f"{fn}('{dtype}') with the preset {preset.split('::')[1]} @ {R}", cites, fsdp=True)
    recipe_assumed = [mbridge_cases.recipe_assumed(
                          settings, f"{fn.split('::')[1]}('{dtype}') with the preset {preset.split('::')[1]} at {R}"),
                      *_more_notes(model, system, precision)]
    optimizer = [] if model in ("DeepSeekV3", "GPT OSS 120B") else [OPTIMIZER_OFF]
    run = mbridge_cases.run_doc(
        cid, f"Megatron-Bridge 26.04.01 {model} pre-training on {gpus} {chip.upper()} ({precision})",
        f"Megatron-Bridge performance summary archive, 26.04.01 NeMo container, {model}, {system} {precision} row. "
        "No profile.", chip=chip, gpus=gpus, slices=slices, model=MODELS[slug], row=row,
        dtype={"NVFP4": "fp4", "BF16": "bf16"}.get(precision, "fp8"), tags=["moe"] if moe else [])
    cited = {
        "source": f"{REPO} docs/performance-summary-archive.md @ {ARCHIVE_COMMIT[:10]}, '26.04.01 NeMo Container' > "
                  f"'Pre-Training Performance' > 'Model: {model}', line {lineno}, row {system} {precision}; recipe "
                  f"settings from scripts/performance @ {RECIPE_COMMIT}",
        "url": URL, "table": f"mbridge-26.04.01-{system.lower()}", "row": f"{model} {precision}",
        "stated": [f"26.04.01 NeMo Container, Pre-Training Performance, Model: {model}, row: {line}",
                   f"columns: {COLUMNS}"] + ([mbridge_cases.MOE_FOOTNOTE] if moe else []),
        "assumed": (MODEL_ASSUMED[slug] + recipe_assumed + MORE_COMMON_ASSUMED + optimizer
                    + [PRECISION_ASSUMED[precision]] + ([r2606.MOE_ASSUMED] if moe else [])
                    + [_more_node_note(system, gpus)]),
    }
    mbridge_cases.write_case_files(root / cid, header + mbridge_cases.dump(doc), run, cited,
                                   mbridge_cases.measured(row, f"{system} row {model} {precision}"))
    return cid


def main(argv: list[str]) -> int:
    def write_all(root: Path) -> Iterator[str]:
        yield from (write_case(root, n, line) for n, line in ROWS)
        yield from (write_more_case(root, model, n, line) for model, lines in MORE_ROWS.items() for n, line in lines)

    return mbridge_cases.run(argv, write_all)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
