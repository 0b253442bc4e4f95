"""Megatron's distributed-optimizer instances: the partial distributed optimizer and Megatron-FSDP's hybrid sharding.

``--num-distributed-optimizer-instances I`` splits the data-parallel ranks into I groups of consecutive ranks; the
distributed optimizer shards over one group and replicates across groups (DistributedDataParallelConfig: "the factor
by which the DP domain is sharded to have the partial DistOpt enabled"). Under Megatron-FSDP the sharded gradients
and parameters do too (HSDP), and ``--outer-dp-sharding-strategy optim`` shards the optimizer state across the groups
(Megatron-LM arguments.py at d98e8a64). NVIDIA's own performance recipes use it (Megatron-Bridge perf_recipes at
067f987d: DeepSeek-V3 on 128 GB300 ``num_distributed_optimizer_instances = 4`` with outer ``optim``; Nemotron 3 Ultra
one instance per NVLink domain).

Fixtures, real files (tests/data/real/README.md): Megatron-LM's functional test
``gpt3_mcore_te_tp2_pp1_multi_dist_optimizer_instances`` (distributed optimizer, 2 instances, TP 2), and Megatron-LM's
``examples/megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh`` with the two HSDP lines its own comment offers ("To enable
HFSDP ... --num-distributed-optimizer-instances 2 --outer-dp-sharding-strategy") uncommented.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import bot.cli.proposals  # noqa: F401  (registers propose)
from bot.cli import cli
from bot.configs.detect import load_config
from bot.configs.mesh import Mesh
from bot.runs.record import RunRecord
from knowledge import costmodel
from knowledge.cost_settings import settings_from_config

MEGATRON = Path(__file__).parent / "data" / "real" / "megatron"
INSTANCES = "gpt3_mcore_te_tp2_pp1_multi_dist_optimizer_instances.model_config.yaml"
FSDP = "train_llama3_8b_fsdp_h100_fp8.sh"
HSDP_LINES = ("        # --num-distributed-optimizer-instances 2\n"
              "        # --outer-dp-sharding-strategy ${OUTER_SHARDING_STRATEGY}\n")


def _hsdp(folder: Path, outer: str | None, instances: str = "2") -> Path:
    """The FSDP example with its HSDP lines uncommented (``outer`` None: only the instances line)."""
    text = (MEGATRON / FSDP).read_text()
    assert HSDP_LINES in text
    lines = f"        --num-distributed-optimizer-instances {instances}\n"
    if outer is not None:
        lines += f"        --outer-dp-sharding-strategy {outer}\n"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / FSDP).write_text(text.replace(HSDP_LINES, lines))
    return folder / FSDP


def _settings(path: Path):  # type: ignore[no-untyped-def]
    return settings_from_config(load_config(path, root=path.parent))


def _memory(path: Path, chips: int = 8, mesh: Mesh | None = None) -> dict[str, float]:
    record = RunRecord(id="r", chip="h100", num_chips=chips, config=path.name)
    pred = costmodel.predict(record, mesh or Mesh(ici={"data": 8}), settings=_settings(path))
    return pred.memory_breakdown_bytes


def test_the_functional_tests_instances_are_read() -> None:
    s = _settings(MEGATRON / INSTANCES)
    assert s.distributed_optimizer is True and not s.megatron_fsdp
    assert s.dp_replicas == 2 and s.optimizer_over_replicas is False


def test_two_optimizer_instances_hold_twice_the_optimizer_state_per_gpu() -> None:
    """TP 2 on 8 GPUs: 4 data ranks in 2 instances of 2, so each GPU holds half the optimizer state, not a quarter.
    Weights and gradients are not sharded by the distributed optimizer and do not move."""
    path = MEGATRON / INSTANCES
    record = RunRecord(id="r", chip="h100", num_chips=8, config=path.name)
    mesh = Mesh(ici={"data": 4, "tensor": 2})
    s = _settings(path)
    two = costmodel.predict(record, mesh, settings=s)
    one = costmodel.predict(record, mesh, settings=s.model_copy(update={"dp_replicas": None}))
    assert two.memory_breakdown_bytes["optimizer"] == pytest.approx(2.0 * one.memory_breakdown_bytes["optimizer"])
    assert two.memory_breakdown_bytes["weights"] == pytest.approx(one.memory_breakdown_bytes["weights"])
    assert two.memory_breakdown_bytes["gradients"] == pytest.approx(one.memory_breakdown_bytes["gradients"])
    assert any("2 distributed-optimizer instances: optimizer state sharded within each of 2 groups" in a
               for a in two.assumptions), two.assumptions


@pytest.mark.parametrize(("outer", "optimizer_ratio"), [(None, 2.0), ("no_shard", 2.0), ("optim", 1.0)])
def test_hsdp_shards_weights_and_gradients_within_a_group(tmp_path: Path, outer: str | None,
                                                         optimizer_ratio: float) -> None:
    """Megatron-FSDP optim_grads_params with 2 instances on 8 H100: parameters and gradients over 4 ranks, not 8;
    the optimizer state too, unless the outer strategy is optim (then over all 8, as without HSDP)."""
    path = _hsdp(tmp_path, outer)
    s = _settings(path)
    assert s.megatron_fsdp and s.zero_stage == 3 and s.dp_replicas == 2
    assert s.optimizer_over_replicas is (outer == "optim")
    hsdp = _memory(path)
    fsdp = _memory(MEGATRON / FSDP)
    assert hsdp["gradients"] == pytest.approx(2.0 * fsdp["gradients"])
    assert hsdp["optimizer"] == pytest.approx(optimizer_ratio * fsdp["optimizer"])
    assert hsdp["weights"] > fsdp["weights"]  # the held shard doubles (the two gathered layers do not)


def test_hsdp_keeps_the_per_micro_batch_gathers_inside_the_node(tmp_path: Path) -> None:
    """The FSDP example on two 8-GPU nodes: plain Megatron-FSDP gathers and reduce-scatters over all 16 ranks at every
    micro-batch, so every one crosses InfiniBand; with one instance per node only a once-per-step all-reduce of the
    node's gradient shard does."""
    path = _hsdp(tmp_path, "optim")
    record = RunRecord(id="r", chip="h100", num_chips=16, num_slices=2, config=path.name)
    mesh = Mesh(ici={"data": 8}, dcn={"data": 2})
    hsdp = costmodel.predict(record, mesh, settings=_settings(path))
    fsdp_record = record.model_copy(update={"config": FSDP})
    fsdp = costmodel.predict(fsdp_record, mesh, settings=_settings(MEGATRON / FSDP))
    assert hsdp.breakdown_ms.get("comm.data", 0.0) < fsdp.breakdown_ms.get("comm.data", 0.0)
    assert hsdp.memory_per_chip_bytes > fsdp.memory_per_chip_bytes  # the price: state over 8 ranks, not 16


