"""torchtitan of March 2026 on, before a run: its config function read from the Python source (bot/configs/torchtitan_py.py).

Since pytorch/torchtitan #2386 a run is ``--module llama3 --config llama3_70b``: a function in
``torchtitan/models/llama3/config_registry.py`` returning ``Trainer.Config``. Before this reader, a run.yaml naming that
file (a pre-flight question, or a pull request editing it) got "no readable sharding config". The files here are
torchtitan's own at b5bcd76c (tests/data/real/README.md); the JSON records of two of their functions, written by
torchtitan's own code at the same commit, are the independent check of what the source is read as.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import bot.cli.proposals  # noqa: F401  (registers propose)
from bot.cli import cli
from bot.configs.detect import load_config, parse_config
from bot.configs.edit import apply_mesh, apply_settings, config_diff, reparse
from bot.configs.mesh import Mesh
from bot.configs.torchtitan_json import FUNCTION_SOURCE
from bot.errors import ConfigError
from knowledge.cost_settings import settings_from_config

REAL = Path(__file__).parent / "data" / "real" / "torchtitan"
LLAMA = REAL / "2026-source" / "torchtitan" / "models" / "llama3" / "config_registry.py"
DSV3 = REAL / "2026-source" / "torchtitan" / "models" / "deepseek_v3" / "config_registry.py"
DUMPS = REAL / "2026-dump"
LAUNCH = "torchrun --nproc_per_node=8 -m torchtitan.train --module {module} --config {fn}"


def _read(path: Path, fn: str, extra: str = "") -> object:
    module = path.parent.name
    return load_config(path, command=LAUNCH.format(module=module, fn=fn) + extra)


@pytest.mark.parametrize(("source", "fn", "dump", "chips", "slices"), [
    (LLAMA, "llama3_70b", "llama3_70b.json", 64, 8),
    (DSV3, "deepseek_v3_16b", "deepseek_v3_16b.json", 8, 1),
])
def test_the_source_reads_as_torchtitans_own_record_of_the_same_function(source: Path, fn: str, dump: str,
                                                                          chips: int, slices: int) -> None:
    """What torchtitan itself built from the function (its JSON record) is what ASAP reads from the source."""
    cfg, record = _read(source, fn), load_config(DUMPS / dump)
    assert cfg.format == "torchtitan" and cfg.vintage == FUNCTION_SOURCE  # type: ignore[attr-defined]
    assert cfg.mesh(chips, slices) == record.mesh(chips, slices)  # type: ignore[attr-defined]
    mine, theirs = settings_from_config(cfg), settings_from_config(record)  # type: ignore[arg-type]
    for name in ("seq_len", "local_batch", "micro_batch", "global_batch", "remat_policy", "loss_compiled",
                 "tp_comm_overlap"):
        assert getattr(mine, name) == getattr(theirs, name), name
    assert mine.model_dims is not None and theirs.model_dims is not None
    for name, value in theirs.model_dims.stated().items():
        if name in ("layers", "d_model", "heads", "kv_heads", "vocab", "experts", "experts_per_token"):
            assert mine.model_dims.stated().get(name) == value, name


def test_llama3_70b_is_tensor_8_inside_the_node_and_fsdp_over_nodes() -> None:
    cfg = _read(LLAMA, "llama3_70b")
    assert cfg.mesh(64, 8) == Mesh(ici={"tensor": 8}, dcn={"fsdp": 8})  # type: ignore[attr-defined]
    tp = cfg.key("tensor_parallel_degree")  # type: ignore[attr-defined]
    assert tp.value == 8 and tp.line == 294 and "llama3_70b" in tp.via  # the literal in ParallelismConfig(...)


def test_a_derived_function_keeps_its_base_and_applies_its_own_assignments() -> None:
    """llama3_8b_mxfp8: ``config = llama3_8b()``, then compile on and MXFP8 linears through model_registry."""
    assert any("llama3_8b is also the base of 2 other" in r and "llama3_8b_mxfp8" in r
               for r in _read(LLAMA, "llama3_8b").reading)  # type: ignore[attr-defined]  # an edit reaches them too
    st = settings_from_config(_read(LLAMA, "llama3_8b_mxfp8"))  # type: ignore[arg-type]
    assert (st.seq_len, st.local_batch) == (8192, 1)  # from llama3_8b's TrainingConfig
    assert st.quantization == "mxfp8" and st.loss_compiled
    base = settings_from_config(_read(LLAMA, "llama3_8b"))  # type: ignore[arg-type]
    assert base.quantization is None and not base.loss_compiled


def test_float8_defaults_to_rowwise_and_async_tp_comes_from_a_named_compile_config() -> None:
    """llama3_405b binds ``compile_config = CompileConfig(enable=True, enable_async_tensor_parallel=True)`` and passes
    the name; its Float8LinearConverter states no recipe, and torchtitan's default recipe is now rowwise."""
    st = settings_from_config(_read(LLAMA, "llama3_405b"))  # type: ignore[arg-type]
    assert st.quantization == "fp8_rowwise" and st.tp_comm_overlap and st.remat_policy == "full"


