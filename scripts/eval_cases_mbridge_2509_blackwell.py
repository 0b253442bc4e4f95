"""Write the Megatron-Bridge 25.09 NeMo Container pre-training rows of DGX-GB200 and DGX-B200 (dense Llama models) into
the eval corpus: each row twice, its FP8-CS figures and its parenthesised MXFP8 figures.

Run: ``.venv/bin/python scripts/eval_cases_mbridge_2509_blackwell.py [examples/eval]`` (writes the case folders named
below in place; nothing else is touched).

Why: the corpus holds the 25.11 Blackwell Llama rows and the 25.09 DGX-H100 rows, not the 25.09 Blackwell ones. 25.09
ran Llama 3 70B and Llama 3.1 405B on GB200 with layouts 25.11 no longer uses (Megatron-FSDP with activation
offloading for FP8-CS, 405B at TP 2 on 128 GPUs; pipelined layouts for MXFP8), so one row gives two configurations.

Source: NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary-archive.md`` @ 067f987df03b (Apache-2.0), section
"25.09 NeMo Container" > "Pre-Training Performance" > "System: DGX-GB200" / "System: DGX-B200". The table has no
Precision column. Its footnote: "The numbers in parentheses indicate the use of different quantization granularities:
In case of GB200 and B200 systems, 32x32 for both weights and activations" (MXFP8); a cell ``64 (0)`` is 64 for the
main (FP8-CS) figures and 0 for the parenthesised (MXFP8) ones, and a cell without parentheses holds for both. The
settings the table does not state come from the 25.09 performance recipes at fa0315ae2 ("update 25.09 performance
summary (#916)", 2025-10-10, the commit that published the rows): ``scripts/performance/configs/llama3/
llama3_{8b,70b}_llm_pretrain.yaml`` and ``scripts/performance/configs/llama31/llama31_405b_llm_pretrain.yaml``, whose
``perf_matrix.<gpu>.num_gpus_<N>`` holds ``common`` and per precision ``fp8_cs`` / ``fp8_mx`` entries, applied by
``scripts/performance/utils/helpers.py::apply_perf_matrix_overrides`` on top of the library recipe
(``src/megatron/bridge/recipes/llama/llama3.py``) and ``scripts/performance/run_script.py``. Each setting in a case's
``megatron.yaml`` names the file and key path that sets it. The script checks that each row's parallel sizes and batch
are its perf_matrix entry's; where the row's own columns contradict each other it follows the recipe (``ROW_FIXES``,
recorded in the case's ``assumed``).

Left out, with the reason: the MoE rows of both systems (DeepSeekV3, Qwen3_30B_a3B and Qwen3_235B_a22B, each marked
"(tokendrop)": token dropping with a capacity factor, ``megatron.bridge.training.utils.moe_token_drop`` applied by
run_script.py on B200 / GB200; ASAP prices dropless routing). DGX-B200 has no Llama 3 70B row. The section's
DGX-H100 rows are written by ``scripts/eval_cases_mbridge_h100.py``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/mbridge_cases.py
import mbridge_cases  # noqa: E402

REPO = "NVIDIA-NeMo/Megatron-Bridge"
COMMIT = "067f987df03b8355b03192d88d70f1709fedf51a"  # the archive that prints the rows
C = COMMIT[:10]
RECIPE_COMMIT = "fa0315ae2684693a666be9d247adf9baf1e30028"  # "update 25.09 performance summary (#916)"
R = RECIPE_COMMIT[:9]
URL = f"https://github.com/{REPO}/blob/{COMMIT}/docs/performance-summary-archive.md"
COLUMNS = ("Model | #-GPUs | GBS | MBS | Sequence Length | FSDP | TP | PP | CP | VP | EP | GA | Tokens / sec / GPU | "
           "Model TFLOP / sec / GPU")
FOOTNOTE = ("footnote: 'The numbers in parentheses indicate the use of different quantization granularities: In case "
            "of GB200 and B200 systems, 32x32 for both weights and activations.'")

# The rows exactly as the archive prints them, with their line in docs/performance-summary-archive.md @ COMMIT.
ROWS: dict[str, list[tuple[int, str]]] = {
    "DGX-GB200": [
        (607, "| LLAMA3_8B | 8 | 128 | 2 | 8192 | 0 | 1 | 1 | 1 | n/a | 1 | 8 | 31357 (29925) | 1614 (1540) |"),
        (608, "| LLAMA3_70B | 64 | 128 | 2 | 8192 | 64 (0) | 1 (2) | 1 (4) | 1 | 1 (5) | 1 | 1 (16) | 3986 (3546) | "
              "1791 (1593) |"),
        (609, "| LLAMA3.1_405B | 128 | 64 | 1 | 8192 | 64 (0) | 2 (4) | 1 (8) | 1 (2) | 1 (8) | 1 | 1 (32) | 729 (578) "
              "| 1840 (1458) |"),
    ],
    "DGX-B200": [
        (618, "| LLAMA3_8B | 8 | 128 | 2 | 8192 | 0 | 1 | 1 | 1 | n/a | 1 | 8 | 29994 (29388) | 1544 (1513) |"),
        (619, "| LLAMA3.1_405B | 128 | 64 | 1 | 8192 | 0 | 4 | 8 | 2 | 8 | 1 | 32 | 664 (622) | 1676 (1569) |"),
    ],
}
CHIP = {"DGX-GB200": "gb200", "DGX-B200": "b200"}
SLUG = {"LLAMA3_8B": "llama3-8b", "LLAMA3_70B": "llama3-70b", "LLAMA3.1_405B": "llama31-405b"}
# run.yaml model blocks, as the corpus's 25.11 Blackwell cases of the same models record them.
MODELS: dict[str, dict[str, Any]] = {
    "LLAMA3_8B": dict(name="llama3-8b", vocab=128256, layers=32, d_model=4096, d_ff=14336, heads=32, kv_heads=8,
                      mlp_matrices=3),
    "LLAMA3_70B": dict(name="llama3-70b", vocab=128256, layers=80, d_model=8192, d_ff=28672, heads=64, kv_heads=8,
                       mlp_matrices=3),
    "LLAMA3.1_405B": dict(name="llama3.1-405b", vocab=128256, layers=126, d_model=16384, d_ff=53248, heads=128,
                          kv_heads=8, mlp_matrices=3),
}

S = "scripts/performance"
HELPERS = f"{S}/utils/helpers.py"
RUN_SCRIPT = f"{S}/run_script.py"
LIB = "src/megatron/bridge/recipes/llama/llama3.py"
PRECISION = "src/megatron/bridge/training/mixed_precision.py"
RECIPE_FILE = {"LLAMA3_8B": f"{S}/configs/llama3/llama3_8b_llm_pretrain.yaml",
               "LLAMA3_70B": f"{S}/configs/llama3/llama3_70b_llm_pretrain.yaml",
               "LLAMA3.1_405B": f"{S}/configs/llama31/llama31_405b_llm_pretrain.yaml"}
LIB_FN = {"LLAMA3_8B": f"{LIB}::llama3_8b_pretrain_config", "LLAMA3_70B": f"{LIB}::llama3_70b_pretrain_config",
          "LLAMA3.1_405B": f"{LIB}::llama31_405b_pretrain_config"}

# The perf_matrix entries the rows ran (the keys that matter here), as the recipe files print them @ RECIPE_COMMIT:
# (system, model) -> {"common": ..., "fp8_cs": ..., "fp8_mx": ...}; a precision's key overrides common's.
_8B = {"common": dict(seq_length=8192, mbs=2, gbs=128, cuda_graphs=True, tp=1, pp=1, cp=1, vp=None, ep=1,
                      use_megatron_fsdp=False), "fp8_cs": {}, "fp8_mx": {}}
PERF_MATRIX: dict[tuple[str, str], dict[str, dict[str, Any]]] = {
    ("DGX-GB200", "LLAMA3_8B"): _8B,
    ("DGX-B200", "LLAMA3_8B"): _8B,
    ("DGX-GB200", "LLAMA3_70B"): {
        "common": dict(seq_length=8192, gbs=128, cuda_graphs=False, cp=1, ep=1),
        "fp8_cs": dict(mbs=2, tp=1, pp=1, vp=None, use_megatron_fsdp=True, cpu_offloading_num_layers=40),
        "fp8_mx": dict(mbs=1, tp=2, pp=4, vp=5, use_megatron_fsdp=False)},
    ("DGX-GB200", "LLAMA3.1_405B"): {
        "common": dict(seq_length=8192, mbs=1, gbs=64, cuda_graphs=False, ep=1),
        "fp8_cs": dict(tp=2, pp=1, cp=1, vp=None, use_megatron_fsdp=True, cpu_offloading_num_layers=95),
        "fp8_mx": dict(tp=4, pp=8, cp=2, vp=8, use_megatron_fsdp=False)},
    ("DGX-B200", "LLAMA3.1_405B"): {
        "common": dict(seq_length=8192, mbs=1, gbs=64, cuda_graphs=False, tp=4, pp=8, cp=2, vp=8, ep=1,
                       use_megatron_fsdp=False), "fp8_cs": {}, "fp8_mx": {}},
}
GPUS_PER_NODE = {"DGX-GB200": 4, "DGX-B200": 8}  # perf_matrix.<gpu>.num_gpus_<N>.common.num_gpus_per_node
# The userbuffers configuration run_script.py gives TP overlap (COMM_OVERLAP_CONFIG_MAP in utils/helpers.py, 'fp8').
UB_CFG = {"LLAMA3_70B": "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192",
          "LLAMA3.1_405B": "userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192"}

# A row whose own columns contradict each other: (system, model, precision) -> (cells the case takes, why).
ROW_FIXES: dict[tuple[str, str, str], tuple[dict[str, str], str]] = {
    ("DGX-GB200", "LLAMA3_70B", "fp8_mx"): ({"MBS": "1"}, (
        "micro batch 1, not the row's MBS 2: the parenthesised layout (TP 2, PP 4, CP 1 on 64 GPUs: data parallel 8) "
        "with GA 16 at GBS 128 leaves 128 / (16 x 8) = 1 sequence per micro-batch (MBS 2 would need GA 8); the MBS "
        "column has no parenthesised value, and the recipe's MXFP8 entry runs micro batch 1 "
        f"({RECIPE_FILE['LLAMA3_70B']} perf_matrix.gb200.num_gpus_64.fp8_mx.mbs @ {R})")),
}

LABEL = {"fp8_cs": "FP8-CS", "fp8_mx": "FP8-MX"}
_PAREN = re.compile(r"(\S+) \((\S+)\)")


def _pick(cell: str, precision: str) -> str:
    """A cell's value for one precision: ``a (b)`` is a for FP8-CS, b for the parenthesised MXFP8; ``a`` both."""
    m = _PAREN.fullmatch(cell)
    return cell if m is None else m.group(1 if precision == "fp8_cs" else 2)