def test_instances_without_a_sharding_optimizer_are_said_to_change_nothing() -> None:
    s = _settings(MEGATRON / INSTANCES).model_copy(update={"distributed_optimizer": False})
    record = RunRecord(id="r", chip="h100", num_chips=8, config=INSTANCES)
    pred = costmodel.predict(record, Mesh(ici={"data": 4, "tensor": 2}), settings=s)
    assert any("without the distributed optimizer or Megatron-FSDP: nothing is sharded" in a for a in pred.assumptions)


def test_a_bad_instance_count_is_named_not_guessed(tmp_path: Path) -> None:
    path = _hsdp(tmp_path, None, instances="two")
    s = _settings(path)
    assert s.dp_replicas is None
    record = RunRecord(id="r", chip="h100", num_chips=8, config=path.name)
    pred = costmodel.predict(record, Mesh(ici={"data": 8}), settings=s)
    assert any("num_distributed_optimizer_instances 'two' is not a positive integer" in a for a in pred.assumptions)


def test_the_answer_names_the_instances(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "llama3"
    run.mkdir(parents=True)
    shutil.copy(_hsdp(tmp_path / "src", "optim"), run / "train.sh")
    (run / "run.yaml").write_text("id: llama3\nchip: h100\nnum_chips: 8\nconfig: train.sh\n")
    out = CliRunner().invoke(cli, ["--runs-dir", str(tmp_path / "runs"), "propose", "llama3", "--json", "--no-diff"])
    assert out.exit_code == 0, out.output
    notes = json.loads(out.output)["baseline"]["predicted"]["assumptions"]
    assert any("2 distributed-optimizer instances: gradients and parameters sharded within each of 2 groups" in n
               and "Megatron-FSDP HSDP" in n and "optimizer state over every data-parallel rank" in n
               for n in notes), notes
