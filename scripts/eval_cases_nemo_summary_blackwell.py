"""Write NeMo's Blackwell pre-training tables (25.02 DGX-B200, 25.04 DGX-GB200; FP8) into the eval corpus.

Run: ``.venv/bin/python scripts/eval_cases_nemo_summary_blackwell.py [examples/eval]`` (writes the case folders named
below in place; nothing else is touched).

Why: the corpus's Blackwell rows all come from Megatron-Bridge (25.09 on) and, for long sequences, from one NeMo
table (scripts/eval_cases_nemo_long_context.py). NeMo 25.02's summary measured eight models on DGX-B200 in one
container: GPT-3 175B, Llama 3 8B / 70B / 405B, Nemotron-4 15B / 340B and Mixtral 8x7B / 8x22B, the last at 64K
tokens per sequence with CP 8 (attention about half its FLOPs): a second, independent Blackwell table, with model
families the Megatron-Bridge tables do not hold.

Source: NVIDIA NeMo Framework user guide, "Performance Summary for Large Language Models"
(https://docs.nvidia.com/nemo-framework/user-guide/latest/performance/performance_summary.html), section
"Pretraining", "Container: NeMo 25.02", "System: DGX-B200", as stored by this project's search corpus (two stored
copies of the page; one leaves GPT3-175B's TFLOP/s cell empty, the other gives 1722). The page is not in a git
repository, so the cases cite the page and the container. Layout, batch and micro-batch are the row's; the recipes the
summary names (NeMo ``scripts/llm/performance/`` at v2.2.0, the 25.02 release) take the rest from each model's
``performance_mode`` recipe, which this corpus does not restate: recompute, communication overlap and CUDA graphs are
left unstated and ASAP's answers name them as such.

The 25.04 DGX-GB200 table (same page, "Container: NeMo 25.04", "System: DGX-GB200"; a column FSDP added, 1 meaning
Megatron-Core's FSDP) was added after the Blackwell refit of the attention core and GEMMs (docs/cost-model.md), as an
out-of-sample check of it. Its Mixtral-8x22B row is cut off in the stored copy after the tokens/s cell (the TFLOP/s
cell reads "10"): left out, since a table is ranked by a metric every row states.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/mbridge_cases.py
import mbridge_cases  # noqa: E402

URL = "https://docs.nvidia.com/nemo-framework/user-guide/latest/performance/performance_summary.html"
COLUMNS = ("Model | #-GPUs | GBS | MBS | Sequence Length | TP | PP | CP | VP | EP | GA | Tokens / sec / GPU | "
           "Model TFLOP / sec / GPU")
COLUMNS_2504 = ("Model | #-GPUs | GBS | MBS | Sequence Length | FSDP | TP | PP | CP | VP | EP | GA | Tokens / sec / GPU | "
                "Model TFLOP / sec / GPU")

# The rows as the stored page prints them (cells in column order). GPT3-175B's TFLOP/s cell is empty in one stored
# copy and 1722 in the other. Mixtral-8x22B prints GBS 1 and MBS 64; its GA column (16) over DP 4 (256 / (TP 2 x PP 4
# x CP 8)) gives GBS 64 at MBS 1, as v2.2.0's recommended_model_configs/model_configs_b200.csv lists the same layout
# (mbs 1, gbs 64): read as GBS 64, MBS 1.
ROWS = [
    "GPT3-175B | 512 | 2048 | 2 | 2048 | 4 | 4 | 1 | 6 | 1 | 32 | 1600 | 1722",
    "LLAMA3-8B | 8 | 128 | 2 | 8192 | 1 | 1 | 1 | 1 | 1 | 8 | 26006 | 1506",
    "LLAMA3-70B | 64 | 128 | 1 | 8192 | 2 | 4 | 2 | 5 | 1 | 32 | 3062 | 1474",
    "LLAMA3-405B | 128 | 64 | 1 | 8192 | 4 | 8 | 2 | 8 | 1 | 32 | 625 | 1658",
    "Nemotron-15B | 64 | 256 | 2 | 4096 | 1 | 1 | 1 | 1 | 1 | 2 | 14760 | 1387",
    "Nemotron-340B | 128 | 32 | 1 | 4096 | 8 | 4 | 1 | 12 | 1 | 8 | 602 | 1268",
    "Mixtral-8x7B | 64 | 256 | 2 | 4096 | 1 | 1 | 1 | 1 | 8 | 2 | 15457 | 1282",
    "Mixtral-8x22B | 256 | 64 | 1 | 65536 | 2 | 4 | 8 | 14 | 8 | 16 | 2232 | 824",
]
# NeMo 25.04, DGX-GB200, as the stored copy prints it (GPT3-175B's TFLOP/s cell empty in one copy, 1942 in the other).
ROWS_2504 = [
    "GPT3-175B | 128 | 256 | 2 | 2048 | 0 | 4 | 4 | 1 | 12 | 1 | 16 | 1804 | 1942",
    "LLAMA3-8B | 8 | 128 | 2 | 8192 | 0 | 1 | 1 | 1 | 1 | 1 | 8 | 33099 | 1917",
    "LLAMA3-70B | 64 | 128 | 1 | 8192 | 1 | 1 | 1 | 1 | 1 | 1 | 2 | 4035 | 1943",
    "LLAMA3-405B | 128 | 64 | 1 | 8192 | 0 | 4 | 8 | 2 | 8 | 1 | 32 | 665 | 1763",
    "Nemotron-15B | 64 | 256 | 2 | 4096 | 0 | 1 | 1 | 1 | 1 | 1 | 2 | 17809 | 1674",
    "Nemotron-340B | 128 | 32 | 1 | 4096 | 0 | 8 | 4 | 1 | 12 | 1 | 8 | 737 | 1551",
    "Mixtral-8x7B | 64 | 256 | 2 | 4096 | 0 | 1 | 1 | 1 | 1 | 8 | 2 | 19275 | 1598",
]
PRINTED = {"Mixtral-8x22B": "Mixtral-8x22B | 256 | 1 | 64 | 65536 | 2 | 4 | 8 | 14 | 8 | 16 | 2232 | 824",
           "GPT3-175B": "GPT3-175B | 512 | 2048 | 2 | 2048 | 4 | 4 | 1 | 6 | 1 | 32 | 1600 | (empty; 1722 in the "
                        "other stored copy)"}

# Published architectures (Hugging Face configs; NeMo's model configs for GPT-3 175B and Nemotron-4).
MODELS: dict[str, tuple[dict[str, Any], str]] = {
    "GPT3-175B": (dict(name="gpt3-175b", layers=96, d_model=12288, d_ff=49152, heads=96, vocab=50304, mlp_matrices=2),
                  "NeMo's GPT3Config175B (96 layers, hidden 12288, FFN 4x, 96 heads, GELU), GPT-2 BPE vocabulary "
                  "padded to 50304 as in the corpus's NeMo 24.07 GPT-3 cases"),
    "LLAMA3-8B": (dict(name="llama3-8b", layers=32, d_model=4096, d_ff=14336, heads=32, kv_heads=8, head_dim=128,
                       vocab=128256, mlp_matrices=3), "meta-llama/Meta-Llama-3-8B config.json"),
    "LLAMA3-70B": (dict(name="llama3-70b", layers=80, d_model=8192, d_ff=28672, heads=64, kv_heads=8, head_dim=128,
                        vocab=128256, mlp_matrices=3), "meta-llama/Meta-Llama-3-70B config.json"),
    "LLAMA3-405B": (dict(name="llama31-405b", layers=126, d_model=16384, d_ff=53248, heads=128, kv_heads=8,
                         head_dim=128, vocab=128256, mlp_matrices=3),
                    "meta-llama/Llama-3.1-405B config.json (the recipe is llama31_405b)"),
    "Nemotron-15B": (dict(name="nemotron4-15b", layers=32, d_model=6144, d_ff=24576, heads=48, kv_heads=8,
                          vocab=256000, mlp_matrices=2),
                     "Nemotron-4 15B technical report (Parmar et al. 2024, Table 1: 32 layers, hidden 6144, 48 heads, "
                     "8 KV heads, 256K vocabulary; squared-ReLU MLP of 4x hidden)"),
    "Nemotron-340B": (dict(name="nemotron4-340b", layers=96, d_model=18432, d_ff=73728, heads=96, kv_heads=8,
                           vocab=256000, mlp_matrices=2),
                      "Nemotron-4 340B technical report (96 layers, hidden 18432, 96 heads, 8 KV heads, squared-ReLU "
                      "MLP of 4x hidden), as the corpus's NeMo 24.07 case"),
    "Mixtral-8x7B": (dict(name="mixtral-8x7b", layers=32, d_model=4096, d_ff=14336, heads=32, kv_heads=8,
                          head_dim=128, vocab=32000, mlp_matrices=3, experts=8, experts_per_token=2),
                     "mistralai/Mixtral-8x7B-v0.1 config.json (8 experts, top-2)"),
    "Mixtral-8x22B": (dict(name="mixtral-8x22b", layers=56, d_model=6144, d_ff=16384, heads=48, kv_heads=8,
                           head_dim=128, vocab=32000, mlp_matrices=3, experts=8, experts_per_token=2),
                      "mistralai/Mixtral-8x22B-v0.1 config.json (8 experts, top-2; the tokenizer the performance "
                      "script loads)"),
}

ASSUMED = [
    "FP8 linear layers with per-tensor current scaling, as the summary states ('per-tensor FP8 quantization using "
    "the scaling factors calculated in the current step' in later containers; 'FP8 precision (using NeMo 2.0)' in "
    "25.02), recorded as dtype fp8 with fp8_recipe tensorwise",
    "recompute, tensor-parallel communication overlap and CUDA graphs not stated: the table does not give them and "
    "the performance_mode recipes behind it are not restated here; ASAP prices them as unstated",
    "sequence parallelism at TP > 1 (NeMo's performance recipes set it wherever TP > 1)",
]
MOE_ASSUMED = "routed tokens priced as evenly spread over the experts (the summary does not say whether it "\
              "force-balances routing)"


@dataclass(frozen=True)
class Table:
    """One system's table of one container's summary."""

    key: str
    container: str
    system: str
    chip: str
    columns: str
    rows: list[str]
    placement: str  # how the GPUs sit in nodes / NVLink domains (an assumption the case states)
    intro: str  # the page's sentence above the table, quoted

    def slices(self, gpus: int) -> int:
        return mbridge_cases.nvl72_segments(gpus) if self.chip == "gb200" else max(gpus // 8, 1)


TABLES = [
    Table("nemo-25.02-dgx-b200", "25.02", "DGX-B200", "b200", COLUMNS, ROWS,
          "8 GPUs per DGX-B200 node; Megatron's rank order tp-cp-ep-dp-pp fills a node with TP, then CP, then EP / DP",
          "pre-training performance of various models at FP8 precision (using NeMo 2.0)"),
    Table("nemo-25.04-dgx-gb200", "25.04", "DGX-GB200", "gb200", COLUMNS_2504, ROWS_2504,
          "GB200 NVL72: 4-GPU trays in NVLink domains of up to 72; the job placed in Slurm segments of at most 18 "
          "trays as Megatron-Bridge's launcher asks for them (NeMo's own executor at 25.04 is not restated)",
          "pre-training performance of various models with the FP8 precision. Specifically, we use per-tensor FP8 "
          "quantization using the scaling factors calculated in the current step"),
]


def _row(table: Table, line: str) -> dict[str, str]:
    cells = [c.strip() for c in line.split("|")]
    return dict(zip([c.strip() for c in table.columns.split("|")], cells, strict=True))


def _megatron_yaml(table: Table, row: dict[str, str], gpus: int) -> str:
    tp, pp, cp, vp, ep = (int(row[k]) for k in ("TP", "PP", "CP", "VP", "EP"))
    model: dict[str, Any] = {"tensor_model_parallel_size": tp, "pipeline_model_parallel_size": pp,
                             "context_parallel_size": cp}
    if vp > 1:
        model["virtual_pipeline_model_parallel_size"] = vp
    if ep > 1:
        model["expert_model_parallel_size"] = ep
    model.update({"seq_length": int(row["Sequence Length"]), "micro_batch_size": int(row["MBS"]),
                  "global_batch_size": int(row["GBS"])})
    slices = table.slices(gpus)
    doc: dict[str, Any] = {"trainer": {"devices": min(gpus // slices, 8) if table.chip == "b200" else gpus // slices,
                                       "num_nodes": slices}, "model": model}
    if row.get("FSDP") == "1":  # the summary's FSDP = 1: Megatron-Core's FSDP over the data-parallel ranks
        doc["ddp"] = {"use_megatron_fsdp": True, "data_parallel_sharding_strategy": "optim_grads_params"}
    doc["mixed_precision"] = {"fp8_recipe": "tensorwise"}
    header = (f"# NeMo Framework performance summary, NeMo {table.container}, {table.system}, row {row['Model']} "
              f"({URL})\n# parallel sizes, batch and micro-batch from the row; nothing else is stated "
              f"(scripts/eval_cases_nemo_summary_blackwell.py)\n")
    return header + mbridge_cases.dump(doc)


def _cited(table: Table, row: dict[str, str], line: str, model_note: str, moe: bool) -> dict[str, Any]:
    printed = PRINTED.get(row["Model"], line) if table.chip == "b200" else line
    assumed = [f"model dimensions: {model_note}", *ASSUMED, table.placement, *([MOE_ASSUMED] if moe else [])]
    if row.get("FSDP") == "1":
        assumed.append("FSDP = 1 ('use FSDP') written as Megatron-Core's FSDP sharding optimizer state, gradients and "
                       "parameters (use_megatron_fsdp, optim_grads_params), as NeMo's use_mcore_fsdp")
    if printed != line:
        assumed.append("the row as printed is '" + printed + "'; read as in the script's ROWS comment")
    where = f"Container: NeMo {table.container}, System: {table.system}"
    return {
        "source": f"NeMo Framework user guide, Performance Summary for Large Language Models, 'Pretraining', "
                  f"{where}, row {row['Model']} (stored copy of {URL})",
        "url": URL, "table": table.key, "row": row["Model"],
        "stated": [f"{where}, '{table.intro}'",
                   f"columns: {table.columns}", f"row: | {printed} |"],
        "assumed": assumed,
    }


def write_case(root: Path, table: Table, line: str) -> str:
    """Write one case folder; returns its id."""
    row = _row(table, line)
    model, model_note = MODELS[row["Model"]]
    gpus = int(row["#-GPUs"])
    cid = f"nemo-{table.container}-{table.chip}-{model['name']}-{gpus}gpu"
    run = {
        "id": cid, "name": f"NeMo {table.container} {row['Model']} pre-training on {gpus} {table.chip.upper()} (FP8)",
        "description": f"NeMo Framework performance summary, NeMo {table.container} container, {table.system} "
                       f"pre-training table, row {row['Model']}. No profile.",
        "framework": "megatron", "chip": table.chip, "num_chips": gpus, "num_slices": table.slices(gpus),
        "model": dict(model),
        "training": {"global_batch": int(row["GBS"]), "seq_len": int(row["Sequence Length"]),
                     "micro_batch": int(row["MBS"]), "dtype": "fp8"},
        "tags": ["published", "config-only", "nemo", *(["moe"] if "experts" in model else [])],
        "config": "megatron.yaml", "profile": [],
    }
    tps, tflops = row["Tokens / sec / GPU"], row["Model TFLOP / sec / GPU"]
    measured = [{"tokens_per_second_per_chip": float(tps), "tflops_per_chip": float(tflops),
                 "source": f"NeMo {table.container} {table.system} row {row['Model']}: {tps} tokens/sec/GPU, "
                           f"{tflops} model TFLOP/sec/GPU"}]
    cited = _cited(table, row, line, model_note, "experts" in model)
    mbridge_cases.write_case_files(root / cid, _megatron_yaml(table, row, gpus), run, cited, measured)
    return cid


def main(argv: list[str]) -> int:
    return mbridge_cases.run(argv, lambda root: [write_case(root, t, line) for t in TABLES for line in t.rows])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
