"""Write MosaicML's MPT training benchmarks (llm-foundry) into the eval corpus.

Run: ``.venv/bin/python scripts/eval_cases_llm_foundry.py [examples/eval]`` (writes the case folders named below in
place; nothing else is touched).

Why: every other GPU table in the corpus comes from NVIDIA's Megatron stack or from torchtitan, and spans at most a
dozen rows. MosaicML's llm-foundry published five tables of one PyTorch-FSDP trainer (Composer) over 125M-70B
models, 512-65,536 tokens per sequence, 8-512 GPUs and with / without activation checkpointing, on A100 40GB, A100
80GB and H100: 216 rows measured with one code base. No constant of ASAP's was fitted to them; they were added as
an out-of-sample check of how per-GPU efficiency follows model width, sequence length, micro-batch and scale.

Source: mosaicml/llm-foundry ``scripts/train/benchmarking/README.md`` @ 495218376 (Apache-2.0), section "Results",
copied verbatim into ``scripts/data/llm-foundry-benchmarks-495218376.md``. Each row gives the model, sequence
length, GPU count, MFU, model TFLOP/s per GPU, micro-batch, gradient accumulation, global batch, throughput
(tokens/s per GPU), precision, FSDP mixed-precision mode, sharding strategy and activation checkpointing.

Model: the MPT yamls ``scripts/train/yamls/pretrain/mpt-<size>.yaml`` at the same commit (d_model, n_heads, n_layers,
expansion_ratio 4, vocab 50,368; ``attn_impl: flash``); MPT has no biases, a GELU MLP of two matrices, and its
output layer is the input embedding (``logits = F.linear(x, wte.weight)``). ``NumParams`` grows with the sequence
length by seq x d_model: the learned position embedding table (``learned_pos_emb`` on by default), a lookup.

Their FLOP count (README "MFU"): 6 x NumParams + 12 x n_layers x d_model x seq per token, ASAP's count plus the
position table's 6 x seq x d_model (0.1-1.2% of a row's FLOPs). The measured step is derived from the tokens/s per
GPU the row states, which needs no FLOP count.

Sharding: every row states its FSDP strategy; the mesh file carries it as ``sharding_strategy`` (FULL_SHARD: the
weights gathered in forward and again in backward; SHARD_GRAD_OP, the H100 large-scale table's 1B and 3B rows: gathered
once per micro-batch and kept to backward).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
COMMIT = "495218376830947dce625efabc4d86be7c47cc45"
URL = f"https://github.com/mosaicml/llm-foundry/blob/{COMMIT}/scripts/train/benchmarking/README.md"
YAML_URL = f"https://github.com/mosaicml/llm-foundry/blob/{COMMIT}/scripts/train/yamls/pretrain"
DATA = ROOT / "scripts" / "data" / "llm-foundry-benchmarks-495218376.md"

# README section title -> (table key, chip, dtype)
TABLES: dict[str, tuple[str, str, str]] = {
    "H100 80GB BF16 (Large Scale, >= 128 GPUs)": ("llm-foundry-h100-bf16-large-scale", "h100", "bf16"),
    "H100 80GB BF16": ("llm-foundry-h100-bf16", "h100", "bf16"),
    "H100 80GB FP8": ("llm-foundry-h100-fp8", "h100", "fp8"),
    "A100 80GB with 1600 Gbps node-node interconnect (RoCE)": ("llm-foundry-a100-80gb", "a100-80gb", "bf16"),
    "A100 40GB with 1600 Gbps node-node interconnect (RoCE)": ("llm-foundry-a100-40gb", "a100-40gb", "bf16"),
}

# mpt-<size>.yaml @ COMMIT: d_model, n_heads, n_layers (expansion_ratio 4, vocab_size 50368 in every one)
MPT: dict[str, tuple[int, int, int]] = {
    "125m": (768, 12, 12), "350m": (1024, 16, 24), "760m": (1536, 12, 24), "1b": (2048, 16, 24),
    "3b": (2560, 20, 32), "7b": (4096, 32, 32), "13b": (5120, 40, 40), "30b": (7168, 56, 48), "70b": (8192, 64, 80),
}
VOCAB = 50368

ASSUMED = [
    "model dimensions from llm-foundry's scripts/train/yamls/pretrain/mpt-<size>.yaml @ 495218376 (d_model, n_heads, "
    "n_layers; expansion_ratio 4, vocab 50368, attn_impl flash); MPT's output layer is its input embedding (tied), "
    "its MLP two matrices (GELU), no biases",
    "8 GPUs per node (the tables' GPU counts are 8 x 2^k; the A100 tables state 1600 Gbps RoCE between nodes, 200 Gb/s "
    "per GPU); FSDP over every GPU written as fsdp 8 inside a node x nodes across, with the row's sharding_strategy",
    "Activation Checkpointing True recorded as remat full: llm-foundry checkpoints each MPT block "
    "(fsdp_config.activation_checkpointing wraps every block); False as none",
    "cross-entropy: llm-foundry's ComposerMPTCausalLM defaults loss_fn to fused_crossentropy (flash-attn's "
    "CrossEntropyLoss; llmfoundry/models/mpt/modeling_mpt.py @ 495218376, line 1000), written as "
    "cross_entropy_loss_fusion: true",
    "the row's table throughput (tokens/s per GPU) gives the measured step; MFU and model TFLOP/s count 6 x NumParams "
    "(which includes the learned position-embedding table, a lookup) + 12 x layers x d_model x seq per token",
]


def parse_tables(text: str) -> dict[str, list[dict[str, str]]]:
    """Rows of each '## <title>' table, as {column: cell}."""
    tables: dict[str, list[dict[str, str]]] = {}
    title, header = None, None
    for line in text.splitlines():
        if line.startswith("## "):
            title, header = line[3:].strip(), None
            continue
        if title is None or not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
        elif not set(cells[0]) <= {"-"}:
            tables.setdefault(title, []).append(dict(zip(header, cells, strict=True)))
    return tables


def _model(size: str) -> dict[str, Any]:
    d, heads, layers = MPT[size]
    return {"name": f"mpt-{size}", "layers": layers, "d_model": d, "d_ff": 4 * d, "heads": heads, "kv_heads": heads,
            "head_dim": d // heads, "vocab": VOCAB, "mlp_matrices": 2, "tied_embeddings": True}


def _case_id(key: str, row: dict[str, str]) -> str:
    return (f"{key}-mpt-{row['Model']}-s{row['SeqLen (T)']}-{row['# GPUs']}gpu-mb{row['MicroBatchSize']}"
            .replace("llm-foundry-", "llmfoundry-").replace("-large-scale", "-ls"))


def _mesh_text(title: str, row: dict[str, str], gpus: int) -> str:
    inner, nodes = min(gpus, 8), max(gpus // 8, 1)
    lines = [f"# llm-foundry scripts/train/benchmarking/README.md @ {COMMIT[:9]}, table '{title}' ({URL})",
             f"# FSDP {row['Sharding Strategy']} over {gpus} GPUs ({row['Precision']}, mixed precision "
             f"{row['MP Mode']}); device_train_microbatch_size {row['MicroBatchSize']}, global batch "
             f"{row['GlobalBatchSize']} (scripts/eval_cases_llm_foundry.py)",
             f"ici_mesh: {{fsdp: {inner}}}"]
    if nodes > 1:
        lines.append(f"dcn_mesh: {{fsdp: {nodes}}}")
    lines.append(f"sharding_strategy: {row['Sharding Strategy']}  # fsdp_config.sharding_strategy")
    lines.append("# MPT's loss_fn default fused_crossentropy: flash-attn's fused cross-entropy kernel "
                 "(llmfoundry/models/mpt/modeling_mpt.py)")
    lines.append("cross_entropy_loss_fusion: true")
    lines.append(f"attention: flash  # mpt-{row['Model']}.yaml attn_config.attn_impl: flash")
    return "\n".join(lines) + "\n"


def write_case(root: Path, title: str, row: dict[str, str]) -> str:
    """Write one row's case folder; returns its id."""
    key, chip, dtype = TABLES[title]
    gpus, seq, size = int(row["# GPUs"]), int(row["SeqLen (T)"]), row["Model"]
    cid = _case_id(key, row)
    training: dict[str, Any] = {"global_batch": int(row["GlobalBatchSize"]), "seq_len": seq,
                                "micro_batch": int(row["MicroBatchSize"]), "dtype": dtype,
                                "remat": "full" if row["Activation Checkpointing"] == "True" else "none"}
    if dtype == "fp8":
        training["fp8_recipe"] = "delayed"
    run = {
        "id": cid, "name": f"llm-foundry MPT-{size} at {seq} tokens on {gpus} {chip.upper()} ({row['Precision']})",
        "description": f"llm-foundry MPT training benchmark, table '{title}', row {size} / {seq} / {gpus} GPUs / "
                       f"micro-batch {row['MicroBatchSize']}. No profile.",
        "framework": "other", "chip": chip, "num_chips": gpus, "num_slices": max(gpus // 8, 1), "model": _model(size),
        "training": training, "tags": ["published", "config-only", "llm-foundry"], "config": "mesh.yml", "profile": [],
    }
    header = list(row)
    assumed = list(ASSUMED)
    if dtype == "fp8":
        assumed.append("amp_fp8: Transformer Engine fp8 linear layers with its default delayed scaling (Composer's "
                       "amp_fp8 precision of 2023), recorded as dtype fp8, fp8_recipe delayed")
    expected = {
        "schema_version": 1, "kind": "config_only",
        "source": f"mosaicml/llm-foundry scripts/train/benchmarking/README.md @ {COMMIT[:9]}, table '{title}', row "
                  f"{size} / SeqLen {seq} / {gpus} GPUs / MicroBatchSize {row['MicroBatchSize']}",
        "url": URL, "table": key,
        "row": f"{size} {seq} {gpus}gpu mb{row['MicroBatchSize']}",
        "stated": [f"table '{title}', columns: {' | '.join(header)}",
                   "row: | " + " | ".join(row[c] for c in header) + " |",
                   f"model: {YAML_URL}/mpt-{size}.yaml"],
        "assumed": assumed,
        "measured": [{"tokens_per_second_per_chip": float(row["Throughput (T/s/GPU)"]),
                      "tflops_per_chip": float(row["Model TFLOP"]), "mfu_percent": float(row["MFU"]),
                      "source": f"'{title}' row {size} / {seq} / {gpus} GPUs: {row['Throughput (T/s/GPU)']} "
                                f"tokens/s/GPU, {row['Model TFLOP']} model TFLOP/s/GPU, MFU {row['MFU']}%"}],
    }
    folder = root / cid
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mesh.yml").write_text(_mesh_text(title, row, gpus))
    for name, doc in (("run.yaml", run), ("expected.yaml", expected)):
        (folder / name).write_text(yaml.safe_dump(doc, sort_keys=False, width=120))
    return cid


def write_all(root: Path) -> list[str]:
    tables = parse_tables(DATA.read_text())
    missing = set(TABLES) - set(tables)
    if missing:
        raise SystemExit(f"{DATA}: tables not found: {sorted(missing)}")
    return [write_case(root, title, row) for title in TABLES for row in tables[title]]


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else ROOT / "examples" / "eval"
    ids = write_all(root)
    if len(ids) != len(set(ids)):
        raise SystemExit("two rows map to one case id")
    print("\n".join(ids))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
