"""Write the Megatron-Bridge 26.04.01 rows ASAP could not price before LatentMoE, hybrid MTP modules and Muon were
modelled: Nemotron 3 Super's four MXFP8 rows and Kimi K2's MXFP8 row, into the eval corpus.

Run: ``.venv/bin/python scripts/eval_cases_mbridge_260401.py [examples/eval]`` (writes the case folders named below in
place; nothing else is touched).

Why: Nemotron 3 Super runs its 512 routed experts in a 1024-wide latent (``moe_latent_size``) and trains two hybrid
multi-token-prediction modules (``*E``); ASAP prices both (``model.moe_latent_size``, the pattern's ``/*E/*E``). The
26.04.01 container measured it on four systems with three expert layouts: EP 64 inside one NVLink domain (GB300; GB200
with TP 2), EP 8 inside eight-GPU DGX-B300 nodes (data parallel 8 over InfiniBand), and EP 64 across eight DGX-B200
nodes over InfiniBand. Kimi K2 (1T, DeepSeek-V3's architecture) trains with distributed Muon (``dist_muon``), which
ASAP prices (``knowledge/cost_muon.py``); its row is the 26.06 one's recipe (``scripts/eval_cases_mbridge_2606.py``,
the same presets and helpers at both commits). The rows join the 26.04.01 tables the corpus already has (one per
system); the DGX-GB300 one then ranks three models.

Source: NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary-archive.md`` @ 067f987df03b (Apache-2.0), section
"26.04.01 NeMo Container" > "Pre-Training Performance" > "Model: Nemotron_3_Super", lines 282-288, and
"Model: Kimi_K2", line 264. The rows first appear
in ``docs/performance-summary.md`` at 21d102f5e ("26.04.01_perf_summary", 2026-05-27); the performance scripts at that
commit give the settings the table omits: ``scripts/performance/configs/nemotronh/nemotron_3_llm_pretrain.py``
(``nemotron_3_super_pretrain_config_<gpu>``, ``set_nemotron_3_super_common_configs``), the presets in
``nemotron_3_workload_base_configs.py`` (``NEMOTRON_3_SUPER_PRETRAIN_CONFIG_<GPU>_FP8_MX_V1``) and the library recipe
``src/megatron/bridge/recipes/nemotronh/nemotron_3_super.py::nemotron_3_super_pretrain_config``. The dimensions are
Megatron-LM's argument file for the model (tests/data/real/megatron/NVIDIA-Nemotron-3-Super-120B-A12B-BF16.sh).

Left out, with the reason: Nemotron 3 Super's NVFP4 rows (their recipe quantizes per layer from a Transformer Engine recipe file,
``te_quant.cfg``, mixing formats ASAP does not read), and the 26.04 and 26.02.01 containers' rows of the same
layouts (the same recipes, re-measured within 5%).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/mbridge_cases.py
import eval_cases_mbridge_2606 as r2606  # noqa: E402  (Kimi K2's recipe settings: the same files at both commits)
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
]
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


def _settings(system: str, tp: int) -> list[Setting]:
    """What the row's recipe sets beyond its sizes: HybridEP (preset), the library recipe's distributed optimizer and
    overlapped collectives, BF16 gradient reduction, MXFP8 with fp8 parameter gathers; CUDA graphs and recompute as the
    system's preset sets them (B200: no graphs, selective recompute of moe_act and layernorm)."""
    gpu = system[4:].upper()
    preset = f"{PRESETS}::NEMOTRON_3_SUPER_PRETRAIN_CONFIG_{gpu}_FP8_MX_V1 (applied by {WORKLOAD})"
    b200 = system == "DGX-B200"
    remat: list[Setting] = ([("model", "recompute_granularity", "selective", preset),
                             ("model", "recompute_modules", ["moe_act", "layernorm"], preset)] if b200 else
                            [("model", "recompute_granularity", None, LIB)])
    graph: list[Setting] = ([("model", "cuda_graph_impl", "none", preset), ("model", "cuda_graph_scope", [], preset)]
                            if b200 else
                            [("model", "cuda_graph_impl", "transformer_engine", preset),
                             ("model", "cuda_graph_scope", ["attn", "mamba", "moe_router", "moe_preprocess"], preset)])
    return [("model", "sequence_parallel", tp > 1, f"{preset} (TP > 1)"),
            ("model", "moe_token_dispatcher_type", "flex", f"{preset} (apply_flex_dispatcher_backend)"),
            ("model", "moe_flex_dispatcher_backend", "hybridep", preset),
            *remat, *graph,
            ("ddp", "use_distributed_optimizer", True, LIB),
            ("ddp", "overlap_grad_reduce", True, LIB), ("ddp", "overlap_param_gather", True, LIB),
            ("ddp", "grad_reduce_in_fp32", False, COMMON),
            ("mixed_precision", "fp8_recipe", "mxfp8", MXFP8), ("mixed_precision", "fp8_param_gather", True, MXFP8)]


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


