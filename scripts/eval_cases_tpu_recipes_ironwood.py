"""Write Google's Ironwood (TPU7x) MaxText recipes, with the figures their summary table publishes, into the eval corpus.

Run: ``.venv/bin/python scripts/eval_cases_tpu_recipes_ironwood.py TPU_RECIPES_CHECKOUT [examples/eval]`` with a
checkout of AI-Hypercomputer/tpu-recipes at the commit below (writes the case folders named below in place).

Why: TPU7x was in the hardware catalog with no measured step to price against, and MaxText counts two JAX devices
per TPU7x chip (``per_device_batch_size`` and the ``ici_*`` sizes count TensorCores), which ASAP read as one. The
tpu-recipes ``training/ironwood/README.md`` table gives, per recipe, chips, global batch, sequence length,
precision, step time, TFLOP/s per chip and tokens/s per chip: 21 language-model rows (DeepSeek-V3, Gemma 4,
GPT-OSS 120B, Llama 3.1 70B / 405B, Qwen3 235B-A22B; bf16 and fp8_full), one table. Wan 2.1 (video diffusion)
is left out: ASAP prices transformer language models.

Each case's config is the recipe's own launcher, unmodified: ``run_recipe.sh``, an ``xpk workload create ...
--command "... python3 -m MaxText.train MaxText/configs/base.yml ${MAXTEXT_ARGS}"`` whose ``MAXTEXT_ARGS`` holds
the MaxText overrides (its ``run_name=${WORKLOAD_NAME}`` is built with ``$(date ...)`` and stays unknown). The
script checks that ASAP reads each launcher to the table's global batch (per-device batch x 2 devices x chips).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/mbridge_cases.py
import mbridge_cases  # noqa: E402

RECIPES = "AI-Hypercomputer/tpu-recipes"
RECIPES_FULL = "c8cfe2f689081d36701a101cd73a70965d80926b"  # the tpu-recipes snapshot read (2026-08-07)
TABLE_FILE = "training/ironwood/README.md"
TABLE = "tpu-recipes-ironwood"
TOPOLOGY_CHIPS = {"4x4x4": 64, "4x4x8": 128, "4x8x8": 256}

# (table row: model id, chips, precision, sequence length) -> the recipe folder whose run_recipe.sh ran it
ROWS: dict[tuple[str, int, str, int], str] = {
    ("deepseek-v3", 128, "bf16", 4096): "deepseek3-671b/4k-bf16-tpu7x-4x4x8/xpk",
    ("deepseek-v3", 128, "fp8_full", 4096): "deepseek3-671b/4k-fp8-tpu7x-4x4x8/xpk",
    ("deepseek-v3", 256, "bf16", 4096): "deepseek3-671b/4k-bf16-tpu7x-4x8x8/xpk",
    ("deepseek-v3", 256, "fp8_full", 4096): "deepseek3-671b/4k-fp8-tpu7x-4x8x8/xpk",
    ("gemma4-2b", 64, "bf16", 8192): "gemma4-2b/8k-bf16-tpu7x-4x4x4/xpk",
    ("gemma4-4b", 64, "bf16", 8192): "gemma4-4b/8k-bf16-tpu7x-4x4x4/xpk",
    ("gemma4-26b", 64, "bf16", 4096): "gemma4-26b/4k-bf16-tpu7x-4x4x4/xpk",
    ("gemma4-26b", 256, "bf16", 4096): "gemma4-26b/4k-bf16-tpu7x-4x8x8/xpk",
    ("gemma4-31b", 64, "bf16", 8192): "gemma4-31b/8k-bf16-tpu7x-4x4x4/xpk",
    ("gpt-oss-120b", 64, "bf16", 8192): "gpt-oss-120b/8k-bf16-tpu7x-4x4x4/xpk",
    ("gpt-oss-120b", 256, "bf16", 8192): "gpt-oss-120b/8k-bf16-tpu7x-4x8x8/xpk",
    ("llama3.1-405b", 256, "bf16", 8192): "llama3.1-405b/8k-bf16-tpu7x-4x8x8",
    ("llama3.1-405b", 256, "fp8_full", 8192): "llama3.1-405b/8k-fp8-tpu7x-4x8x8",
    ("llama3.1-70b", 64, "bf16", 8192): "llama3.1-70b/8k-bf16-tpu7x-4x4x4/xpk",
    ("llama3.1-70b", 64, "fp8_full", 8192): "llama3.1-70b/8k-fp8-tpu7x-4x4x4/xpk",
    ("llama3.1-70b", 256, "bf16", 8192): "llama3.1-70b/8k-bf16-tpu7x-4x8x8/xpk",
    ("llama3.1-70b", 256, "fp8_full", 8192): "llama3.1-70b/8k-fp8-tpu7x-4x8x8",
    ("llama3.1-70b", 256, "bf16", 131072): "llama3.1-70b/128k-bf16-tpu7x-4x8x8/xpk",
    ("llama3.1-70b", 256, "fp8_full", 131072): "llama3.1-70b/128k-fp8-tpu7x-4x8x8",
    ("qwen3-235b-a22b", 256, "bf16", 4096): "qwen3-235b-a22b/4k-bf16-tpu7x-4x8x8/xpk",
    ("qwen3-235b-a22b", 256, "fp8_full", 4096): "qwen3-235b-a22b/4k-fp8-tpu7x-4x8x8",
}

ASSUMED = [
    "the row was measured with the recipe's run_recipe.sh at this commit (the table and the recipes are committed "
    "together; the table names no recipe folder, matched here by model, chips, precision and sequence length)",
    "the model is MaxText's models/<model_name>.yml (ASAP's bundled copy); run.yaml states none",
    "MaxText settings the launcher does not override take base.yml's defaults (the launcher's base.yml is not in the "
    "case folder)",
    "the launcher's XLA flags (scoped VMEM, SparseCore collective offload) and kernel tile sizes are not read",
]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def table_rows(readme: str) -> list[dict[str, str]]:
    """The summary table's language-model rows as column -> cell."""
    lines = [ln for ln in readme.splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    header[0] = "Model ID"
    rows = [dict(zip(header, (c.strip() for c in ln.strip("|").split("|")), strict=True)) for ln in lines[2:]]
    return [r for r in rows if r["Model ID"] != "wan2.1-14b"]


def _num(cell: str) -> float:
    return float(cell.replace(",", ""))


def write_case(root: Path, repo: Path, row: dict[str, str]) -> str:
    """One case folder from one table row; returns its id."""
    chips, seq, prec = int(row["Number of chips"]), int(row["Sequence length"]), row["Precision"]
    recipe = ROWS[(row["Model ID"], chips, prec, seq)]
    topology = recipe.split("tpu7x-")[1].split("/")[0]
    assert TOPOLOGY_CHIPS[topology] == chips, (recipe, chips)
    path = f"training/ironwood/{recipe}/run_recipe.sh"
    cid = f"tpu-recipes-tpu7x-{row['Model ID']}-{chips}-{seq // 1024}k-{prec.replace('_full', '')}"
    folder = root / cid
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run_recipe.sh").write_text(_git(repo, "show", f"{RECIPES_FULL}:{path}"))
    run = {"id": cid, "name": f"MaxText {row['Model ID']} on tpu7x-{topology} ({chips} chips), {prec}, {seq} tokens",
           "description": f"Google's tpu-recipes Ironwood recipe {path} (its launcher, unmodified) with the figures of "
                          f"the {TABLE_FILE} summary table. No profile; run.yaml names no model or batch (both come "
                          "from the launcher's MaxText arguments).",
           "framework": "maxtext", "chip": "tpu7x", "num_chips": chips, "num_slices": 1,
           "tags": ["published", "config-only", TABLE], "config": "run_recipe.sh", "profile": []}
    mbridge_cases.write(folder, "run.yaml", run)
    mesh, batch = _read_back(root, cid)
    assert batch == int(row["GBS"]), (cid, batch, row["GBS"])  # per_device_batch_size x 2 devices x chips
    cells = " | ".join(row.values())
    expected: dict[str, Any] = {
        "schema_version": 1, "kind": "config_only",
        "source": f"{RECIPES} {TABLE_FILE} @ {RECIPES_FULL[:7]} (summary table) and {path}",
        "url": f"https://github.com/{RECIPES}/blob/{RECIPES_FULL}/{TABLE_FILE}",
        "table": TABLE, "row": f"{row['Model ID']} {chips} chips {prec} {seq}",
        "stated": [f"{TABLE_FILE} row: | {cells} |",
                   "columns: Model ID | Number of chips | GBS | Sequence length | Precision | Step time (seconds) | "
                   "TFLOPs/sec/chip | Tokens/sec/chip",
                   f"{path}: --device-type=tpu7x-{topology} --num-slices=1, MaxText arguments in MAXTEXT_ARGS"],
        "assumed": list(ASSUMED),
        "adopted_mesh": mesh,
        "measured": [{"step_time_ms": round(1000.0 * _num(row["Step time (seconds)"]), 3),
                      "tokens_per_second_per_chip": _num(row["Tokens/sec/chip"]),
                      "tflops_per_chip": _num(row["TFLOPs/sec/chip"]),
                      "source": f"{TABLE_FILE} row {row['Model ID']}, {chips} chips, {prec}: step "
                                f"{row['Step time (seconds)']} s, {row['TFLOPs/sec/chip']} TFLOP/s/chip, "
                                f"{row['Tokens/sec/chip']} tokens/s/chip"}],
    }
    mbridge_cases.write(folder, "expected.yaml", expected)
    return cid


def _read_back(root: Path, cid: str) -> tuple[dict[str, Any], int | None]:
    """The mesh ASAP reads from the written case, and the global batch it reads from the launcher."""
    from bot.configs.detect import load_run_config
    from bot.runs.store import LocalRunStore
    from knowledge.cost_settings import settings_for_run
    from knowledge.cost_shapes import config_global_batch

    run = LocalRunStore(root).get(cid)
    cfg = load_run_config(run)
    mesh = cfg.mesh(run.record.num_chips, run.record.num_slices).normalized().model_dump(exclude_defaults=True)
    return mesh, config_global_batch(run.record, settings_for_run(run))


def main(argv: list[str]) -> int:
    repo = Path(argv[1])
    readme = _git(repo, "show", f"{RECIPES_FULL}:{TABLE_FILE}")
    return mbridge_cases.run(argv[1:], lambda root: [write_case(root, repo, r) for r in table_rows(readme)])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
