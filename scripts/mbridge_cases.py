"""What the Megatron-Bridge case-writing scripts share: the YAML dump, the measured block, and the command line.

``scripts/eval_cases_mbridge_{h100,nemotron,finetune,2608}.py`` each turn rows of a Megatron-Bridge performance table
into eval case folders (``examples/eval/<case>/``). Their rows, recipes and assumptions differ; how a case file is
written, how a row's two figures become the ``measured`` entry, and how the script is run do not.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


# A Megatron-Bridge performance table's columns, and the footnote its MoE rows carry.
COLUMNS = ("System | #-GPUs | Precision | GBS | MBS | Sequence Length | TP | PP | CP | VP | EP | "
           "Tokens / sec / GPU | Model TFLOP / sec / GPU")
REPO = "NVIDIA-NeMo/Megatron-Bridge"
# The 26.04 / 26.04.01 sections' column line (an FSDP column).
COLUMNS_FSDP = ("System | #-GPUs | Precision | GBS | MBS | Sequence Length | FSDP | TP | PP | CP | VP | EP | "
                "Tokens / sec / GPU | Model TFLOP / sec / GPU")
MOE_FOOTNOTE = ("footnote: 'In MoE training benchmarks, we force-balance the token distribution among experts and all "
                "benchmarks are token-dropless.'")


# Nemotron 3 Super as Megatron-LM's argument file gives it (tests/data/real/megatron/NVIDIA-Nemotron-3-Super-120B-A12B-
# BF16.sh), with the two hybrid MTP modules its pretraining recipes train ("/*E/*E"); the same in every container.
NEMOTRON_3_SUPER: dict[str, Any] = dict(
    name="nemotron-3-super-120b-a12b",
    layer_pattern="MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME/*E/*E",
    d_model=4096, d_ff=2688, heads=32, kv_heads=2, head_dim=128, vocab=131072, mlp_matrices=2, experts=512,
    experts_per_token=22, shared_experts=2, moe_latent_size=1024, mamba_heads=128, mamba_head_dim=64,
    mamba_state_dim=128, mamba_groups=8)

# Kimi K2 (moonshotai/Kimi-K2-Instruct's Hugging Face config, which Megatron-Bridge's kimi_k2 recipe builds through
# AutoBridge): DeepSeek-V3's architecture with 384 experts, 64 heads and one leading dense layer, no MTP.
KIMI_K2: dict[str, Any] = dict(
    name="kimi-k2", vocab=163840, layers=61, d_model=7168, d_ff=2048, heads=64, experts=384, experts_per_token=8,
    shared_experts=1, dense_layers=1, dense_d_ff=18432, mlp_matrices=3, q_lora_rank=1536, kv_lora_rank=512,
    qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)


def kimi_k2_assumed(commit: str) -> list[str]:
    """Where KIMI_K2's numbers come from, for the recipe at ``commit``."""
    return [
        "model dimensions are the Hugging Face config of moonshotai/Kimi-K2-Instruct, the model the library recipe "
        f"kimi_k2_pretrain_config builds through AutoBridge at {commit}: hidden 7168, 61 layers of which the first dense "
        "with intermediate 18432, 384 routed experts of 2048 top-8 plus 1 shared, 64 heads with MLA q_lora_rank 1536 / "
        "kv_lora_rank 512 / qk_nope 128 / qk_rope 64 / v 128, vocabulary 163840, no MTP layer (DeepSeek-V3's "
        "architecture); not stated in the table. ASAP counts 1.03T parameters, 32.7B active (Moonshot AI: 1.04T, 32B)",
    ]


def nemotron_3_super_assumed(mtp_source: str) -> list[str]:
    """Where NEMOTRON_3_SUPER's numbers come from; ``mtp_source``: the recipe (and commit) that sets the row's MTP."""
    return [
        "model dimensions are Megatron-LM's argument file for NVIDIA-Nemotron-3-Super-120B-A12B (NVIDIA/Megatron-LM "
        "examples/post_training/modelopt/conf/nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16.sh @ 6fe4b16360: hidden "
        "4096, 88-layer pattern of 40 Mamba-2, 40 MoE and 8 attention layers, 32 query / 2 KV heads of 128, 512 "
        "experts of 2688 top-22 in a 1024-wide latent, shared expert 5376, squared ReLU, 128 Mamba heads of 64; "
        "Megatron-Core's default Mamba state 128 and 8 groups), not stated in the table; the vocabulary 131072 is the "
        "Hugging Face config's (the argument file names only its tokenizer)",
        "the shared expert of width 5376 written as shared_experts 2 of the routed width 2688: the same weights and "
        "FLOPs; squared-ReLU experts (not gated): mlp_matrices 2",
        f"multi-token prediction as {mtp_source} sets it (mtp_num_layers 2, the Hugging Face config's "
        "mtp_hybrid_override_pattern *E through AutoBridge), written as the pattern's MTP part /*E/*E; its "
        "mtp_use_repeated_layer (one set of MTP weights run twice) is not modelled: the second module's weights are "
        "counted too",
    ]

