"""torchtitan settings edits and launch overrides, on torchtitan's own TOML files.

tests/data/real/torchtitan holds unmodified llama3 TOMLs of pytorch/torchtitan (BSD-3-Clause; sources in
tests/data/real/README.md): ``2026/`` from 238fa99 (the last commit with TOML configs) and ``2024/`` from 9dec370.
A proposal that changes activation checkpointing or the batch split writes those keys (only their value spans, or
a new line under the right table), the result reads back to what the proposal priced, run.yaml's ``command:``
overrides (``--activation_checkpoint.mode full``) win over the file as in torchtitan's ConfigManager, and
``asap apply`` commits the same edit on a branch.
"""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest

from bot.apply import apply_proposal
from bot.cli import main
from bot.configs.detect import load_config, parse_config
from bot.configs.edit import apply_settings, config_diff, settings_applied
from bot.configs.mesh import Mesh
from bot.configs.sharding import ShardingConfig
from bot.errors import AsapError, ConfigError
from bot.proposals.moves import SettingsMove
from bot.proposals.settings import apply as priced_settings
from bot.proposals.settings import expand
from bot.runs.record import RunRecord
from bot.runs.store import LocalRunStore
from integrations.codehost.localgit import LocalGitHost
from knowledge.cost_settings import settings_from_config
from knowledge.cost_shapes import resolve_shape

REAL = Path(__file__).parent / "data" / "real" / "torchtitan"
NEW, OLD = REAL / "2026", REAL / "2024"
TP2_FULL = ("CONFIG_FILE=./train_configs/llama3_8b.toml ./run_train.sh --training.steps 10 "
            "--activation_checkpoint.mode full --parallelism.tensor_parallel_degree 2")


