"""llm-foundry (Composer) train YAMLs, read as llm-foundry reads them: unmodified files from mosaicml/llm-foundry
(tests/data/real/README.md: mpt-7b, mpt-125m and hf-llama-3.1-8B at 8c8dd48f, the ``variables:`` layout; mpt-30b at
495218376, the older top-level ``${max_seq_len}`` layout; Apache-2.0).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.configs.detect import load_config, parse_config
from bot.configs.edit import apply_mesh, apply_settings
from bot.configs.mesh import Mesh
from bot.configs.model_dims import read_model_dims
from bot.errors import ConfigError
from bot.runs.store import LocalRunStore
from knowledge import costmodel
from knowledge.cost_settings import settings_from_config

LF = Path(__file__).parent / "data" / "real" / "llmfoundry"


def test_mpt_7b_reads_as_llm_foundry_trains_it() -> None:
    cfg = load_config(LF / "mpt-7b.yaml")
    assert cfg.format == "llmfoundry"
    assert cfg.mesh(64, 8).short() == "fsdp=8 | dcn fsdp=8"  # FULL_SHARD: every GPU, inside and across nodes
    s = settings_from_config(cfg)
    assert (s.micro_batch, s.global_batch, s.seq_len) == (8, 1024, 2048)  # seq via ${variables.max_seq_len}
    assert s.remat_policy == "full" and s.fused_cross_entropy is True and s.attention_kernel == "flash"
    assert s.fsdp_sharding_strategy == "full_shard"
    dims = read_model_dims(cfg)
    assert dims is not None and not dims.problems
    assert dims.stated() == {"layers": 32, "d_model": 4096, "d_ff": 16384, "heads": 32, "kv_heads": 32, "head_dim": 128,
                             "vocab": 50368, "mlp_matrices": 2, "seq_len": 2048, "tied_embeddings": True}


def test_the_2024_layout_resolves_top_level_references() -> None:
    cfg = load_config(LF / "mpt-30b.495218376.yaml")
    dims = read_model_dims(cfg)
    assert dims is not None
    assert (dims.layers, dims.d_model, dims.heads, dims.seq_len) == (48, 7168, 56, 2048)
    assert settings_from_config(cfg).seq_len == 2048  # max_seq_len: ${max_seq_len}


def test_a_hugging_face_model_is_named_not_sized() -> None:
    cfg = load_config(LF / "hf-llama-3.1-8B.yaml")
    assert cfg.mesh(8, 1).short() == "fsdp=8"
    dims = read_model_dims(cfg)
    assert dims is not None and dims.stated() == {}
    assert "meta-llama/Meta-Llama-3.1-8B" in dims.problems[0] and "run.yaml" in dims.problems[0]


@pytest.mark.parametrize(("strategy", "mesh"), [
    ("HYBRID_SHARD", "fsdp=8 | dcn data=4"), ("SHARD_GRAD_OP", "fsdp=8 | dcn fsdp=4"), ("NO_SHARD", "data=8 | dcn data=4"),
])
def test_each_strategy_is_its_layout(strategy: str, mesh: str) -> None:
    text = (LF / "mpt-125m.yaml").read_text().replace("sharding_strategy: FULL_SHARD", f"sharding_strategy: {strategy}")
    assert parse_config(text, "mpt-125m.yaml").mesh(32, 4).short() == mesh


def test_without_fsdp_config_composer_runs_ddp() -> None:
    text = "model:\n  name: mpt_causal_lm\nglobal_train_batch_size: 256\ndevice_train_microbatch_size: auto\n"
    cfg = parse_config(text, "ddp.yaml")
    assert cfg.mesh(16, 2).short() == "data=8 | dcn data=2"
    notes = " ".join(cfg.notes(16, 2))
    assert "DDP" in notes and "auto" in notes  # an automatic micro-batch is unknown, and said so
    assert settings_from_config(cfg).micro_batch is None


def test_hybrid_sharding_edit_rewrites_one_value() -> None:
    cfg = load_config(LF / "mpt-7b.yaml")
    old = cfg.text
    new = apply_mesh(cfg, Mesh.model_validate({"ici": {"fsdp": 8}, "dcn": {"data": 8}}))
    changed = [(a, b) for a, b in zip(old.splitlines(), new.splitlines(), strict=True) if a != b]
    assert changed == [("  sharding_strategy: FULL_SHARD", "  sharding_strategy: HYBRID_SHARD")]
    assert parse_config(new, "mpt-7b.yaml").mesh(64, 8).short() == "fsdp=8 | dcn data=8"


def test_a_layout_llm_foundry_cannot_state_is_refused_naming_the_key() -> None:
    cfg = load_config(LF / "mpt-7b.yaml")
    with pytest.raises(ConfigError) as err:
        apply_mesh(cfg, Mesh.model_validate({"ici": {"fsdp": 4, "pipeline": 2}, "dcn": {"fsdp": 8}}))
    assert err.value.field == "fsdp_config.sharding_strategy" and "pipeline" in (err.value.hint or "")


def test_lighter_remat_is_written_as_activation_checkpointing_false() -> None:
    cfg = load_config(LF / "mpt-7b.yaml")
    new = apply_settings(cfg, {"fsdp_config.activation_checkpointing": False})
    assert "  activation_checkpointing: false\n" in new and new.count("\n") == cfg.text.count("\n")
    assert settings_from_config(parse_config(new, "mpt-7b.yaml")).remat_policy == "none"


@pytest.mark.parametrize(("edit", "field"), [
    (("sharding_strategy: FULL_SHARD", "sharding_strategy: FULLY_SHARDED"), "fsdp_config.sharding_strategy"),
    (("device_train_microbatch_size: 8", "device_train_microbatch_size: 0"), "device_train_microbatch_size"),
    (("activation_checkpointing: true", "activation_checkpointing: sometimes"), "fsdp_config.activation_checkpointing"),
    (("  max_seq_len: 2048", "  max_seq_len: ${variables.max_seq_len}"), "max_seq_len"),  # a reference to itself
])
def test_bad_values_are_named(edit: tuple[str, str], field: str) -> None:
    text = (LF / "mpt-7b.yaml").read_text().replace(*edit, 1)
    with pytest.raises(ConfigError) as err:
        parse_config(text, "mpt-7b.yaml")
    assert err.value.field == field and err.value.source == "mpt-7b.yaml"


def test_accelerates_fsdp_config_is_not_taken_for_llm_foundry() -> None:
    """Accelerate's launch config also has a top-level fsdp_config: it keeps its own hint, not an llm-foundry reading."""
    with pytest.raises(ConfigError) as err:
        load_config(LF.parent / "accelerate" / "fsdp.yaml")
    assert "accelerate" in (err.value.message + (err.value.hint or "")).lower()


