"""Write the Megatron-Bridge DGX-H100 rows of the 25.09 and 25.11 NeMo containers that the eval corpus lacked.

Run: ``.venv/bin/python scripts/eval_cases_mbridge_h100.py [examples/eval]`` (writes the case folders named below in
place; nothing else is touched).

Why: the corpus held only the three dense Llama rows of the 25.11 DGX-H100 table (719 / 737 / 744 TFLOP/s, a 3.5%
spread), so its Spearman was taken over three near-equal rows. The table has six rows; the three MoE rows
(GPT-OSS 120B, Qwen3 30B-A3B, Qwen3 235B-A22B) are added here. The 25.09 container published the same three Llama
configurations (same GPUs, batch and parallel sizes) and measured them in another order (8B 725, 70B 727, 405B
763): they are added as their own table, so the corpus shows how far one configuration moves between two releases.

Source: NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary-archive.md`` @ 067f987df03b (Apache-2.0), sections
"25.11 NeMo Container" and "25.09 NeMo Container", "System: DGX-H100". The 25.09 rows' first appearance is
``docs/performance-summary.md`` @ fa0315ae2 (2025-10-10), whose performance recipes
(``scripts/performance/configs/*/*_llm_pretrain.yaml``) name the precisions each parallel layout ran with.

Left out, with the reason: 25.09's DeepSeekV3 (dropless) row (its precision is not stated and the recipe lists bf16,
fp8_cs and fp8_ss for the same layout; the recipe's pipeline layout ``Et|(tt|)*30mL`` carries a multi-token-prediction
layer ASAP does not price), and its two Qwen3 rows marked "(tokendrop)" (token dropping with a capacity factor; ASAP
prices dropless routing, and the 25.09 and 25.11 Qwen3 30B-A3B rows on the same layout differ 2x).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/mbridge_cases.py
import mbridge_cases  # noqa: E402

REPO = "NVIDIA-NeMo/Megatron-Bridge"
ARCHIVE_COMMIT = "067f987df03b8355b03192d88d70f1709fedf51a"
RECIPE_COMMIT_2509 = "fa0315ae2"
RECIPE_COMMIT_2511 = "00b7660be0254ac6f95f44164ddd0c3e9cc798ed"
URL = f"https://github.com/{REPO}/blob/{ARCHIVE_COMMIT}/docs/performance-summary-archive.md"

COLUMNS = {
    "25.11": "Model | #-GPUs | Precision | GBS | MBS | Sequence Length | FSDP | TP | PP | CP | VP | EP | GA | "
             "Tokens / sec / GPU | Model TFLOP / sec / GPU",
    "25.09": "Model | #-GPUs | GBS | MBS | Sequence Length | FSDP | TP | PP | CP | VP | EP | GA | Tokens / sec / GPU | "
             "Model TFLOP / sec / GPU",
}

# Published architectures (Meta's Llama 3 / 3.1 model cards; Hugging Face config.json of openai/gpt-oss-120b,
# Qwen/Qwen3-30B-A3B and Qwen/Qwen3-235B-A22B), as the corpus's other Megatron-Bridge cases record them.
MODELS: dict[str, dict[str, Any]] = {
    "llama3-8b": dict(layers=32, d_model=4096, d_ff=14336, heads=32, kv_heads=8, vocab=128256, mlp_matrices=3),
    "llama3-70b": dict(layers=80, d_model=8192, d_ff=28672, heads=64, kv_heads=8, vocab=128256, mlp_matrices=3),
    "llama3.1-405b": dict(layers=126, d_model=16384, d_ff=53248, heads=128, kv_heads=8, vocab=128256,
                          mlp_matrices=3),
    "gpt-oss-120b": dict(layers=36, d_model=2880, d_ff=2880, heads=64, kv_heads=8, head_dim=64, vocab=201088,
                         mlp_matrices=3, experts=128, experts_per_token=4, sliding_window=128, global_every=2),
    "qwen3-30b-a3b": dict(layers=48, d_model=2048, d_ff=768, heads=32, kv_heads=4, head_dim=128, vocab=151936,
                          mlp_matrices=3, experts=128, experts_per_token=8),
    "qwen3-235b-a22b": dict(layers=94, d_model=4096, d_ff=1536, heads=64, kv_heads=4, head_dim=128, vocab=151936,
                            mlp_matrices=3, experts=128, experts_per_token=8),
}
MODEL_OF_ROW = {"LLAMA3_8B": "llama3-8b", "LLAMA3_70B": "llama3-70b", "LLAMA3.1_405B": "llama3.1-405b",
                "GPT OSS 120B": "gpt-oss-120b", "Qwen3_30B_a3B": "qwen3-30b-a3b",
                "Qwen3_235B_a22B": "qwen3-235b-a22b"}

# The rows exactly as the archive prints them (lines 589-595 and 629-631 @ 067f987df03b).
ROWS = {
    "25.11": [
        "| GPT OSS 120B | 64 | BF16 | 512 | 4 | 4096 | 0 | 1 | 4 | 1 | 1 | 8 | 2 | 5630 | 153 |",
        "| Qwen3_30B_a3B | 16 | FP8-CS | 512 | 2 | 4096 | 0 | 1 | 2 | 1 | 24 | 8 | 32 | 5275 | 121 |",
        "| Qwen3_235B_a22B | 256 | FP8-CS | 2048 | 1 | 4096 | 0 | 2 | 8 | 1 | 4 | 32 | 128 | 1575 | 233 |",
    ],
    "25.09": [
        "| LLAMA3_8B | 8 | 128 | 1 | 8192 | 8 | 1 | 1 | 1 | n/a | 1 | 16 | 14079 | 725 |",
        "| LLAMA3_70B | 64 | 128 | 1 | 8192 | 0 | 4 | 8 | 1 | 5 | 1 | 64 | 1619 | 727 |",
        "| LLAMA3.1_405B | 1024 | 512 | 1 | 8192 | 0 | 8 | 8 | 2 | 8 | 1 | 64 | 302 | 763 |",
    ],
}

COMMON_ASSUMED = [
    "model dimensions are the published architecture (Meta's Llama 3 / 3.1 model cards; the Hugging Face configs of "
    "openai/gpt-oss-120b and Qwen/Qwen3-30B-A3B / Qwen3-235B-A22B), not stated in the table",
    "8 GPUs per DGX node; Megatron's rank order tp-cp-ep-dp-pp places TP (then CP, EP, DP) inside a node",
]
MOE_ASSUMED = {
    "gpt-oss-120b": [
        "GPT-OSS's attention: the Hugging Face config (openai/gpt-oss-120b) alternates sliding_attention "
        "(sliding_window 128) and full_attention layers, recorded as model.sliding_window 128, global_every 2; its "
        "attention sinks are not modelled",
        "every layer is a MoE layer with no shared expert (GPT-OSS)",
    ],
    "qwen3-30b-a3b": ["every layer is a MoE layer with no shared expert (Qwen3-MoE)"],
    "qwen3-235b-a22b": [
        "every layer is a MoE layer with no shared expert (Qwen3-MoE)",
        "EP 32 > data parallel 16: Megatron-Core MoE parallel folding; ASAP prices the experts on their own grid, "
        "expert parallel 32 over the 16 data ranks x the 2 tensor ranks, each expert whole (expert_tensor_parallel_size "
        "1)",
    ],
}
# Settings the 25.11 performance recipes set for the H100 MoE rows (scripts/performance/configs/{qwen,gpt_oss}/
# *_workload_base_configs.py @ 00b7660be025, the commit the corpus's other 25.11 H100 cases cite).
RECIPE_2511 = {
    "gpt-oss-120b": ({"recompute_granularity": "selective", "recompute_modules": ["layernorm", "moe_act"]},
                     "GPT_OSS_120B_PRETRAIN_CONFIG_H100_BF16_BASE_CONFIG"),
    "qwen3-30b-a3b": ({"overlap_moe_expert_parallel_comm": True},
                      "QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_BASE_CONFIG (moe_a2a_overlap=True)"),
    # BASE_QWEN3_235B_A22B_CONFIG sets expert_tensor_parallel_size=1: whole experts beside TP 2
    "qwen3-235b-a22b": ({"overlap_moe_expert_parallel_comm": True, "expert_tensor_parallel_size": 1},
                        "QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_BASE_CONFIG (moe_a2a_overlap=True; "
                        "BASE_QWEN3_235B_A22B_CONFIG expert_tensor_parallel_size=1)"),
}
# A row whose own columns contradict each other: what the case takes, and why.
ROW_FIXES: dict[tuple[str, str], tuple[dict[str, int], str]] = {
    ("25.11", "GPT OSS 120B"): ({"mbs": 1}, (
        "micro batch 1, not the row's 4: the row's MBS 4 and GA 2 cannot both hold with PP 4 on 64 GPUs at GBS 512 "
        "(4 x 2 x data parallel 16 = 128, not 512; MBS 4 and GA 2 are the values of the Blackwell GPT-OSS rows beside "
        "it), and the performance recipe at 00b7660be025 runs this layout at micro_batch_size 1 "
        "(BASE_GPT_OSS_120B_CONFIG), as the 26.04.01 H100 row does")),
}
PRECISION_2509 = (
    "precision: the 25.09 table states none. The 25.11 table runs these three configurations (same GPUs, batch and "
    "parallel sizes) in FP8-CS; the 25.09 recipes (scripts/performance/configs/llama3*/ @ fa0315ae2) give these "
    "layouts to their fp8 entries (8B: Megatron-FSDP with CP 1, 70B: PP 8 with CP 1; bf16 runs CP 2); and 725-763 "
    "model TFLOP/s per GPU is 73-77% of the H100's dense bf16 peak. Recorded as dtype fp8"
)


def _parse(version: str, line: str) -> dict[str, Any]:
    """One published row as named fields (the 25.09 table has no Precision column)."""
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    names = [c.strip() for c in COLUMNS[version].split("|")]
    row = dict(zip(names, cells, strict=True))
    row.setdefault("Precision", "FP8-CS (assumed)")
    return row


def _ints(row: dict[str, Any]) -> dict[str, int]:
    keys = {"gpus": "#-GPUs", "gbs": "GBS", "mbs": "MBS", "seq": "Sequence Length", "tp": "TP", "pp": "PP",
            "cp": "CP", "ep": "EP", "fsdp": "FSDP"}
    out = {k: int(row[v]) for k, v in keys.items()}
    out["vp"] = 0 if row["VP"] in ("n/a", "1") else int(row["VP"])
    return out


def _config(version: str, row: dict[str, Any], n: dict[str, int], model: str) -> tuple[str, str, list[str]]:
    """The config file (name, text) the case runs and the assumptions its settings add."""
    header = (f"# Megatron-Bridge docs/performance-summary-archive.md, {version} NeMo container, DGX-H100, "
              f"{row['Model']} ({URL})\n")
    if n["fsdp"] > 1:  # Megatron-FSDP over every GPU: ASAP's Megatron reader has no FSDP axis
        text = header + f"# FSDP={n['fsdp']} TP=1 PP=1 CP=1\nici_mesh: {{fsdp: {n['gpus']}}}\n"
        return "mesh.yml", text, [f"FSDP={n['fsdp']} (Megatron FSDP over all {n['gpus']} GPUs) written as a plain "
                                  f"mesh fsdp={n['gpus']}, since ASAP's Megatron reader has no FSDP axis"]
    dp = n["gpus"] // (n["tp"] * n["pp"] * n["cp"])
    model_keys: dict[str, Any] = {"tensor_model_parallel_size": n["tp"], "pipeline_model_parallel_size": n["pp"],
                                  "context_parallel_size": n["cp"]}
    if n["ep"] > 1:
        model_keys["expert_model_parallel_size"] = n["ep"]
    if n["vp"]:
        model_keys["virtual_pipeline_model_parallel_size"] = n["vp"]
    model_keys.update(micro_batch_size=n["mbs"], global_batch_size=n["gbs"], seq_length=n["seq"])
    assumed: list[str] = []
    comment = (f"# TP={n['tp']} PP={n['pp']} CP={n['cp']} VP={row['VP']} EP={n['ep']} GBS={n['gbs']} MBS={n['mbs']}"
               f" GA={n['gbs'] // (n['mbs'] * dp)}; data parallel = {n['gpus']}/(TP*PP*CP) = {dp}\n")
    if version == "25.11" and model in RECIPE_2511:
        settings, name = RECIPE_2511[model]
        model_keys.update(settings)
        keys = ", ".join(settings)
        comment += (f"# {keys} from the performance recipe scripts/performance/configs/*/ {name} "
                    f"@ {RECIPE_COMMIT_2511[:12]} (the table does not state it)\n")
        assumed.append(f"{keys} as the performance recipe {name} at {RECIPE_COMMIT_2511[:12]} sets it (the recipe "
                       "at this commit is assumed to be the one the 25.11 row ran)")
    doc = {"trainer": {"devices": 8, "num_nodes": n["gpus"] // 8}, "model": model_keys}
    return "megatron.yaml", header + comment + mbridge_cases.dump(doc), assumed


def _adopted(folder: Path, config_name: str, gpus: int) -> dict[str, dict[str, int]]:
    """The mesh the case's own config resolves to (ASAP's reader; the adopted configuration is the one that ran)."""
    from bot.configs.detect import load_config

    mesh = load_config(folder / config_name).mesh(gpus, max(1, gpus // 8))
    return mesh.normalized().model_dump(exclude_defaults=True)


def write_case(root: Path, version: str, line: str) -> str:
    """Write one case folder; returns its id."""
    row = _parse(version, line)
    n = _ints(row)
    fix, fix_note = ROW_FIXES.get((version, row["Model"]), ({}, ""))
    n.update(fix)
    model = MODEL_OF_ROW[row["Model"]]
    fp8 = not row["Precision"].startswith("BF16")
    cid = f"mbridge-{version}-h100-{model.replace('.', '')}-{n['gpus']}gpu"
    folder = root / cid
    folder.mkdir(parents=True, exist_ok=True)
    config_name, config_text, config_assumed = _config(version, row, n, model)
    (folder / config_name).write_text(config_text)
    run = {
        "id": cid,
        "name": f"Megatron-Bridge {version} {row['Model']} pre-training on {n['gpus']} H100 "
                f"({'FP8' if fp8 else 'BF16'})",
        "description": f"Megatron-Bridge performance summary archive, {version} NeMo container, DGX-H100, row "
                       f"{row['Model']}. No profile.",
        "framework": "megatron", "chip": "h100", "num_chips": n["gpus"], "num_slices": max(1, n["gpus"] // 8),
        "model": {"name": model, **MODELS[model]},
        "training": {"global_batch": n["gbs"], "seq_len": n["seq"], "micro_batch": n["mbs"],
                     "dtype": "fp8" if fp8 else "bf16"},
        "tags": ["published", "config-only", "megatron-bridge"] + (["moe"] if "experts" in MODELS[model] else []),
        "config": config_name, "profile": [],
    }
    (folder / "run.yaml").write_text(mbridge_cases.dump(run))
    assumed = list(COMMON_ASSUMED) + config_assumed + MOE_ASSUMED.get(model, []) + ([fix_note] if fix_note else [])
    if version == "25.09":
        assumed.append(PRECISION_2509)
    elif fp8:
        assumed.append("FP8-CS (current-scaling FP8) recorded as dtype fp8")
    if "experts" in MODELS[model]:
        assumed.append("the archive's footnote: MoE benchmarks force-balance the token distribution among experts and "
                       "are token-dropless, as ASAP prices routed tokens (evenly spread)")
    if version == "25.11":
        assumed.append("other settings the table does not state (distributed optimizer, TP overlap, dispatcher, CUDA "
                       "graphs) are left unstated")
    else:
        assumed.append("settings the table does not state (recompute, distributed optimizer, sequence parallel, "
                       "overlap) are left unstated: the performance recipes set them in code")
    exp = {
        "schema_version": 1, "kind": "config_only",
        "source": f"{REPO} docs/performance-summary-archive.md @ {ARCHIVE_COMMIT[:10]}, '{version} NeMo Container' > "
                  f"'Pre-Training Performance' > 'System: DGX-H100', row {row['Model']}",
        "url": URL, "table": f"mbridge-{version}-dgx-h100", "row": row["Model"].replace(" ", "_"),
        "stated": [f"{version} NeMo Container, Pre-Training Performance, System: DGX-H100, row: {line}",
                   f"columns: {COLUMNS[version]}"],
        "assumed": assumed,
        "adopted_mesh": _adopted(folder, config_name, n["gpus"]),
        "measured": mbridge_cases.measured(row, f"DGX-H100 row {row['Model']}"),
    }
    (folder / "expected.yaml").write_text(mbridge_cases.dump(exp))
    return cid


def main(argv: list[str]) -> int:
    return mbridge_cases.run(argv, lambda root: (write_case(root, version, line)
                                                 for version, lines in ROWS.items() for line in lines))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
