"""Write Google's Trillium (TPU v6e) MaxText recipes, with the step each README logged, into the eval corpus.

Run: ``.venv/bin/python scripts/eval_cases_tpu_recipes_trillium.py [examples/eval]`` (writes the case folders named
below in place; nothing else is touched).

Why: the corpus's v6e cases were recipes that "work out of the box" with no figure, so v6e had no measured step to
price against. AI-Hypercomputer/tpu-recipes (Apache-2.0) publishes, per recipe, the MaxText tag it runs, the
workload's ``tuning_params`` as MaxText defines them at that tag (``benchmarks/maxtext_trillium_model_configs.py``),
and a log line of the run: ``completed step: N, seconds: S, TFLOP/s/device: F, Tokens/s/device: T, total_weights: W``.
Llama 3.1 8B on 8 to 256 chips and Llama 3.1 70B on 32 to 256 chips are two scaling tables; Llama 3.1 405B (two
slices), Mixtral 8x7B, Mixtral 8x22B, Mistral 7B and GPT-3 175B one table of models. The Mixtral 8x22B README
pins a MaxText commit (261a8be0) that predates its workload; that row takes tpu-recipes-v0.1.2, whose workload
is the same at every tpu-recipes tag and matches the log's total_weights (ROW_NOTES says so in the case).

Each case's ``mesh.yml`` is the workload's tuning parameters that change what a step costs (batch, parallelism,
remat and its per-tensor choices, sequence, attention, dtypes, MoE routing), as MaxText's overrides on base.yml;
data, profiler and splash-attention block sizes are left out. ``total_weights`` (tokens in the step) equals
per_device_batch_size x chips x max_target_length in every row kept. Left out: Llama 2 70B on v6e-256 (its log's
total_weights, 2,097,152, is two sequences per chip where its tuning params say three), Gemma 3 12B (MaxText models
it with sliding-window layers and a vision tower this corpus does not price), GPT-3 175B fp8.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/mbridge_cases.py
import mbridge_cases  # noqa: E402

RECIPES = "AI-Hypercomputer/tpu-recipes"
RECIPES_FULL = "c8cfe2f689081d36701a101cd73a70965d80926b"  # the tpu-recipes snapshot read (2026-08-07)
RECIPES_COMMIT = RECIPES_FULL[:7]
MAXTEXT_TAGS = {"tpu-recipes-v0.1.2": "14b5876ea857c09cc3d8645385f984689376a331",
                "tpu-recipes-v0.1.4": "9f1820b472ef362e7b5c782fe1d6fda8a0943eff"}  # the commit the annotated tag names

OFFLOAD_QKV_O = {"remat_policy": "custom", "decoder_layer_input": "offload", "out_proj": "offload",
                 "query_proj": "offload", "key_proj": "offload", "value_proj": "offload"}
OFFLOAD_QKV = {"remat_policy": "custom", "decoder_layer_input": "offload", "query_proj": "offload",
               "key_proj": "offload", "value_proj": "offload"}

# (case stem, table, README path, MaxText tag, workload name, model_name, chips, slices, tuning params kept, log line)
ROWS: list[tuple[str, str, str, str, str, str, int, int, dict[str, Any], str]] = [
    *[(f"llama3.1-8b-{n}", "tpu-recipes-trillium-llama3.1-8b", f"training/trillium/Llama3.1-8B-MaxText/v6e-{n}/README.md",
       "tpu-recipes-v0.1.4", work, "llama3.1-8b", n, 1,
       {"per_device_batch_size": pdb, "ici_fsdp_parallelism": -1, **OFFLOAD_QKV_O, "max_target_length": 8192,
        "attention": "flash"}, log)
      for n, work, pdb, log in [
          (8, "llama3_1_8b_8192_no_collective_matmul", 3, "completed step: 14, seconds: 3.443, TFLOP/s/device: "
           "413.433, Tokens/s/device: 7138.890, total_weights: 196608, loss: 2.136"),
          (16, "llama3_1_8b_8192_no_collective_matmul", 3, "completed step: 14, seconds: 3.393, TFLOP/s/device: "
           "419.485, Tokens/s/device: 7243.378, total_weights: 393216, loss: 3.974"),
          (32, "llama3_1_8b_8192_no_collective_matmul", 3, "completed step: 14, seconds: 3.495, TFLOP/s/device: "
           "407.225, Tokens/s/device: 7031.689, total_weights: 786432, loss: 5.864"),
          (64, "llama3_1_8b_8192_bs5", 5, "completed step: 14, seconds: 5.652, TFLOP/s/device: 419.701, "
           "Tokens/s/device: 7247.111, total_weights: 2621440, loss: 8.534"),
          (128, "llama3_1_8b_8192", 4, "completed step: 14, seconds: 4.602, TFLOP/s/device: 412.319, "
           "Tokens/s/device: 7119.648, total_weights: 4194304, loss: 9.285"),
          (256, "llama3_1_8b_8192", 4, "completed step: 14, seconds: 4.546, TFLOP/s/device: 417.397, "
           "Tokens/s/device: 7207.336, total_weights: 8388608, loss: 10.131"),
      ]],
    *[(f"llama3.1-70b-{n}", "tpu-recipes-trillium-llama3.1-70b",
       f"training/trillium/Llama3.1-70B-MaxText/v6e-{n}/README.md", "tpu-recipes-v0.1.4", work, "llama3.1-70b", n, 1,
       {"per_device_batch_size": pdb, "ici_fsdp_parallelism": -1, **OFFLOAD_QKV, "max_target_length": 8192,
        "attention": "flash", **extra}, log)
      for n, work, pdb, extra, log in [
          (32, "llama3_1_70b_8192_bs2_bfloat16_no_collective_matmul", 2, {"weight_dtype": "bfloat16"},
           "completed step: 34, seconds: 17.790, TFLOP/s/device: 443.385, Tokens/s/device: 920.965, total_weights: "
           "524288, loss: 11.457"),
          (64, "llama3_1_70b_8192_bs2", 2, {}, "completed step: 14, seconds: 18.688, TFLOP/s/device: 422.091, "
           "Tokens/s/device: 876.736, total_weights: 1048576, loss: 0.865"),
          (128, "llama3_1_70b_8192_bs4", 4, {}, "completed step: 14, seconds: 34.786, TFLOP/s/device: 453.500, "
           "Tokens/s/device: 941.976, total_weights: 4194304, loss: 4.174"),
          (256, "llama3_1_70b_8192", 5, {}, "completed step: 14, seconds: 42.656, TFLOP/s/device: 462.297, "
           "Tokens/s/device: 960.248, total_weights: 10485760, loss: 6.658"),
      ]],
    ("llama3.1-405b-512", "tpu-recipes-trillium-models", "training/trillium/Llama3.1-405B-MaxText/README.md",
     "tpu-recipes-v0.1.2", "llama3_1_405b_8192_pure_fsdp_ici", "llama3.1-405b", 512, 2,
     {"per_device_batch_size": 1, "ici_fsdp_parallelism": 256, "dcn_fsdp_parallelism": 2, "remat_policy": "custom",
      "decoder_layer_input": "offload", "max_target_length": 8192, "attention": "flash"},
     "completed step: 14, seconds: 54.803, TFLOP/s/device: 392.454, Tokens/s/device: 149.482, total_weights: "
     "4194304, loss: 0.297"),
    ("mixtral-8x7b-256", "tpu-recipes-trillium-models", "training/trillium/Mixtral-8x7B-MaxText/README.md",
     "tpu-recipes-v0.1.2", "mixtral_8x7b_dropped", "mixtral-8x7b", 256, 1,
     {"per_device_batch_size": 12, "ici_fsdp_parallelism": -1, "max_target_length": 4096, **OFFLOAD_QKV_O,
      "attention": "flash", "megablox": False, "sparse_matmul": False, "capacity_factor": 1.25},
     "completed step: 11, seconds: 13.484, TFLOP/s/device: 302.311, Tokens/s/device: 3645.203, total_weights: "
     "12582912, loss: 10.546"),
    ("mixtral-8x22b-256", "tpu-recipes-trillium-models", "training/trillium/Mixtral-8x22B-MaxText/README.md",
     "tpu-recipes-v0.1.2", "mixtral_8x22b_dropped", "mixtral-8x22b", 256, 1,
     {"per_device_batch_size": 8, "max_target_length": 4096, "ici_fsdp_parallelism": 64, "ici_expert_parallelism": 4,
      **OFFLOAD_QKV_O, "attention": "flash", "megablox": False, "sparse_matmul": False, "capacity_factor": 1.25,
      "dtype": "bfloat16", "weight_dtype": "bfloat16", "allow_split_physical_axes": True,
      "custom_mesh": "hybrid_ring_64x4"},
     "completed step: 9, seconds: 24.706, TFLOP/s/device: 332.463, Tokens/s/device: 1326.307, total_weights: 8388608, "
     "loss: 0.045"),
    ("mistral-7b-8", "tpu-recipes-trillium-models", "training/trillium/Mistral-7B-MaxText/README.md",
     "tpu-recipes-v0.1.2", "mistral_7b", "mistral-7b", 8, 1,
     {"per_device_batch_size": 6, "ici_fsdp_parallelism": -1, **OFFLOAD_QKV_O, "max_target_length": 8192,
      "attention": "flash"},
     "completed step: 6, seconds: 6.320, TFLOP/s/device: 431.981, Tokens/s/device: 7776.813, total_weights: 393216, "
     "loss: 7.378"),
    ("gpt3-175b-256", "tpu-recipes-trillium-models", "training/trillium/GPT3-175B-MaxText/bf16/README.md",
     "tpu-recipes-v0.1.2", "gpt_3_175b_bf16", "gpt3-175b", 256, 1,
     {"per_device_batch_size": 3, "ici_fsdp_parallelism": -1, "remat_policy": "full", "attention": "flash"},
     "completed step: 15, seconds: 17.182, TFLOP/s/device: 384.891, Tokens/s/device: 357.580, total_weights: "
     "1572864, loss: 388.622"),
]

ASSUMED = [
    "the run is the README's: its MaxText tag, its workload (the tuning_params shown, as MaxText's "
    "benchmarks/maxtext_trillium_model_configs.py defines them at that tag) and its device type and slice count",
    "the model is MaxText's configs/models/<model_name>.yml (read from model_name; run.yaml states none)",
    "parallelism the workload does not set comes from base.yml (ici_fsdp_parallelism -1, dcn_data_parallelism -1)",
    "the workload's XLA flags (collective fusion, host offload, VMEM limits) are not read",
]

# Rows whose README does not name a tpu-recipes tag: case stem -> (how the README pins MaxText, its own assumed lines,
# which replace the generic capacity_factor line).
ROW_NOTES: dict[str, tuple[str, list[str]]] = {
    "mixtral-8x22b-256": (
        "'Test Env: jaxlib=0.4.35, libtpu-nightly=20241119, maxtext@261a8be0fc5e909ef9da0521df62549e650ebb79', "
        "--libtpu_version=20241119",
        ["the README's MaxText commit 261a8be0 (2024-11-21) does not define mixtral_8x22b_dropped: MaxText added it in "
         "449b4fe52a781e8f9adfa43550bed36d2e9dbd99 ('Add 8x22b config to benchmark', 2025-02-12, the day the README was "
         "committed) and its tuning_params are the same there and at every tpu-recipes tag v0.1.0 to v0.1.5; the case "
         "takes tpu-recipes-v0.1.2, as its table's neighbours do; the log's total_weights 8,388,608 = "
         "per_device_batch_size 8 x 256 chips x max_target_length 4096 agrees",
         "allow_split_physical_axes and custom_mesh hybrid_ring_64x4 (how the 64 x 4 mesh is laid on the v6e-256 torus) "
         "are kept as the workload sets them; ASAP reads neither and prices the fsdp 64 x expert 4 mesh on its own "
         "link model",
         "capacity_factor 1.25 with megablox and sparse_matmul off: MaxText's dense MoE path with token dropping "
         "(capacity-sized expert buffers, one-hot dispatch / combine), which ASAP reads from these three settings",
         "left out of mesh.yml: the splash-attention block sizes (sa_block_q, sa_block_q_dkv, sa_block_q_dq 2048), "
         "gcs_metrics, use_iota_embed, dataset, checkpointing, profiler and tokenizer settings"]),
}


def logged_measurement(readme: str, figures: dict[str, float]) -> list[dict[str, Any]]:
    """expected.yaml's ``measured``: the README's logged step, tokens/s and TFLOP/s per device (one device a chip
    on v5e / v5p / v6e), with the line they come from."""
    return [{"step_time_ms": round(1000.0 * figures["seconds"], 3),
             "tokens_per_second_per_chip": figures["Tokens/s/device"],
             "tflops_per_chip": figures["TFLOP/s/device"],
             "source": f"{readme} log line: seconds {figures['seconds']}, TFLOP/s/device "
                       f"{figures['TFLOP/s/device']}, Tokens/s/device {figures['Tokens/s/device']}"}]


def _log(line: str) -> dict[str, float]:
    """The log line's figures: seconds, TFLOP/s/device, Tokens/s/device, total_weights."""
    fields = dict(part.strip().split(": ", 1) for part in line.split(",") if ": " in part)
    return {k: float(fields[k]) for k in ("seconds", "TFLOP/s/device", "Tokens/s/device", "total_weights")}


