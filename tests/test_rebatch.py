"""A mesh with another data-parallel degree is proposed with the micro-batch that keeps the global batch.

Real configs: torchtitan's llama3_70b.toml of spring 2025 (@3ce5616, TP 8, [training] batch_size 8) and
Megatron-LM's ``examples/llama/train_llama3_8b_h100_fp8.sh`` (tests/data/real/README.md). Before this, every mesh
that trades tensor ranks for data-parallel ones was rejected by the Critic ("global batch 64 is not a multiple of
micro_batch 8 x data-parallel size 64"): the answer for a TP-8 70B run on 64 GPUs could not say "drop TP".
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bot.analysis.analyze import analyze_run
from bot.configs.detect import parse_config
from bot.configs.mesh import Mesh
from bot.proposals.engine import propose
from bot.proposals.rebatch import rebatch_change
from bot.runs.record import RunRecord
from bot.runs.store import LocalRunStore
from knowledge.cost_settings import settings_from_config

REAL = Path(__file__).parent / "data" / "real"
SPRING = REAL / "torchtitan" / "2025-spring" / "llama3_70b.toml"
MEGATRON = REAL / "megatron" / "train_llama3_8b_h100_fp8.sh"


def _titan_run(tmp_path: Path, command: str | None = None) -> LocalRunStore:
    run = tmp_path / "runs" / "t70"
    run.mkdir(parents=True)
    shutil.copy(SPRING, run / SPRING.name)
    line = f"command: {command!r}\n" if command else ""
    (run / "run.yaml").write_text(f"id: t70\nchip: h100\nnum_chips: 64\nnum_slices: 8\nconfig: {SPRING.name}\n{line}")
    return LocalRunStore(tmp_path / "runs")


def test_dropping_tp_on_a_real_torchtitan_config_carries_the_batch_that_keeps_64_sequences(tmp_path: Path) -> None:
    runs = _titan_run(tmp_path)
    run = runs.get("t70")
    pset = propose(run, analyze_run(run))
    rebatched = [p for p in pset.proposals if "rebatch" in p.kind]
    assert rebatched, [p.kind for p in pset.proposals]
    p = rebatched[0]
    assert "tensor=8" not in p.mesh_short
    # the edit writes the degrees and batch_size together; torchtitan then runs batch_size x dp = 64 sequences
    edited = parse_config(_apply(SPRING.read_text(), p.diff), "x.toml")
    dp = edited.mesh(64, 8).size("fsdp") * edited.mesh(64, 8).size("data")
    assert settings_from_config(edited).local_batch * dp == 64
    assert not any("set global_batch_size" in t or "launch command" in t for t in p.tradeoffs)


def _apply(text: str, diff: str | None) -> str:
    """Apply a unified diff's -/+ lines (single hunk per line pair) to ``text``."""
    assert diff
    for old, new in zip([ln[1:] for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")],
                        [ln[1:] for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")],
                        strict=True):
        text = text.replace(old, new, 1)
    return text


def test_a_degree_the_launch_command_sets_is_proposed_for_the_command_not_dropped(tmp_path: Path) -> None:
    # torchtitan's CLI wins over the TOML: a mesh that changes --parallelism.tensor_parallel_degree is still the
    # answer; the proposal names the flag to change instead of disappearing as "not expressible"
    runs = _titan_run(tmp_path, "./run_train.sh --parallelism.tensor_parallel_degree 8 --training.batch_size 8")
    run = runs.get("t70")
    pset = propose(run, analyze_run(run))
    no_tp = [p for p in pset.proposals if "tensor=8" not in p.mesh_short]
    assert no_tp, [p.mesh_short for p in pset.proposals]
    assert any("change it on the launch command" in t and "tensor_parallel_degree" in t for t in no_tp[0].tradeoffs)


def test_megatron_takes_the_largest_micro_batch_that_splits_the_global_batch() -> None:
    # Megatron-LM refuses global_batch_size % (micro_batch_size x dp) != 0: GBS 48, MBS 8 over dp 2 -> 6 ranks
    # needs MBS dividing 48 / 6 = 8 ... and over 12 ranks 4; over 16 ranks 3 (48 / 16), the largest divisor <= 8
    text = (MEGATRON.read_text().replace("MICRO_BATCH_SIZE=1", "MICRO_BATCH_SIZE=8")
            .replace("GLOBAL_BATCH_SIZE=128", "GLOBAL_BATCH_SIZE=48"))
    cfg = parse_config(text, "train.sh")
    record = RunRecord(id="r", chip="h100", num_chips=16, num_slices=2, config="train.sh")
    settings = settings_from_config(cfg)
    assert settings.micro_batch == 8 and settings.global_batch == 48
    change = rebatch_change(Mesh(ici={"data": 8}, dcn={"data": 2}), record=record, settings=settings, config=cfg)
    assert change is not None and dict(change.values) == {"micro_batch": 3, "global_batch": 48}
    assert change.config_values == {"micro_batch_size": 3} or list(change.config_values.values()) == [3]
    # a split that is already whole needs no change; a global batch that does not split over the ranks gets none
    for n in (3, 5):  # 48 = 8 x 3 x 2 splits at today's micro-batch; 48 over 5 ranks does not split at all
        record_n = RunRecord(id="r", chip="h100", num_chips=n, config="train.sh")
        assert rebatch_change(Mesh(ici={"data": n}), record=record_n, settings=settings, config=cfg) is None
