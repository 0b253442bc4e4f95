"""torchtitan TOML training configs as a config format (bot/configs/torchtitan.py), on torchtitan's own files.

tests/data/real/torchtitan holds unmodified llama3 TOMLs of pytorch/torchtitan: ``2026/`` from 238fa99 (the last
commit with TOML configs, ``[parallelism]`` table) and ``2024/`` from 9dec370 (the commit of its H100 benchmark
tables, degrees under ``[training]`` / ``[experimental]``). A run.yaml with only chip, num_chips, num_slices and
config gets the mesh, the model, step-time and memory predictions; bad TOML gets one line naming file and key.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import bot.cli.proposals  # noqa: F401  (registers propose)
from bot.cli import cli
from bot.configs.checks import startup_problems
from bot.configs.detect import load_config, parse_config
from bot.configs.edit import apply_mesh, config_diff
from bot.configs.mesh import Mesh
from bot.configs.model_dims import read_model_dims
from bot.errors import ConfigError
from bot.runs.record import ModelSpec, RunRecord
from knowledge.cost_settings import settings_from_config
from knowledge.cost_shapes import resolve_shape

REAL = Path(__file__).parent / "data" / "real" / "torchtitan"
NEW, OLD = REAL / "2026", REAL / "2024"


def _run(tmp_path: Path, toml: Path, chips: int = 64, slices: int = 8, run_id: str = "tt") -> Path:
    run = tmp_path / run_id
    run.mkdir()
    shutil.copy(toml, run / toml.name)
    (run / "run.yaml").write_text(f"id: {run_id}\nchip: h100\nnum_chips: {chips}\nnum_slices: {slices}\n"
                                  f"config: {toml.name}\n")
    return run


def test_both_layouts_read_to_the_same_mesh_in_torchtitans_rank_order() -> None:
    for folder in (NEW, OLD):
        cfg = load_config(folder / "llama3_8b.toml")
        assert cfg.format == "torchtitan"
        # dp_shard = -1 takes all 64 GPUs: 8 per node inside, 8 nodes across
        assert cfg.mesh(64, 8) == Mesh(ici={"fsdp": 8}, dcn={"fsdp": 8})
        # 405B: tp 8 innermost fills each node; FSDP across the nodes
        big = load_config(folder / "llama3_405b.toml")
        assert big.mesh(128, 16) == Mesh(ici={"tensor": 8}, dcn={"fsdp": 16})
    assert "2024" in load_config(OLD / "llama3_8b.toml").vintage  # type: ignore[operator]
    assert "parallelism table" in load_config(NEW / "llama3_8b.toml").vintage  # type: ignore[operator]


def test_toml_is_recognised_by_its_keys_without_the_extension() -> None:
    text = (NEW / "llama3_70b.toml").read_text()
    cfg = parse_config(text, "train-config")
    assert cfg.format == "torchtitan" and cfg.mesh(64, 8) == Mesh(ici={"tensor": 8}, dcn={"fsdp": 8})


def test_pipeline_goes_outermost_and_hsdp_replicas_across_nodes() -> None:
    text = (NEW / "llama3_8b.toml").read_text().replace("data_parallel_replicate_degree = 1",
                                                          "data_parallel_replicate_degree = 2")
    text = text.replace("pipeline_parallel_degree = 1", "pipeline_parallel_degree = 4")
    cfg = parse_config(text, "llama3_8b.toml")
    # world 64: pp 4 (outermost), dp_replicate 2, dp_shard -1 -> 8 (inside a node of 8)
    assert cfg.mesh(64, 8) == Mesh(ici={"fsdp": 8}, dcn={"data": 2, "pipeline": 4})


def test_model_from_flavor_uses_torchtitans_args_and_ffn_rule() -> None:
    for folder in (NEW, OLD):
        dims = read_model_dims(load_config(folder / "llama3_8b.toml"))
        assert dims is not None and not dims.problems
        assert (dims.layers, dims.d_model, dims.d_ff, dims.heads, dims.kv_heads, dims.vocab, dims.mlp_matrices) == (
            32, 4096, 14336, 32, 8, 128256, 3)
        assert dims.seq_len == 8192
    dims70 = read_model_dims(load_config(NEW / "llama3_70b.toml"))
    dims405 = read_model_dims(load_config(NEW / "llama3_405b.toml"))
    assert dims70 is not None and (dims70.layers, dims70.d_model, dims70.d_ff) == (80, 8192, 28672)
    assert dims405 is not None and (dims405.layers, dims405.d_model, dims405.d_ff) == (126, 16384, 53248)
    assert any("@238fa99" in n for n in dims405.notes)


def test_unknown_model_is_named_not_guessed() -> None:
    # llama4 (torchtitan's 17Bx16E / 17Bx128E) is not in ASAP's table; qwen3 8B now is
    text = (NEW / "llama3_8b.toml").read_text().replace('name = "llama3"', 'name = "llama4"', 1)
    dims = read_model_dims(parse_config(text, "q.toml"))
    assert dims is not None and dims.layers is None
    assert "torchtitan model 'llama4' flavor '8B' is not in ASAP's table" in dims.problems[0]
    qwen = read_model_dims(parse_config(text.replace('name = "llama4"', 'name = "qwen3"', 1), "q.toml"))
    assert qwen is not None and (qwen.layers, qwen.d_model, qwen.d_ff) == (36, 4096, 12288)


def test_settings_remat_batch_and_float8() -> None:
    s8 = settings_from_config(load_config(NEW / "llama3_8b.toml"))
    assert (s8.remat_policy, s8.local_batch, s8.micro_batch, s8.seq_len, s8.quantization) == (
        "selective_op", 1, 1, 8192, None)
    s405 = settings_from_config(load_config(NEW / "llama3_405b.toml"))
    assert (s405.remat_policy, s405.quantization, s405.local_batch, s405.batch_divisor) == ("full", "fp8", 2, 8)
    old405 = settings_from_config(load_config(OLD / "llama3_405b.toml"))  # [float8] enable_float8_linear = true
    assert (old405.remat_policy, old405.quantization, old405.local_batch) == ("full", "fp8", 2)
    # no [activation_checkpoint]: torchtitan's default selective with option "2" (every second block)
    bare = (NEW / "llama3_8b.toml").read_text().split("[activation_checkpoint]")[0]
    assert settings_from_config(parse_config(bare, "x.toml")).remat_policy == "selective_layer_2"


def test_loss_parallel_is_torchtitans_default_and_its_disable_key_is_read_in_both_layouts() -> None:
    # torchtitan runs the cross-entropy under loss_parallel whenever TP > 1 unless disable_loss_parallel is set
    # ([training] in 2024, [parallelism] in 2025-26); the real 405B configs (TP 8) leave it on.
    record = RunRecord(id="r", chip="h100", num_chips=512, num_slices=64)
    new = (NEW / "llama3_405b.toml").read_text()
    old = (OLD / "llama3_405b.toml").read_text()
    assert resolve_shape(record, settings_from_config(parse_config(new, "a.toml"))).loss_parallel
    assert resolve_shape(record, settings_from_config(parse_config(old, "b.toml"))).loss_parallel
    new_off = new.replace("[parallelism]\n", "[parallelism]\ndisable_loss_parallel = true\n")
    old_off = old.replace("[training]\n", "[training]\ndisable_loss_parallel = true\n")
    assert not resolve_shape(record, settings_from_config(parse_config(new_off, "c.toml"))).loss_parallel
    assert not resolve_shape(record, settings_from_config(parse_config(old_off, "d.toml"))).loss_parallel
    # the 2024 key in a 2026 layout is not torchtitan's: it does not turn the loss parallel off
    misplaced = new.replace("[training]\n", "[training]\ndisable_loss_parallel = true\n")
    assert resolve_shape(record, settings_from_config(parse_config(misplaced, "e.toml"))).loss_parallel


def test_pipeline_microbatches_in_both_layouts() -> None:
    new = (NEW / "llama3_8b.toml").read_text().replace("pipeline_parallel_degree = 1",
                                                        "pipeline_parallel_degree = 4\npipeline_parallel_microbatch_size = 2")
    new = new.replace("local_batch_size = 1", "local_batch_size = 8")
    assert settings_from_config(parse_config(new, "a.toml")).micro_batch == 2
    old = (OLD / "llama3_8b.toml").read_text().replace("pipeline_parallel_degree = 1", "pipeline_parallel_degree = 4")
    old = old.replace("batch_size = 1", "batch_size = 8")
    assert settings_from_config(parse_config(old, "b.toml")).micro_batch == 2  # 8 split into pp = 4 micro-batches


def test_shape_global_batch_is_local_times_data_parallel_and_memory_behaves_as_torchtitan() -> None:
    cfg = load_config(NEW / "llama3_405b.toml")
    record = RunRecord(id="r", chip="h100", num_chips=512, num_slices=64)
    shape = resolve_shape(record, settings_from_config(cfg))
    assert shape.global_batch == 2 * 512 // 8 and shape.seq_len == 8192  # local 2 x dp (512 / tp 8)
    assert shape.fp8 and shape.remat == "full" and shape.layers == 126
    assert shape.fsdp_gathered_under_pp  # torchtitan's FSDP2-under-PP behaviour, without a run tag
    assert shape.framework == "other"  # eager PyTorch: the caching allocator's reserve and the eager loss apply


def test_degree_edit_changes_only_those_values() -> None:
    cfg = load_config(NEW / "llama3_8b.toml")
    new = apply_mesh(cfg, Mesh(ici={"tensor": 8}, dcn={"fsdp": 4, "pipeline": 2}))
    old_lines, new_lines = cfg.text.splitlines(), new.splitlines()
    assert len(old_lines) == len(new_lines)
    changed = [(a, b) for a, b in zip(old_lines, new_lines, strict=True) if a != b]
    assert changed == [("tensor_parallel_degree = 1", "tensor_parallel_degree = 8"),
                       ("pipeline_parallel_degree = 1", "pipeline_parallel_degree = 2")]
    # the 2024 layout: pp lives under [experimental]; an expert degree it cannot carry is refused
    old = load_config(OLD / "llama3_8b.toml")
    diff = config_diff(old, Mesh(ici={"fsdp": 8}, dcn={"fsdp": 4, "pipeline": 2}), None, "llama3_8b.toml")
    assert "-pipeline_parallel_degree = 1\n+pipeline_parallel_degree = 2" in diff
    with pytest.raises(ConfigError, match="no expert parallelism"):
        apply_mesh(old, Mesh(ici={"fsdp": 4, "expert": 2}))


def test_a_missing_degree_is_added_to_parallelism_and_a_misplaced_mesh_refused() -> None:
    cfg = load_config(NEW / "llama3_8b.toml")
    new = apply_mesh(cfg, Mesh(ici={"fsdp": 4, "expert": 2}))
    assert "context_parallel_degree = 1\nexpert_parallel_degree = 2\n" in new
    assert parse_config(new, "x.toml").mesh(8, 1) == Mesh(ici={"fsdp": 4, "expert": 2})
    # torchtitan puts tp innermost: tensor across nodes with fsdp inside cannot be written
    with pytest.raises(ConfigError, match="tp innermost"):
        apply_mesh(cfg, Mesh(ici={"fsdp": 8}, dcn={"tensor": 2}))
    # batch_size next to local_batch_size (its June 2025 successor) never coexisted: refused, naming both layouts
    with pytest.raises(ConfigError, match=r"mixes torchtitan layouts: training.batch_size"):
        config_diff(cfg, cfg.mesh(8, 1), {"batch_size": 2}, "llama3_8b.toml")


@pytest.mark.parametrize("change,field,words", [
    (("tensor_parallel_degree = 1", 'tensor_parallel_degree = "8"'), "parallelism.tensor_parallel_degree",
     'must be a positive integer, got "8" (line 41)'),
    (("data_parallel_shard_degree = -1", "data_parallel_shard_degree = 0"), "parallelism.data_parallel_shard_degree",
     "must be a positive integer or -1 (the rest), got 0"),
    (("local_batch_size = 1", "local_batch_size = 1.5"), "training.local_batch_size", "must be an integer, got 1.5"),
    (('mode = "selective"', "mode = true"), "activation_checkpoint.mode", "must be a string, got true"),
    (("[parallelism]", "[parallelism"), None, "not valid TOML: Expected ']' at the end of a table declaration "
                                              "(at line 38, column 13)"),
])
def test_bad_toml_is_one_clear_line(change: tuple[str, str], field: str | None, words: str) -> None:
    text = (NEW / "llama3_8b.toml").read_text().replace(*change)
    with pytest.raises(ConfigError) as err:
        parse_config(text, "llama3_8b.toml")
    assert err.value.field == field and words in err.value.message
    assert err.value.render().splitlines()[0].startswith("llama3_8b.toml: ")


def test_huge_or_deeply_nested_toml_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    big.write_text("[training]\n" + "# pad\n" * 200_000)
    with pytest.raises(ConfigError, match=r"larger than 1,048,576 bytes"):
        load_config(big)
    with pytest.raises(ConfigError, match="nested too deeply"):
        parse_config("[training]\nx = " + "[" * 50_000 + "]" * 50_000 + "\n", "deep.toml")


def test_mixed_layouts_are_refused_naming_both() -> None:
    text = (NEW / "llama3_8b.toml").read_text().replace("local_batch_size = 1", "batch_size = 1\n"
                                                         "tensor_parallel_degree = 2")
    with pytest.raises(ConfigError, match=r"mixes torchtitan layouts: training.tensor_parallel_degree"):
        parse_config(text, "m.toml")


def test_startup_rules_in_torchtitans_words() -> None:
    model = ModelSpec(layers=32, d_model=4096, heads=32, kv_heads=8, d_ff=14336)
    text = (NEW / "llama3_8b.toml").read_text()
    wrong = parse_config(text.replace("data_parallel_shard_degree = -1", "data_parallel_shard_degree = 16"), "a.toml")
    [p] = startup_problems(wrong, 64, 8, model)
    assert p.error and "Invalid parallel dims: dp_replicate(1) * dp_shard(16) * cp(1) * tp(1) * pp(1) != " \
        "WORLD_SIZE(64)" in p.message
    pp = parse_config(text.replace("local_batch_size = 1", "local_batch_size = 3\nglobal_batch_size = 100")
                      .replace("pipeline_parallel_degree = 1", "pipeline_parallel_degree = 2\n"
                               "pipeline_parallel_microbatch_size = 2"), "b.toml")
    errors = [p.message for p in startup_problems(pp, 64, 8, model) if p.error]
    assert any("Batch size 3 must be divisible by microbatch_size 2" in e for e in errors)
    assert any("global batch size must be multiple of local batch size times data-parallel degree "
               "(100 % (3 * 32) != 0)" in e for e in errors)
    tp16 = parse_config(text.replace("tensor_parallel_degree = 1", "tensor_parallel_degree = 16"), "c.toml")
    found = [p.render() for p in startup_problems(tp16, 64, 8, model)]
    assert any("n_kv_heads=8 is not divisible by tensor_parallel_degree=16" in f for f in found)
    assert any(f.startswith("warning: tensor_parallel_degree=16 crosses nodes") for f in found)


def test_why_and_propose_on_a_run_yaml_with_only_chip_and_the_8b_toml(tmp_path: Path) -> None:
    _run(tmp_path, NEW / "llama3_8b.toml")
    why = CliRunner().invoke(cli, ["--runs-dir", str(tmp_path), "why", "tt", "--json"])
    assert why.exit_code == 0, why.output
    report = json.loads(why.output)
    assert report["kpis"]["model_source"] == "config llama3_8b.toml"
    assert 7.9e9 < report["run"]["params"] < 8.1e9  # Llama 3 8B
    assert report["run"]["mesh"] == {"ici": {"fsdp": 8}, "dcn": {"fsdp": 8}}
    out = CliRunner().invoke(cli, ["--runs-dir", str(tmp_path), "propose", "tt", "--json"])
    assert out.exit_code == 0, out.output
    answer = json.loads(out.output)
    assert answer["baseline"]["predicted"]["step_time_ms"] > 0
    assert 10e9 < answer["baseline"]["predicted"]["memory_per_chip_bytes"] < 80e9
    for p in answer["proposals"]:
        assert p["diff"] is None or p["diff"].startswith("--- a/llama3_8b.toml")
        if p["diff"]:
            changed = [ln for ln in p["diff"].splitlines() if ln[:1] in "+-" and not ln.startswith(("---", "+++"))]
            keys = {k.rsplit(".", 1)[-1] for k in p["settings"]}  # a remat change writes [activation_checkpoint]
            assert all("_degree = " in ln or ln[1:].split(" = ")[0] in keys for ln in changed)


def test_bad_toml_in_a_run_is_one_message_not_a_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "src" / "llama3_8b.toml"
    bad.parent.mkdir()
    bad.write_text((NEW / "llama3_8b.toml").read_text().replace("tensor_parallel_degree = 1",
                                                                 "tensor_parallel_degree = [8]"))
    _run(tmp_path, bad, chips=8, slices=1)
    out = CliRunner().invoke(cli, ["--runs-dir", str(tmp_path), "why", "tt"])
    from bot.errors import AsapError

    assert isinstance(out.exception, AsapError)
    assert "parallelism.tensor_parallel_degree: must be a positive integer, got [8]" in out.exception.render()


def test_review_of_a_tp_change_sees_the_global_batch_follow_the_data_parallel_degree(tmp_path: Path) -> None:
    run = _run(tmp_path, NEW / "llama3_8b.toml")
    new = tmp_path / "new.toml"
    new.write_text((NEW / "llama3_8b.toml").read_text().replace("tensor_parallel_degree = 1",
                                                                 "tensor_parallel_degree = 8"))
    out = CliRunner().invoke(cli, ["--runs-dir", str(tmp_path), "review", str(run / "llama3_8b.toml"), str(new),
                                   "--run", "tt"])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "fsdp=8 | dcn fsdp=8 -> tensor=8 | dcn fsdp=8" in text
    # no global_batch_size: torchtitan runs local 1 x dp sequences, dp 64 -> 8
    assert "the global batch changes 64 -> 8 sequences" in text