def test_the_launch_flags_still_win_over_the_function() -> None:
    cfg = _read(LLAMA, "llama3_70b", " --parallelism.pipeline_parallel_degree 2 --parallelism.tensor_parallel_degree 4")
    assert cfg.mesh(64, 8) == Mesh(ici={"tensor": 4, "fsdp": 2}, dcn={"fsdp": 4, "pipeline": 2})  # type: ignore[attr-defined]
    assert any("--parallelism.tensor_parallel_degree 4" in r and "line 294" in r for r in cfg.reading)  # type: ignore[attr-defined]


def test_run_train_sh_style_config_variable_names_the_function() -> None:
    cfg = load_config(LLAMA, command="MODULE=llama3 CONFIG=llama3_70b ./run_train.sh")
    assert cfg.key("tensor_parallel_degree").value == 8


def test_a_statement_asap_does_not_evaluate_is_named_in_the_reading() -> None:
    """deepseek_v3_16b_minimal_async_ep calls ``enable_fused_swiglu(config)``: said, not guessed at."""
    cfg = _read(DSV3, "deepseek_v3_16b_minimal_async_ep")
    # its own ParallelismConfig replaces the base's: every degree 1, a one-GPU config, which 8 GPUs cannot run
    assert {k.key: k.value for k in cfg.keys}["expert_parallel_degree"] == 1  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"!= WORLD_SIZE\(8\)"):
        cfg.mesh(8, 1)  # type: ignore[attr-defined]
    assert any("does not evaluate" in r and "deepseek_v3_16b_minimal_async_ep" in r for r in cfg.reading)  # type: ignore[attr-defined]


def _changed(diff: str) -> list[str]:
    return [ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]


def test_a_mesh_proposal_is_written_as_assignments_in_the_launched_function_and_reads_back() -> None:
    """torchtitan's README: change a run by editing its config function. llama3_70b returns Trainer.Config(...)
    directly, so the edit binds it, assigns the changed degrees and returns it; nothing else in the file moves."""
    cfg = _read(LLAMA, "llama3_70b")
    target = Mesh(ici={"tensor": 4, "sequence": 2}, dcn={"fsdp": 8})
    diff = config_diff(cfg, target, None, "config_registry.py")  # type: ignore[arg-type]
    assert sorted(_changed(diff)) == sorted(["-    return Trainer.Config(", "+    config = Trainer.Config(",
                                             "+    config.parallelism.tensor_parallel_degree = 4",
                                             "+    config.parallelism.context_parallel_degree = 2", "+    return config"])
    text = apply_mesh(cfg, target)  # type: ignore[arg-type]
    assert reparse(cfg, {cfg.source: text}).mesh(64, 8) == target  # type: ignore[arg-type, attr-defined]
    assert text.count("config.parallelism") == LLAMA.read_text().count("config.parallelism") + 2  # only these two


def test_settings_are_written_in_the_functions_own_fields() -> None:
    cfg = _read(LLAMA, "llama3_70b")
    text = apply_settings(cfg, {"training.global_batch_size": 64, "compile.enable": True})  # type: ignore[arg-type]
    assert "    config.training.num_tokens_per_train_step = 524288\n" in text  # 64 sequences of 8,192 tokens
    again = settings_from_config(reparse(cfg, {cfg.source: text}))  # type: ignore[arg-type]
    assert again.global_batch == 64 and again.remat_policy == "full"
    text = apply_settings(cfg, {"activation_checkpoint.mode": "selective",  # type: ignore[arg-type]
                                "activation_checkpoint.selective_ac_option": "op"})
    assert "    config.activation_checkpoint = SelectiveAC.Config()\n" in text
    assert settings_from_config(reparse(cfg, {cfg.source: text})).remat_policy == "selective_op"  # type: ignore[arg-type]


