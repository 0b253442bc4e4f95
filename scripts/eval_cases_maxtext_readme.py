"""Write the MaxText TPU README cases of the eval corpus with the configuration their figures were measured on.

Run: ``.venv/bin/python scripts/eval_cases_maxtext_readme.py [examples/eval]`` (rewrites the ``maxtext-v4-*``,
``maxtext-v5e-*`` and ``maxtext-v5p-*`` case folders in place; measured figures are kept as they are).

Why: the three READMEs' tables (AI-Hypercomputer/maxtext ``configs/{v4,v5e,v5p}/README.md``) have not changed since
2023, while the launch scripts beside them and ``base.yml`` were retuned many times since (v5p 512b ran at
``ici_tensor_parallelism=16``, later 8; v5p 32b / 64b / 128b / 256b at ``per_device_batch_size`` 8 / 4 / 2 / 2, later 6 /
3 / 1 / 1; v4 22b / 52b at 16 / 10, later 13 / 7 with ``num_vocab_tiling``; v5e 128b at ``remat_policy=full``, later
``qkv_proj_offloaded``), and ``base.yml`` of 2023 built another model for the same ``global_parameter_scale``
(``head_dim: 256``, ``mlp_activations: ["relu"]``, ``vocab_size: 32_768``, ``logits_via_embedding: True``,
``base_emb_dim: 2560``, ``base_num_heads: 8``, ``base_mlp_dim: 8192``, ``base_num_decoder_layers: 16``). The figures
belong to the scripts committed with them:

* v5p: README and scripts created together in 76bd53b0f (2023-12-15);
* v5e: the table in the top-level README of e47fa1b5d (2023-10-31) with ``MaxText/configs/largest_job/*.sh`` of
  that commit (moved unchanged to ``configs/v5e`` in 76bd53b0f);
* v4: the table in the top-level README of March 2023 (cf466fafe 22B, c0e67ec1a 52B) with its ``*xv4-*.sh``
  scripts; 76bd53b0f's ``configs/v4/22b.sh`` / ``52b.sh`` hold the same settings with explicit dimensions.

Model dimensions follow MaxText's ``get_individual_scales`` of 2023 (``pyconfig.py`` @ 76bd53b0f).
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import yaml

REPO = "AI-Hypercomputer/maxtext"
DEC_2023 = "76bd53b0f44caf989c88189afadeb1062f9254f0"
OCT_2023 = "e47fa1b5d377ee1043e663f1414024f4d0f12df0"
COMMITS = {
    "v5p": (DEC_2023, "MaxText/configs/v5p/README.md", "MaxText/configs/v5p/{m}.sh"),
    "v5e": (OCT_2023, "README.md", "MaxText/configs/largest_job/{m}.sh"),
    "v4": (DEC_2023, "MaxText/configs/v4/README.md", "MaxText/configs/v4/{m}.sh"),
}
# per model: per_device_batch_size, remat_policy, ici_fsdp, ici_tensor (None: -1, every chip of the slice)
SCRIPTS: dict[str, dict[str, tuple[int, str, int | None, int]]] = {
    "v5p": {"32b": (8, "minimal", None, 4), "64b": (4, "minimal", None, 4), "128b": (2, "minimal", None, 8),
            "256b": (2, "minimal", None, 8), "512b": (2, "full", None, 16), "1024b": (2, "full", None, 16)},
    "v5e": {"16b": (6, "full", None, 1), "32b": (4, "full", None, 1), "64b": (2, "full", None, 1),
            "128b": (1, "full", 16, 16)},
    "v4": {"22b": (16, "full", 64, 1), "52b": (10, "full", 192, 1)},
}
# assumptions of the 2026-configuration cases (or of an earlier run of this script) that this script rewrites
STALE_ASSUMPTIONS = ("model dims", "the script at this commit", "the README's figures", "remat_policy qkv_proj_offloaded")
# v4's scripts set the dimensions explicitly (base_emb_dim, base_num_heads, base_mlp_dim, base_num_decoder_layers)
V4_DIMS = {"22b": (6144, 24, 24576, 48), "52b": (12288, 32, 49152, 32)}


def dims_2023(scale: int) -> tuple[int, int, int, int]:
    """(d_model, heads, d_ff, layers) for ``global_parameter_scale`` by MaxText's 2023 ``get_individual_scales``."""
    base, rem = divmod(int(math.log2(scale)), 3)
    heads_scale = base + int(rem > 0)
    emb_scale = base + int(rem > 1)
    return 2560 * 2**emb_scale, 8 * 2**heads_scale, 8192 * 2**heads_scale, 16 * 2**base


