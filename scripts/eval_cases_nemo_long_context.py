"""Write NeMo's long-sequence (context parallel) pre-training rows into the eval corpus.

Run: ``.venv/bin/python scripts/eval_cases_nemo_long_context.py [examples/eval]`` (writes the case folders named
below in place; nothing else is touched).

Why: every other table in the corpus trains at 2K-8K tokens per sequence (torchtitan's 32K-262K context-parallel rows
aside), where attention is a small share of the FLOPs. NVIDIA's long-sequence table trains one model from 4K to 1M
tokens per sequence with context parallelism (CP 1 to 32), so attention grows from ~10% to ~97% of the FLOPs, and
the K/V ring passes and the causal load balance of Megatron-Core context parallelism decide the step: the pricing
issue 12 item 3 asks for, measured on two systems.

Source: NVIDIA/NeMo ``docs/source/performance/performance_long_sequence.md`` @ a2c4cc8ee6 (Apache-2.0), two tables:
"LLAMA3-8B (FP8) - B200" (NeMo 25.04.rc2, DGX-B200) and "LLAMA2-7B (FP8) - H100" (NeMo 24.03.01, DGX-H100). Each row
gives the sequence length (K = 1024 tokens), the GPU count, the batch size, the TFLOP/s per GPU without CP, and the
TP / PP / DP / CP layout and TFLOP/s per GPU with CP. Only the "with CP" half names its layout ("In non-CP training
runs, we use the most performant model- and data-parallel configurations without CP"), so each row is one case: the
with-CP layout and figure.

TFLOP/s per GPU: NeMo's model-FLOP formula (``nemo/utils/flops_formulas.py::llama2`` / ``llama3`` at the same commit)
counts attention as 12 x layers x hidden x sequence per token (the full, not causal-halved, score matrix), which is
the count ASAP derives the measured step time with.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/mbridge_cases.py
import mbridge_cases  # noqa: E402

COMMIT = "a2c4cc8ee64eb98d83684fc616dd0225c25bdfa1"
URL = f"https://github.com/NVIDIA/NeMo/blob/{COMMIT}/docs/source/performance/performance_long_sequence.md"
COLUMNS = ("SeqLen (K) | # of GPUs | Batch Size | Without CP TFLOPS / GPU | TP | PP | DP | CP | With CP TFLOPS / GPU | "
           "Speedup with CP/without CP")

# The rows exactly as the tables give them (cells of each <tr>, in column order).
B200_ROWS = [
    "8 | 8 | 512 | 1,671 | 1 | 1 | 2 | 1 | 1,671 | 1.00",
    "16 | 16 | 256 | 1,717 | 1 | 1 | 4 | 1 | 1,717 | 1.00",
    "32 | 32 | 128 | 1,549 | 1 | 1 | 4 | 2 | 1,624 | 1.05",
    "64 | 64 | 64 | 1,481 | 1 | 1 | 4 | 4 | 1,600 | 1.08",
    "128 | 128 | 32 | 1,438 | 2 | 1 | 4 | 4 | 1,588 | 1.10",
    "256 | 256 | 16 | 1,162 | 4 | 1 | 4 | 4 | 1,590 | 1.37",
    "512 | 512 | 8 | 607 | 4 | 1 | 4 | 8 | 1,619 | 2.67",
    "1024 | 1024 | 4 | -<sup>1)</sup> | 4 | 1 | 4 | 16 | 1,608 | -",
]
H100_ROWS = [
    "4 | 4 | 1024 | 768 | 1 | 1 | 4 | 1 | 768 | 1.00",
    "8 | 8 | 512 | 730 | 1 | 2 | 4 | 1 | 730 | 1.00",
    "16 | 16 | 256 | 660 | 2 | 1 | 8 | 1 | 660 | 1.00",
    "32 | 32 | 128 | 595 | 2 | 1 | 8 | 2 | 610 | 1.03",
    "64 | 64 | 64 | 534 | 4 | 1 | 8 | 2 | 574 | 1.07",
    "128 | 128 | 32 | 424 | 4 | 1 | 8 | 4 | 555 | 1.31",
    "256 | 256 | 16 | 392 | 4 | 1 | 8 | 8 | 549 | 1.40",
    "512 | 512 | 8 | 104 | 8 | 1 | 4 | 16 | 549 | 5.28",
    "1024 | 1024 | 4 | 26.5 | 8 | 1 | 4 | 32 | 536 | 20.23",
]

# Hugging Face configs meta-llama/Meta-Llama-3-8B and meta-llama/Llama-2-7b-hf (NeMo's Llama3Config8B / Llama2Config7B).
LLAMA3_8B: dict[str, Any] = dict(name="llama3-8b", layers=32, d_model=4096, d_ff=14336, heads=32, kv_heads=8,
                                 head_dim=128, vocab=128256, mlp_matrices=3)
LLAMA2_7B: dict[str, Any] = dict(name="llama2-7b", layers=32, d_model=4096, d_ff=11008, heads=32, kv_heads=32,
                                 head_dim=128, vocab=32000, mlp_matrices=3)

# One table each: (table key, title as printed, system, container, chip, model, rows)
TABLES = [
    ("nemo-long-context-dgx-b200", "LLAMA3-8B (FP8) - B200", "DGX-B200", "NeMo25.04.rc2", "b200", LLAMA3_8B, B200_ROWS),
    ("nemo-long-context-dgx-h100", "LLAMA2-7B (FP8) - H100", "DGX-H100", "NeMo24.03.01.framework", "h100", LLAMA2_7B,
     H100_ROWS),
]

ASSUMED = [
    "micro-batch size 1: the table does not state it; NeMo's long-sequence recipes (nemo/collections/llm/recipes/"
    "llama3_8b_16k.py, _64k.py, _128k.py @ a2c4cc8ee6) set micro_batch_size=1",
    "sequence parallelism on wherever TP > 1, as those recipes set it (sequence_parallelism=True)",
    "activation recomputation not stated: the table does not say, and the recipes' parallel sizes differ from the "
    "table's, so none is written and ASAP prices the run without it (its answer names the setting as unstated)",
    "FP8 linear layers with per-tensor scaling (Transformer Engine's default recipe in those containers), recorded as "
    "dtype fp8; the attention core in bf16",
    "8 GPUs per DGX node; Megatron's rank order tp-cp-ep-dp-pp fills a node with TP, then CP, then DP",
    "Megatron-Core context parallelism balances the causal mask over CP ranks (each rank holds two mirrored chunks)",
]


def _row(line: str) -> dict[str, str]:
    cells = [c.strip() for c in line.split("|")]
    return dict(zip([c.strip() for c in COLUMNS.split("|")], cells, strict=True))


def _gpus(row: dict[str, str]) -> int:
    """GPUs a row ran on: TP x PP x DP x CP. The B200 table at COMMIT prints '# of GPUs' four times that (8 ... 1024);
    its previous version (14d427f575, the table's first, with TP / CP / DP columns only) printed 2 ... 256, the count
    the layout gives, so the layout is taken and the case says so."""
    return int(row["TP"]) * int(row["PP"]) * int(row["DP"]) * int(row["CP"])


def _megatron_yaml(row: dict[str, str], seq: int, gpus: int, title: str) -> str:
    tp, pp, cp = int(row["TP"]), int(row["PP"]), int(row["CP"])
    model: dict[str, Any] = {"tensor_model_parallel_size": tp, "pipeline_model_parallel_size": pp,
                             "context_parallel_size": cp, "seq_length": seq, "sequence_parallel": tp > 1,
                             "micro_batch_size": 1, "global_batch_size": int(row["Batch Size"]), "fp8": True}
    doc = {"trainer": {"devices": min(gpus, 8), "num_nodes": max(gpus // 8, 1)}, "model": model}
    header = (f"# NeMo docs/source/performance/performance_long_sequence.md @ {COMMIT[:10]}, table '{title}', row "
              f"SeqLen {row['SeqLen (K)']}K ({URL})\n# TP / PP / CP, GPUs and batch size from the row's 'With CP' "
              f"columns; micro-batch 1 and sequence parallelism assumed (scripts/eval_cases_nemo_long_context.py)\n")
    return header + mbridge_cases.dump(doc)


def write_case(root: Path, table: tuple[str, str, str, str, str, dict[str, Any], list[str]], line: str) -> str:
    """Write one case folder; returns its id."""
    key, title, system, container, chip, model, _ = table
    row = _row(line)
    seq_k, gpus = int(row["SeqLen (K)"]), _gpus(row)
    seq, tflops = seq_k * 1024, float(row["With CP TFLOPS / GPU"].replace(",", ""))
    cid = f"nemo-long-context-{chip}-{model['name']}-{seq_k}k-{gpus}gpu"
    slices = max(gpus // 8, 1)
    run = {
        "id": cid, "name": f"NeMo {model['name']} pre-training at {seq_k}K tokens per sequence on {gpus} "
                           f"{chip.upper()} (FP8, CP {row['CP']})",
        "description": f"NeMo long-sequence performance table '{title}' ({container}, {system}), row SeqLen "
                       f"{seq_k}K, with-CP layout. No profile.",
        "framework": "megatron", "chip": chip, "num_chips": gpus, "num_slices": slices, "model": dict(model),
        "training": {"global_batch": int(row["Batch Size"]), "seq_len": seq, "micro_batch": 1, "dtype": "fp8"},
        "tags": ["published", "config-only", "nemo", "long-context"], "config": "megatron.yaml", "profile": [],
    }
    cited = {
        "source": f"NVIDIA/NeMo docs/source/performance/performance_long_sequence.md @ {COMMIT[:10]}, table "
                  f"'{title}', row SeqLen {seq_k}K (with CP)",
        "url": URL, "table": key, "row": f"SeqLen {seq_k}K",
        "stated": [f"table '{title}': container {container}, system {system}",
                   f"columns: {COLUMNS}", f"row: | {line} |"],
        "assumed": list(ASSUMED) + ([] if gpus == int(row["# of GPUs"]) else [
            f"{gpus} GPUs (TP x PP x DP x CP), not the row's '# of GPUs' {row['# of GPUs']}: the table's first version "
            f"(14d427f575, 'update the perf number for B200') printed {gpus} GPUs for this row with the same layout "
            f"and figure; the reformatted table four times the layout's count"]),
    }
    measured = [{"tflops_per_chip": tflops,
                 "source": f"'{title}' row SeqLen {seq_k}K: {row['With CP TFLOPS / GPU']} TFLOPS/GPU with CP "
                           f"(TP {row['TP']}, PP {row['PP']}, DP {row['DP']}, CP {row['CP']})"}]
    mbridge_cases.write_case_files(root / cid, _megatron_yaml(row, seq, gpus, title), run, cited, measured)
    return cid


def write_all(root: Path) -> list[str]:
    return [write_case(root, table, line) for table in TABLES for line in table[6]]


def main(argv: list[str]) -> int:
    return mbridge_cases.run(argv, write_all)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