def test_a_derived_function_is_edited_in_place_and_gets_the_policy_import_it_lacks(tmp_path: Path) -> None:
    shutil.copytree(LLAMA.parent, tmp_path / "torchtitan" / "models" / "llama3")
    (tmp_path / "torchtitan_recipes").mkdir()
    recipe = tmp_path / "torchtitan_recipes" / "llama3.py"
    recipe.write_text(RECIPE)
    cfg = load_config(recipe, command="x --config llama3_70b_tp4_cp2_h100", root=tmp_path)
    diff = config_diff(cfg, Mesh(ici={"tensor": 8}, dcn={"fsdp": 8}), {"activation_checkpoint.mode": "none"},
                       "torchtitan_recipes/llama3.py")
    assert sorted(_changed(diff)) == sorted(["-    config.parallelism.tensor_parallel_degree = 4",
                                             "+    config.parallelism.tensor_parallel_degree = 8",
                                             "-    config.parallelism.context_parallel_degree = 2",
                                             "+    config.parallelism.context_parallel_degree = 1",
                                             "+    config.activation_checkpoint = None"])
    text = apply_settings(cfg, {"activation_checkpoint.mode": "full"})
    assert "from torchtitan.distributed.activation_checkpoint import FullAC\n" in text  # the recipe imports none
    assert (tmp_path / "torchtitan" / "models" / "llama3" / "config_registry.py").read_text() == LLAMA.read_text()


def test_a_value_the_launch_command_sets_is_not_written_into_the_function() -> None:
    cfg = _read(LLAMA, "llama3_70b", " --parallelism.tensor_parallel_degree 8")
    with pytest.raises(ConfigError, match=r"--parallelism\.tensor_parallel_degree 8") as err:
        apply_mesh(cfg, Mesh(ici={"tensor": 4, "fsdp": 2}, dcn={"fsdp": 8}))  # type: ignore[arg-type]
    assert err.value.field == "parallelism.tensor_parallel_degree"


@pytest.mark.parametrize(("text", "command", "field", "words"), [
    ("from torchtitan.trainer import Trainer\ndef a() -> Trainer.Config:\n    return Trainer.Config(\n",
     None, None, "not valid Python"),
    (LLAMA.read_text(), "x --config llama3_7b", "command", "does not define"),
    (LLAMA.read_text(), None, "command", "functions return Trainer.Config"),
    (LLAMA.read_text(), "x --config 'a;b'", "command", "not a Python function name"),
    ("import os\nfrom torchtitan.trainer import Trainer\nfrom torchtitan.config import ParallelismConfig\n"
     "def a() -> Trainer.Config:\n    return Trainer.Config(parallelism=ParallelismConfig(\n"
     "        tensor_parallel_degree=int(os.environ['TP'])))\n",
     None, "parallelism.tensor_parallel_degree", "line 6"),
    ("from torchtitan.trainer import Trainer\nN = " + "+".join(["1"] * 20000) + "\ndef a() -> Trainer.Config:\n"
     "    return Trainer.Config()\n", None, None,
     "cannot be parsed as Python"),  # an expression bomb: refused, not a RecursionError traceback
    ("from torchtitan.trainer import Trainer\ndef a() -> Trainer.Config:\n    config = b()\n    return config\n"
     "def b() -> Trainer.Config:\n    config = a()\n    return config\n", "x --config a", "b", "deep"),
])
def test_what_cannot_be_read_is_an_error_naming_the_place(text: str, command: str | None, field: str | None,
                                                           words: str) -> None:
    with pytest.raises(ConfigError, match=words) as err:
        parse_config(text, "torchtitan_recipes/mine.py", command=command)
    assert err.value.field == field


def test_the_file_is_read_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    text = (f"open({str(marker)!r}, 'w').write('x')\nfrom torchtitan.trainer import Trainer\n"
            "from torchtitan.config import ParallelismConfig\n"
            f"def a() -> Trainer.Config:\n    open({str(marker)!r}, 'w')\n"
            "    return Trainer.Config(parallelism=ParallelismConfig(tensor_parallel_degree=2))\n")
    cfg = parse_config(text, "mine.py")
    assert cfg.key("tensor_parallel_degree").value == 2 and not marker.exists()