def model_2023(gen: str, size: str) -> dict[str, object]:
    d, h, ff, layers = V4_DIMS[size] if gen == "v4" else dims_2023(int(size[:-1]))
    return {"name": f"maxtext-{size}", "layers": layers, "d_model": d, "d_ff": ff, "heads": h, "kv_heads": h,
            "head_dim": 256, "vocab": 32768, "mlp_matrices": 2, "tied_embeddings": True}


def _mesh_yml(gen: str, size: str, script: str, commit: str) -> str:
    pdbs, remat, fsdp, tensor = SCRIPTS[gen][size]
    return (f"# {script} ({REPO} @ {commit[:10]}): the launch overrides on base.yml of that commit, the configuration\n"
            "# the README's figures were measured on. Parallelism not set in the script comes from base.yml:\n"
            "# ici_fsdp_parallelism: -1, dcn_data_parallelism: -1.\n"
            f"per_device_batch_size: {pdbs}\nmax_target_length: 2048\nremat_policy: {remat}\n"
            f"ici_data_parallelism: 1\nici_fsdp_parallelism: {fsdp if fsdp else -1}\n"
            f"ici_tensor_parallelism: {tensor}\nici_sequence_parallelism: 1\ndcn_data_parallelism: -1\n")


def rewrite(folder: Path) -> None:
    """Rewrite one case folder's run.yaml, mesh.yml and expected.yaml to the 2023 configuration."""
    gen, size = folder.name.split("-")[1:3]
    commit, readme, script_t = COMMITS[gen]
    script = script_t.format(m=size)
    pdbs, remat, fsdp, tensor = SCRIPTS[gen][size]
    run = yaml.safe_load((folder / "run.yaml").read_text())
    chips, slices = int(run["num_chips"]), int(run["num_slices"])
    model = model_2023(gen, size)
    run["model"] = model
    run["training"].update(global_batch=pdbs * chips, remat=remat)
    run["description"] = re.sub(r"configuration \S+ on", f"configuration {script} @ {commit[:10]} on", run["description"])
    (folder / "run.yaml").write_text(yaml.safe_dump(run, sort_keys=False, width=120))
    (folder / "mesh.yml").write_text(_mesh_yml(gen, size, script, commit))

    exp = yaml.safe_load((folder / "expected.yaml").read_text())
    url = f"https://github.com/{REPO}/blob/{commit}/{readme}"
    exp["url"] = url
    row = exp["row"].split(" ", 1)[1]
    exp["source"] = f"MaxText {readme} @ {commit[:10]}, row '{row}', {size} model; config {script} @ {commit[:10]}"
    for m in exp["measured"]:
        m["source"] = f"{readme} @ {commit[:10]}, {size} table, row {row}"
    figures = exp["stated"][0].split(": ", 1)[1] if exp["stated"] else ""
    per_slice = chips // slices
    exp["stated"] = [
        f"{readme} @ {commit[:10]} ({url}), row '{row}', {size} model: {figures}".rstrip(),
        f"{script} @ {commit[:10]}: per_device_batch_size={pdbs}, max_target_length=2048, remat_policy={remat}, "
        + (f"base_emb_dim={model['d_model']}, base_num_heads={model['heads']}, base_mlp_dim={model['d_ff']}, "
           f"base_num_decoder_layers={model['layers']}" if gen == "v4" else f"global_parameter_scale={size[:-1]}")
        + f", ici_fsdp_parallelism={fsdp or -1}, ici_tensor_parallelism={tensor}",
        f"base.yml @ {commit[:10]}: head_dim 256, vocab_size 32768, mlp_activations ['relu'] (2 MLP matrices), "
        "logits_via_embedding True (tied output layer), dcn_data_parallelism -1",
    ]
    exp["assumed"] = [a for a in exp.get("assumed", []) if not a.startswith(STALE_ASSUMPTIONS)]
    if gen != "v4":
        exp["assumed"].insert(0, f"model dims from global_parameter_scale={size[:-1]} by get_individual_scales of "
                              f"pyconfig.py @ {DEC_2023[:10]}: d_model {model['d_model']}, heads {model['heads']} "
                              f"(kv {model['heads']}), d_ff {model['d_ff']}, layers {model['layers']}")
    exp["assumed"].insert(1 if gen != "v4" else 0,
                          "the README's figures (unchanged since 2023) were measured on the scripts and base.yml "
                          "committed with them, not on the retuned scripts of later commits "
                          "(scripts/eval_cases_maxtext_readme.py gives the history)")
    exp["adopted_mesh"]["ici"] = {"fsdp": per_slice // tensor, **({"tensor": tensor} if tensor > 1 else {})}
    (folder / "expected.yaml").write_text(yaml.safe_dump(exp, sort_keys=False, width=120))


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else "examples/eval")
    folders = sorted(p for p in root.glob("maxtext-v*-*b-*x*") if p.name.split("-")[1] in SCRIPTS)
    for folder in folders:
        rewrite(folder)
    print(f"rewrote {len(folders)} cases under {root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