def _recipe(model: str, system: str, tp: int) -> tuple[str, str, list[Setting], list[str], dict[str, Any], list[str]]:
    """The row's recipe function and preset, its settings, the notes they need, the model and its provenance."""
    if model == "Kimi_K2":
        fn, preset, settings = r2606._kimi()
        return (fn, preset, settings, r2606._notes(model, system, "MXFP8") + [r2606.KIMI_MXFP8], mbridge_cases.KIMI_K2,
                mbridge_cases.kimi_k2_assumed(RECIPE_COMMIT) + COMMON_ASSUMED)
    fn = f"{FN}::nemotron_3_super_pretrain_config_{system[4:].lower()}"
    preset = f"{PRESETS}::NEMOTRON_3_SUPER_PRETRAIN_CONFIG_{system[4:].upper()}_FP8_MX_V1"
    return fn, preset, _settings(system, tp), [], MODEL, ASSUMED


def write_case(root: Path, lineno: int, line: str) -> str:
    """Write one case folder; returns its id."""
    row = mbridge_cases.parse_row(line, COLUMNS)
    system, gpus = row["System"], int(row["#-GPUs"])
    chip, slices, tp = CHIP[system], _slices(system, gpus), int(row["TP"])
    model = "Kimi_K2" if gpus == 256 else "Nemotron_3_Super"
    slug = "kimi-k2" if model == "Kimi_K2" else "nemotron-3-super"
    cid = f"mbridge-26.04.01-{chip}-{slug}-{gpus}gpu-mxfp8"
    fn, preset, settings, notes, spec, assumed = _recipe(model, system, tp)
    doc, cites, dp = mbridge_cases.megatron_doc(row, gpus, slices, settings)
    header = (f"# Megatron-Bridge docs/performance-summary-archive.md line {lineno} @ {ARCHIVE_COMMIT[:9]}, 26.04.01 NeMo "
              f"container, Pre-Training Performance, model {model}, {system} MXFP8 row ({URL})\n"
              f"# TP={tp} PP={row['PP']} CP=1 VP={row['VP']} EP={row['EP']} GBS={row['GBS']} MBS={row['MBS']}; data "
              f"parallel = {gpus}/(TP*PP) = {dp}\n# parallel sizes and batch from the row; the other settings from the "
              f"performance recipe {fn}('fp8_mx') with the preset {preset.split('::')[1]} @ {RECIPE_COMMIT} (the table "
              "does not state them), each set where named:\n" + "\n".join(cites) + "\n")
    run = mbridge_cases.run_doc(
        cid, f"Megatron-Bridge 26.04.01 {model} pre-training on {gpus} {chip.upper()} (MXFP8)",
        f"Megatron-Bridge performance summary archive, 26.04.01 NeMo container, {model}, {system} MXFP8 row. "
        "No profile.", chip=chip, gpus=gpus, slices=slices, model=spec, row=row, dtype="fp8",
        tags=["moe"] + (["hybrid"] if "layer_pattern" in spec else []))
    cited = {
        "source": f"{REPO} docs/performance-summary-archive.md @ {ARCHIVE_COMMIT[:10]}, '26.04.01 NeMo Container' > "
                  f"'Pre-Training Performance' > 'Model: {model}', line {lineno}, row {system} MXFP8; recipe "
                  f"settings from scripts/performance @ {RECIPE_COMMIT}",
        "url": URL, "table": f"mbridge-26.04.01-{system.lower()}", "row": f"{model} MXFP8",
        "stated": [f"26.04.01 NeMo Container, Pre-Training Performance, Model: {model}, row: {line}",
                   f"columns: {COLUMNS}", mbridge_cases.MOE_FOOTNOTE],
        "assumed": assumed + notes + [_node_note(system, gpus)],
    }
    mbridge_cases.write_case_files(root / cid, header + mbridge_cases.dump(doc), run, cited,
                                   mbridge_cases.measured(row, f"{system} row {model} MXFP8"))
    return cid


def main(argv: list[str]) -> int:
    return mbridge_cases.run(argv, lambda root: (write_case(root, n, line) for n, line in ROWS))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