def test_propose_answers_a_run_that_names_only_the_config_function(tmp_path: Path) -> None:
    """The pre-flight question a torchtitan user asks today: run.yaml points at the registry and the launch."""
    run = tmp_path / "runs" / "tt70b"
    shutil.copytree(LLAMA.parent, run / "torchtitan" / "models" / "llama3")
    (run / "run.yaml").write_text(
        "id: tt70b\nframework: other\ntags: [torchtitan]\nchip: h100\nnum_chips: 64\nnum_slices: 8\n"
        "config: torchtitan/models/llama3/config_registry.py\n"
        f"command: \"{LAUNCH.format(module='llama3', fn='llama3_70b')}\"\nprofile: []\n")
    out = CliRunner().invoke(cli, ["--runs-dir", str(tmp_path / "runs"), "propose", "tt70b"])
    assert out.exit_code == 0, out.output
    said = " ".join(out.output.split())
    assert "current mesh tensor=8 | dcn fsdp=8" in said
    assert "function llama3_70b" in said and "no readable sharding config" not in said


RECIPE = '''"""Configs of my cluster, as torchtitan's README says to write them (torchtitan_recipes/llama3.py)."""
from torchtitan.models.llama3.config_registry import llama3_70b
from torchtitan.trainer import Trainer


def llama3_70b_tp4_cp2_h100() -> Trainer.Config:
    config = llama3_70b()
    config.parallelism.tensor_parallel_degree = 4
    config.parallelism.context_parallel_degree = 2
    return config
'''


def test_a_recipe_deriving_from_torchtitans_registry_is_read_through_the_import(tmp_path: Path) -> None:
    """torchtitan_recipes/<model>.py imports its base from torchtitan/models/<model>/config_registry.py: the base is
    found inside the repository (never imported), its model and settings kept, the recipe's assignments applied."""
    shutil.copytree(LLAMA.parent, tmp_path / "torchtitan" / "models" / "llama3")
    (tmp_path / "torchtitan_recipes").mkdir()
    recipe = tmp_path / "torchtitan_recipes" / "llama3.py"
    recipe.write_text(RECIPE)
    cfg = load_config(recipe, command="torchrun -m torchtitan.train --module torchtitan_recipes.llama3 "
                                      "--config llama3_70b_tp4_cp2_h100", root=tmp_path)
    assert cfg.mesh(64, 8) == Mesh(ici={"tensor": 4, "sequence": 2}, dcn={"fsdp": 8})
    st = settings_from_config(cfg)
    assert st.remat_policy == "full" and (st.seq_len, st.local_batch) == (8192, 8)  # llama3_70b's, kept
    assert st.model_dims is not None and st.model_dims.stated()["layers"] == 80  # llama3's 70B via model_registry


def test_a_base_outside_the_repository_is_named_not_guessed(tmp_path: Path) -> None:
    (tmp_path / "torchtitan_recipes").mkdir()
    recipe = tmp_path / "torchtitan_recipes" / "llama3.py"
    recipe.write_text(RECIPE)
    with pytest.raises(ConfigError, match=r"torchtitan\.models\.llama3\.config_registry\.llama3_70b") as err:
        load_config(recipe, command="x --config llama3_70b_tp4_cp2_h100", root=tmp_path)
    assert "cannot find inside the repository" in err.value.message