def _entry(system: str, model: str, precision: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The perf_matrix entry a row ran (common merged with the precision's entry, as apply_perf_matrix_overrides
    merges them) and, per key, the key path that sets it."""
    block = PERF_MATRIX[(system, model)]
    gpus = next(int(line.split("|")[2]) for _, line in ROWS[system] if line.split("|")[1].strip() == model)
    base = f"{RECIPE_FILE[model]} perf_matrix.{CHIP[system]}.num_gpus_{gpus}"
    values = {**block["common"], **block[precision]}
    where = {k: f"{base}.{precision if k in block[precision] else 'common'}.{k}" for k in values}
    return values, where


def _row(line: str, system: str, precision: str) -> tuple[dict[str, str], str]:
    """The row's cells for one precision (with any ROW_FIXES applied) and the fix's note ('' if none)."""
    cells = {k: _pick(v, precision) for k, v in mbridge_cases.parse_row(line, COLUMNS).items()}
    fix, note = ROW_FIXES.get((system, cells["Model"], precision), ({}, ""))
    return {**cells, **fix}, note


def _check(row: dict[str, str], recipe: dict[str, Any]) -> None:
    """The row's sizes and batch are its perf_matrix entry's, and its GA is what they leave."""
    gpus, gbs, mbs = int(row["#-GPUs"]), int(row["GBS"]), int(row["MBS"])
    tp, pp, cp = (int(row[k]) for k in ("TP", "PP", "CP"))
    vp = None if row["VP"] in ("n/a", "1") else int(row["VP"])
    got = dict(tp=tp, pp=pp, cp=cp, vp=vp, mbs=mbs, gbs=gbs, seq_length=int(row["Sequence Length"]), ep=int(row["EP"]))
    want = {k: recipe[k] for k in got}
    assert got == want, f"{row['Model']}: the row {got} is not its perf_matrix entry {want}"
    dp = gpus // (tp * pp * cp)
    assert gbs == mbs * dp * int(row["GA"]), f"{row['Model']}: GBS {gbs} != MBS {mbs} x DP {dp} x GA {row['GA']}"
    assert (int(row["FSDP"]) > 0) == recipe["use_megatron_fsdp"], row["Model"]
    assert int(row["FSDP"]) in (0, dp), row["Model"]


# One setting: (ConfigContainer section, key, value, where the recipe sets it).
Setting = tuple[str, str, Any, str]


def _settings(model: str, precision: str, recipe: dict[str, Any], where: dict[str, str]) -> list[Setting]:
    tp = recipe["tp"]
    graphs = f"{where['cuda_graphs']} ({HELPERS}::set_cuda_graph_overrides)"
    out: list[Setting] = [
        ("model", "sequence_parallel", tp > 1, f"{HELPERS}::apply_perf_matrix_overrides (TP > 1)"),
        ("model", "recompute_granularity", None,
         f"{LIB_FN[model]} (none set; the perf_matrix entry has no recompute_num_layers: "
         f"{HELPERS}::set_recompute_overrides)"),
        ("model", "enable_cuda_graph", recipe["cuda_graphs"], graphs),
    ]
    layers = recipe.get("cpu_offloading_num_layers", 0)
    if layers:
        src = f"{where['cpu_offloading_num_layers']} ({HELPERS}::set_recompute_overrides)"
        out += [("model", "cpu_offloading", True, src), ("model", "cpu_offloading_weights", False, src),
                ("model", "cpu_offloading_num_layers", layers, src)]
    if model == "LLAMA3.1_405B":
        out += [("model", "account_for_embedding_in_pipeline_split", True, LIB_FN[model]),
                ("model", "account_for_loss_in_pipeline_split", True, LIB_FN[model])]
    out.append(("ddp", "use_distributed_optimizer", True, f"{LIB}::_llama3_common (DistributedDataParallelConfig)"))
    if recipe["use_megatron_fsdp"]:
        fsdp = f"{HELPERS}::set_megatron_fsdp_overrides"
        out += [("ddp", "use_megatron_fsdp", True, f"{where['use_megatron_fsdp']} ({fsdp})"),
                ("ddp", "data_parallel_sharding_strategy", "optim_grads_params", fsdp)]
    if model != "LLAMA3_8B" and tp > 1:
        out.append(("comm_overlap", "tp_comm_overlap", True,
                    f"{LIB_FN[model]} (CommOverlapConfig; {RUN_SCRIPT} gives it {UB_CFG[model]})"))
    mp = (f"{PRECISION}::bf16_with_mxfp8_mixed ({HELPERS}::get_precision_config('fp8', 'mx'))"
          if precision == "fp8_mx" else
          f"{PRECISION}::bf16_with_fp8_current_scaling_mixed ({HELPERS}::get_precision_config('fp8', 'cs'))")
    out += [("mixed_precision", "grad_reduce_in_fp32", False,
             f"{RECIPE_FILE[model]} ConfigContainer.mixed_precision.grad_reduce_in_fp32 "
             "(MixedPrecisionConfig.setup copies it into ddp)"),
            ("mixed_precision", "fp8_recipe", "mxfp8" if precision == "fp8_mx" else "tensorwise", mp),
            ("mixed_precision", "fp8_param_gather", True, mp)]
    return out


def _slices(system: str, gpus: int) -> int:
    return mbridge_cases.nvl72_segments(gpus) if system == "DGX-GB200" else max(1, gpus // 8)


def _node_note(system: str, gpus: int) -> str:
    slices = _slices(system, gpus)
    if system == "DGX-B200":
        nodes = f"{slices} nodes of 8" if slices > 1 else "one node"
        return (f"DGX-B200: 8 GPUs per node on NVLink (the recipe's num_gpus_per_node 8), nodes joined by InfiniBand: "
                f"{nodes} (num_slices {slices}); Megatron's rank order tp-cp-ep-dp-pp places TP (then CP, DP) inside "
                "a node first")
    trays = gpus // 4
    how = (f"{trays} trays fit one segment, one NVLink domain of {gpus} GPUs" if slices == 1 else
           f"{trays} trays run as {slices} segments of {trays // slices} trays, {slices} NVLink domains of "
           f"{gpus // slices} GPUs")
    return ("GB200 NVL72: 4 GPUs per compute tray (the recipe's num_gpus_per_node 4), one NVLink domain per rack (DGX "
            f"GB200 user guide). Megatron-Bridge's launcher (scripts/performance/utils/executors.py at {R}) asks Slurm "
            f"for segments of at most 18 trays, the largest dividing the tray count: {how} (num_slices {slices}); "
            "megatron.yaml's trainer block counts one node per NVLink domain")


def _notes(system: str, model: str, precision: str, recipe: dict[str, Any], twin: str) -> list[str]:
    """The precision reading, and what the recipe does beyond the settings written that ASAP does not model."""
    if precision == "fp8_cs":
        out = [f"the 25.09 table has no Precision column; its main figures read as FP8-CS (current-scaling FP8) and the "
               f"parenthesised ones as MXFP8 (the footnote's 32x32 granularity on GB200 / B200): the 25.11 table "
               f"marks the same rows 'FP8-CS (FP8-MX)', and the recipe's fp8_cs and fp8_mx entries hold the two "
               f"layouts (on GB200 Llama 3 70B only fp8_cs runs micro batch 2 with offloading). Recorded as dtype "
               f"fp8, fp8_recipe tensorwise: get_precision_config('fp8', 'cs') also turns off the recipe's BF16 first "
               f"and last layers (first_last_layers_bf16 False), so every layer runs fp8. The parenthesised figures "
               f"are the case {twin}"]
    else:
        out = [f"the row's parenthesised figures: the footnote's 'different quantization granularities ... 32x32 for "
               f"both weights and activations' on GB200 / B200, read as MXFP8 (the recipe's fp8_mx entry, "
               f"bf16_with_mxfp8_mixed); a cell without parentheses holds for both runs. Recorded as dtype fp8, "
               f"fp8_recipe mxfp8; bf16_with_mxfp8_mixed also reuses the gradient buffer for the MXFP8 parameter "
               f"all-gather (reuse_grad_buf_for_mxfp8_param_ag), not modelled. The main (FP8-CS) figures are the case "
               f"{twin}"]
    layers = recipe.get("cpu_offloading_num_layers", 0)
    if layers:
        out.append(f"activation offloading of {layers} of the {MODELS[model]['layers']} layers (cpu_offloading_num_layers "
                   f"{layers}, cpu_offloading_weights False: activations only), as the recipe's {precision} entry sets "
                   "it with Megatron-FSDP")
    if recipe["use_megatron_fsdp"]:
        extra = " and suggested_communication_unit_size 800000000" if model == "LLAMA3_70B" else ""
        out.append("Megatron-FSDP (FSDP column = the data-parallel size) over the data-parallel ranks with "
                   "data_parallel_sharding_strategy optim_grads_params (set_megatron_fsdp_overrides): parameters, "
                   f"gradients and optimizer state sharded, priced as ZeRO stage 3; {RUN_SCRIPT} also sets "
                   f"fsdp_double_buffer True{extra}, and set_megatron_fsdp_overrides keep_fp8_transpose_cache False: "
                   "not modelled")
    if recipe["cuda_graphs"]:
        out.append("CUDA graphs (perf_matrix cuda_graphs True: enable_cuda_graph, Megatron-Core's per-layer graphs, "
                   "with the TE RNG tracker) are read as not whole-iteration")
    if model != "LLAMA3_8B":
        out.append(f"TP overlap runs with run_script.py's userbuffers configuration ({UB_CFG[model]}), whose per-GEMM "
                   "split and SM counts are not modelled" if recipe["tp"] > 1 else
                   "the library recipe's tp_comm_overlap True does nothing at TP 1 (Megatron-Bridge comm_overlap.py "
                   "turns it off below TP 2), so it is not written")
    if model == "LLAMA3.1_405B" and recipe["pp"] > 1:
        out.append(f"account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split (library recipe): "
                   f"126 layers + embedding + loss = 128 slots over PP {recipe['pp']} x VP {recipe['vp']} = "
                   f"{recipe['pp'] * recipe['vp']} virtual stages")
    return out


COMMON_ASSUMED = [
    "model dimensions are the published Llama 3 / 3.1 architecture (Meta's model cards; the Hugging Face configs the "
    "library recipes load), not stated in the table",
    f"settings the table does not state are the 25.09 performance recipe's at {R} (the commit that published the 25.09 "
    "summary): the perf_matrix entry of the row's GPU, GPU count and precision (common merged with fp8_cs / fp8_mx), "
    "applied by scripts/performance/utils/helpers.py::apply_perf_matrix_overrides on the library recipe and "
    "scripts/performance/run_script.py. Each setting in megatron.yaml names the file and key path that sets it; the "
    "row's parallel sizes and batch are the entry's (checked by the script that writes the case)",
]


def write_case(root: Path, system: str, lineno: int, line: str, precision: str) -> str:
    """Write one case folder (one precision of one row); returns its id."""
    row, fix_note = _row(line, system, precision)
    model, gpus = row["Model"], int(row["#-GPUs"])
    recipe, where = _entry(system, model, precision)
    _check(row, recipe)
    chip, slices = CHIP[system], _slices(system, gpus)
    base = f"mbridge-25.09-{chip}-{SLUG[model]}-{gpus}gpu"
    cid, twin = (base, f"{base}-fp8mx") if precision == "fp8_cs" else (f"{base}-fp8mx", base)
    label = LABEL[precision]
    settings = _settings(model, precision, recipe, where)
    # VP 1 and EP 1 are the recipe's vp null and ep 1: nothing to write for a dense model.
    doc_row = {**row, "VP": row["VP"] if recipe["vp"] else "n/a", "EP": "n/a"}
    doc, cites, dp = mbridge_cases.megatron_doc(doc_row, gpus, slices, settings)
    figures = "FP8-CS" if precision == "fp8_cs" else "FP8-MX (the parenthesised figures)"
    mbs, gbs = int(row["MBS"]), int(row["GBS"])
    text = (f"# Megatron-Bridge docs/performance-summary-archive.md line {lineno} @ {C}, 25.09 NeMo container, "
            f"Pre-Training Performance, {system}, {model} {figures} ({URL})\n"
            f"# FSDP={row['FSDP']} TP={row['TP']} PP={row['PP']} CP={row['CP']} VP={row['VP']} EP={row['EP']} "
            f"GBS={gbs} MBS={mbs} GA={row['GA']}; data parallel = {gpus}/(TP*PP*CP) = {dp}\n"
            f"# parallel sizes and batch from the row; the other settings from the performance recipe "
            f"{RECIPE_FILE[model]} perf_matrix.{chip}.num_gpus_{gpus} (common + {precision}) @ {R} and the code it "
            "runs (the table does not state them), each set where named:\n" + "\n".join(cites) + "\n"
            + mbridge_cases.dump(doc))
    run = mbridge_cases.run_doc(
        cid, f"Megatron-Bridge 25.09 {model} pre-training on {gpus} {chip.upper()} ({label})",
        f"Megatron-Bridge performance summary archive, 25.09 NeMo container, {system}, row {model}"
        + (f" {label}. No profile." if precision == "fp8_cs" else f", its parenthesised {label} figures. No profile."),
        chip=chip, gpus=gpus, slices=slices, model=MODELS[model], row=row, dtype="fp8", tags=[])
    run["training"]["fp8_recipe"] = "mxfp8" if precision == "fp8_mx" else "tensorwise"
    which = label if precision == "fp8_cs" else f"{label} (parenthesised)"
    cited = {
        "source": f"{REPO} docs/performance-summary-archive.md @ {C}, '25.09 NeMo Container' > 'Pre-Training "
                  f"Performance' > 'System: {system}', line {lineno}, row {model} {which}; recipe settings from "
                  f"scripts/performance @ {R}",
        "url": URL, "table": f"mbridge-25.09-{system.lower()}", "row": model,
        "stated": [f"25.09 NeMo Container, Pre-Training Performance, System: {system}, row: {line}",
                   f"columns: {COLUMNS}", FOOTNOTE],
        "assumed": (COMMON_ASSUMED + _notes(system, model, precision, recipe, twin)
                    + ([fix_note] if fix_note else []) + [_node_note(system, gpus)]),
    }
    mbridge_cases.write_case_files(root / cid, text, run, cited,
                                   mbridge_cases.measured(row, f"{system} row {model} {which}"))
    return cid


def main(argv: list[str]) -> int:
    return mbridge_cases.run(argv, lambda root: (write_case(root, system, lineno, line, precision)
                                                 for system, lines in ROWS.items() for lineno, line in lines
                                                 for precision in ("fp8_cs", "fp8_mx")))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
