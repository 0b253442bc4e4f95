"""Real public launch files read as the framework resolves them (issue 13): golden readings and edits.

The files under tests/data/real/ are copies of public repositories (see its README for each file's
repository, path, commit and license). Each test pins what a person would check by hand: the mesh the
framework builds, the settings that matter, the device count the launch states, and that an edit changes
only the value where it wins.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.configs.checks import startup_problems
from bot.configs.detect import load_config, parse_config
from bot.configs.edit import apply_mesh, apply_mesh_files, apply_settings, config_diff
from bot.configs.maxtext import native
from bot.configs.mesh import Mesh
from bot.errors import ConfigError

REAL = Path(__file__).parent / "data" / "real"
MT = REAL / "maxtext" / "current" / "src" / "maxtext" / "configs"
PAI_ARGS = ("dsw /workspace/Pai-Megatron-Patch 7B 1 8 1e-5 1e-6 2048 2048 0 bf16 1 1 sel true true true false 100000 "
            "/mnt/data /mnt/ckpt 10000000000 100000000 /mnt/out")


def changed_lines(old: str, new: str) -> list[tuple[str, str]]:
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    assert len(a) == len(b), "an in-place edit keeps the line count"
    return [(x, y) for x, y in zip(a, b, strict=True) if x != y]


# -------------------------------------------------------------------------------------- MaxText recipes
def test_maxtext_recipe_override_wins_over_base_yml() -> None:
    c = load_config(MT / "tpu" / "v5p" / "128b.sh")
    assert c.format == "maxtext" and c.vintage and "August 2026" in c.vintage
    assert c.mesh_axes is not None and "sequence" not in c.mesh_axes and "context_usp_ulysses" in c.mesh_axes
    assert c.mesh(256, 1) == Mesh(ici={"fsdp": 32, "tensor": 8})
    assert native(c, 256, 1)["ici"]["tensor"] == 8
    t = c.key("ici_tensor_parallelism")
    assert t.file is None and c.text[t.start:t.end] == "8"  # the override on the launch line
    assert c.key("dcn_data_parallelism").file.endswith("base.yml")  # nothing overrides it
    assert c.setting("per_device_batch_size") == 1 and c.setting("remat_policy") == "minimal"
    assert any("ici_tensor_parallelism: 8" in n and "overrides 1" in n and "base.yml" in n for n in c.reading)
    shown = [p for p in startup_problems(c, 256, 1) if p.rule == "reading"]  # what why/propose/review show
    assert any("overrides 1" in p.message and not p.error for p in shown)
    assert any("looks like MaxText of August 2026 or later" in p.message for p in shown)


def test_maxtext_recipe_through_a_called_script_with_positional_arguments() -> None:
    # v5p_1024.sh runs gpt3_175b_base.sh 4 "full" 1 64 8 ...: ICI_FSDP_PARALLELISM=${4:-...} takes 64 from the call
    c = load_config(MT / "tpu" / "v5p" / "gpt3_175b" / "v5p_1024.sh")
    assert c.mesh(512, 1) == Mesh(ici={"fsdp": 64, "tensor": 8})
    assert c.setting("per_device_batch_size") == 4 and c.setting("remat_policy") == "full"
    fsdp = c.key("ici_fsdp_parallelism")
    assert fsdp.file is None and c.text[fsdp.start:fsdp.end] == "64"  # the argument in v5p_1024.sh itself


def test_maxtext_recipe_multislice_default_data_over_dcn() -> None:
    c = load_config(MT / "tpu" / "v6e" / "mixtral_8x7b.sh")
    assert c.mesh(256, 2) == Mesh(ici={"fsdp": 128}, dcn={"data": 2})
    assert c.setting("per_device_batch_size") == 32


def test_edit_changes_the_launch_override_and_nothing_else() -> None:
    c = load_config(MT / "tpu" / "v5p" / "128b.sh")
    files = apply_mesh_files(c, Mesh(ici={"fsdp": 64, "tensor": 4}))
    assert list(files) == [c.source]  # base.yml is not touched: the override wins
    # fsdp's -1 now stands for another size, so the edit writes it out (docs: the -1 policy)
    assert changed_lines(c.text, files[c.source]) == [
        ("    ici_fsdp_parallelism=-1 ici_tensor_parallelism=8\\\n", "    ici_fsdp_parallelism=64 ici_tensor_parallelism=4\\\n")
    ]


def test_edit_of_a_positional_argument_lands_in_the_calling_script() -> None:
    c = load_config(MT / "tpu" / "v5p" / "gpt3_175b" / "v5p_1024.sh")
    new = apply_mesh(c, Mesh(ici={"fsdp": 128, "tensor": 4}))
    assert changed_lines(c.text, new) == [
        ('./maxtext/configs/tpu/v5p/gpt3_175b/gpt3_175b_base.sh 4 "full" 1 64 8 "${RUNNAME}" "${BASE_OUTPUT_DIRECTORY}"\n',
         './maxtext/configs/tpu/v5p/gpt3_175b/gpt3_175b_base.sh 4 "full" 1 128 4 "${RUNNAME}" "${BASE_OUTPUT_DIRECTORY}"\n')
    ]


def test_edit_of_a_value_only_base_yml_sets_goes_to_base_yml() -> None:
    c = load_config(MT / "tpu" / "v5p" / "128b.sh")
    base = str(MT / "base.yml")
    files = apply_mesh_files(c, Mesh(ici={"fsdp": 16, "tensor": 8, "sequence": 2}))
    assert sorted(files) == sorted([c.source, base])
    # the launch's own override changes in the script; the context axis, which only base.yml sets, in base.yml
    assert changed_lines(c.text, files[c.source]) == [
        ("    ici_fsdp_parallelism=-1 ici_tensor_parallelism=8\\\n", "    ici_fsdp_parallelism=16 ici_tensor_parallelism=8\\\n")
    ]
    assert changed_lines(c.files[base], files[base]) == [
        ("ici_context_parallelism: 1\n", "ici_context_parallelism: 2\n")
    ]  # current MaxText has no sequence axis: context carries sequence parallelism
    diff = config_diff(c, Mesh(ici={"fsdp": 16, "tensor": 8, "sequence": 2}), None, "128b.sh")
    assert "+++ b/128b.sh" in diff and f"+++ b/{base}" in diff


def test_settings_edit_on_a_launch_keeps_the_number_form() -> None:
    c = load_config(MT / "tpu" / "v5p" / "128b.sh")
    new = apply_settings(c, {"per_device_batch_size": 2})
    assert changed_lines(c.text, new) == [
        ("    steps=15 per_device_batch_size=1 enable_checkpointing=false\\\n",
         "    steps=15 per_device_batch_size=2 enable_checkpointing=false\\\n")
    ]
    with pytest.raises(ConfigError, match="maxtext has no micro_batch_size"):
        apply_settings(c, {"micro_batch_size": 4})


def test_float_setting_stays_a_float(tmp_path: Path) -> None:
    (tmp_path / "child.yml").write_text("base_config: base.yml\nper_device_batch_size: 12.0\n")
    (tmp_path / "base.yml").write_text("ici_fsdp_parallelism: -1\nper_device_batch_size: 1\n")
    c = load_config(tmp_path / "child.yml")
    assert apply_settings(c, {"per_device_batch_size": 24}) == "base_config: base.yml\nper_device_batch_size: 24.0\n"


# -------------------------------------------------------------------------------- MaxText vintages
def _child(tmp_path: Path, base: Path, body: str) -> Path:
    (tmp_path / "base.yml").write_text(base.read_text())
    (tmp_path / "run.yml").write_text("base_config: base.yml\n" + body)
    return tmp_path / "run.yml"


def test_current_maxtext_ignores_the_removed_sequence_axis(tmp_path: Path) -> None:
    c = load_config(_child(tmp_path, MT / "base.yml", "ici_sequence_parallelism: 4\n"))
    assert c.mesh(64, 1) == Mesh(ici={"fsdp": 64})  # what MaxText builds: sequence is not in mesh_axes
    assert any("ici_sequence_parallelism=4 is ignored" in n for n in c.notes(64, 1))
    assert "sequence" in c.allowed_axes()  # through the context axis
    files = apply_mesh_files(c, Mesh(ici={"fsdp": 32, "sequence": 2}))
    assert list(files) == [str(tmp_path / "base.yml")]  # both values are set only there
    assert changed_lines(c.files[str(tmp_path / "base.yml")], files[str(tmp_path / "base.yml")]) == [
        ("ici_fsdp_parallelism: -1 # recommended ICI axis to be auto-sharded\n",
         "ici_fsdp_parallelism: 32 # recommended ICI axis to be auto-sharded\n"),
        ("ici_context_parallelism: 1\n", "ici_context_parallelism: 2\n"),
    ]


def test_ulysses_and_diloco_axes_are_read(tmp_path: Path) -> None:
    c = load_config(_child(tmp_path, MT / "base.yml",
                           "ici_context_usp_ulysses_parallelism: 2\ndcn_diloco_parallelism: 2\n"))
    assert c.mesh(256, 4) == Mesh(ici={"fsdp": 32, "sequence": 2}, dcn={"data": 4})
    assert native(c, 256, 4)["dcn"] == {**native(c, 256, 4)["dcn"], "diloco": 2, "data": 2}
    assert any("DiLoCo" in n for n in c.notes(256, 4))


def test_2023_maxtext_reads_sequence_and_has_no_expert_or_stage(tmp_path: Path) -> None:
    c = load_config(_child(tmp_path, REAL / "maxtext" / "v2023" / "base.yml", "ici_sequence_parallelism: 4\n"))
    assert c.mesh_axes == ["data", "fsdp", "sequence", "tensor"] and "2023" in (c.vintage or "")
    assert c.mesh(64, 1) == Mesh(ici={"fsdp": 16, "sequence": 4})
    assert c.allowed_axes() == {"data", "fsdp", "sequence", "tensor"}
    with pytest.raises(ConfigError, match="no expert axis"):
        apply_mesh(c, Mesh(ici={"fsdp": 8, "expert": 8}))


def test_2025_maxtext_vintage_is_named(tmp_path: Path) -> None:
    c = load_config(_child(tmp_path, REAL / "maxtext" / "v2025" / "base.yml", "ici_tensor_parallelism: 4\n"))
    assert "2025" in (c.vintage or "") and "sequence" in (c.mesh_axes or [])
    assert c.mesh(64, 1) == Mesh(ici={"fsdp": 16, "tensor": 4})


def test_inherited_mesh_is_read_and_edited_where_set(tmp_path: Path) -> None:
    (tmp_path / "base.yml").write_text("ici_fsdp_parallelism: -1\nici_tensor_parallelism: 4  # keep\n")
    (tmp_path / "run.yml").write_text("base_config: base.yml\nmodel_name: llama2-7b\n")
    c = load_config(tmp_path / "run.yml")  # no mesh key of its own: inherited, not "no sharding keys"
    assert c.mesh(64, 1) == Mesh(ici={"fsdp": 16, "tensor": 4})
    files = apply_mesh_files(c, Mesh(ici={"fsdp": 32, "tensor": 2}))
    assert files == {str(tmp_path / "base.yml"): "ici_fsdp_parallelism: 32\nici_tensor_parallelism: 2  # keep\n"}
    with pytest.raises(ConfigError, match="must be written in .*base.yml"):
        apply_mesh(c, Mesh(ici={"fsdp": 32, "tensor": 2}))
    diff = config_diff(c, Mesh(ici={"fsdp": 32, "tensor": 2}), None, "run.yml")
    assert "-ici_tensor_parallelism: 4  # keep" in diff and "+ici_tensor_parallelism: 2  # keep" in diff


def test_base_config_cycle_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "a.yml").write_text("base_config: b.yml\nici_fsdp_parallelism: -1\n")
    (tmp_path / "b.yml").write_text("base_config: a.yml\n")
    with pytest.raises(ConfigError, match="base_config chain loops back: .*a.yml -> .*b.yml -> .*a.yml"):
        load_config(tmp_path / "a.yml")


def test_recorded_command_overrides_the_yaml(tmp_path: Path) -> None:
    (tmp_path / "base.yml").write_text("ici_fsdp_parallelism: -1\nici_tensor_parallelism: 1\n")
    c = load_config(tmp_path / "base.yml",
                    command="python3 -m MaxText.train MaxText/configs/base.yml run_name=x ici_tensor_parallelism=4")
    assert c.mesh(64, 1) == Mesh(ici={"fsdp": 16, "tensor": 4})
    with pytest.raises(ConfigError, match="ASAP cannot edit in place"):  # it is in run.yaml, not a config file
        apply_mesh(c, Mesh(ici={"fsdp": 32, "tensor": 2}))


# ------------------------------------------------------------------------------ Megatron, Pai, NeMo
def test_megatron_lm_example_arrays_and_device_count() -> None:
    c = load_config(REAL / "megatron" / "train_gpt3_175b_distributed.sh")
    assert c.format == "megatron" and (c.devices, c.nodes) == (8, 1)
    assert {k.key: k.value for k in c.keys} == {"tensor_model_parallel_size": 8, "pipeline_model_parallel_size": 16}
    assert (c.setting("micro_batch_size"), c.setting("global_batch_size")) == (1, 1536)
    assert c.mesh(128, 16) == Mesh(ici={"tensor": 8}, dcn={"pipeline": 16})
    errors = [p for p in startup_problems(c, 128, 16) if p.error]
    assert [p.rule for p in errors] == ["devices"] and "starts 8 devices" in errors[0].message


def test_megatron_array_edit_is_byte_preserving() -> None:
    c = load_config(REAL / "megatron" / "train_gpt3_175b_distributed.sh")
    new = apply_mesh(c, Mesh(ici={"tensor": 4, "data": 2}, dcn={"pipeline": 16}))
    assert changed_lines(c.text, new) == [("\t--tensor-model-parallel-size 8 \n", "\t--tensor-model-parallel-size 4 \n")]


def test_megatron_moe_example_with_environment_node_count() -> None:
    c = load_config(REAL / "megatron" / "train_mixtral_8x7b_distributed.sh")
    assert {k.key: k.value for k in c.keys}["expert_model_parallel_size"] == 8
    assert c.devices is None and any("SLURM_NNODES" in n for n in c.reading)  # not fixed by the script
    assert c.mesh(64, 8) == Mesh(ici={"expert": 8}, dcn={"data": 2, "pipeline": 4})
    assert c.setting("num_moe_experts") == 8 and c.setting("use_distributed_optimizer") is True


def test_megatron_flag_style_yaml() -> None:
    c = load_config(REAL / "megatron" / "bert_mcore_tp1_pp4_vp2.model_config.yaml")
    assert {k.key: k.value for k in c.keys} == {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 4}
    assert c.setting("num_layers_per_virtual_pipeline_stage") == 2 and c.setting("global_batch_size") == 128
    new = apply_mesh(c, Mesh(ici={"data": 4, "pipeline": 2}))
    assert changed_lines(c.text, new) == [("  --pipeline-model-parallel-size: 4\n", "  --pipeline-model-parallel-size: 2\n")]


def test_nemo2_dotted_keys_and_trainer_devices() -> None:
    c = load_config(REAL / "nemo" / "llama3-nemo_8b_cp2.model_config.yaml")
    assert c.devices == 8 and c.mesh(8, 1) == Mesh(ici={"data": 4, "sequence": 2})
    assert (c.setting("micro_batch_size"), c.setting("global_batch_size")) == (4, 64)
    assert any("sequence_parallel is on" in p.message for p in startup_problems(c, 8, 1))


def test_nemo_launcher_device_count_is_checked_against_the_run() -> None:
    c = load_config(REAL / "nemo" / "launcher_gpt3_20b.yaml")
    assert (c.devices, c.nodes) == (512, 64)  # trainer.devices 8 x num_nodes 64
    problems = startup_problems(c, 64, 8)
    assert problems[0].error and "starts 512 devices" in problems[0].message


def test_pai_script_with_its_launch_command() -> None:
    path = REAL / "pai" / "run_pretrain_megatron_deepseek.sh"
    c = load_config(path, command=f"sh run_pretrain_megatron_deepseek.sh {PAI_ARGS}")
    assert {k.key: k.value for k in c.keys} == {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1}
    assert (c.setting("micro_batch_size"), c.setting("global_batch_size")) == (1, 8)
    assert c.setting("recompute_granularity") == "selective" and c.setting("use_distributed_optimizer") is True
    assert c.setting("use_flash_attn") is True and c.devices == 8
    with pytest.raises(ConfigError, match="cannot edit in place"):  # TP comes from the command's argument 12
        apply_mesh(c, Mesh(ici={"tensor": 2, "data": 4}))


def test_pai_script_without_arguments_names_the_missing_argument() -> None:
    with pytest.raises(ConfigError, match=r"positional argument \$12 is not given"):
        load_config(REAL / "pai" / "run_pretrain_megatron_deepseek.sh")


# -------------------------------------------------------------------------- start-up rules, bad input
@pytest.mark.parametrize(("flags", "rule"), [
    ("--global-batch-size 30 --micro-batch-size 4", "global_batch"),
    ("--num-attention-heads 31", "heads"),
    ("--num-layers 30 --pipeline-model-parallel-size 4", "layers"),
    ("--num-experts 6 --expert-model-parallel-size 4", "experts"),
    ("--seq-length 4098 --context-parallel-size 2", "context"),
    ("--num-layers 32 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 3", "virtual_pipeline"),
])
def test_megatron_start_up_rules(flags: str, rule: str) -> None:
    text = f"#!/bin/bash\nTP=2\ntorchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size $TP {flags}\n"
    c = parse_config(text, "t.sh")
    errors = [p for p in startup_problems(c, 8, 1) if p.error]
    assert [p.rule for p in errors] == [rule] and "refuse" in errors[0].message


@pytest.mark.parametrize(("text", "what"), [
    ("#!/bin/bash\nfor ((i=0; i<3; i++)); do echo; done\n", "C-style for"),
    ("#!/bin/bash\necho 'unclosed\n", "unclosed single quote"),
    ("#!/bin/bash\necho hello\n", "no training launch found"),
    ("#!/bin/bash\ntorchrun pretrain_gpt.py --tensor-model-parallel-size $(nproc)\n", "is a command ASAP does not run"),
    # bash refuses a bare "(" inside a command; reading on would drop every flag after it (Megatron-LM's GB200 guide)
    ("#!/bin/bash\ntorchrun pretrain_gpt.py --moe-layer-freq ([0]*1+[1]*3) --fp8-recipe mxfp8\n",
     r"unquoted '\(' after '--moe-layer-freq' \(line 2\)"),
])
def test_unsupported_scripts_name_what_is_unsupported(text: str, what: str) -> None:
    with pytest.raises(ConfigError, match=what) as info:
        parse_config(text, "launch.sh")
    assert info.value.source == "launch.sh"


def test_the_valid_bash_uses_of_a_parenthesis_still_read() -> None:
    """Arrays, functions (with and without the keyword), [[ ( ) ]] grouping, case patterns written "(x)", process
    substitution and subshells are bash; only a bare "(" among a command's words is refused."""
    text = ("#!/bin/bash\nARR=(a b)\nf() { echo f; }\nfunction g() { echo g; }\n"
            "if [[ ( \"$X\" == 1 ) ]]; then echo one; fi\nTP=2\ncase \"$M\" in\n  (fast) LOG=1 ;;\n  *) LOG=2 ;;\nesac\n"
            "source <(echo A=1)\ndiff <(echo a) >(cat) || true\n(cd /tmp && echo sub)\n"
            "torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size $TP --fp8-format hybrid "
            "--fp8-recipe tensorwise --moe-layer-freq '([0]*1+[1]*3)'\n")
    c = parse_config(text, "launch.sh")
    assert c.mesh(8, 1).normalized().ici == {"tensor": 2, "data": 4}
    assert c.settings.get("fp8_recipe") == "tensorwise"