def test_apply_commits_the_assignments_to_the_launched_function_in_the_repository(tmp_path: Path) -> None:
    """``asap apply``: a bot branch whose only change is the launched function's new assignments, and that reads back
    to the proposal's mesh with the run's own command."""
    import subprocess

    from bot.analysis.analyze import analyze_run
    from bot.apply import apply_proposal
    from bot.proposals.engine import propose
    from bot.runs.store import LocalRunStore
    from integrations.codehost.localgit import LocalGitHost

    command = LAUNCH.format(module="llama3", fn="llama3_8b") + " --parallelism.tensor_parallel_degree 2"
    run_dir = tmp_path / "runs" / "tt"
    shutil.copytree(LLAMA.parent, run_dir / "torchtitan" / "models" / "llama3")
    (run_dir / "run.yaml").write_text(
        "id: tt\nframework: other\ntags: [torchtitan]\nchip: h100\nnum_chips: 8\nnum_slices: 1\n"
        f"config: torchtitan/models/llama3/config_registry.py\ncommand: \"{command}\"\n")
    repo = tmp_path / "titan"
    shutil.copytree(LLAMA.parent, repo / "torchtitan" / "models" / "llama3")
    for args in (["init", "-q", "-b", "main"], ["add", "."],
                 ["-c", "user.name=Dev", "-c", "user.email=dev@acme.dev", "commit", "-qm", "init"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    runs = LocalRunStore(tmp_path / "runs")
    run = runs.get("tt")
    pset = propose(run, analyze_run(run))
    assert pset.proposals, "a run read from its config function gets proposals"
    p = pset.proposals[0]
    path = "torchtitan/models/llama3/config_registry.py"
    res = apply_proposal("tt", p.rank, None, LocalGitHost(repo), runs=runs, proposals=pset, config_path=path)
    after = subprocess.run(["git", "-C", str(repo), "show", f"{res.branch}:{path}"], check=True, capture_output=True,
                           text=True).stdout
    added = [ln for ln in _changed(config_diff_text(LLAMA.read_text(), after)) if ln.startswith("+")]
    assert added and all(ln.startswith(("+    config", "+    return config")) for ln in added)
    again = parse_config(after, path, command=command)
    assert again.mesh(8, 1).short() == p.mesh_short
    assert "tensor_parallel_degree" not in after.split("def llama3_8b()")[1].split("def ")[0]  # the command's to set


def config_diff_text(before: str, after: str) -> str:
    from bot.configs.edit import diff_text

    return diff_text(before, after, "config_registry.py")


def _edited(fn: str, old: str, new: str) -> str:
    """The registry with one function's text changed."""
    text = LLAMA.read_text()
    start = text.index(f"def {fn}()")
    end = text.index("\ndef ", start + 1)
    return text[:start] + text[start:end].replace(old, new) + text[end:]


def test_review_of_a_pull_request_reads_the_one_function_it_changes(tmp_path: Path) -> None:
    """A PR that edits llama3_70b's ParallelismConfig in the registry: no run names a function, so the review reads the
    function the change touches, on both sides."""
    from bot.proposals.review import review

    new = tmp_path / "config_registry.py"
    new.write_text(_edited("llama3_70b", "tensor_parallel_degree=8,", "tensor_parallel_degree=4,\n"
                           "            context_parallel_degree=2,"))
    result = review(LLAMA, new, num_chips=64, num_slices=8)
    assert (result.old.mesh_short, result.new.mesh_short) == ("tensor=8 | dcn fsdp=8", "tensor=4 sequence=2 | dcn fsdp=8")


def test_review_of_a_change_to_several_functions_asks_which_one_runs(tmp_path: Path) -> None:
    from bot.proposals.review import review

    new = tmp_path / "config_registry.py"
    text = _edited("llama3_70b", "tensor_parallel_degree=8,", "tensor_parallel_degree=4,")
    new.write_text(text.replace("num_tokens_per_microbatch_per_dp_rank=1 * 8192", "num_tokens_per_microbatch_per_dp_rank=2 * 8192"))
    with pytest.raises(ConfigError, match=r"touches 2 config functions \(llama3_70b, llama3_8b\)") as err:
        review(LLAMA, new, num_chips=64, num_slices=8)
    assert err.value.field == "command"


def test_gpt_oss_120b_is_torchtitans_gpt_oss_with_its_windowed_layers() -> None:
    """torchtitan's gpt_oss_120b (``model_registry("120b")``): the sizes of ``_120b`` in
    torchtitan/models/gpt_oss/__init__.py @ b5bcd76c, every other layer over a 128-token window."""
    source = REAL / "2026-source" / "torchtitan" / "models" / "gpt_oss" / "config_registry.py"
    st = settings_from_config(_read(source, "gpt_oss_120b"))  # type: ignore[arg-type]
    assert st.model_dims is not None
    dims = st.model_dims.stated()
    assert {k: dims.get(k) for k in ("layers", "d_model", "heads", "kv_heads", "head_dim", "experts",
                                     "experts_per_token", "d_ff", "vocab", "sliding_window", "global_every")} == {
        "layers": 36, "d_model": 2880, "heads": 64, "kv_heads": 8, "head_dim": 64, "experts": 128,
        "experts_per_token": 4, "d_ff": 2880, "vocab": 201088, "sliding_window": 128, "global_every": 2}
    assert (st.seq_len, st.local_batch, st.remat_policy) == (8192, 1, "full")


def test_moonlight_is_deepseek_v3s_layout_with_kimis_vocabulary() -> None:
    """``model_registry("moonlight-16B-A3B")`` of torchtitan's kimi_k2_7 (``_moonlight_16b_a3b_config`` @ b5bcd76c)."""
    text = ("from torchtitan.models.kimi_k2_7 import model_registry\nfrom torchtitan.trainer import Trainer\n"
            "from torchtitan.config import TrainingConfig\n\n\ndef moonlight() -> Trainer.Config:\n"
            "    return Trainer.Config(model_spec=model_registry(\"moonlight-16B-A3B\"),\n"
            "                          training=TrainingConfig(num_tokens_per_microbatch_per_dp_rank=4 * 4096,\n"
            "                                                  max_context_length=4096))\n")
    dims = settings_from_config(parse_config(text, "torchtitan_recipes/kimi.py")).model_dims
    assert dims is not None
    got = dims.stated()
    assert {k: got.get(k) for k in ("vocab", "d_model", "layers", "dense_layers", "experts", "experts_per_token",
                                    "shared_experts", "kv_lora_rank", "d_ff")} == {
        "vocab": 163840, "d_model": 2048, "layers": 27, "dense_layers": 1, "experts": 64, "experts_per_token": 6,
        "shared_experts": 2, "kv_lora_rank": 512, "d_ff": 1408}


def test_a_python_file_that_is_no_torchtitan_config_function_says_what_to_point_at(tmp_path: Path) -> None:
    """A Megatron-Bridge perf recipe (Python building a ConfigContainer) was reported as 'malformed YAML at line 14'."""
    recipe = tmp_path / "llama3.py"
    recipe.write_text('"""GB200 performance recipes."""\nfrom megatron.bridge.perf_recipes.llama.common import '
                      'ConfigContainer\n\n\ndef llama3_8b() -> ConfigContainer:\n    cfg = base()\n    return cfg\n')
    with pytest.raises(ConfigError, match="run_config.yaml Megatron-Bridge writes") as err:
        load_config(recipe)
    assert "YAML" not in err.value.message.split("run_config")[0] and err.value.field == "config"
    with pytest.raises(ConfigError, match="only as a torchtitan config function"):
        parse_config("print('hello')\n", "train.py")


def test_bases_called_many_times_are_read_once() -> None:
    """A module whose functions each call their base several times: read in linear time, not 3^depth."""
    lines = ["from torchtitan.trainer import Trainer", "from torchtitan.config import ParallelismConfig", "",
             "def f0() -> Trainer.Config:",
             "    return Trainer.Config(parallelism=ParallelismConfig(tensor_parallel_degree=2))"]
    for i in range(1, 8):
        lines += [f"def f{i}() -> Trainer.Config:", f"    a = f{i - 1}()", f"    b = f{i - 1}()", f"    config = f{i - 1}()",
                  "    return config"]
    cfg = parse_config("\n".join(lines) + "\n", "mine.py", command="x --config f7")
    assert cfg.key("tensor_parallel_degree").value == 2


@pytest.mark.parametrize(("chips", "outside", "hint"), [
    (4, False, "make run.yaml's chip count"),  # tensor 8 on 4 GPUs: torchtitan's own ParallelDims error
    (64, True, "fix what the config's error names"),  # the registry symlinked from outside the run's repository
])
def test_why_a_config_cannot_be_used_gets_the_hint_that_fits(tmp_path: Path, chips: int, outside: bool,
                                                              hint: str) -> None:
    from bot.analysis.analyze import analyze_run
    from bot.errors import AsapError
    from bot.runs.store import LocalRunStore

    run = tmp_path / "runs" / "tt"
    (run / "torchtitan" / "models").mkdir(parents=True)
    if outside:
        (tmp_path / "elsewhere").mkdir()
        shutil.copytree(LLAMA.parent, tmp_path / "elsewhere" / "llama3")
        (run / "torchtitan" / "models" / "llama3").symlink_to(tmp_path / "elsewhere" / "llama3")
    else:
        shutil.copytree(LLAMA.parent, run / "torchtitan" / "models" / "llama3")
    (run / "run.yaml").write_text(
        f"id: tt\nframework: torchtitan\nchip: h100\nnum_chips: {chips}\nnum_slices: {max(chips // 8, 1)}\n"
        "config: torchtitan/models/llama3/config_registry.py\n"
        f"command: \"{LAUNCH.format(module='llama3', fn='llama3_70b')}\"\n")
    with pytest.raises(AsapError) as err:
        analyze_run(LocalRunStore(tmp_path / "runs").get("tt"))
    assert err.value.hint is not None and err.value.hint.startswith(hint), err.value.render()
    assert ("outside the run folder" if outside else "WORLD_SIZE(4)") in err.value.message