def _changes(cfg: ShardingConfig, move: SettingsMove, chips: int, dp: int) -> list:  # type: ignore[type-arg]
    settings = settings_from_config(cfg)
    record = RunRecord(id="r", chip="h100", num_chips=chips, num_slices=chips // 8)
    from knowledge.cost_shapes import config_global_batch

    return expand(move, settings=settings, config=cfg, framework="other", runyaml_remat=None,
                  runyaml_micro_batch=None, global_batch=config_global_batch(record, settings), data_parallel=dp)


def _changed_lines(old: str, new: str) -> list[tuple[str, str]]:
    a, b = old.splitlines(), new.splitlines()
    assert len(a) == len(b)
    return [(x, y) for x, y in zip(a, b, strict=True) if x != y]


# ------------------------------------------------------------------------------------------- remat edits
def test_a_lighter_remat_proposal_rewrites_only_the_mode_value_keeping_its_comment() -> None:
    cfg = load_config(NEW / "llama3_8b.toml")  # mode = "selective", selective_ac_option = "op"
    [to_none] = _changes(cfg, SettingsMove(change="remat", direction="lighter"), 64, 64)
    assert to_none.config_values == {"activation_checkpoint.mode": "none"}
    new = apply_settings(cfg, to_none.config_values)
    assert _changed_lines(cfg.text, new) == [('mode = "selective"  # ["none", "selective", "full"]',
                                              'mode = "none"  # ["none", "selective", "full"]')]
    start = cfg.text.index('"selective"  # [')
    assert new == cfg.text[:start] + '"none"' + cfg.text[start + len('"selective"'):]  # every other byte kept
    diff = config_diff(cfg, cfg.mesh(64, 8), to_none.config_values, "llama3_8b.toml")
    assert [ln for ln in diff.splitlines() if ln[:1] in "+-"][2:] == [
        '-mode = "selective"  # ["none", "selective", "full"]', '+mode = "none"  # ["none", "selective", "full"]']
    # the 2024 file's single quotes are kept
    old = load_config(OLD / "llama3_8b.toml")
    edited = apply_settings(old, {"activation_checkpoint.mode": "full"})
    assert _changed_lines(old.text, edited) == [("mode = 'selective'  # ['none', 'selective', 'full']",
                                                 "mode = 'full'  # ['none', 'selective', 'full']")]


def test_every_lighter_policy_reads_back_as_the_settings_the_proposal_priced() -> None:
    cfg = load_config(NEW / "llama3_405b.toml")  # mode = "full", no selective_ac_option
    record = RunRecord(id="r", chip="h100", num_chips=512, num_slices=64)
    base = settings_from_config(cfg)
    changes = _changes(cfg, SettingsMove(change="remat", direction="lighter"), 512, 64)
    assert [c.values[0][1] for c in changes] == ["selective_layer_2", "selective_op", "none"]
    for change in changes:
        new_text = apply_settings(cfg, change.config_values)
        reread = settings_from_config(settings_applied(cfg, change.config_values))
        priced = priced_settings(base, change, framework="other")
        assert reread.remat_policy == priced.remat_policy == change.values[0][1]
        a, b = resolve_shape(record, priced), resolve_shape(record, reread)
        assert (a.remat, a.micro_batch, a.global_batch, a.seq_len) == (b.remat, b.micro_batch, b.global_batch, b.seq_len)
        ac = tomllib.loads(new_text)["activation_checkpoint"]  # what torchtitan itself would load
        assert ac == {k.rsplit(".", 1)[1]: v for k, v in change.config_values.items()}


def test_an_absent_key_goes_under_its_table_or_into_a_new_table_at_the_end() -> None:
    big = load_config(NEW / "llama3_405b.toml")
    new = apply_settings(big, {"activation_checkpoint.mode": "selective", "activation_checkpoint.selective_ac_option": "2"})
    assert '[activation_checkpoint]\nmode = "selective" # ["none", "selective", "full"]\nselective_ac_option = "2"\n\n' \
        "[compile]" in new
    assert len(new.splitlines()) == len(big.text.splitlines()) + 1
    # no [activation_checkpoint] table at all: it is added at the end
    bare_text = (NEW / "llama3_8b.toml").read_text().split("[activation_checkpoint]")[0]
    bare = parse_config(bare_text, "bare.toml")
    added = apply_settings(bare, {"activation_checkpoint.mode": "full"})
    assert added == bare_text + '\n[activation_checkpoint]\nmode = "full"\n'
    assert settings_from_config(parse_config(added, "bare.toml")).remat_policy == "full"
    # the file's own layout names the batch: 2024 batch_size, 2025-26 local_batch_size; an absent one goes
    # under [training] after its last key
    old = load_config(OLD / "llama3_8b.toml")
    assert _changed_lines(old.text, apply_settings(old, {"batch_size": 4})) == [("batch_size = 1", "batch_size = 4")]
    cur = load_config(NEW / "llama3_8b.toml")
    grown = apply_settings(cur, {"global_batch_size": 512})
    assert 'dataset = "c4"\nglobal_batch_size = 512\n\n[parallelism]' in grown
    assert tomllib.loads(grown)["training"]["global_batch_size"] == 512
    with pytest.raises(ConfigError, match=r"local_batch_size: torchtitan of 2024 .* has no local_batch_size setting ASAP can write"):
        apply_settings(old, {"local_batch_size": 4})


def test_dotted_keys_get_a_dotted_neighbour_and_an_inline_table_is_refused_not_guessed() -> None:
    rest = (NEW / "llama3_405b.toml").read_text().replace(
        '[activation_checkpoint]\nmode = "full" # ["none", "selective", "full"]\n', "")
    assert "activation_checkpoint" not in rest
    cfg = parse_config('activation_checkpoint.mode = "full"\n' + rest, "d.toml")  # a dotted key before any table
    new = apply_settings(cfg, {"activation_checkpoint.mode": "selective", "activation_checkpoint.selective_ac_option": "op"})
    assert new.startswith('activation_checkpoint.mode = "selective"\nactivation_checkpoint.selective_ac_option = "op"\n')
    assert tomllib.loads(new)["activation_checkpoint"] == {"mode": "selective", "selective_ac_option": "op"}
    inline = parse_config('activation_checkpoint = { mode = "full" }\n' + rest, "i.toml")
    with pytest.raises(ConfigError) as err:
        apply_settings(inline, {"activation_checkpoint.mode": "none"})
    assert "not a one-line value ASAP can locate" in err.value.message and err.value.hint == 'set mode = "none" by hand'


def test_crlf_line_endings_are_kept_for_an_inserted_key() -> None:
    text = (NEW / "llama3_405b.toml").read_text().replace("\n", "\r\n")
    new = apply_settings(parse_config(text, "c.toml"), {"activation_checkpoint.selective_ac_option": "op"})
    assert 'mode = "full" # ["none", "selective", "full"]\r\nselective_ac_option = "op"\r\n' in new
    assert new.count("\r\n") == new.count("\n")


# ------------------------------------------------------------------------------------------ batch edits
def test_a_smaller_micro_batch_pins_the_global_batch_the_step_ran() -> None:
    cfg = load_config(NEW / "llama3_405b.toml")  # local 2, no global_batch_size, tp 8: dp 64 on 512 GPUs
    [one] = _changes(cfg, SettingsMove(change="micro_batch", direction="down"), 512, 64)
    assert one.config_values == {"training.local_batch_size": 1, "training.global_batch_size": 128}
    new = apply_settings(cfg, one.config_values)
    assert _changed_lines(cfg.text.replace('dataset = "c4"\n\n[parallelism]', 'dataset = "c4"\nX\n\n[parallelism]'),
                          new.replace("global_batch_size = 128", "X")) == [("local_batch_size = 2", "local_batch_size = 1")]
    record = RunRecord(id="r", chip="h100", num_chips=512, num_slices=64)
    priced = resolve_shape(record, priced_settings(settings_from_config(cfg), one, framework="other"))
    reread = resolve_shape(record, settings_from_config(settings_applied(cfg, one.config_values)))
    assert (priced.global_batch, priced.micro_batch) == (reread.global_batch, reread.micro_batch) == (128, 1)


def test_micro_batch_keys_follow_the_layout_and_pipelining() -> None:
    text = (NEW / "llama3_8b.toml").read_text().replace("local_batch_size = 1", "local_batch_size = 4\n"
                                                         "global_batch_size = 1024")
    stated = parse_config(text, "g.toml")  # the global batch is stated: only the local batch changes
    ups = _changes(stated, SettingsMove(change="micro_batch", direction="up"), 64, 64)
    assert [c.config_values for c in ups] == [{"training.local_batch_size": 8}, {"training.local_batch_size": 16}]
    piped = parse_config(text.replace("pipeline_parallel_degree = 1", "pipeline_parallel_degree = 2"), "p.toml")
    [two, four] = _changes(piped, SettingsMove(change="micro_batch", direction="up"), 64, 32)
    assert two.config_values == {"parallelism.pipeline_parallel_microbatch_size": 2}
    assert "pipeline_parallel_microbatch_size = 2\n" in apply_settings(piped, two.config_values)
    # torchtitan of 2024 has no global batch: a larger batch_size would raise it, so nothing is offered
    old = load_config(OLD / "llama3_8b.toml")
    assert _changes(old, SettingsMove(change="micro_batch", direction="down"), 64, 64) == []


# ------------------------------------------------------------------------------- run.yaml command overrides
def test_command_overrides_win_over_the_toml_and_are_named() -> None:
    cfg = load_config(NEW / "llama3_8b.toml", command=TP2_FULL)
    s = settings_from_config(cfg)
    assert s.remat_policy == "full" and "recorded launch command" in (s.remat_key or "")
    assert cfg.mesh(64, 8).sizes()["tensor"] == 2
    assert ("activation_checkpoint.mode = 'full' comes from the recorded launch command "
            '(--activation_checkpoint.mode full), over "selective" in the file (line 58)') in cfg.reading
    plain = settings_from_config(load_config(NEW / "llama3_8b.toml"))
    record = RunRecord(id="r", chip="h100", num_chips=64, num_slices=8)
    assert resolve_shape(record, s).remat == "full" and resolve_shape(record, plain).remat == "selective_op"
    # tyro spellings: --a.b=v, hyphens for underscores, --no_ flags, comma lists; the last flag wins
    tyro = load_config(NEW / "llama3_405b.toml", command=(
        "torchrun --nproc_per_node=8 -m torchtitan.train --job.config_file llama3_405b.toml "
        "--training.local-batch-size=4 --compile.no-enable --model.converters=quantize.linear.mx "
        "--training.local_batch_size 3"))
    assert (tyro.settings["training.local_batch_size"], tyro.settings["compile.enable"]) == (3, False)
    assert settings_from_config(tyro).quantization == "mxfp8"  # the file's float8 converter replaced by MX
    assert settings_from_config(tyro).fp8_recipe == "mxfp8"
    legacy = load_config(OLD / "llama3_8b.toml", command="./run_train.sh --training.batch_size 2 --training.compile")
    assert (legacy.settings["training.batch_size"], legacy.settings["training.compile"]) == (2, True)


def test_an_edit_of_a_value_the_command_sets_is_refused_naming_the_flag() -> None:
    cfg = load_config(NEW / "llama3_8b.toml", command=TP2_FULL)
    with pytest.raises(ConfigError) as err:
        apply_settings(cfg, {"activation_checkpoint.mode": "none"})
    assert "set by the recorded launch command (run.yaml command: --activation_checkpoint.mode full)" in err.value.message
    assert err.value.hint == "change --activation_checkpoint.mode full on the launch command"
    [light, *_] = _changes(cfg, SettingsMove(change="remat", direction="lighter"), 64, 32)
    assert light.config_values == {}  # a proposal does not write it into the file
    assert "the recorded launch command's --activation_checkpoint.mode full wins over it" in light.words[0]
    # the degree the command sets is not edited either; the others still are
    with pytest.raises(ConfigError, match="parallelism.tensor_parallel_degree is set by the recorded launch command"):
        config_diff(cfg, Mesh(ici={"tensor": 4, "fsdp": 2}, dcn={"fsdp": 8}), None, "x")
    assert "local_batch_size = 2" in apply_settings(cfg, {"training.local_batch_size": 2})


@pytest.mark.parametrize("command,words,hint", [
    ("./run_train.sh --training.local_batch_size two", "--training.local_batch_size expects an integer, got 'two'",
     "write --training.local_batch_size 2 or --training.local_batch_size=2"),
    ("./run_train.sh --activation_checkpoint.mode", "--activation_checkpoint.mode on the recorded launch command has "
     "no value", "write --activation_checkpoint.mode none or --activation_checkpoint.mode=none"),
    ("./run_train.sh --activation_checkpoint.mode=Full --training.steps 5", "--activation_checkpoint.mode expects one "
     "of none, selective, full, memory_budget, got 'Full'", "write --activation_checkpoint.mode none"),
    ("./run_train.sh --compile.enable=False", "--compile.enable is a true/false flag and takes no value",
     "write --compile.enable to turn it on, --compile.no_enable to turn it off"),
    ("./run_train.sh --parallelism.tensor_parallel_degree $TP", "the shell fills this value in when the job starts",
     "record the command with the value itself"),
    ("./run_train.sh --training.tensor_parallel_degree 2", "the file and the recorded command mix torchtitan layouts: "
     "--training.tensor_parallel_degree on the command (torchtitan of 2024)", "keep the keys and flags"),
    ("./run_train.sh --parallelism.tensor_parallel_degree 0", "must be a positive integer, got --parallelism."
     "tensor_parallel_degree 0 on the recorded launch command", None),
    ("./run_train.sh --training.steps '10", "cannot be split into words: No closing quotation", "check its quotes"),
])
def test_a_malformed_override_is_one_clear_error(command: str, words: str, hint: str | None) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(NEW / "llama3_8b.toml", command=command)
    assert words in err.value.message
    assert hint is None or (err.value.hint or "").startswith(hint)


def test_a_malformed_override_in_run_yaml_exits_2_without_a_traceback(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    runs = _runs(tmp_path, "./run_train.sh --training.local_batch_size=2x")
    with pytest.raises(SystemExit) as exc:
        main(["--runs-dir", str(runs), "why", "tt"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "command: --training.local_batch_size expects an integer, got '2x'" in err and "Traceback" not in err
    assert "hint: write --training.local_batch_size 2 or --training.local_batch_size=2" in err


# ----------------------------------------------------------------------------------------- asap apply
def _runs(tmp_path: Path, command: str | None) -> Path:
    run = tmp_path / "runs" / "tt"
    run.mkdir(parents=True)
    (run / "llama3_8b.toml").write_text((NEW / "llama3_8b.toml").read_text())
    line = f"command: {command!r}\n" if command else ""
    (run / "run.yaml").write_text(f"id: tt\nchip: h100\nnum_chips: 64\nnum_slices: 8\nconfig: llama3_8b.toml\n{line}")
    return tmp_path / "runs"


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "titan"
    (repo / "train_configs").mkdir(parents=True)
    (repo / "train_configs" / "llama3_8b.toml").write_text((NEW / "llama3_8b.toml").read_text())
    for args in (["init", "-q", "-b", "main"], ["add", "."],
                 ["-c", "user.name=Dev", "-c", "user.email=dev@acme.dev", "commit", "-qm", "init"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    return repo


def _applied(tmp_path: Path, command: str | None, kind: str = "remat") -> tuple[str, str, object]:
    runs = LocalRunStore(_runs(tmp_path, command))
    from bot.analysis.analyze import analyze_run
    from bot.proposals.engine import propose

    run = runs.get("tt")
    pset = propose(run, analyze_run(run))
    # the proposal of exactly that kind, else the first that includes it (a move combined with a settings change)
    p = next((p for p in pset.proposals if p.kind == kind), None) or next(p for p in pset.proposals if kind in p.kind)
    repo = _repo(tmp_path)
    res = apply_proposal("tt", p.rank, None, LocalGitHost(repo), runs=runs, proposals=pset,
                         config_path="train_configs/llama3_8b.toml")
    after = subprocess.run(["git", "-C", str(repo), "show", f"{res.branch}:train_configs/llama3_8b.toml"],
                           check=True, capture_output=True, text=True).stdout
    return (NEW / "llama3_8b.toml").read_text(), after, p


def test_apply_commits_the_remat_change_with_the_degrees_and_nothing_else(tmp_path: Path) -> None:
    before, after, p = _applied(tmp_path, None)
    assert p.settings == {"activation_checkpoint.mode": "none"}  # type: ignore[attr-defined]
    changed = _changed_lines(before, after)
    assert ('mode = "selective"  # ["none", "selective", "full"]', 'mode = "none"  # ["none", "selective", "full"]') \
        in changed
    assert all(a.startswith("mode = ") or "_degree = " in a for a, _ in changed)
    cfg = parse_config(after, "llama3_8b.toml")
    assert settings_from_config(cfg).remat_policy == "none"
    assert cfg.mesh(64, 8).short() == p.mesh_short  # type: ignore[attr-defined]


def test_apply_reads_the_repository_file_with_the_runs_command(tmp_path: Path) -> None:
    # the command sets tp 2 and full remat: the repo file (tp 1) is still this run's config, and a mesh proposal
    # writes only the degrees it may change (not tensor_parallel_degree, which the command sets)
    before, after, p = _applied(tmp_path, TP2_FULL, kind="dcn.fsdp->dcn.data")
    assert all("_degree = " in a and not a.startswith("tensor_") for a, _ in _changed_lines(before, after))
    assert parse_config(after, "x.toml", command=TP2_FULL).mesh(64, 8).short() == p.mesh_short  # type: ignore[attr-defined]


def test_a_change_only_the_launch_command_can_make_is_refused_naming_the_flag(tmp_path: Path) -> None:
    # the lighter-remat proposal's remat value is the command's --activation_checkpoint.mode, which apply cannot edit:
    # the answer names the flag; when the proposal also moves the mesh, nothing is committed (the mesh alone is not
    # the change that was predicted)
    with pytest.raises(AsapError) as err:
        _applied(tmp_path, TP2_FULL)
    assert "--activation_checkpoint.mode full wins" in str(err.value) and "launch command" in str(err.value)
    assert subprocess.run(["git", "-C", str(tmp_path / "titan"), "branch", "--format=%(refname:short)"], check=True,
                          capture_output=True, text=True).stdout.split() == ["main"]  # no branch pushed


def test_lighter_than_selective_layer_k_is_only_what_recomputes_less() -> None:
    # selective_layer_k checkpoints one block in k: selective_layer_4 recomputes a quarter of the blocks, so
    # selective_layer_2 (half) is heavier, never offered as "lighter"
    from knowledge.cost_remat import _torchtitan_policy, lighter_torchtitan

    every4 = _torchtitan_policy("selective_layer_4", "test")
    every2 = _torchtitan_policy("selective_layer_2", "test")
    full = _torchtitan_policy("selective_layer_1", "test")
    assert every4 is not None and every2 is not None and full is not None
    assert lighter_torchtitan(every4) == ["none"]
    assert lighter_torchtitan(every2) == ["selective_op", "none"]
    assert lighter_torchtitan(full) == ["selective_layer_2", "selective_op", "none"]
