"""Write the Megatron-Bridge 26.06 fine-tuning rows (Llama 3 70B SFT and LoRA) into the eval corpus.

Run: ``.venv/bin/python scripts/eval_cases_mbridge_finetune.py [examples/eval]`` (writes the case folders named below
in place; nothing else is touched).

Why: every other row of the corpus pre-trains. Fine-tuning is half of what teams run, and LoRA changes what a step
costs: the 70B base is frozen (no weight gradients, no optimizer state), so Megatron-Bridge runs it on 8 GPUs where
pre-training it needs 64. A cost model that prices every run as pre-training calls those rows out of memory.

Source: NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary.md`` @ 63b08b397a3e ("26.06 perf summary", Apache-2.0),
sections "SFT Performance" and "LoRA Performance", Model: LLAMA3_70B. The settings the table omits are the
performance recipe at the same commit: ``scripts/performance/configs/llama/llama3_workload_base_configs.py``
(``LLAMA3_70B_{SFT,LORA}_CONFIG_*``), ``scripts/performance/configs/llama/llama3_llm_finetune.py`` (LoRA on
``linear_qkv`` only, TP communication overlap when TP > 1, the distributed optimizer) and the library recipe
``src/megatron/bridge/recipes/llama/llama3.py::llama3_70b_peft_config`` (LoRA dim 16). The architecture is Meta's
Llama 3 70B (Hugging Face meta-llama/Meta-Llama-3-70B config).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/mbridge_cases.py
import mbridge_cases  # noqa: E402

REPO = "NVIDIA-NeMo/Megatron-Bridge"
COMMIT = "63b08b397a3ee37edf439c7be0b24d7439d8cf23"
URL = f"https://github.com/{REPO}/blob/{COMMIT}/docs/performance-summary.md"
COLUMNS = ("System | #-GPUs | Precision | GBS | MBS | Sequence Length | TP | PP | CP | VP | EP | "
           "Tokens / sec / GPU | Model TFLOP / sec / GPU")

# The rows exactly as the summary prints them (26.06 NeMo Container, Model: LLAMA3_70B).
ROWS: dict[str, list[str]] = {
    "sft": [
        "| DGX-GB300 | 32 | FP8 | 32 | 1 | 4096 | 1 | 2 | 1 | 20 | n/a | 4819 | 2083 |",
        "| DGX-GB300 | 32 | MXFP8 | 32 | 1 | 4096 | 1 | 2 | 1 | 20 | n/a | 4312 | 1877 |",
        "| DGX-GB200 | 32 | FP8 | 32 | 1 | 4096 | 1 | 8 | 1 | 10 | n/a | 3864 | 1671 |",
        "| DGX-GB200 | 32 | MXFP8 | 32 | 1 | 4096 | 1 | 8 | 1 | 10 | n/a | 3593 | 1553 |",
        "| DGX-H100 | 32 | FP8 | 32 | 1 | 4096 | 4 | 4 | 1 | 5 | n/a | 1638 | 710 |",
    ],
    "lora": [
        "| DGX-GB300 | 8 | FP8 | 32 | 1 | 4096 | 1 | 2 | 1 | 20 | n/a | 7481 | 2086 |",
        "| DGX-GB300 | 8 | MXFP8 | 32 | 1 | 4096 | 1 | 2 | 1 | 20 | n/a | 7447 | 2072 |",
        "| DGX-GB200 | 8 | FP8 | 32 | 1 | 4096 | 1 | 2 | 1 | 20 | n/a | 6206 | 1731 |",
        "| DGX-GB200 | 8 | MXFP8 | 32 | 1 | 4096 | 1 | 4 | 1 | 20 | n/a | 5958 | 1663 |",
        "| DGX-H100 | 8 | FP8 | 32 | 1 | 4096 | 2 | 4 | 1 | 20 | n/a | 2643 | 735 |",
    ],
}
SECTION = {"sft": "SFT Performance", "lora": "LoRA Performance"}
CHIP = {"DGX-GB300": "gb300", "DGX-GB200": "gb200", "DGX-H100": "h100"}

# meta-llama/Meta-Llama-3-70B config.json: hidden 8192, 80 layers, 64 heads (8 KV), intermediate 28672, vocab 128256.
MODEL: dict[str, Any] = dict(name="llama3-70b", layers=80, d_model=8192, d_ff=28672, heads=64, kv_heads=8,
                             head_dim=128, vocab=128256, mlp_matrices=3)

LORA_RANK = 16  # llama3_70b_peft_config: "70B uses dim=16, alpha=32"
LORA_TARGETS = ["linear_qkv"]  # llama3_llm_finetune.py: "Override target_modules to only apply LoRA to QKV"

ASSUMED = [
    "model dimensions are Meta's Llama 3 70B (Hugging Face config), not stated in the table",
    f"the distributed optimizer and TP communication overlap when TP > 1, as llama3_llm_finetune.py at {COMMIT[:9]} "
    "sets them; sequence parallelism when TP > 1 (the workload base config's sequence_parallel property)",
    "the SFT and LoRA datasets are packed to the 4,096-token sequence (packed_sequence_specs.packed_sequence_size, "
    "read from the config) and padded to it (pad_to_max_length): attention, which packed samples run only within "
    "themselves, is priced over the full 4,096 tokens, and the band's low edge takes it at almost none",
    "CUDA graphs over the MLP (cuda_graph_scope mlp, the Blackwell and H100 FP8 presets) are not modelled",
    "8 GPUs per DGX-H100 node; GB200 / GB300 rows in one NVLink domain",
]


def _row(line: str) -> dict[str, str]:
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    return dict(zip([c.strip() for c in COLUMNS.split("|")], cells, strict=True))


def _config(task: str, row: dict[str, str], chip: str, gpus: int) -> str:
    """The megatron.yaml the case runs: the row's sizes, the recipe's settings, and the LoRA block as
    Megatron-Bridge's ConfigContainer writes it."""
    tp = int(row["TP"])
    model: dict[str, Any] = {
        "tensor_model_parallel_size": tp, "pipeline_model_parallel_size": int(row["PP"]),
        "context_parallel_size": int(row["CP"]), "virtual_pipeline_model_parallel_size": int(row["VP"]),
        "sequence_parallel": tp > 1, "seq_length": int(row["Sequence Length"]),
        "gated_linear_unit": True,  # Llama's SwiGLU MLP (Megatron-Bridge Llama3ModelProvider70B)
    }
    doc: dict[str, Any] = {
        "trainer": {"devices": min(gpus, 8), "num_nodes": gpus // 8 if chip == "h100" else 1},
        "model": model,
        "train": {"micro_batch_size": int(row["MBS"]), "global_batch_size": int(row["GBS"])},
        "ddp": {"use_distributed_optimizer": True},
        # get_precision_config: fp8_cs -> bf16_with_fp8_current_scaling_mixed (tensorwise), fp8_mx -> bf16_with_mxfp8_mixed
        "mixed_precision": {"fp8_recipe": "mxfp8" if row["Precision"] == "MXFP8" else "tensorwise"},
        "comm_overlap": {"tp_comm_overlap": tp > 1},
        # llama3.py llama3_70b_*_config: cfg.dataset.packed_sequence_specs.packed_sequence_size = seq_length
        "dataset": {"packed_sequence_specs": {"packed_sequence_size": int(row["Sequence Length"])}},
    }
    if task == "lora":
        doc["peft"] = {"_target_": "megatron.bridge.peft.lora.LoRA", "dim": LORA_RANK, "alpha": 32,
                       "target_modules": list(LORA_TARGETS)}
    header = (f"# Megatron-Bridge docs/performance-summary.md @ {COMMIT[:9]}, 26.06 NeMo container, {SECTION[task]}, "
              f"LLAMA3_70B, {row['System']} {row['Precision']} row ({URL})\n# parallel sizes and batch from the row; "
              f"the other settings from the performance recipe scripts/performance/configs/llama/ @ {COMMIT[:9]}\n")
    return header + mbridge_cases.dump(doc)


def write_case(root: Path, task: str, line: str) -> str:
    """Write one case folder; returns its id."""
    from bot.configs.detect import load_config

    row = _row(line)
    chip, gpus = CHIP[row["System"]], int(row["#-GPUs"])
    precision = row["Precision"]
    cid = f"mbridge-26.06-{chip}-llama3-70b-{task}-{gpus}gpu-{precision.lower()}"
    folder = root / cid
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "megatron.yaml").write_text(_config(task, row, chip, gpus))
    slices = gpus // 8 if chip == "h100" else 1
    what = "LoRA fine-tuning" if task == "lora" else "SFT (full-parameter fine-tuning)"
    training: dict[str, Any] = {"global_batch": int(row["GBS"]), "seq_len": int(row["Sequence Length"]),
                                "micro_batch": int(row["MBS"]), "dtype": "fp8"}
    if task == "lora":
        training.update(peft="lora", lora_rank=LORA_RANK, lora_targets=list(LORA_TARGETS))
    run = {
        "id": cid, "name": f"Megatron-Bridge 26.06 LLAMA3_70B {what} on {gpus} {chip.upper()} ({precision})",
        "description": f"Megatron-Bridge performance summary, 26.06 NeMo container, {SECTION[task]}, LLAMA3_70B, "
                       f"{row['System']} {precision} row. No profile.",
        "framework": "megatron", "chip": chip, "num_chips": gpus, "num_slices": slices, "model": dict(MODEL),
        "training": training,
        "tags": ["published", "config-only", "megatron-bridge", "fine-tuning"] + (["lora"] if task == "lora" else []),
        "config": "megatron.yaml", "profile": [],
    }
    (folder / "run.yaml").write_text(mbridge_cases.dump(run))
    mesh = load_config(folder / "megatron.yaml").mesh(gpus, slices).normalized().model_dump(exclude_defaults=True)
    dtype_note = ("FP8 (current scaling, the recipe's fp8_cs) recorded as dtype fp8, fp8_recipe tensorwise" if precision == "FP8"
                  else "MXFP8 recorded as dtype fp8, fp8_recipe mxfp8 (the chip's fp8 peak; dense GEMMs at MXFP8's "
                  "kernel rate)")
    lora_note = ([f"LoRA dim {LORA_RANK} on {', '.join(LORA_TARGETS)} (llama3_70b_peft_config and "
                  "llama3_llm_finetune.py at the same commit); the base model frozen"] if task == "lora" else [])
    exp = {
        "schema_version": 1, "kind": "config_only",
        "source": f"{REPO} docs/performance-summary.md @ {COMMIT[:10]}, '26.06 NeMo Container' > '{SECTION[task]}' > "
                  f"'Model: LLAMA3_70B', row {row['System']} {precision}",
        "url": URL, "table": f"mbridge-26.06-{task}", "row": f"{row['System']} {precision}",
        "stated": [f"26.06 NeMo Container, {SECTION[task]}, Model: LLAMA3_70B, row: {line}", f"columns: {COLUMNS}"],
        "assumed": ASSUMED + lora_note + [dtype_note],
        "adopted_mesh": mesh,
        "measured": mbridge_cases.measured(row, f"{SECTION[task]} LLAMA3_70B, {row['System']} {precision} row"),
    }
    (folder / "expected.yaml").write_text(mbridge_cases.dump(exp))
    return cid


def main(argv: list[str]) -> int:
    return mbridge_cases.run(argv, lambda root: (write_case(root, task, line)
                                                 for task, lines in ROWS.items() for line in lines))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
