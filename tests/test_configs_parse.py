"""Parsing, mesh resolution and every bad-input path of the sharding config readers."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.configs.detect import load_config, parse_config
from bot.configs.edit import apply_mesh, diff_text
from bot.configs.mesh import Mesh
from bot.errors import ConfigError

DATA = Path(__file__).parent / "data" / "configs"


def err(text: str, match: str) -> ConfigError:
    with pytest.raises(ConfigError, match=match) as info:
        parse_config(text, "cfg.yml")
    assert info.value.source == "cfg.yml"
    return info.value


# ------------------------------------------------------------------------------------------ detection
def test_maxtext_keys_axes_values_and_settings() -> None:
    c = load_config(DATA / "maxtext_llama3_8b_v5p.yml")
    assert c.format == "maxtext"
    assert c.source.endswith("maxtext_llama3_8b_v5p.yml")
    assert c.text == (DATA / "maxtext_llama3_8b_v5p.yml").read_text()
    k = c.key("ici_tensor_parallelism")
    assert (k.axis, k.group, k.value, k.raw, k.line) == ("tensor", "ici", 4, "4", 17)
    assert c.key("ici_fsdp_parallelism").value == -1
    assert c.settings["remat_policy"] == "save_dot_except_mlp"
    assert c.setting("per_device_batch_size") == 4


def test_maxtext_twelve_axes_fold_onto_canonical_axes_and_multiply() -> None:
    text = (
        "ici_fsdp_parallelism: 4\nici_fsdp_transpose_parallelism: 2\nici_tensor_sequence_parallelism: 2\n"
        "ici_context_parallelism: 2\nici_pipeline_parallelism: 2\ndcn_data_parallelism: 2\n"
    )
    c = parse_config(text, "t.yml")
    assert c.mesh(128, 2) == Mesh(ici={"fsdp": 8, "tensor": 2, "sequence": 2, "pipeline": 2}, dcn={"data": 2})
    assert {k.key: k.axis for k in c.keys}["ici_context_parallelism"] == "sequence"


def test_maxtext_absent_keys_take_base_yml_defaults() -> None:
    c = parse_config("ici_tensor_parallelism: 8\n", "t.yml")  # ici_fsdp -1 and dcn_data -1 by default
    assert c.mesh(256, 4) == Mesh(ici={"fsdp": 8, "tensor": 8}, dcn={"data": 4})
    assert any("ici_fsdp_parallelism is not set" in n for n in c.notes(256, 4))


def test_plain_mesh_aliases_and_replica_is_data() -> None:
    c = parse_config("ici_mesh: {data: 2, replica: 2, model: 4, seq: 2, expert: 1}\n", "p.yml")
    assert c.format == "ici_mesh"
    assert c.mesh(32) == Mesh(ici={"data": 4, "tensor": 4, "sequence": 2})
    assert {k.key: k.axis for k in c.keys} == {
        "data": "data", "replica": "data", "model": "tensor", "seq": "sequence", "expert": "expert"
    }


def test_megatron_nested_under_model_and_dp_derived() -> None:
    c = load_config(DATA / "nemo_llama2_70b.yml")
    assert c.format == "megatron"
    assert c.key("tensor_model_parallel_size").path == "model.tensor_model_parallel_size"
    m = c.mesh(64, 8)
    assert m.sizes() == {"data": 2, "fsdp": 1, "tensor": 8, "sequence": 1, "expert": 1, "pipeline": 4}
    assert m.ici == {"tensor": 8}  # tensor parallelism stays inside the NVLink node
    assert c.setting("activations_checkpoint_method") == "block"
    assert c.setting("global_batch_size") == 512


def test_megatron_experts_nest_inside_data_parallel() -> None:
    c = load_config(DATA / "megatron_bridge_moe_flow.yml")
    m = c.mesh(32, 4)
    assert m.size("expert") == 8 and m.size("data") == 2 and m.size("tensor") == 2
    assert c.setting("use_distributed_optimizer") is True


def test_megatron_notes_tp_beyond_nvlink_and_batch_arithmetic() -> None:
    c = parse_config("tensor_model_parallel_size: 16\nmicro_batch_size: 3\nglobal_batch_size: 64\n", "m.yml")
    notes = c.notes(64, 8)
    assert any("more than one 8-GPU NVLink domain" in n for n in notes)
    assert any("global_batch_size=64 is not a multiple of micro_batch_size=3 x data parallel size 4" in n for n in notes)
    assert c.mesh(64, 8).ici == {"tensor": 8} and c.mesh(64, 8).dcn == {"tensor": 2, "data": 4}


def test_megatron_axis_straddling_nodes_is_noted() -> None:
    c = parse_config("tensor_model_parallel_size: 4\ncontext_parallel_size: 3\n", "m.yml")
    m = c.mesh(24, 3)  # nodes of 8: tp=4 fits, cp=3 cannot split over the remaining 2 GPUs
    assert m.ici == {"tensor": 4} and m.dcn == {"sequence": 3, "data": 2}
    assert any("does not split evenly over nodes of 8 GPUs" in n for n in c.notes(24, 3))


def test_maxtext_notes_tensor_over_dcn() -> None:
    c = parse_config("ici_fsdp_parallelism: -1\ndcn_tensor_parallelism: 2\ndcn_data_parallelism: 1\n", "t.yml")
    assert any("never recommended" in n for n in c.notes(16, 2))


def test_anchors_and_aliases_are_read() -> None:
    text = "defaults: &d\n  tensor_model_parallel_size: 4\nmodel:\n  <<: *d\n  micro_batch_size: 2\n"
    c = parse_config(text, "a.yml")
    assert c.key("tensor_model_parallel_size").path == "defaults.tensor_model_parallel_size"
    assert c.mesh(8).size("tensor") == 4


def test_bom_is_kept_and_editing_still_works() -> None:
    text = "\ufeffici_fsdp_parallelism: 8\n"
    c = parse_config(text, "b.yml")
    assert apply_mesh(c, Mesh(ici={"fsdp": 4})) == "\ufeffici_fsdp_parallelism: 4\n"


# ---------------------------------------------------------------------------------- mesh arithmetic
def test_wildcard_that_cannot_fill_the_rest_names_key_and_arithmetic() -> None:
    c = parse_config("ici_fsdp_parallelism: -1\nici_tensor_parallelism: 12\n", "t.yml")
    with pytest.raises(ConfigError, match=r"ici_fsdp_parallelism=-1 cannot fill the rest: 64 devices / 12") as e:
        c.mesh(64)
    assert e.value.field == "ici_fsdp_parallelism"


def test_product_mismatch_names_keys_and_counts() -> None:
    c = parse_config("ici_data_parallelism: 4\nici_tensor_parallelism: 8\nici_fsdp_parallelism: 1\n", "t.yml")
    with pytest.raises(ConfigError) as e:
        c.mesh(64)
    assert "ici_data_parallelism=4 x ici_tensor_parallelism=8 = 32 devices per slice, but the run has 64 chips in 1 slice" in str(e.value)


def test_dcn_mismatch() -> None:
    c = parse_config("ici_fsdp_parallelism: -1\ndcn_data_parallelism: 2\n", "t.yml")
    with pytest.raises(ConfigError, match="dcn_data_parallelism=2 = 2 slices, but the run has 4 slices"):
        c.mesh(64, 4)


def test_two_wildcards_one_from_default_gets_a_hint() -> None:
    c = parse_config("ici_data_parallelism: -1\n", "t.yml")  # ici_fsdp defaults to -1 too
    with pytest.raises(ConfigError, match="only one ici axis may be -1") as e:
        c.mesh(8)
    assert "ici_fsdp_parallelism is not in the file" in (e.value.hint or "")


@pytest.mark.parametrize("devices,slices,match", [(0, 1, "device count"), (8, 0, "slice count"), (10, 4, "10 / 4")])
def test_bad_device_counts(devices: int, slices: int, match: str) -> None:
    c = parse_config("ici_fsdp_parallelism: -1\n", "t.yml")
    with pytest.raises(ConfigError, match=match):
        c.mesh(devices, slices)


def test_plain_mesh_product_mismatch() -> None:
    c = parse_config("ici_mesh: {data: 8, model: 4}\n", "p.yml")
    with pytest.raises(ConfigError, match=r"ici_mesh data=8 x model=4 = 32 devices per slice, but the run has 64"):
        c.mesh(64)


def test_megatron_world_not_divisible() -> None:
    c = parse_config("tensor_model_parallel_size: 8\npipeline_model_parallel_size: 3\n", "m.yml")
    with pytest.raises(ConfigError) as e:
        c.mesh(64)
    assert "tensor_model_parallel_size=8 x pipeline_model_parallel_size=3 = 24 GPUs per model replica" in str(e.value)
    assert "64 / 24 is not an integer" in str(e.value)


def test_megatron_ep_must_fit_in_data_tensor_and_context_ranks() -> None:
    c = parse_config("tensor_model_parallel_size: 1\nexpert_model_parallel_size: 8\n", "m.yml")
    with pytest.raises(ConfigError, match=r"expert_model_parallel_size=8 divides neither the data parallel size 4"):
        c.mesh(4)


def test_megatron_ep_larger_than_dp_folds_over_tensor_ranks() -> None:
    # Megatron-Bridge's Qwen3-235B-A22B H100 recipe: TP 2, PP 8, EP 32 on 256 GPUs, so data parallel is 16 and the
    # expert layers fold EP over data x tensor (MoE parallel folding, expert_tensor_parallel_size 1)
    c = parse_config("tensor_model_parallel_size: 2\npipeline_model_parallel_size: 8\nexpert_model_parallel_size: 32\n",
                     "m.yml")
    m = c.mesh(256, num_slices=32)
    assert m.size("expert") == 16 and m.size("tensor") == 2 and m.size("pipeline") == 8 and m.size("data") == 1
    [note] = [n for n in c.notes(256, 32) if "MoE parallel folding" in n]
    assert "expert_model_parallel_size=32" in note and "all-to-all over all 32 expert ranks" in note


# ------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "value,shown",
    [("-2", "-2"), ("0", "0"), ("2.5", "2.5"), ("4.0", "4.0"), ("four", "'four'"), ("true", "true"),
     ("", "nothing"), ("[2, 2]", "'<sequence>'"), ("{a: 1}", "'<mapping>'"), ("9" * 5000, "'999")],
)
def test_bad_sizes_name_key_and_value(value: str, shown: str) -> None:
    e = err(f"# c\nici_tensor_parallelism: {value}\n", "must be a positive integer or -1")
    assert e.field == "ici_tensor_parallelism"
    assert shown in e.message and "line 2" in e.message


def test_megatron_refuses_minus_one() -> None:
    e = err("model:\n  tensor_model_parallel_size: -1\n", r"must be a positive integer, got -1")
    assert e.field == "model.tensor_model_parallel_size"


def test_quoted_integer_strings_are_sizes() -> None:
    assert parse_config("ici_fsdp_parallelism: '8'\n", "q.yml").key("ici_fsdp_parallelism").value == 8


def test_malformed_yaml_reports_line_and_column() -> None:
    e = err("ici_fsdp_parallelism: 4\nici_tensor_parallelism: [1, 2\n", r"malformed YAML at line \d+, column \d+")
    assert e.field is None


def test_tab_indentation_is_malformed_with_position() -> None:
    err("model:\n\ttensor_model_parallel_size: 2\n", r"malformed YAML at line 2, column 1")


def test_non_printable_character() -> None:
    err("ici_fsdp_parallelism: 4\x07\n", r"line 1, column 24: unacceptable character #x0007")


def test_no_known_keys_lists_expected() -> None:
    e = err("learning_rate: 3e-4\nmicro_batch_size: 4\n", "no sharding keys found")
    assert "ici_fsdp_parallelism" in e.message and "tensor_model_parallel_size" in e.message and "ici_mesh" in e.message


@pytest.mark.parametrize("text,match", [("", "empty"), ("# only a comment\n", "empty"), ("- 1\n- 2\n", "got a list"),
                                        ("42\n", "got a single value")])
def test_not_a_mapping(text: str, match: str) -> None:
    err(text, match)


def test_mixed_formats_refused() -> None:
    e = err("ici_fsdp_parallelism: 8\nmodel:\n  tensor_model_parallel_size: 2\n", "mixes sharding formats")
    assert "maxtext" in e.message and "megatron" in e.message and "line 3" in e.message


def test_duplicate_key_refused_with_both_lines() -> None:
    e = err("ici_fsdp_parallelism: 8\nother: 1\nici_fsdp_parallelism: 4\n", r"appears 2 times \(line 1 .*line 3")
    assert e.field == "ici_fsdp_parallelism"


def test_key_in_two_places_refused() -> None:
    err("model:\n  tensor_model_parallel_size: 2\nsweep:\n  tensor_model_parallel_size: 4\n", "appears 2 times")


def test_multiple_documents_refused() -> None:
    err("ici_fsdp_parallelism: 8\n---\nici_fsdp_parallelism: 4\n", "malformed YAML at line 2.*single document in the stream; but found another document")


@pytest.mark.parametrize(
    "text,match",
    [("ici_mesh: {data: 8, modle: 4}\n", "unknown axis 'modle'.*expected one of: data, replica"),
     ("ici_mesh: 8\n", "must be a mapping of axis name to size"),
     ("ici_mesh: {data: 4, data: 2}\n", "axis data appears twice"),
     ("ici_mesh: {1: 4}\n", "unknown axis 1")],
)
def test_plain_mesh_bad_input(text: str, match: str) -> None:
    err(text, match)


def test_python_tags_are_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = f"ici_fsdp_parallelism: !!python/object/apply:os.system ['touch {marker}']\n"
    with pytest.raises(ConfigError):
        parse_config(text, "evil.yml")
    text2 = f"x: !!python/object/apply:os.system ['touch {marker}']\nici_fsdp_parallelism: 4\n"
    parse_config(text2, "evil.yml")  # the unknown tag sits on an unrelated key: read, never run
    assert not marker.exists()


# ----------------------------------------------------------------------------------------- files
def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yml")


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path)


def test_non_utf8(tmp_path: Path) -> None:
    p = tmp_path / "latin1.yml"
    p.write_bytes("# caf\xe9\nici_fsdp_parallelism: 8\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"not UTF-8 text: byte 0xe9 at offset 5 \(line 1\)"):
        load_config(p)


def test_huge_file_refused_without_reading(tmp_path: Path) -> None:
    p = tmp_path / "huge.yml"
    with p.open("wb") as f:
        f.write(b"ici_fsdp_parallelism: 8\n")
        f.truncate(2 * 1024 * 1024)
    with pytest.raises(ConfigError, match="larger than 1,048,576 bytes"):
        load_config(p)
    with pytest.raises(ConfigError, match="1 MiB"):
        parse_config("ici_fsdp_parallelism: 8\n" + "#" * (1024 * 1024), "big.yml")


def test_crlf_is_kept_when_loading() -> None:
    c = load_config(DATA / "maxtext_crlf_quoted.yml")
    assert "\r\n" in c.text and c.text.encode() == (DATA / "maxtext_crlf_quoted.yml").read_bytes()


# ------------------------------------------------------------------------------------------ editing
def test_megatron_cannot_take_fsdp() -> None:
    c = load_config(DATA / "nemo_llama2_70b.yml")
    with pytest.raises(ConfigError, match="no FSDP axis"):
        apply_mesh(c, Mesh(ici={"fsdp": 8}, dcn={"pipeline": 8}))


def test_apply_refuses_non_positive_axis() -> None:
    c = parse_config("ici_fsdp_parallelism: 8\n", "t.yml")
    with pytest.raises(ConfigError, match="positive integer, got 0"):
        apply_mesh(c, Mesh(ici={"fsdp": 0}))


def test_axis_set_back_to_one_is_updated_not_deleted() -> None:
    c = parse_config("ici_fsdp_parallelism: 4\nici_tensor_parallelism: 2\n", "t.yml")
    assert apply_mesh(c, Mesh(ici={"fsdp": 8})) == "ici_fsdp_parallelism: 8\nici_tensor_parallelism: 1\n"


def test_tag_and_anchor_before_a_value_are_kept() -> None:
    c = parse_config("ici_fsdp_parallelism: &f !!int 4\nici_tensor_parallelism: 2\n", "t.yml")
    assert apply_mesh(c, Mesh(ici={"fsdp": 2, "tensor": 4})).startswith("ici_fsdp_parallelism: &f !!int 2\n")


def test_diff_text_shows_only_mesh_lines() -> None:
    c = load_config(DATA / "megatron_lm_gpt175b.yml")
    new = apply_mesh(c, Mesh(ici={"tensor": 4, "data": 2}, dcn={"data": 16, "pipeline": 8}))
    diff = diff_text(c.text, new, "configs/gpt.yml")
    assert diff.startswith("--- a/configs/gpt.yml\n+++ b/configs/gpt.yml\n")
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("---", "+++"))]
    assert changed == [
        "-tensor_model_parallel_size: 8", "-pipeline_model_parallel_size: 16",
        "+tensor_model_parallel_size: 4", "+pipeline_model_parallel_size: 8",
    ]
    assert diff_text(c.text, c.text, "x") == ""


def test_diff_text_marks_missing_final_newline() -> None:
    assert "\\ No newline at end of file" in diff_text("a: 1", "a: 2", "f.yml")