def test_the_yaml_predicts_what_the_published_row_does(tmp_path: Path) -> None:
    """mpt-7b.yaml at the llm-foundry H100 table's row (7B, 2,048 tokens, 8 GPUs, micro-batch 6, no checkpointing;
    scripts/eval_cases_llm_foundry.py) predicts the same step as the eval case built from the table."""
    text = (LF / "mpt-7b.yaml").read_text()
    for old, new in (("device_train_microbatch_size: 8", "device_train_microbatch_size: 6"),
                     ("global_train_batch_size: 1024", "global_train_batch_size: 48"),
                     ("activation_checkpointing: true", "activation_checkpointing: false")):
        text = text.replace(old, new, 1)
    run_dir = tmp_path / "runs" / "mpt7b"
    run_dir.mkdir(parents=True)
    (run_dir / "mpt-7b.yaml").write_text(text)
    (run_dir / "run.yaml").write_text("id: mpt7b\nchip: h100\nnum_chips: 8\nnum_slices: 1\nconfig: mpt-7b.yaml\n")
    run = LocalRunStore(tmp_path / "runs").get("mpt7b")
    from tests.published_cases import predict_case

    mesh = Mesh.model_validate({"ici": {"fsdp": 8}})
    from knowledge.cost_settings import settings_for_run

    ours = costmodel.predict(run.record, mesh, settings=settings_for_run(run))
    published = predict_case("llmfoundry-h100-bf16-mpt-7b-s2048-8gpu-mb6")
    assert ours.step_time_ms == pytest.approx(published.step_time_ms, rel=0.01)


