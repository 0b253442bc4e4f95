"""Megatron-Core MoE parallel folding: expert layers on their own grid, priced and edited as the config runs them.

Megatron-Bridge's own 8-GPU Qwen3-30B-A3B recipe (tests/data/real/megatron_bridge/run_config/
qwen3_30b_a3b_pretrain_8gpu_h100_bf16.yaml, its ConfigContainer dump at 067f987d) runs TP 4, PP 2, EP 4 with
expert_tensor_parallel_size 1: data parallelism is 1, so the four expert ranks are the four tensor ranks, each holding
32 whole experts. ASAP used to price that run as if the experts were split four ways by tensor parallelism (no
all-to-all, 192-wide expert matmuls), told the user a TP 4->1 move turned "expert 1->4" on, and wrote a config with
expert_model_parallel_size 1 for any candidate that kept the tensor axis.
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import bot.cli.proposals  # noqa: F401  (registers propose)
from bot.cli import cli
from bot.configs.checks import startup_problems
from bot.configs.detect import load_config, parse_config
from bot.configs.edit import apply_mesh, apply_settings, config_diff
from bot.configs.megatron import kept_expert_size, mesh
from bot.configs.mesh import Mesh
from bot.proposals.critic import check_divisibility, ep_overlap_problems, expert_group
from bot.proposals.engine import baseline_mesh
from bot.proposals.moves import load_playbook
from bot.proposals.settings import apply, expand
from bot.runs.record import RunRecord
from bot.runs.store import LocalRunStore
from knowledge import costmodel
from knowledge.cost_moe_grid import expert_grid
from knowledge.cost_settings import settings_for_run, settings_from_config
from tests.published_cases import EVAL

QWEN = Path(__file__).parent / "data" / "real" / "megatron_bridge" / "run_config" / "qwen3_30b_a3b_pretrain_8gpu_h100_bf16.yaml"


def _asap(runs: Path, *args: str, config: Path = QWEN, code: int = 0) -> dict:  # type: ignore[type-arg]
    """``asap --runs-dir RUNS ARGS --json`` on a run 'qwen8' of 8 H100s whose config is ``config``."""
    run = runs / "qwen8"
    run.mkdir(parents=True, exist_ok=True)
    shutil.copy(config, run / "run_config.yaml")
    (run / "run.yaml").write_text("id: qwen8\nchip: h100\nnum_chips: 8\nnum_slices: 1\nconfig: run_config.yaml\n")
    out = CliRunner().invoke(cli, ["--runs-dir", str(runs), *args, "--json"])
    assert out.exit_code == code, out.output
    return json.loads(out.output)


def _propose(tmp_path: Path, config: Path) -> dict:  # type: ignore[type-arg]
    return _asap(tmp_path, "propose", "qwen8", config=config)


def test_the_recipes_folded_experts_are_priced_with_their_all_to_all_and_whole_expert_matmuls(tmp_path: Path) -> None:
    folded = _propose(tmp_path, QWEN)["baseline"]["predicted"]["breakdown_ms"]
    # the same file read as the mesh alone describes it: experts split over the tensor ranks, no expert ranks
    text = QWEN.read_text().replace("  expert_model_parallel_size: 4\n", "  expert_model_parallel_size: 1\n", 1)
    text = text.replace("  expert_tensor_parallel_size: 1\n", "  expert_tensor_parallel_size: 4\n", 1)
    (tmp_path / "split.yaml").write_text(text)
    split = _propose(tmp_path / "split", tmp_path / "split.yaml")
    split_ms = split["baseline"]["predicted"]["breakdown_ms"]
    assert split_ms.get("comm.expert", 0.0) == 0.0
    assert folded["comm.expert"] > 100.0  # 48 MoE layers x 16 micro-batches of dispatch + combine over 4 ranks
    # whole experts: no tensor collective around the expert MLP, and 768-wide matmuls instead of 192-wide ones
    assert folded["comm.tensor"] < 0.6 * split_ms["comm.tensor"]
    assert folded["compute"] < split_ms["compute"]


def test_a_move_off_tensor_parallelism_says_expert_parallelism_stays_at_four(tmp_path: Path) -> None:
    answer = _propose(tmp_path, QWEN)
    assert answer["baseline"]["mesh_short"] == "tensor=4 pipeline=2"
    off_tensor = [p for p in answer["proposals"] if p["mesh"]["ici"].get("tensor", 1) == 1]
    assert off_tensor
    for p in off_tensor:
        assert "expert_model_parallel_size 4->4" in p["rationale"], p["rationale"]
        # the edit moves tensor_model_parallel_size and leaves the configured expert size alone
        assert "expert_model_parallel_size" not in "".join(
            line for line in p["diff"].splitlines() if line.startswith(("-", "+")) and not line.startswith(("---", "+++")))


def test_a_candidate_that_keeps_the_tensor_axis_keeps_the_folded_expert_size(tmp_path: Path) -> None:
    """A candidate config must not silently drop expert parallelism: at tensor 4 the four expert ranks still fit."""
    cfg = load_config(QWEN)
    target = Mesh(ici={"tensor": 4, "pipeline": 2})
    assert mesh(cfg, 8, 1) == target
    assert apply_mesh(cfg, target) == QWEN.read_text()  # the baseline itself: nothing to write (it wrote expert 4 -> 1)
    moved = Mesh(ici={"tensor": 8})
    edited = apply_mesh(cfg, moved)
    assert "expert_model_parallel_size: 4\n" in edited and "tensor_model_parallel_size: 8\n" in edited
    again = tmp_path / "edited.yaml"
    again.write_text(edited)
    assert mesh(load_config(again), 8, 1) == moved


def _meshes(chips: int) -> list[dict[str, int]]:
    sizes = [2 ** i for i in range(int(np.log2(chips)) + 1)]
    out = []
    for d, t, s, e in itertools.product(sizes, repeat=4):
        if chips % (d * t * s * e) == 0:
            out.append({"data": d, "tensor": t, "sequence": s, "expert": e})
    return out


@pytest.mark.parametrize("configured", [4, 8, 32, 64])
def test_the_cost_model_prices_the_expert_size_the_config_editor_writes(configured: int) -> None:
    """knowledge.cost_moe_grid and bot.configs.megatron.kept_expert_size are one rule in two layers."""
    meshes = _meshes(256)
    nd, nt, ns, ne = (np.array([m[a] for m in meshes], dtype=np.float64) for a in ("data", "tensor", "sequence", "expert"))
    grid = expert_grid(configured, 1, nd, nt, ns, ne)
    written = [kept_expert_size(configured, m["expert"], m["data"], m["tensor"], m["sequence"]) for m in meshes]
    assert list(grid.ep.astype(int)) == written
    assert np.all(grid.edp >= 1) and np.all(np.mod(grid.edp, 1) == 0)


def test_an_unset_expert_tensor_size_follows_tensor_parallelism_as_in_megatron_lm() -> None:
    """arguments.py: ``if args.expert_tensor_parallel_size is None: ... = args.tensor_model_parallel_size``; where
    that grid cannot exist (EP x TP beyond the ranks), the experts are priced on the largest one that can."""
    one = np.ones(1)
    assert expert_grid(0, 0, one, 2 * one, one, 8 * one).etp[0] == 2
    folded = expert_grid(32, 0, one, 2 * one, one, 16 * one)  # the Qwen3-235B H100 layout with ETP left unset
    assert (folded.ep[0], folded.etp[0], folded.edp[0]) == (32, 1, 1)


def test_a_mesh_file_without_megatron_sizes_prices_experts_on_the_mesh() -> None:
    c = parse_config("ici_mesh: {expert: 4, tensor: 2}\n", "mesh.yml")
    assert c.mesh(8) == Mesh(ici={"expert": 4, "tensor": 2})
    one = np.ones(1)
    grid = expert_grid(0, 0, one, 2 * one, one, 4 * one)
    assert (grid.ep[0], grid.etp[0], grid.fold[0]) == (4, 2, 1)


def _split_experts_recipe(tmp_path: Path) -> Path:
    """The recipe as a user who left expert_tensor_parallel_size to Megatron's default writes it at TP 2: EP 2 over the
    data ranks, each expert split over the two tensor ranks (Megatron-Bridge resolves an unset size to the tensor
    size in the dumped file, as the Llama fixture's expert_tensor_parallel_size: 4 shows)."""
    text = QWEN.read_text()
    for old, new in (("  tensor_model_parallel_size: 4\n", "  tensor_model_parallel_size: 2\n"),
                     ("  expert_model_parallel_size: 4\n", "  expert_model_parallel_size: 2\n"),
                     ("  expert_tensor_parallel_size: 1\n", "  expert_tensor_parallel_size: 2\n")):
        assert text.count(old) == 1
        text = text.replace(old, new)
    path = tmp_path / "run_config.yaml"
    path.write_text(text)
    return path


def test_whole_experts_keep_each_gpus_expert_share_and_drop_the_tensor_collectives_around_them(tmp_path: Path) -> None:
    """Megatron-Core's MoE guide: "Use ETP=1 for MoE (better GEMM efficiency, less communication)"; the playbook move
    sets expert_tensor_parallel_size 1 and grows expert_model_parallel_size by the same factor, on the run's mesh."""

    cfg = load_config(_split_experts_recipe(tmp_path))
    base = mesh(cfg, 8, 1)
    assert base == Mesh(ici={"tensor": 2, "expert": 2, "pipeline": 2})
    settings = settings_from_config(cfg)
    [rule] = [r for r in load_playbook().rules if r.id == "moe-whole-experts"]
    assert rule.settings is not None
    change, alone = expand(rule.settings, settings=settings, config=cfg, framework="megatron", runyaml_remat=None,
                           runyaml_micro_batch=None, global_batch=32, data_parallel=2, base=base)
    assert change.config_values == {"model.expert_tensor_parallel_size": 1, "model.expert_model_parallel_size": 4}
    assert change.only_mesh == base
    # the other form rides on any mesh with tensor parallelism: whole experts replicated over the tensor ranks
    assert (alone.config_values, alone.needs_axis) == ({"model.expert_tensor_parallel_size": 1}, "tensor")
    record = RunRecord.model_validate({"id": "q", "chip": "h100", "num_chips": 8, "num_slices": 1})
    now = costmodel.predict(record, base, settings=settings)
    whole = costmodel.predict(record, base, settings=apply(settings, change, framework="megatron"))
    assert whole.memory_per_chip_bytes == pytest.approx(now.memory_per_chip_bytes, rel=1e-3)
    assert whole.breakdown_ms["comm.tensor"] == pytest.approx(now.breakdown_ms["comm.tensor"] / 2, rel=0.05)
    assert whole.breakdown_ms["compute"] < now.breakdown_ms["compute"]  # 768-wide expert matmuls, not 384-wide
    assert whole.breakdown_ms["comm.expert"] > now.breakdown_ms["comm.expert"]  # the all-to-all over 4 ranks, not 2
    # the edit: both keys written in place, the mesh unchanged, Megatron folding the 4 expert ranks over 2 x 2
    edited = tmp_path / "edited.yaml"
    edited.write_text(apply_settings(cfg, change.config_values))
    again = load_config(edited)
    assert mesh(again, 8, 1) == base
    s = settings_from_config(again)
    assert (s.expert_parallel, s.expert_tensor_parallel) == (4, 1)


def test_whole_experts_are_not_offered_where_the_experts_are_whole_already() -> None:

    cfg = load_config(QWEN)  # the recipe itself: expert_tensor_parallel_size 1
    [rule] = [r for r in load_playbook().rules if r.id == "moe-whole-experts"]
    assert rule.settings is not None
    assert expand(rule.settings, settings=settings_from_config(cfg), config=cfg, framework="megatron",
                  runyaml_remat=None, runyaml_micro_batch=None, global_batch=32, data_parallel=1,
                  base=mesh(cfg, 8, 1)) == []


def test_the_diagnosis_says_the_experts_run_on_a_grid_the_mesh_string_does_not_show(tmp_path: Path) -> None:
    answer = _asap(tmp_path, "why", "qwen8")
    assert answer["run"]["mesh_short"] == "tensor=4 pipeline=2"
    [fold] = [w for w in answer["warnings"] if "MoE parallel folding" in w]
    assert "all-to-all over all 4 expert ranks" in fold
    assert not fold.startswith("warning")  # a recommended layout, read and priced, not a problem


def test_a_review_that_halves_the_folded_expert_group_flags_the_memory_it_costs(tmp_path: Path) -> None:
    """A PR that sets expert_model_parallel_size 4 -> 2 on the recipe leaves the mesh string as it was (tensor 4,
    pipeline 2); each GPU then holds 64 experts instead of 32. Priced as the mesh alone, the review saw no change."""
    new = tmp_path / "new.yaml"
    text = QWEN.read_text()
    assert text.count("  expert_model_parallel_size: 4\n") == 1
    new.write_text(text.replace("  expert_model_parallel_size: 4\n", "  expert_model_parallel_size: 2\n"))
    runs = tmp_path / "runs"
    review = _asap(runs, "review", "--run", "qwen8", str(QWEN), str(new), code=1)  # exit 1: a problem is flagged
    findings = {(f["severity"], f["check"]): f["message"] for f in review["findings"]}
    assert "out of memory" in findings[("problem", "memory")]
    assert findings[("info", "mesh")] == ("the mesh is unchanged; the MoE layers' grid changes: "
                                          "expert_model_parallel_size 4 -> 2")


def test_the_critic_counts_expert_ranks_folded_over_tensor_ranks() -> None:
    """The recipe's EP 4 lives on its tensor ranks (the mesh's expert axis is 1): Megatron-Core runs the expert
    all-to-all overlap there, so the Critic must not call it 'without expert parallelism'; and a folded group the
    experts do not divide over (Mixtral 8x22B's 8 experts over 16 ranks) is refused as Megatron-Core refuses it."""
    cfg = load_config(QWEN)
    base = mesh(cfg, 8, 1)
    settings = settings_from_config(cfg).model_copy(update={"ep_comm_overlap": True, "remat_policy": None})
    assert expert_group(base, settings) == 4
    assert not any("without expert parallelism" in p for p in ep_overlap_problems(base, settings))

    run = LocalRunStore(EVAL).get("nemo-25.02-b200-mixtral-8x22b-256gpu")
    mixtral = settings_for_run(run)
    assert mixtral is not None and mixtral.expert_parallel == 8
    m, _ = baseline_mesh(run, None)
    assert check_divisibility(run.record, m, mixtral).passed
    bad = check_divisibility(run.record, m, mixtral.model_copy(update={"expert_parallel": 16}))
    assert not bad.passed and "expert_model_parallel_size=16 (folded over tensor / context ranks) does not divide " \
        "experts=8" in bad.reason


def test_a_folded_expert_group_with_the_default_expert_tensor_size_is_refused_as_megatron_refuses_it(
        tmp_path: Path) -> None:
    """Megatron-Core builds the experts' grid only when expert_tensor_parallel_size x expert_model_parallel_size divides
    tensor x context x data (parallel_state.py: "world_size ... is not divisible by expert_tensor_model_pipeline_parallel
    size"). The recipe folds EP 4 over its 4 tensor ranks with expert_tensor_parallel_size 1; without that line
    Megatron-LM takes the tensor size, 4 x 4 = 16 ranks on 4, and the run does not start."""
    assert not [p for p in startup_problems(load_config(QWEN), 8, 1) if p.error]
    text = QWEN.read_text()
    assert text.count("  expert_tensor_parallel_size: 1\n") == 1
    unset = tmp_path / "run_config.yaml"
    unset.write_text(text.replace("  expert_tensor_parallel_size: 1\n", "  expert_tensor_parallel_size: null\n"))
    [grid] = [p for p in startup_problems(load_config(unset), 8, 1) if p.rule == "expert_grid"]
    assert grid.error
    assert grid.message.startswith("expert_model_parallel_size=4 x expert_tensor_parallel_size=4 (unset: Megatron-LM "
                                   "takes the tensor size) = 16 does not divide tensor x context x data = 4")
    assert grid.message.endswith("expert_tensor_parallel_size: 1 (whole experts) fits")


MIXTRAL_LAUNCH = Path(__file__).parent / "data" / "real" / "megatron" / "train_mixtral_8x7b_distributed.sh"


def test_a_megatron_launch_gets_whole_experts_as_flags_edited_in_place(tmp_path: Path) -> None:
    """Megatron-LM's own Mixtral 8x7B launch (examples/mixtral @ d98e8a64dd) written at TP 2 and EP 4 on 32 GPUs, as a
    user would scale it: Megatron-LM splits each expert over the two tensor ranks (no --expert-tensor-parallel-size).
    The folded whole-experts edit changes the launch's own --expert-model-parallel-size and adds the new flag."""
    text = MIXTRAL_LAUNCH.read_text()
    for old, new in (("--tensor-model-parallel-size 1", "--tensor-model-parallel-size 2"),
                     ("--expert-model-parallel-size 8", "--expert-model-parallel-size 4")):
        assert text.count(old) == 1
        text = text.replace(old, new)
    launch = tmp_path / "train.sh"
    launch.write_text(text)
    cfg = load_config(launch)
    base = mesh(cfg, 32, 4)
    settings = settings_from_config(cfg)
    assert (settings.expert_parallel, settings.expert_tensor_parallel) == (4, None)
    [rule] = [r for r in load_playbook().rules if r.id == "moe-whole-experts"]
    assert rule.settings is not None
    folded, _ = expand(rule.settings, settings=settings, config=cfg, framework="megatron", runyaml_remat=None,
                       runyaml_micro_batch=None, global_batch=256, data_parallel=4, base=base)
    assert folded.config_values == {"expert_tensor_parallel_size": 1, "expert_model_parallel_size": 8}
    diff = [line for line in config_diff(cfg, base, folded.config_values, "train.sh").splitlines()
            if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))]
    assert any("--expert-model-parallel-size 4" in line for line in diff if line.startswith("-"))
    assert any("--expert-model-parallel-size 8" in line for line in diff if line.startswith("+"))
    assert any("--expert-tensor-parallel-size 1" in line for line in diff if line.startswith("+"))
