"""Write the Megatron-Bridge 26.04.01 Nemotron 3 Nano rows (a hybrid Mamba-2 / MoE / attention model) into the eval
corpus.

Run: ``.venv/bin/python scripts/eval_cases_mbridge_nemotron.py [examples/eval]`` (writes the case folders named below
in place; nothing else is touched).

Why: every other model in the corpus is a transformer. Nemotron 3 Nano 30B-A3B is a Megatron hybrid stack (23 Mamba-2,
23 MoE and 6 attention layers: ``--hybrid-layer-pattern``), and the 26.04.01 container measured it on five systems.
Its H100 and GB200 rows join tables the corpus already ranks (the H100 row sits next to Qwen3 30B-A3B, a transformer
MoE of about the same active size), so the corpus checks that a hybrid model is priced, and ranked, as a hybrid model.

Source: NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary-archive.md`` @ 067f987df03b (Apache-2.0), section
"26.04.01 NeMo Container" > "Pre-Training Performance" > "Model: Nemotron_3_Nano". The rows first appear in
``docs/performance-summary.md`` at 21d102f5e ("26.04.01_perf_summary", 2026-05-27); the performance recipe at that
commit (``scripts/performance/configs/nemotronh/nemotron_3_workload_base_configs.py``) gives the settings the table
omits. The architecture is the Megatron-Bridge recipe's ``HybridModelProvider`` for Nemotron 3 Nano
(``src/megatron/bridge/recipes/nemotronh/h100/nemotron_3_nano.py`` @ 067f987df03b), the Hugging Face model
nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/mbridge_cases.py
import mbridge_cases  # noqa: E402

REPO = "NVIDIA-NeMo/Megatron-Bridge"
ARCHIVE_COMMIT = "067f987df03b8355b03192d88d70f1709fedf51a"
RECIPE_COMMIT = "21d102f5e"
URL = f"https://github.com/{REPO}/blob/{ARCHIVE_COMMIT}/docs/performance-summary-archive.md"
COLUMNS = mbridge_cases.COLUMNS_FSDP

# The rows exactly as the archive prints them (26.04.01 NeMo Container, Model: Nemotron_3_Nano).
ROWS = [
    "| DGX-GB300 | 8 | MXFP8 | 512 | 4 | 8192 | 0 | 1 | 1 | 1 | n/a | 8 | 37888 | 845 |",
    "| DGX-GB200 | 8 | MXFP8 | 512 | 2 | 8192 | 0 | 1 | 1 | 1 | n/a | 8 | 32768 | 725 |",
    "| DGX-B300 | 8 | MXFP8 | 512 | 4 | 8192 | 0 | 1 | 1 | 1 | n/a | 8 | 35840 | 794 |",
    "| DGX-B200 | 8 | MXFP8 | 512 | 2 | 8192 | 0 | 1 | 1 | 1 | n/a | 8 | 32768 | 726 |",
    "| DGX-H100 | 16 | FP8 | 1024 | 1 | 8192 | 0 | 1 | 1 | 1 | n/a | 8 | 14336 | 321 |",
]
CHIP = {"DGX-GB300": "gb300", "DGX-GB200": "gb200", "DGX-B300": "b300", "DGX-B200": "b200", "DGX-H100": "h100"}

# HybridModelProvider(hybrid_layer_pattern=..., hidden_size=2688, mamba_num_heads=64, kv_channels=128,
# mamba_state_dim=128, ffn_hidden_size=1856, num_attention_heads=32, mamba_head_dim=64, num_query_groups=2,
# num_moe_experts=128, moe_ffn_hidden_size=1856, moe_shared_expert_intermediate_size=3712, moe_router_topk=6,
# mamba_num_groups=8, activation_func=squared_relu) and the tokenizer's 131072-entry vocabulary.
MODEL: dict[str, Any] = dict(
    name="nemotron-3-nano-30b-a3b", layer_pattern="MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
    d_model=2688, d_ff=1856, heads=32, kv_heads=2, head_dim=128, vocab=131072, mlp_matrices=2, experts=128,
    experts_per_token=6, shared_experts=2, mamba_heads=64, mamba_head_dim=64, mamba_state_dim=128, mamba_groups=8,
)

# Settings the recipe at RECIPE_COMMIT sets and the table does not state: the library recipe
# src/megatron/bridge/recipes/nemotronh/nemotron_3_nano.py::nemotron_3_nano_pretrain_config (flex dispatcher,
# ddp.use_distributed_optimizer True), BASE_NEMOTRON_3_NANO_CONFIG (the hybridep backend) and the H100 FP8-CS
# variant's recompute_modules (scripts/performance/utils/overrides.py makes any recompute_modules selective).
COMMON = {"moe_token_dispatcher_type": "flex", "moe_flex_dispatcher_backend": "hybridep",
          "use_distributed_optimizer": True, "sequence_parallel": False}
H100 = {"recompute_granularity": "selective", "recompute_modules": ["moe", "layernorm", "core_attn", "moe_act"]}

ASSUMED = [
    "model dimensions are the Megatron-Bridge recipe's HybridModelProvider for Nemotron 3 Nano "
    "(src/megatron/bridge/recipes/nemotronh/h100/nemotron_3_nano.py @ 067f987df03b): pattern "
    "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME (23 Mamba-2, 23 MoE, 6 attention layers), not stated in "
    "the table",
    "the shared expert of width 3712 (moe_shared_expert_intermediate_size) written as shared_experts 2 of the routed "
    "width 1856: the same weights and FLOPs",
    "squared-ReLU experts (not gated): mlp_matrices 2",
    f"moe_token_dispatcher_type flex and the distributed optimizer as nemotron_3_nano_pretrain_config at "
    f"{RECIPE_COMMIT} sets them, the hybridep backend from its BASE_NEMOTRON_3_NANO_CONFIG (no sequence parallelism: "
    "TP 1)",
    "the archive's footnote: MoE benchmarks force-balance the token distribution among experts and are token-dropless, "
    "as ASAP prices routed tokens (evenly spread)",
    "CUDA graphs (TE, over the Mamba / attention / router scopes in the recipe) are not modelled",
]


def _row(line: str) -> dict[str, str]:
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    return dict(zip([c.strip() for c in COLUMNS.split("|")], cells, strict=True))


def _config(row: dict[str, str], chip: str, gpus: int) -> tuple[str, list[str]]:
    """The megatron.yaml the case runs, and what its settings assume beyond ASSUMED."""
    keys: dict[str, Any] = {"tensor_model_parallel_size": int(row["TP"]), "pipeline_model_parallel_size": int(row["PP"]),
                            "context_parallel_size": int(row["CP"]), "expert_model_parallel_size": int(row["EP"]),
                            "micro_batch_size": int(row["MBS"]), "global_batch_size": int(row["GBS"]),
                            "seq_length": int(row["Sequence Length"]), **COMMON}
    assumed: list[str] = []
    if chip == "h100":
        keys.update(H100)
        assumed.append(f"recompute_granularity selective with recompute_modules moe, layernorm, core_attn, moe_act "
                       f"as NEMOTRON_3_NANO_PRETRAIN_CONFIG_H100_FP8_CS_V1 at {RECIPE_COMMIT} sets them")
        assumed.append("8 GPUs per DGX node; Megatron's rank order tp-cp-ep-dp-pp places EP inside a node")
    else:
        assumed.append(f"no activation recomputation: the {chip.upper()} recipe at {RECIPE_COMMIT} sets none")
        assumed.append("8 GPUs in one NVLink domain (num_slices 1)")
    nodes = gpus // 8 if chip == "h100" else 1
    header = (f"# Megatron-Bridge docs/performance-summary-archive.md, 26.04.01 NeMo container, Nemotron_3_Nano, "
              f"{row['System']} row ({URL})\n# parallel sizes and batch from the row; the other settings from the "
              f"performance recipe scripts/performance/configs/nemotronh/ @ {RECIPE_COMMIT}\n")
    # the recipe's precision: FP8 current scaling (tensorwise) on H100, MXFP8 on Blackwell
    recipe = "mxfp8" if row["Precision"] == "MXFP8" else "tensorwise"
    doc = {"trainer": {"devices": min(gpus, 8), "num_nodes": nodes}, "model": keys,
           "mixed_precision": {"fp8_recipe": recipe}}
    return header + mbridge_cases.dump(doc), assumed


def write_case(root: Path, line: str) -> str:
    """Write one case folder; returns its id."""
    from bot.configs.detect import load_config

    row = _row(line)
    chip, gpus = CHIP[row["System"]], int(row["#-GPUs"])
    precision = row["Precision"]
    cid = f"mbridge-26.04.01-{chip}-nemotron-3-nano-{gpus}gpu"
    folder = root / cid
    folder.mkdir(parents=True, exist_ok=True)
    text, assumed = _config(row, chip, gpus)
    (folder / "megatron.yaml").write_text(text)
    slices = gpus // 8 if chip == "h100" else 1
    run = {
        "id": cid, "name": f"Megatron-Bridge 26.04.01 Nemotron_3_Nano pre-training on {gpus} {chip.upper()} ({precision})",
        "description": f"Megatron-Bridge performance summary archive, 26.04.01 NeMo container, Nemotron_3_Nano, "
                       f"{row['System']} row. No profile.",
        "framework": "megatron", "chip": chip, "num_chips": gpus, "num_slices": slices, "model": dict(MODEL),
        "training": {"global_batch": int(row["GBS"]), "seq_len": int(row["Sequence Length"]),
                     "micro_batch": int(row["MBS"]), "dtype": "fp8"},
        "tags": ["published", "config-only", "megatron-bridge", "moe", "hybrid"],
        "config": "megatron.yaml", "profile": [],
    }
    (folder / "run.yaml").write_text(mbridge_cases.dump(run))
    mesh = load_config(folder / "megatron.yaml").mesh(gpus, slices).normalized().model_dump(exclude_defaults=True)
    dtype_note = ("FP8 (current scaling in the H100 recipe) recorded as dtype fp8, fp8_recipe tensorwise" if precision == "FP8"
                  else "MXFP8 recorded as dtype fp8, fp8_recipe mxfp8 (the chip's fp8 peak; dense GEMMs at MXFP8's "
                  "kernel rate)")
    exp = {
        "schema_version": 1, "kind": "config_only",
        "source": f"{REPO} docs/performance-summary-archive.md @ {ARCHIVE_COMMIT[:10]}, '26.04.01 NeMo Container' > "
                  f"'Pre-Training Performance' > 'Model: Nemotron_3_Nano', row {row['System']}",
        "url": URL, "table": f"mbridge-26.04.01-{row['System'].lower()}", "row": "Nemotron_3_Nano",
        "stated": [f"26.04.01 NeMo Container, Pre-Training Performance, Model: Nemotron_3_Nano, row: {line}",
                   f"columns: {COLUMNS}"],
        "assumed": ASSUMED + assumed + [dtype_note],
        "adopted_mesh": mesh,
        "measured": mbridge_cases.measured(row, f"{row['System']} row Nemotron_3_Nano"),
    }
    (folder / "expected.yaml").write_text(mbridge_cases.dump(exp))
    return cid


def main(argv: list[str]) -> int:
    return mbridge_cases.run(argv, lambda root: (write_case(root, line) for line in ROWS))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