def test_review_of_a_script_megatron_would_refuse_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bot.cli import main

    old = tmp_path / "old.sh"
    old.write_text("#!/bin/bash\nARGS=(--tensor-model-parallel-size 2 --micro-batch-size 1 --global-batch-size 64)\n"
                   "torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py \"${ARGS[@]}\"\n")
    new = tmp_path / "new.sh"
    new.write_text(old.read_text().replace("--micro-batch-size 1", "--micro-batch-size 3"))
    with pytest.raises(SystemExit) as info:
        main(["review", str(old), str(new)])
    assert info.value.code == 1
    out = " ".join(capsys.readouterr().out.split())  # the terminal may wrap lines
    assert "global_batch_size=64 is not a multiple of micro_batch_size=3 x data parallel size 8" in out


def test_unsupported_script_in_review_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bot.cli import main

    bad = tmp_path / "bad.sh"
    bad.write_text("#!/bin/bash\ncase $X in\n")
    with pytest.raises(SystemExit) as info:
        main(["review", str(bad), str(bad), "--chips", "8"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "bad.sh" in err and len(err.splitlines()) <= 2


def test_review_reports_a_2d_fsdp_split_as_a_mesh_change(tmp_path: Path) -> None:
    from bot.proposals.review import review

    (tmp_path / "old.yml").write_text("ici_fsdp_parallelism: 64\nici_fsdp_transpose_parallelism: 1\n")
    (tmp_path / "new.yml").write_text("ici_fsdp_parallelism: 32\nici_fsdp_transpose_parallelism: 2\n")
    r = review(tmp_path / "old.yml", tmp_path / "new.yml", num_chips=64, num_slices=1)
    assert r.mesh_changed
    assert any("fsdp 64 -> 32" in f.message and "fsdp_transpose 1 -> 2" in f.message for f in r.findings)


def test_allowed_axes_per_framework() -> None:
    assert load_config(REAL / "megatron" / "train_gpt3_175b_distributed.sh").allowed_axes() == {
        "data", "tensor", "pipeline", "sequence", "expert"}
    assert parse_config("ici_mesh: {data: 2}\n", "m.yml").allowed_axes() >= {"fsdp", "expert"}


def test_run_yaml_command_and_startup_problems_reach_the_analysis(tmp_path: Path) -> None:
    from bot.analysis.analyze import config_warnings, load_mesh
    from bot.runs.store import LocalRunStore

    folder = tmp_path / "r1"
    folder.mkdir()
    (folder / "base.yml").write_text("ici_fsdp_parallelism: -1\nici_tensor_parallelism: 1\n")
    (folder / "run.yaml").write_text(
        "id: r1\nchip: tpu-v5p\nnum_chips: 64\nconfig: base.yml\n"
        "command: python3 -m MaxText.train base.yml ici_tensor_parallelism=4 per_device_batch_size=0.01\n"
    )
    run = LocalRunStore(tmp_path).get("r1")
    assert run.record.command and "ici_tensor_parallelism=4" in run.record.command
    mesh, fmt, problems = load_mesh(run)
    assert (mesh, fmt, problems) == (Mesh(ici={"fsdp": 16, "tensor": 4}), "maxtext", [])
    warnings = config_warnings(run)
    assert any("per_device_batch_size=0.01 x 64 chips" in w and "refuses to start" in w for w in warnings)


def test_nemo_launcher_5b_reading() -> None:
    c = load_config(REAL / "nemo" / "gpt3_5b.yaml")
    assert (c.devices, c.nodes) == (128, 16)
    assert c.mesh(128, 16) == Mesh(ici={"data": 8}, dcn={"data": 16})
    assert (c.setting("micro_batch_size"), c.setting("global_batch_size")) == (4, 2048)
    assert not [p for p in startup_problems(c, 128, 16) if p.error]


def test_why_and_propose_show_what_megatron_would_refuse(tmp_path: Path) -> None:
    import shutil

    from bot.analysis.analyze import analyze_run
    from bot.proposals.engine import propose
    from bot.runs.store import LocalRunStore

    src = Path(__file__).resolve().parents[1] / "examples" / "runs" / "204"
    shutil.copytree(src, tmp_path / "204")
    cfg = tmp_path / "204" / "megatron.yaml"
    cfg.write_text(cfg.read_text().replace("global_batch_size: 256", "global_batch_size: 250")
                   .replace("num_nodes: 1", "num_nodes: 2"))
    run = LocalRunStore(tmp_path).get("204")
    report = analyze_run(run)
    warned = " ".join(report.warnings)
    assert "global_batch_size=250 is not a multiple of micro_batch_size=1 x data parallel size 8" in warned
    assert "starts 16 devices" in warned  # trainer.devices 8 x num_nodes 2 on an 8-GPU run
    notes = " ".join(propose(run, report, knowledge=False).notes)
    assert "Megatron refuses to start" in notes and "starts 16 devices" in notes


def test_xpk_workload_command_is_read_and_edited_in_place() -> None:
    text = ("#!/bin/bash\npython3 xpk/xpk.py workload create --cluster c --workload w --num-slices 2 \\\n"
            '  --command "python3 -m MaxText.train MaxText/configs/base.yml run_name=x ici_tensor_parallelism=4"\n')
    c = parse_config(text, "xpk.sh")
    assert c.nodes == 2 and c.mesh(128, 2) == Mesh(ici={"fsdp": 16, "tensor": 4}, dcn={"data": 2})
    assert any(p.rule == "nodes" for p in startup_problems(c, 64, 1))
    new = apply_mesh(c, Mesh(ici={"fsdp": 8, "tensor": 4, "sequence": 2}, dcn={"data": 2}))
    # the MaxText version is unknown (base.yml not found): sequence parallelism goes to the context axis,
    # which every MaxText since 2025 reads (the old sequence axis is ignored by current MaxText)
    assert new == text.replace("ici_tensor_parallelism=4",
                               "ici_tensor_parallelism=4 ici_fsdp_parallelism=8 ici_context_parallelism=2")


def test_a_new_megatron_flag_goes_at_the_end_of_the_launch_line() -> None:
    c = load_config(REAL / "megatron" / "train_gpt3_175b_distributed.sh")
    new = apply_mesh(c, Mesh(ici={"tensor": 8}, dcn={"pipeline": 8, "sequence": 2}))
    assert changed_lines(c.text, new) == [
        ("\t--pipeline-model-parallel-size 16 \n", "\t--pipeline-model-parallel-size 8 \n"),
        ("    ${EVAL_AND_LOGGING_ARGS[@]}\n", "    ${EVAL_AND_LOGGING_ARGS[@]} --context-parallel-size 2\n"),
    ]
    again = parse_config(new, c.source)
    assert {k.key: k.value for k in again.keys}["context_parallel_size"] == 2


def test_files_a_script_names_are_read_only_inside_its_folder(tmp_path: Path) -> None:
    secret = tmp_path / "secret.sh"
    secret.write_text("#!/bin/bash\nTP=8\nroot:x:0:0:leaked\n")
    repo = tmp_path / "pr"
    repo.mkdir()
    (repo / "train.sh").write_text(
        f"#!/bin/bash\nsource {secret}\nsource ../secret.sh\n"
        "torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size ${TP:-2}\n")
    c = load_config(repo / "train.sh")  # no .git: the root is the script's own folder
    assert {k.key: k.value for k in c.keys} == {"tensor_model_parallel_size": 2}  # TP from secret.sh not read
    assert not any("leaked" in n for n in c.reading)
    (repo / "base.yml").write_text("base_config: /etc/passwd\nici_fsdp_parallelism: -1\n")
    assert "not found" in " ".join(load_config(repo / "base.yml").reading)


def test_review_warns_that_current_maxtext_ignores_a_sequence_key(tmp_path: Path) -> None:
    from bot.proposals.review import review

    (tmp_path / "base.yml").write_text((MT / "base.yml").read_text())
    (tmp_path / "old.yml").write_text("base_config: base.yml\nici_tensor_parallelism: 4\n")
    (tmp_path / "new.yml").write_text("base_config: base.yml\nici_tensor_parallelism: 4\nici_sequence_parallelism: 2\n")
    r = review(tmp_path / "old.yml", tmp_path / "new.yml", num_chips=64, num_slices=1)
    assert not r.mesh_changed  # MaxText builds the same mesh
    assert any(f.severity == "warning" and "ici_sequence_parallelism=2 is ignored" in f.message for f in r.findings)


def test_recorded_megatron_command_overrides_a_nemo_yaml(tmp_path: Path) -> None:
    (tmp_path / "nemo.yaml").write_text((REAL / "nemo" / "gpt3_5b.yaml").read_text())
    c = load_config(tmp_path / "nemo.yaml", command="torchrun --nproc_per_node 8 --nnodes 16 pretrain_gpt.py "
                                                     "--tensor-model-parallel-size 2 --micro-batch-size 2")
    assert {k.key: k.value for k in c.keys}["tensor_model_parallel_size"] == 2
    assert c.setting("micro_batch_size") == 2 and c.devices == 128
    assert any("on the recorded command overrides 1" in n for n in c.reading)
    with pytest.raises(ConfigError, match="cannot edit in place"):
        apply_mesh(c, Mesh(ici={"tensor": 4, "data": 2}, dcn={"data": 16}))


@pytest.mark.parametrize(("extra", "error"), [
    # Megatron-Bridge 26.08's Qwen3 235B-A22B on GB200: 94 layers + embedding + loss = 96 slots over PP 8 x VP 3
    ("  account_for_embedding_in_pipeline_split: true\n  account_for_loss_in_pipeline_split: true\n", None),
    ("", "num_layers=94 is not divisible by pipeline_model_parallel_size=8"),
    ("  account_for_embedding_in_pipeline_split: true\n", "94 + 1 (embedding / loss counted as layers) = 95"),
    # explicit first / last stages: 94 - 10 - 12 = 72 layers over the other 6 stages, 12 each; 72 / 6 / 3 is whole
    ("  decoder_first_pipeline_num_layers: 10\n  decoder_last_pipeline_num_layers: 12\n", None),
    ("  decoder_first_pipeline_num_layers: 10\n  decoder_last_pipeline_num_layers: 11\n", "leaves 73 for the other 6"),
])
def test_megatron_splits_layers_over_stages_with_the_embedding_loss_and_edge_stages(
        tmp_path: Path, extra: str, error: str | None) -> None:
    y = tmp_path / "megatron.yaml"
    y.write_text("trainer:\n  devices: 64\n  num_nodes: 4\nmodel:\n  num_layers: 94\n  pipeline_model_parallel_size: 8\n"
                 "  expert_model_parallel_size: 32\n  virtual_pipeline_model_parallel_size: 3\n" + extra
                 + "train:\n  micro_batch_size: 1\n  global_batch_size: 8192\n")
    found = [p.message for p in startup_problems(load_config(y, root=tmp_path), 256, 4) if p.error]
    if error is None:
        assert found == []
    else:
        assert len(found) == 1 and error in found[0] and "Megatron refuses to start" in found[0]


def test_megatron_lm_launch_flags_count_the_embedding_and_loss_as_pipeline_layers(tmp_path: Path) -> None:
    sh = tmp_path / "train.sh"
    sh.write_text("torchrun --nproc_per_node 8 --nnodes 4 pretrain_gpt.py --num-layers 94 "
                  "--pipeline-model-parallel-size 8 --expert-model-parallel-size 4 --num-experts 128 "
                  "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split\n")
    assert [p for p in startup_problems(load_config(sh, root=tmp_path), 32, 4) if p.rule == "layers"] == []


def test_a_megatron_bridge_recipe_launch_is_refused_saying_what_to_give_instead() -> None:
    """Megatron-Bridge's own example (tests/data/real/megatron_bridge) launches scripts/training/run_recipe.py, which
    builds its config from a Python recipe: the script holds overrides, not the config. The refusal names that and
    points at the run_config.yaml Megatron-Bridge writes with every checkpoint (which ASAP reads, see
    tests/test_megatron_bridge_run_config.py), instead of only expecting MaxText or Megatron-LM launch lines."""
    script = Path(__file__).parent / "data" / "real" / "megatron_bridge" / "nemotron_3_nano_slurm_pretrain.sh"
    with pytest.raises(ConfigError, match="no training launch found") as info:
        load_config(script)
    assert info.value.hint is not None and "run_recipe.py" in info.value.hint and "--recipe" in info.value.hint
    assert "run_config.yaml" in info.value.hint
