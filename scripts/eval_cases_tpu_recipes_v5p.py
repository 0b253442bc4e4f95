"""Write Google's TPU v5p MaxText mixture-of-experts recipes, with the step each README logged, into the eval corpus.

Run: ``.venv/bin/python scripts/eval_cases_tpu_recipes_v5p.py [examples/eval]`` (writes the case folders named below
in place; nothing else is touched).

Why: the corpus priced MaxText MoE on TPU in one table only (Trillium's Mixtral rows and Ironwood's summary), so a
miss there could not be told from a miss on that chip. AI-Hypercomputer/tpu-recipes (Apache-2.0) publishes v5p recipes
the same way as the Trillium ones (``scripts/eval_cases_tpu_recipes_trillium.py``, whose helpers this script imports):
per README, the MaxText commit or tag it runs, the workload in ``benchmarks/maxtext_v5p_model_configs.py`` there, and
a log line ``completed step: N, seconds: S, TFLOP/s/device: F, Tokens/s/device: T, total_weights: W``. Three of them
are MoE and log a step: DeepSeek-V3 671B on v5p-1024, Llama 4 Maverick (17B x 128 experts) on v5p-256, Llama 4 Scout
(17B x 16 experts) on the v5p size its log's total_weights gives (v5p-1024; the README offers 256 / 512 / 1024).

Each case's ``mesh.yml`` is the workload's tuning parameters that change what a step costs (batch, parallelism,
remat and its per-tensor choices, sequence, dtypes, MoE routing), as MaxText's overrides on base.yml; data, profiler,
checkpointing, tokenizer and kernel tile sizes (splash-attention blocks, megablox tiles) are left out, each case
saying which. ``total_weights`` (tokens in the step) equals per_device_batch_size x chips x max_target_length in every
row. v5p sizes count TensorCores: v5p-N is N / 2 chips. Left out: Mixtral 8x7B on v5p (training/v5p/Mixtral-8X7B-
Maxtext: a shell script on an unpinned MaxText, no logged step); the dense v5p recipes (GPT-3 175B, Llama 3.1 405B)
are not MoE.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/mbridge_cases.py, the Trillium script
import eval_cases_tpu_recipes_trillium as trillium  # noqa: E402
import mbridge_cases  # noqa: E402

RECIPES, RECIPES_FULL, RECIPES_COMMIT = trillium.RECIPES, trillium.RECIPES_FULL, trillium.RECIPES_COMMIT
MAXTEXT = "AI-Hypercomputer/maxtext"
CONFIGS = "benchmarks/maxtext_v5p_model_configs.py"
TABLE = "tpu-recipes-v5p-models"
DS_COMMIT = "3eb77db3c94580f56f1b738f8d254b03bd205e35"  # DeepSeek3 and Scout READMEs: git checkout <this>
V013_COMMIT = "9ca35d7e60b71303b9f6fa885447d32e8a612c47"  # the Maverick README's link for tpu-recipes-v0.1.3

SPLASH_BLOCKS = "the splash-attention block sizes (sa_block_q, sa_block_kv, sa_block_kv_compute, sa_block_q_dkv, " \
                "sa_block_kv_dkv, sa_block_kv_dkv_compute, sa_block_q_dq, sa_block_kv_dq, all 2048)"
HOUSEKEEPING = "dataset_type synthetic, reuse_example_batch, enable_checkpointing, profiler settings"
CUSTOM_OFFLOAD = {"remat_policy": "custom", "decoder_layer_input": "offload"}
QKV_O = {"out_proj": "offload", "query_proj": "offload", "key_proj": "offload", "value_proj": "offload"}
LLAMA4_XLA = ("MOE_VMEM_LIMIT_FLAG, CF_FOR_ALL_GATHER, DATA_PARALLEL_OVERLAP, LAYOUT_FOR_ALL_REDUCE_SCATTER, "
              "HOST_OFFLOAD_FLAGS")
NO_ATTENTION_KEY = ("the workload sets no attention: base.yml's 'autoselected', which MaxText's attention_op.py runs "
                    "as the TPU flash (splash) kernel in training at sequences of 128 or more; mesh.yml leaves it "
                    "unset as the workload does")


# One row: case stem, README path, MaxText version label, its commit, how the README pins it and launches the
# workload (quoted), workload name, model_name, chips, slices, tuning params kept, what is left out, the workload's
# XLA flags, assumptions of this row only, log line.
ROWS: list[dict[str, Any]] = [
    {"stem": "deepseek3-671b-512", "readme": "training/v5p/DeepSeek3-671B-MaxText/README.md",
     "maxtext": DS_COMMIT[:8], "commit": DS_COMMIT,
     "launch": f"'Instructions for training DeepSeek-671B-MaxText on TPU v5p-1024', 'git checkout {DS_COMMIT}', "
               "'export DEVICE_TYPE=${DEVICE_TYPE} # v5p-1024 for 512 v5p chips', --num_slices=1 "
               "--model_name=\"deepseek3_671b_v5p_1024\"",
     "work": "deepseek3_671b_v5p_1024", "model": "deepseek3-671b", "chips": 512, "slices": 1,
     "params": {"per_device_batch_size": 6, "max_target_length": 8192, "ici_fsdp_parallelism": -1,
                "ici_tensor_parallelism": 1, "dtype": "bfloat16", "weight_dtype": "float32", "megablox": True,
                "sparse_matmul": True, "scan_layers": True, "remat_policy": "custom",
                "decoder_layer_input": "offload", "out_proj": "offload"},
     "left_out": [SPLASH_BLOCKS, "the megablox tile sizes (tile_batch_seq 512, tile_embed_dim 1024, tile_mlp_dim "
                  "1024), sa_use_fused_bwd_kernel False and use_custom_sort_vjp True (kernel implementations of the "
                  "same arithmetic)", HOUSEKEEPING],
     "xla": "ENABLE_SPARSECORE_OFFLOADING_FOR_RS_AG_AR, HOST_OFFLOAD_FLAGS, LAYOUT_FOR_ALL_REDUCE_SCATTER, "
            "DATA_PARALLEL_OVERLAP, MOE_VMEM_LIMIT_FLAG, DISABLE_MEGACORE_FUSION_ALLOW_AGS, "
            "ENABLE_ASYNC_COLLECTIVE_PERMUTE (SparseCore offload of reduce-scatter / all-gather / all-reduce among them)",
     "notes": [NO_ATTENTION_KEY],
     "log": "completed step: 11, seconds: 90.668, TFLOP/s/device: 152.415, Tokens/s/device: 542.108, total_weights: "
            "25165824, loss: 10.989"},
    {"stem": "llama4-17b-128e-128", "readme": "training/v5p/Llama4-Maverick-17B-128E-Maxtext/README.md",
     "maxtext": "tpu-recipes-v0.1.3", "commit": V013_COMMIT,
     "launch": "'Use the MaxText tpu-recipes-v0.1.3 tag to run this recipe', 'Workload details can be found in "
               f"MaxText@tpu-recipes-v0.1.3' (linked at {V013_COMMIT}), --device_type=v5p-256 --num_slices=1 "
               "--model_name=\"llama4_maverick_dropless_v5p_256\"",
     "work": "llama4_maverick_dropless_v5p_256", "model": "llama4-17b-128e", "chips": 128, "slices": 1,
     "params": {"per_device_batch_size": 4, "max_target_length": 8192, "ici_fsdp_parallelism": 32,
                "ici_tensor_parallelism": 4, "dtype": "bfloat16", "weight_dtype": "float32", "megablox": True,
                "sparse_matmul": True, **CUSTOM_OFFLOAD, **QKV_O},
     "left_out": [SPLASH_BLOCKS, f"{HOUSEKEEPING}, tokenizer_path, opt_type adamw (base.yml's default)"],
     "xla": LLAMA4_XLA,
     "notes": ["the tag tpu-recipes-v0.1.3 is commit f4db8e4cc9463151bbfbc04baa5adfde64d6f5ec; the README links the "
               f"workload at {V013_COMMIT[:8]} (an ancestor of it), and the workload is the same at both",
               NO_ATTENTION_KEY],
     "log": "completed step: 12, seconds: 24.792, TFLOP/s/device: 160.005, Tokens/s/device: 1321.725, total_weights: "
            "4194304, loss: 10.034"},
    {"stem": "llama4-17b-16e-512", "readme": "training/v5p/Llama4-Scout-17B-16E-Maxtext/README.md",
     "maxtext": DS_COMMIT[:8], "commit": DS_COMMIT,
     "launch": f"'on TPU v5p-256, v5p-512, and v5p-1024', 'git checkout {DS_COMMIT}', 'export "
               "DEVICE_TYPE=${DEVICE_TYPE} # v5p-256, v5p-512, or v5p-1024', --num_slices=1 "
               "--model_name=\"llama4_scout_dropless_v5p_256\"",
     "work": "llama4_scout_dropless_v5p_256", "model": "llama4-17b-16e", "chips": 512, "slices": 1,
     "params": {"per_device_batch_size": 8, "max_target_length": 8192, "ici_fsdp_parallelism": -1,
                "dtype": "bfloat16", "weight_dtype": "float32", "megablox": True, "sparse_matmul": True,
                **CUSTOM_OFFLOAD},
     "left_out": [SPLASH_BLOCKS, f"{HOUSEKEEPING}, tokenizer_path, opt_type adamw (base.yml's default)"],
     "xla": LLAMA4_XLA,
     "notes": ["the README offers v5p-256, v5p-512 or v5p-1024 and does not say which one logged the line; its "
               "total_weights 33,554,432 = per_device_batch_size 8 x 512 chips x 8192 (and Tokens/s/device x seconds "
               "= 65,534, 8 x 8192 per chip) puts it on v5p-1024, 512 chips, despite the workload's _v5p_256 name "
               "(ici_fsdp_parallelism -1 fits any size)",
               NO_ATTENTION_KEY],
     "log": "completed step: 11, seconds: 31.652, TFLOP/s/device: 225.491, Tokens/s/device: 2070.487, total_weights: "
            "33554432, loss: 11.825"},
]


def configs_url(commit: str) -> str:
    return f"https://github.com/{MAXTEXT}/blob/{commit}/{CONFIGS}"


def _mesh_yml(row: dict[str, Any]) -> str:
    header = (f"# {RECIPES} @ {RECIPES_COMMIT}: workload {row['work']} of MaxText {row['maxtext']} "
              f"({CONFIGS} @ {row['commit'][:10]}): its tuning_params that change a step's cost, as overrides on "
              f"base.yml (scripts/eval_cases_tpu_recipes_v5p.py)\n")
    return header + mbridge_cases.dump({"model_name": row["model"], **row["params"]})


def write_case(root: Path, row: dict[str, Any]) -> str:
    """Write one case folder; returns its id."""
    readme, work, model, chips, slices, params = (row[k] for k in ("readme", "work", "model", "chips", "slices",
                                                                   "params"))
    figures = trillium._log(row["log"])
    tokens = params["per_device_batch_size"] * chips * params["max_target_length"]
    assert tokens == figures["total_weights"], (row["stem"], tokens, figures["total_weights"])
    cid = f"tpu-recipes-v5p-{row['stem']}"
    folder = root / cid
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mesh.yml").write_text(_mesh_yml(row))
    device = f"v5p-{2 * chips // slices}"
    run = {"id": cid, "name": f"MaxText {model} on {slices}x {device} ({chips} chips), tpu-recipes workload {work}",
           "description": f"Google's tpu-recipes v5p recipe {readme}: MaxText {row['maxtext']}, workload {work}, with "
                          f"the step its README logs. No profile; run.yaml names no model or batch (both come from "
                          f"the workload).",
           "framework": "maxtext", "chip": "tpu-v5p", "num_chips": chips, "num_slices": slices,
           "tags": ["published", "config-only", TABLE], "config": "mesh.yml", "profile": []}
    mbridge_cases.write(folder, "run.yaml", run)
    from bot.configs.detect import load_config

    mesh = load_config(folder / "mesh.yml").mesh(chips, slices).normalized().model_dump(exclude_defaults=True)
    assumed = [
        f"the run is the README's: MaxText {row['maxtext']} ({row['commit']}), its workload {work} (the "
        f"tuning_params shown, as MaxText's {CONFIGS} defines them there: {configs_url(row['commit'])}), on "
        f"{slices}x {device} = {chips} chips (v5p-N counts TensorCores, two per chip)",
        f"the log's total_weights {int(figures['total_weights']):,} = per_device_batch_size "
        f"{params['per_device_batch_size']} x {chips} chips x max_target_length {params['max_target_length']}",
        *trillium.ASSUMED[1:3],  # the model file from model_name; base.yml's parallelism defaults
        f"ASAP's bundled models/{model}.yml (MaxText e591f30c) has the dimensions of the file at {row['commit'][:8]}; "
        "only YAML boolean spelling" + (" and vision-encoder keys (unused in text training)" if "llama4" in model
                                        else "") + " differ",
        f"the workload's XLA flags are not read: {row['xla']}",
        "dropless routing as the workload sets it (megablox and sparse_matmul on, base.yml's capacity_factor -1)",
        "left out of mesh.yml: " + "; ".join(row["left_out"]),
        *row["notes"],
    ]
    expected = {
        "schema_version": 1, "kind": "config_only",
        "source": f"{RECIPES} {readme} @ {RECIPES_COMMIT} (log line and workload {work} of MaxText {row['maxtext']})",
        "url": f"https://github.com/{RECIPES}/blob/{RECIPES_FULL}/{readme}",
        "table": TABLE, "row": f"{work} on {slices}x {device}",
        "stated": [f"{readme}: {row['launch']}",
                   f"{readme} log: {row['log']}",
                   f"MaxText {row['maxtext']} ({row['commit']}) {CONFIGS} {work}: "
                   + ", ".join(f"{k}={v}" for k, v in params.items())],
        "assumed": assumed,
        "adopted_mesh": mesh,
        "measured": trillium.logged_measurement(readme, figures),
    }
    mbridge_cases.write(folder, "expected.yaml", expected)
    return cid


def main(argv: list[str]) -> int:
    return mbridge_cases.run(argv, lambda root: [write_case(root, row) for row in ROWS])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
