"""Megatron's data-parallel overlap flags: without them the gradient sync runs outside compute.

Megatron overlaps the gradient reduce with backward only under ``--overlap-grad-reduce``, and the distributed
optimizer's parameter all-gather with the next forward only under ``--overlap-param-gather``; both are store_true flags
that default to off (Megatron-LM megatron/training/arguments.py and Megatron-Core DistributedDataParallelConfig at
d98e8a64). Megatron-LM's own ``examples/gpt3/train_gpt3_175b_distributed.sh`` sets neither (nor the distributed
optimizer), so its gradient all-reduce runs after backward; ``examples/llama/train_llama3_8b_h100_fp8.sh`` sets
both. Fixtures: tests/data/real/megatron (README there).
"""

from __future__ import annotations

from pathlib import Path

from bot.configs.detect import load_config
from bot.configs.mesh import Mesh
from bot.runs.record import RunRecord
from knowledge import costmodel
from knowledge.cost_settings import settings_from_config

MEGATRON = Path(__file__).parent / "data" / "real" / "megatron"
GPT3 = "train_gpt3_175b_distributed.sh"
LLAMA = "train_llama3_8b_h100_fp8.sh"
# 1,024 H100: the script's TP 8 x PP 16 with 8 data-parallel ranks across nodes
MESH = Mesh(ici={"tensor": 8}, dcn={"data": 8, "pipeline": 16})


def _predict(path: Path):  # type: ignore[no-untyped-def]
    settings = settings_from_config(load_config(path, root=path.parent))
    record = RunRecord(id="r", chip="h100", num_chips=1024, num_slices=128, config=path.name)
    return settings, costmodel.predict(record, MESH, settings=settings)


def test_a_launch_without_the_flags_runs_its_gradient_all_reduce_after_backward(tmp_path: Path) -> None:
    settings, pred = _predict(MEGATRON / GPT3)
    assert settings.launch_defaults and settings.grad_reduce_overlap is None  # not on the command line: off
    assert any("--overlap-grad-reduce off: 100% of the data-parallel gradient sync runs outside compute" in a
               for a in pred.assumptions), pred.assumptions
    # the same launch with the flag the script leaves out
    text = (MEGATRON / GPT3).read_text().replace("    --clip-grad 1.0 \n", "    --clip-grad 1.0 \n    --overlap-grad-reduce\n")
    assert text != (MEGATRON / GPT3).read_text()
    (tmp_path / GPT3).write_text(text)
    overlapped_settings, overlapped = _predict(tmp_path / GPT3)
    assert overlapped_settings.grad_reduce_overlap is True
    assert not any("--overlap-grad-reduce off" in a for a in overlapped.assumptions)
    assert pred.breakdown_ms["comm.data"] > 2.0 * overlapped.breakdown_ms["comm.data"]
    assert pred.step_time_ms > overlapped.step_time_ms


def test_the_distributed_optimizer_exposes_only_the_half_whose_flag_is_off(tmp_path: Path) -> None:
    base = (MEGATRON / GPT3).read_text().replace("    --clip-grad 1.0 \n",
                                                 "    --clip-grad 1.0 \n    --use-distributed-optimizer\n")
    (tmp_path / GPT3).write_text(base)
    _, neither = _predict(tmp_path / GPT3)
    assert any("--overlap-grad-reduce and --overlap-param-gather off: 100%" in a for a in neither.assumptions)
    (tmp_path / GPT3).write_text(base.replace("--use-distributed-optimizer\n",
                                              "--use-distributed-optimizer\n    --overlap-grad-reduce\n"))
    _, half = _predict(tmp_path / GPT3)
    assert any("--overlap-param-gather off: 50% of the data-parallel gradient sync" in a for a in half.assumptions)
    assert neither.breakdown_ms["comm.data"] > half.breakdown_ms["comm.data"]


def test_a_launch_with_both_flags_is_priced_overlapped() -> None:
    settings = settings_from_config(load_config(MEGATRON / LLAMA, root=MEGATRON))
    assert settings.grad_reduce_overlap is True and settings.param_gather_overlap is True
    record = RunRecord(id="r", chip="h100", num_chips=16, num_slices=2, config=LLAMA)
    pred = costmodel.predict(record, Mesh(ici={"data": 8}, dcn={"data": 2}), settings=settings)
    assert not any("outside compute" in a for a in pred.assumptions)


# ---- the lever: turn the flags on ---------------------------------------------------------------------------------
def _changes(path: Path):  # type: ignore[no-untyped-def]
    from bot.proposals.moves import SettingsMove
    from bot.proposals.settings import expand

    config = load_config(path, root=path.parent)
    settings = settings_from_config(config)
    move = SettingsMove(change="dp_overlap", direction="enable")
    return config, settings, expand(move, settings=settings, config=config, framework="megatron", runyaml_remat=None,
                                    runyaml_micro_batch=None, global_batch=None, data_parallel=8, base=MESH)


def test_the_lever_turns_on_what_the_launch_leaves_off_and_the_edit_reads_back(tmp_path: Path) -> None:
    from bot.configs.edit import settings_applied
    from bot.proposals.settings import apply

    config, settings, [change] = _changes(MEGATRON / GPT3)
    assert change.config_values == {"overlap_grad_reduce": True}  # no distributed optimizer: one flag
    assert change.words == ("overlap_grad_reduce off -> on",)
    edited = settings_from_config(settings_applied(config, change.config_values))
    assert edited.grad_reduce_overlap is True
    record = RunRecord(id="r", chip="h100", num_chips=1024, num_slices=128, config=GPT3)
    before = costmodel.predict(record, MESH, settings=settings)
    after = costmodel.predict(record, MESH, settings=apply(settings, change, framework="megatron"))
    assert after.breakdown_ms["comm.data"] < before.breakdown_ms["comm.data"]
    assert after.memory_per_chip_bytes == before.memory_per_chip_bytes  # the flags move time, not memory


def test_with_the_distributed_optimizer_both_flags_are_turned_on(tmp_path: Path) -> None:
    text = (MEGATRON / GPT3).read_text().replace("    --clip-grad 1.0 \n",
                                                 "    --clip-grad 1.0 \n    --use-distributed-optimizer\n")
    (tmp_path / GPT3).write_text(text)
    _, _, [change] = _changes(tmp_path / GPT3)
    assert change.config_values == {"overlap_grad_reduce": True, "overlap_param_gather": True}


def test_a_launch_that_has_them_is_not_offered_them() -> None:
    assert _changes(MEGATRON / LLAMA)[2] == []


def test_a_megatron_deepspeed_launch_is_not_offered_megatrons_flags() -> None:
    """Microsoft's Megatron-DeepSpeed Llama 2 launch (tests/data/real/deepspeed): DeepSpeed's engine runs the
    data-parallel sync, so neither the exposed-sync pricing nor the lever applies."""
    path = Path(__file__).parent / "data" / "real" / "deepspeed" / "pretrain_llama2_distributed.sh"
    config, settings, changes = _changes(path)
    assert settings.deepspeed and settings.launch_defaults
    assert changes == []
    record = RunRecord(id="r", chip="h100", num_chips=1024, num_slices=128, config=path.name)
    assert not any("outside compute" in a for a in costmodel.predict(record, MESH, settings=settings).assumptions)