def test_proposals_for_an_llm_foundry_run_are_edits_of_its_yaml(tmp_path: Path) -> None:
    """mpt-1b.yaml with activation checkpointing turned on, on 16 H100 in two nodes: the answer's proposals are diffs
    of the YAML in its own keys (sharding_strategy, activation_checkpointing), never a mesh key it does not have."""
    from bot.analysis.analyze import analyze_run
    from bot.proposals.engine import propose

    text = (LF / "mpt-1b.yaml").read_text().replace("activation_checkpointing: false", "activation_checkpointing: true")
    run_dir = tmp_path / "runs" / "mpt1b"
    run_dir.mkdir(parents=True)
    (run_dir / "mpt-1b.yaml").write_text(text)
    (run_dir / "run.yaml").write_text("id: mpt1b\nchip: h100\nnum_chips: 16\nnum_slices: 2\nconfig: mpt-1b.yaml\n")
    run = LocalRunStore(tmp_path / "runs").get("mpt1b")
    pset = propose(run, analyze_run(run))
    assert pset.proposals
    for p in pset.proposals:
        assert p.diff is not None
        changed = [line for line in p.diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
        assert changed and all("sharding_strategy:" in line or "activation_checkpointing:" in line
                               or "device_train_microbatch_size:" in line for line in changed)
    lighter = next(p for p in pset.proposals if "remat-lighter" in p.kind)
    assert "+  activation_checkpointing: false" in (lighter.diff or "")
    assert "fsdp_config.activation_checkpointing true -> false" in " ".join(lighter.settings_changes)


def test_an_mcli_run_config_is_read_through_its_parameters() -> None:
    """mcli/mcli-1b-max-seq-len-8k.yaml: the MosaicML platform's run config, the train config inline under parameters:
    (composer train/train.py /mnt/config/parameters.yaml) and compute.gpus 8."""
    cfg = load_config(LF / "mcli-1b-max-seq-len-8k.yaml")
    assert cfg.format == "llmfoundry" and cfg.devices == 8
    assert cfg.mesh(8, 1).short() == "fsdp=8"
    s = settings_from_config(cfg)
    assert (s.micro_batch, s.global_batch, s.seq_len) == (1, 128, 8192)
    dims = read_model_dims(cfg)
    assert dims is not None and (dims.layers, dims.d_model, dims.heads, dims.seq_len) == (24, 2048, 16, 8192)
    new = apply_mesh(cfg, Mesh.model_validate({"ici": {"data": 8}}))
    assert "    sharding_strategy: NO_SHARD\n" in new  # edited where it sits, under parameters.fsdp_config


def test_an_mcli_run_config_that_trains_a_yaml_names_it() -> None:
    """mcli/mcli-1b.yaml runs 'composer train/train.py train/yamls/pretrain/mpt-1b.yaml ...': the answer names that
    YAML instead of listing other frameworks' keys."""
    with pytest.raises(ConfigError) as err:
        load_config(LF / "mcli-1b.yaml")
    assert "train/yamls/pretrain/mpt-1b.yaml" in err.value.message
    assert (err.value.hint or "").startswith("point ASAP at train/yamls/pretrain/mpt-1b.yaml")


@pytest.mark.parametrize("name", ["mcli-1b.yaml", "../accelerate/fsdp.yaml"])
def test_a_pull_request_touching_a_run_config_is_not_reviewed_as_a_broken_sharding_config(name: str) -> None:
    """A PR that edits an mcli or Accelerate run config gets no 'problem' status from the sharding review: the file
    is not a config ASAP reads (its layout lives in the train YAML / the user's mesh file)."""
    from integrations.github.review import _not_a_sharding_config

    path = LF / name
    assert _not_a_sharding_config(path.read_text(), str(path))
    assert not _not_a_sharding_config((LF / "mpt-7b.yaml").read_text(), "mpt-7b.yaml")


def test_launch_command_overrides_win_over_the_yaml() -> None:
    """llm-foundry's README trains with overrides on the command line (OmegaConf dotlist): run.yaml's command
    'composer train/train.py train/yamls/pretrain/mpt-7b.yaml ...' is read as llm-foundry merges it."""
    command = ("composer train/train.py train/yamls/pretrain/mpt-7b.yaml train_loader.dataset.split=train_small "
               "device_train_microbatch_size=4 fsdp_config.sharding_strategy=HYBRID_SHARD variables.max_seq_len=4096 "
               "model.n_layers=16")
    cfg = parse_config((LF / "mpt-7b.yaml").read_text(), "train/yamls/pretrain/mpt-7b.yaml", command=command)
    assert cfg.mesh(16, 2).short() == "fsdp=8 | dcn data=2"
    s = settings_from_config(cfg)
    assert (s.micro_batch, s.seq_len) == (4, 4096)  # the reference to variables.max_seq_len follows the override
    dims = read_model_dims(cfg)
    assert dims is not None and (dims.layers, dims.seq_len) == (16, 4096)
    assert any("device_train_microbatch_size set on the launch command" in r for r in cfg.reading)
    with pytest.raises(ConfigError) as err:  # the command's value wins: editing the file would change nothing
        apply_settings(cfg, {"micro_batch_size": 2})
    assert "launch command" in err.value.message
    with pytest.raises(ConfigError) as err:
        apply_mesh(cfg, Mesh.model_validate({"ici": {"fsdp": 8}, "dcn": {"fsdp": 2}}))
    assert "launch command" in err.value.message


def test_a_malformed_override_is_named() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config((LF / "mpt-7b.yaml").read_text(), "mpt-7b.yaml",
                     command="composer train.py mpt-7b.yaml device_train_microbatch_size=-3")
    assert err.value.field == "device_train_microbatch_size" and "on the launch command" in err.value.message


def test_a_micro_batch_change_is_written_as_device_train_microbatch_size() -> None:
    cfg = load_config(LF / "mpt-7b.yaml")
    new = apply_settings(cfg, {"micro_batch_size": 4})
    assert "\ndevice_train_microbatch_size: 4\n" in new and "# device_train_microbatch_size: auto" in new
    assert settings_from_config(parse_config(new, "mpt-7b.yaml")).micro_batch == 4


def test_a_stated_but_invalid_model_size_is_a_problem_not_a_default() -> None:
    """A d_model the file states as text is named as a problem (the model then comes from run.yaml), never replaced
    by MPTConfig's default; a fractional expansion_ratio is MPT's own rule: int(d_model x ratio)."""
    text = (LF / "mpt-7b.yaml").read_text()
    dims = read_model_dims(parse_config(text.replace("d_model: 4096", "d_model: big"), "mpt-7b.yaml"))
    assert dims is not None and dims.stated() == {} and "model.d_model" in dims.problems[0] and "'big'" in dims.problems[0]
    dims = read_model_dims(parse_config(text.replace("expansion_ratio: 4", "expansion_ratio: 2.6875"), "mpt-7b.yaml"))
    assert dims is not None and dims.d_ff == 11008


def test_partial_checkpointing_is_not_read_as_full() -> None:
    """MPT's model.activation_checkpointing_target checkpoints only the modules / blocks it names: the policy is left
    unstated (and the reading says why) rather than priced as every block recomputed."""
    text = (LF / "mpt-7b.yaml").read_text().replace(
        "  attn_config:\n    attn_impl: flash",
        "  attn_config:\n    attn_impl: flash\n  activation_checkpointing_target:\n    mptblock: first-5", 1)
    cfg = parse_config(text, "mpt-7b.yaml")
    assert settings_from_config(cfg).remat_policy is None
    assert any("activation_checkpointing_target" in r for r in cfg.reading)
    with pytest.raises(ConfigError) as err:
        parse_config((LF / "mpt-7b.yaml").read_text().replace("precision: amp_bf16", "precision: [amp_bf16]"), "x.yaml")
    assert err.value.field == "precision"