def _mesh_yml(tag: str, work: str, model: str, params: dict[str, Any]) -> str:
    header = (f"# {RECIPES} @ {RECIPES_COMMIT}: workload {work} of MaxText {tag} "
              f"(benchmarks/maxtext_trillium_model_configs.py @ {MAXTEXT_TAGS[tag][:10]}): its tuning_params that "
              f"change a step's cost, as overrides on base.yml (scripts/eval_cases_tpu_recipes_trillium.py)\n")
    return header + mbridge_cases.dump({"model_name": model, **params})


def write_case(root: Path, row: tuple[str, str, str, str, str, str, int, int, dict[str, Any], str]) -> str:
    """Write one case folder; returns its id."""
    stem, table, readme, tag, work, model, chips, slices, params, line = row
    figures = _log(line)
    cid = f"tpu-recipes-v6e-{stem}"
    folder = root / cid
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mesh.yml").write_text(_mesh_yml(tag, work, model, params))
    device = f"v6e-{chips // slices}"
    run = {"id": cid, "name": f"MaxText {model} on {slices}x {device} ({chips} chips), tpu-recipes workload {work}",
           "description": f"Google's tpu-recipes Trillium recipe {readme}: MaxText {tag}, workload {work}, with the "
                          f"step its README logs. No profile; run.yaml names no model or batch (both come from the "
                          f"workload).",
           "framework": "maxtext", "chip": "tpu-v6e", "num_chips": chips, "num_slices": slices,
           "tags": ["published", "config-only", table], "config": "mesh.yml", "profile": []}
    mbridge_cases.write(folder, "run.yaml", run)
    from bot.configs.detect import load_config

    mesh = load_config(folder / "mesh.yml").mesh(chips, slices).normalized().model_dump(exclude_defaults=True)
    pin, notes = ROW_NOTES.get(stem, (f"'use the MaxText {tag} tag to run this recipe'", None))
    assumed = list(ASSUMED) if notes is None else [*ASSUMED, *notes]
    if "capacity_factor" in params and notes is None:
        assumed.append("capacity_factor 1.25 with megablox and sparse_matmul off: MaxText's dense MoE path with token "
                       "dropping (capacity-sized expert buffers, one-hot dispatch / combine), which ASAP reads from "
                       "these three settings")
    expected = {
        "schema_version": 1, "kind": "config_only",
        "source": f"{RECIPES} {readme} @ {RECIPES_COMMIT} (log line and workload {work} of MaxText {tag})",
        "url": f"https://github.com/{RECIPES}/blob/{RECIPES_FULL}/{readme}",
        "table": table, "row": f"{work} on {slices}x {device}",
        "stated": [f"{readme}: {pin}, --device_type={device} "
                   f"--num_slices={slices} --model_name={work}",
                   f"{readme} log: {line}",
                   f"MaxText {tag} ({MAXTEXT_TAGS[tag]}) benchmarks/maxtext_trillium_model_configs.py {work}: "
                   + ", ".join(f"{k}={v}" for k, v in params.items())],
        "assumed": assumed,
        "adopted_mesh": mesh,
        "measured": logged_measurement(readme, figures),
    }
    mbridge_cases.write(folder, "expected.yaml", expected)
    return cid


def main(argv: list[str]) -> int:
    return mbridge_cases.run(argv, lambda root: [write_case(root, row) for row in ROWS])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