def parse_row(line: str, columns: str = COLUMNS) -> dict[str, str]:
    """A table row as printed (``| DGX-GB300 | 256 | ... |``), column name -> cell; ``columns``: the table's own
    column line where it is not the usual one."""
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    return dict(zip([c.strip() for c in columns.split("|")], cells, strict=True))


def nvl72_segments(gpus: int) -> int:
    """NVLink domains a GB200 / GB300 NVL72 run spans: Megatron-Bridge's launcher
    (scripts/performance/utils/executors.py) asks Slurm for segments of at most 18 four-GPU trays, the largest
    dividing the tray count."""
    trays = gpus // 4
    segment = trays if trays <= 18 else next(s for s in range(18, 0, -1) if trays % s == 0)
    return trays // segment



def node_note(system: str, gpus: int, nvl72: bool, recipe: str) -> str:
    """How a row's GPUs fall into nodes as ASAP counts them (num_slices): eight-GPU DGX nodes joined by InfiniBand, or
    on NVL72 the NVLink domains Megatron-Bridge's launcher (scripts/performance/utils/executors.py at ``recipe``) asks
    Slurm for, segments of at most 18 four-GPU trays, the largest dividing the tray count."""
    if not nvl72:
        slices = max(1, gpus // 8)
        nodes = f"{slices} nodes of 8" if slices > 1 else "one node"
        return (f"{system}: 8 GPUs per node on NVLink, nodes joined by InfiniBand: {nodes} (num_slices {slices}); "
                "Megatron's rank order tp-cp-ep-dp-pp places TP, CP and EP inside a node first")
    slices, trays = nvl72_segments(gpus), gpus // 4
    how = (f"{trays} trays fit one segment, one NVLink domain of {gpus} GPUs" if slices == 1 else
           f"{trays} trays run as {slices} segments of {trays // slices} trays, {slices} NVLink domains of "
           f"{gpus // slices} GPUs")
    return (f"{system[4:]} NVL72: 4 GPUs per compute tray, one NVLink domain per rack (DGX GB200 user guide). "
            f"Megatron-Bridge's launcher (scripts/performance/utils/executors.py at {recipe}) asks Slurm for segments of "
            f"at most 18 trays, the largest dividing the tray count: {how} (num_slices {slices}); megatron.yaml's "
            "trainer block counts one node per NVLink domain")

# Megatron-Bridge's te_quant.cfg (Nemotron 3 Super's per-module precision recipe; the same bytes at the 26.04.01,
# 26.06 and 26.08 recipe commits), as copied into tests/data/real/megatron_bridge
TE_QUANT = Path(__file__).resolve().parents[1] / "tests" / "data" / "real" / "megatron_bridge" / "te_quant.cfg"


def super_nvfp4_settings(recipe_src: str, precision_src: str, gather_src: str) -> list[tuple[str, str, Any, str]]:
    """Nemotron 3 Super's NVFP4 precision as its performance recipes set it, each setting with its source:
    te_quant.cfg as ``model.quant_recipe`` (written beside the case: :func:`write_te_quant`),
    nemotron_3_super_bf16_with_nvfp4_mixed (the last 14 layers in BF16; no fp8 parameter gathers) and NVFP4
    parameter gathers turned off."""
    return [("model", "quant_recipe", "te_quant.cfg", recipe_src),
            ("mixed_precision", "fp8_param_gather", False, precision_src),
            ("mixed_precision", "fp4_param_gather", False, gather_src),
            ("mixed_precision", "first_last_layers_bf16", True, precision_src),
            ("mixed_precision", "num_layers_at_start_in_bf16", 0, f"{precision_src}: MixedPrecisionConfig's default"),
            ("mixed_precision", "num_layers_at_end_in_bf16", 14, precision_src)]


def write_te_quant(folder: Path) -> None:
    """The recipe file an NVFP4 Super case's megatron.yaml names, beside it (before its mesh is read)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "te_quant.cfg").write_bytes(TE_QUANT.read_bytes())

def recipe_header(source: str, row: dict[str, str], gpus: int, dp: int, recipe: str, cites: list[str], *,
                  fsdp: bool = False) -> str:
    """The comment block above a case's megatron.yaml: ``source`` (the table's line, container and row, as the first
    line's text), the row's parallel sizes and batch (``FSDP=`` first where the table has that column), the data-parallel
    size they give, and ``recipe`` (the performance recipe call and preset the other settings come from) with the
    cited settings."""
    tp, pp, cp = (int(row[k]) for k in ("TP", "PP", "CP"))
    mbs, gbs = int(row["MBS"]), int(row["GBS"])
    first = f"FSDP={row['FSDP']} " if fsdp else ""
    return (f"# {source}\n"
            f"# {first}TP={tp} PP={pp} CP={cp} VP={row['VP']} EP={row['EP']} GBS={gbs} MBS={mbs} "
            f"GA={gbs // (mbs * dp)}; data parallel = {gpus}/(TP*PP*CP) = {dp}\n"
            f"# parallel sizes and batch from the row; the other settings from the performance recipe {recipe} (the "
            "table does not state them), each set where named:\n" + "\n".join(cites) + "\n")


def recipe_assumed(settings: list[tuple[str, str, Any, str]], recipe: str) -> str:
    """The assumed line naming the settings a case takes from ``recipe`` rather than from its table row."""
    return (f"{', '.join(k for _, k, _, _ in settings)} as the performance recipe {recipe} sets them (directly or "
            "through the helpers and library recipe named in megatron.yaml)")


def dump(doc: Any) -> str:
    """A case file's YAML, as every committed case is written (key order kept, 120 columns)."""
    return yaml.safe_dump(doc, sort_keys=False, width=120)


def write(folder: Path, name: str, doc: Any) -> None:
    (folder / name).write_text(dump(doc))


def measured(row: dict[str, str], label: str) -> list[dict[str, Any]]:
    """The ``measured`` entry of a row: its tokens/s/GPU and model TFLOP/s/GPU, with the row named by ``label``."""
    tps, tflops = (re.sub(r"\[\^[^\]]*\]", "", row[c]) for c in ("Tokens / sec / GPU", "Model TFLOP / sec / GPU"))  # footnotes
    return [{"tokens_per_second_per_chip": float(tps), "tflops_per_chip": float(tflops),
             "source": f"{label}: {tps} tokens/sec/GPU, {tflops} model TFLOP/sec/GPU"}]


def megatron_doc(row: dict[str, str], gpus: int, slices: int,
                 settings: Iterable[tuple[str, str, Any, str]]) -> tuple[dict[str, Any], list[str], int]:
    """A table row's megatron.yaml document: the parallel sizes and batch the row states, then each recipe setting
    ``(section, key, value, where it is set)``; with the comment line citing each setting, and the data-parallel size."""
    tp, pp, cp = (int(row[k]) for k in ("TP", "PP", "CP"))
    sizes: dict[str, Any] = {"tensor_model_parallel_size": tp, "pipeline_model_parallel_size": pp,
                             "context_parallel_size": cp}
    if row["EP"] != "n/a":
        sizes["expert_model_parallel_size"] = int(row["EP"])
    if row["VP"] != "n/a":
        sizes["virtual_pipeline_model_parallel_size"] = int(row["VP"])
    doc: dict[str, Any] = {"trainer": {"devices": gpus // slices, "num_nodes": slices},
                           "model": {**sizes, "seq_length": int(row["Sequence Length"])},
                           "train": {"micro_batch_size": int(row["MBS"]), "global_batch_size": int(row["GBS"])}}
    cites: list[str] = []
    for section, key, value, src in settings:
        doc.setdefault(section, {})[key] = value
        cites.append(f"#   {section}.{key}: {src}")
    return doc, cites, gpus // (tp * pp * cp)


def run_doc(cid: str, name: str, description: str, *, chip: str, gpus: int, slices: int, model: dict[str, Any],
            row: dict[str, str], dtype: str, tags: list[str]) -> dict[str, Any]:
    """A config-only case's run.yaml: the chip and GPU count, the model, the row's batch and sequence, no profile."""
    return {
        "id": cid, "name": name, "description": description,
        "framework": "megatron", "chip": chip, "num_chips": gpus, "num_slices": slices, "model": dict(model),
        "training": {"global_batch": int(row["GBS"]), "seq_len": int(row["Sequence Length"]),
                     "micro_batch": int(row["MBS"]), "dtype": dtype},
        "tags": ["published", "config-only", "megatron-bridge", *tags],
        "config": "megatron.yaml", "profile": [],
    }


def write_case_files(folder: Path, megatron_text: str, run_yaml: dict[str, Any], cited: dict[str, Any],
                     measured_entry: list[dict[str, Any]]) -> None:
    """Write a case folder: megatron.yaml, run.yaml, and expected.yaml with ``cited`` (source, url, table, row, stated,
    assumed), the mesh the written config builds (the adopted mesh) and the measured entry."""
    from bot.configs.detect import load_config

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "megatron.yaml").write_text(megatron_text)
    write(folder, "run.yaml", run_yaml)
    mesh = load_config(folder / "megatron.yaml").mesh(run_yaml["num_chips"], run_yaml["num_slices"])
    write(folder, "expected.yaml", {"schema_version": 1, "kind": "config_only", **cited,
                                    "adopted_mesh": mesh.normalized().model_dump(exclude_defaults=True),
                                    "measured": measured_entry})


def run(argv: list[str], write_all: Callable[[Path], Iterable[str]]) -> int:
    """``script.py [cases dir]``: write every case (default ``examples/eval``) and print the ids written."""
    root = Path(argv[1]) if len(argv) > 1 else ROOT / "examples" / "eval"
    sys.path.insert(0, str(ROOT))
    for cid in write_all(root):
        print(cid)
    return 0
