"""Ironwood (TPU7x) launchers as Google publishes them: an XPK command built from variables, and two JAX devices
per chip.

Fixtures: AI-Hypercomputer/tpu-recipes @ c8cfe2f, ``training/ironwood/{llama3.1-70b,gpt-oss-120b}/8k-bf16-tpu7x-4x4x4/
xpk/run_recipe.sh`` (tests/data/real/README.md). The figures checked against are the same repository's
``training/ironwood/README.md`` summary table: llama3.1-70b on 64 chips, GBS 256, step 12.20 s; gpt-oss-120b on 64
chips, GBS 1280.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot.configs.checks import startup_problems
from bot.configs.detect import for_run, load_config, load_run_config, parse_config
from bot.configs.edit import apply_mesh, diff_text
from bot.configs.mesh import Mesh, fold_devices, unfold_devices
from bot.errors import ConfigError
from bot.runs.store import LocalRunStore
from knowledge.cost_settings import settings_for_run
from knowledge.cost_shapes import config_global_batch

REAL = Path(__file__).parent / "data" / "real" / "tpu_recipes"
LLAMA = REAL / "ironwood_llama3.1-70b_8k-bf16-tpu7x-4x4x4_run_recipe.sh"
OSS = REAL / "ironwood_gpt-oss-120b_8k-bf16-tpu7x-4x4x4_run_recipe.sh"


def _run(tmp_path: Path, launcher: Path, chip: str = "tpu7x", chips: int = 64):  # type: ignore[no-untyped-def]
    folder = tmp_path / "iw"
    folder.mkdir(parents=True)
    shutil.copy(launcher, folder / "run_recipe.sh")
    (folder / "run.yaml").write_text(f"id: iw\nframework: maxtext\nchip: {chip}\nnum_chips: {chips}\n"
                                     "config: run_recipe.sh\n")
    return LocalRunStore(tmp_path).get("iw")


def test_the_xpk_command_built_from_variables_is_read(tmp_path: Path) -> None:
    # --command="... python3 -m MaxText.train MaxText/configs/base.yml ${MAXTEXT_ARGS}", with run_name=${WORKLOAD_NAME}
    # built from $(date ...): the launch used to be refused ("no training launch found ... commands seen: xpk")
    run = _run(tmp_path, LLAMA)
    cfg = load_run_config(run)
    assert cfg.format == "maxtext" and cfg.nodes == 1  # --num-slices=1
    assert cfg.setting("model_name") == "llama3.1-70b" and cfg.setting("remat_policy") == "custom"
    assert cfg.mesh(64, 1) == Mesh(ici={"fsdp": 64})
    # a setting is placed where MAXTEXT_ARGS="..." writes it, so an edit changes that line
    origin = cfg.origins["per_device_batch_size"]
    line = cfg.text[cfg.text.rfind("\n", 0, origin.start) + 1:cfg.text.find("\n", origin.start)]
    assert cfg.text[origin.start:origin.end] == "2" and line == "per_device_batch_size=2 \\"


def test_per_device_batch_counts_two_devices_per_tpu7x_chip(tmp_path: Path) -> None:
    # the table: 64 chips, per_device_batch_size 2, GBS 256 (MaxText counts each TensorCore as a device)
    run = _run(tmp_path, LLAMA)
    assert config_global_batch(run.record, settings_for_run(run)) == 256
    # on a chip JAX shows once (v5p megacore) the same launcher is 128 sequences
    v5p = _run(tmp_path / "v5p", LLAMA, chip="tpu-v5p")
    assert config_global_batch(v5p.record, settings_for_run(v5p)) == 128


def test_device_sizes_fold_into_chips(tmp_path: Path) -> None:
    # ici_fsdp_parallelism=64 x ici_data_parallelism=2 = 128 devices on 64 chips: read, not refused as 128 != 64
    run = _run(tmp_path, OSS)
    cfg = load_run_config(run)
    assert cfg.mesh(64, 1) == Mesh(ici={"data": 2, "fsdp": 32})
    assert any("64 chips are 128 JAX devices" in n for n in cfg.notes(64, 1))
    assert config_global_batch(run.record, settings_for_run(run)) == 1280  # the table's GBS
    assert not [p for p in startup_problems(cfg, 64, 1) if p.error]
    # the same file on 128 v5p chips means what it says
    plain = load_config(OSS)
    assert plain.mesh(128, 1) == Mesh(ici={"data": 2, "fsdp": 64})


def test_a_size_that_does_not_fit_names_chips_and_devices(tmp_path: Path) -> None:
    run = _run(tmp_path, OSS, chips=128)
    with pytest.raises(ConfigError) as err:
        load_run_config(run).mesh(128, 1)
    assert "128 chips = 256 devices" in err.value.message
    assert "2 per chip" in (err.value.hint or "")


def test_an_edit_writes_device_sizes_in_the_maxtext_args_line(tmp_path: Path) -> None:
    run = _run(tmp_path, OSS)
    cfg = load_run_config(run)
    new = apply_mesh(cfg, Mesh(ici={"data": 4, "fsdp": 16}))
    diff = diff_text(cfg.text, new, "run_recipe.sh")
    assert "+ici_fsdp_parallelism=32 \\" in diff and "+ici_data_parallelism=4 \\" in diff
    added = [ln for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert len(added) == 2  # the two values, where MAXTEXT_ARGS sets them; nothing else
    again = for_run(parse_config(new, "run_recipe.sh"), run.record)
    assert again.mesh(64, 1) == Mesh(ici={"data": 4, "fsdp": 16})


def test_fold_and_unfold_are_inverse() -> None:
    for chips in (Mesh(ici={"fsdp": 32, "data": 2}), Mesh(ici={"fsdp": 64, "sequence": 4}), Mesh(ici={"tensor": 2}),
                  Mesh(ici={}), Mesh(ici={"fsdp": 8}, dcn={"data": 2})):
        assert fold_devices(unfold_devices(chips, 2), 2).normalized() == chips.normalized()
    # the chip's two devices sit on the innermost axis: context before fsdp (MaxText's mesh_axes order)
    assert fold_devices(Mesh(ici={"fsdp": 64, "sequence": 8}), 2) == Mesh(ici={"fsdp": 64, "sequence": 4})
    with pytest.raises(ConfigError):
        fold_devices(Mesh(ici={"fsdp": 3}), 2)


def test_a_large_vocabulary_recipe_that_ran_is_priced_as_fitting(tmp_path: Path) -> None:
    # gpt-oss-120b: 201,088-token vocabulary, 10 sequences of 8,192 per device (163,840 tokens per chip), no vocab
    # tiling, ran on 192 GiB chips. With the fp32 softmax materialized (6 B per logit) the logits alone would be 198 GB;
    # XLA on TPU fuses it into the loss, so the point prices the bf16 logits and the band's high edge the rest.
    from knowledge import costmodel

    run = _run(tmp_path, OSS)
    settings = settings_for_run(run)
    pred = costmodel.predict(run.record, load_run_config(run).mesh(64, 1), settings=settings)
    logits_fused = 2 * 163840 * 201088
    assert pred.fits_memory, pred.memory_per_chip_bytes / 1e9
    assert pred.memory_breakdown_bytes["activations"] > logits_fused  # the bf16 logits are counted
    assert pred.memory_high_bytes is not None and pred.memory_high_bytes > pred.memory_per_chip_bytes + 2 * logits_fused
    assert any("fuses the fp32 softmax" in a and "2 bytes per logit" in a for a in pred.assumptions)


def test_a_key_the_launcher_does_not_set_is_added_among_its_maxtext_args(tmp_path: Path) -> None:
    # tensor 2 over chips is ici_tensor_parallelism=4 over devices, a key the launcher never sets: it goes after the
    # last word the file writes as a literal (steps=30), not after base_output_directory=${BASE_OUTPUT_DIR} (an
    # expansion, where it once landed inside the word) nor after run_name=${WORKLOAD_NAME} (known only at run time)
    run = _run(tmp_path, LLAMA)
    cfg = load_run_config(run)
    new = apply_mesh(cfg, Mesh(ici={"fsdp": 32, "tensor": 2}))
    diff = diff_text(cfg.text, new, "run_recipe.sh")
    assert "+steps=30 ici_tensor_parallelism=4 \\" in diff and "+ici_fsdp_parallelism=32 \\" in diff
    assert for_run(parse_config(new, "run_recipe.sh"), run.record).mesh(64, 1) == Mesh(ici={"fsdp": 32, "tensor": 2})


def test_no_place_for_a_new_override_is_a_clear_error_not_a_stray_edit(tmp_path: Path) -> None:
    # the whole --command comes from a variable another file sets: this file writes none of the launch's words, so a
    # key the launch lacks cannot be added here (it once raised KeyError, and before that spliced into another line)
    (tmp_path / "vars.sh").write_text('CMD="python3 -m MaxText.train MaxText/configs/base.yml ici_fsdp_parallelism=-1"\n')
    (tmp_path / "launch.sh").write_text('#!/bin/bash\nsource ./vars.sh\nxpk workload create --device-type=tpu7x-4x4x4 '
                                        '--num-slices=1 --workload=w --command="${CMD}"\n')
    cfg = for_run(load_config(tmp_path / "launch.sh"), type("R", (), {"jax_devices_per_chip": 2})())
    assert cfg.mesh(64, 1) == Mesh(ici={"fsdp": 64})
    with pytest.raises(ConfigError) as err:
        apply_mesh(cfg, Mesh(ici={"fsdp": 32, "tensor": 2}))
    assert "cannot add ici_tensor_parallelism=4" in err.value.message and "by hand" in (err.value.hint or "")
