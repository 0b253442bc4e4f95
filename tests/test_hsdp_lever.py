"""The HSDP lever: a Megatron-FSDP run over several nodes is offered one distributed-optimizer instance per node.

Fixture: Megatron-LM's ``examples/megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh`` at d98e8a64 (Megatron-FSDP,
``optim_grads_params``, fp8, micro-batch 1 x 8,192 tokens, global batch 128), whose own comment offers the HSDP flags
(``--num-distributed-optimizer-instances 2 --outer-dp-sharding-strategy``), run here on two and on one 8-GPU H100
node; its plain distributed-optimizer sibling ``examples/llama/train_llama3_8b_h100_fp8.sh`` is the control.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

import bot.cli.proposals  # noqa: F401  (registers propose)
from bot.cli import cli
from bot.configs.detect import parse_config
from knowledge.cost_settings import settings_from_config

MEGATRON = Path(__file__).parent / "data" / "real" / "megatron"
FSDP = "train_llama3_8b_fsdp_h100_fp8.sh"
DDP = "train_llama3_8b_h100_fp8.sh"


def _propose(tmp_path: Path, script: str, chips: int, text: str | None = None) -> dict:  # type: ignore[type-arg]
    run = tmp_path / "runs" / "llama3"
    run.mkdir(parents=True)
    if text is None:
        shutil.copy(MEGATRON / script, run / "train.sh")
    else:
        (run / "train.sh").write_text(text)
    (run / "run.yaml").write_text(f"id: llama3\nchip: h100\nnum_chips: {chips}\nnum_slices: {chips // 8}\n"
                                  "config: train.sh\n")
    out = CliRunner().invoke(cli, ["--runs-dir", str(tmp_path / "runs"), "propose", "llama3", "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.output)  # type: ignore[no-any-return]


def _hsdp(answer: dict) -> list[dict]:  # type: ignore[type-arg]
    return [p for p in answer["proposals"] if p["kind"] == "hsdp"]


def test_two_nodes_of_megatron_fsdp_are_offered_one_group_per_node(tmp_path: Path) -> None:
    answer = _propose(tmp_path, FSDP, 16)
    [hsdp] = _hsdp(answer)
    assert hsdp["mesh_short"] == answer["baseline"]["mesh_short"]  # the mesh stays; the sharding groups change
    assert hsdp["settings"] == {"num_distributed_optimizer_instances": 2, "outer_dp_sharding_strategy": "optim"}
    assert "+    ${EVAL_AND_LOGGING_ARGS[@]} --num-distributed-optimizer-instances 2 --outer-dp-sharding-strategy optim" \
        in hsdp["diff"]
    base, new = answer["baseline"]["predicted"], hsdp["predicted"]
    # the per-micro-batch gathers leave InfiniBand: less exposed data-parallel time, more memory per GPU
    assert new["breakdown_ms"]["comm.data"] < base["breakdown_ms"]["comm.data"]
    assert new["step_time_ms"] < base["step_time_ms"]
    assert new["memory_per_chip_bytes"] > base["memory_per_chip_bytes"]
    assert all(c["passed"] for c in hsdp["critic"] if c["name"] == "memory")
    assert any("memory per GPU" in t for t in hsdp["tradeoffs"])


def test_the_edit_reads_back_as_hybrid_sharding(tmp_path: Path) -> None:
    answer = _propose(tmp_path, FSDP, 16)
    [hsdp] = _hsdp(answer)
    text = (MEGATRON / FSDP).read_text().replace(
        "    ${EVAL_AND_LOGGING_ARGS[@]}\n",
        "    ${EVAL_AND_LOGGING_ARGS[@]} --num-distributed-optimizer-instances 2 --outer-dp-sharding-strategy optim\n")
    assert text != (MEGATRON / FSDP).read_text()
    s = settings_from_config(parse_config(text, str(tmp_path / FSDP)))
    assert s.dp_replicas == 2 and s.optimizer_over_replicas is True
    # and a run that already has it is not offered it again
    assert _hsdp(_propose(tmp_path / "again", FSDP, 16, text=text)) == []
    assert hsdp["rank"] >= 1


def test_one_node_and_plain_data_parallelism_are_not_offered_it(tmp_path: Path) -> None:
    assert _hsdp(_propose(tmp_path / "one", FSDP, 8)) == []  # no inter-node collective to keep in the node
    assert _hsdp(_propose(tmp_path / "ddp", DDP, 16)) == []  # the distributed optimizer alone: nothing to gain
    # optim_grads: the parameters are not gathered per micro-batch, so there is nothing for HSDP to keep in the node
    grads = (MEGATRON / FSDP).read_text().replace('SHARDING_STRATEGY=${SHARDING_STRATEGY:-"optim_grads_params"}',
                                                  'SHARDING_STRATEGY=${SHARDING_STRATEGY:-"optim_grads"}')
    assert _hsdp(_propose(tmp_path / "grads", FSDP, 16, text=grads)) == []


# DeepSpeed: ZeRO++ hpZ is the same lever for a ZeRO-3 ds_config (DeepSpeed's tests/torch_compile/ds_config_z3.json at
# 38327e07, stage 3 without hpZ), with the 18B GPT-2 of DeepSpeed's ZeRO++ tutorial on four 8-GPU A100 nodes.
DEEPSPEED = Path(__file__).parent / "data" / "real" / "deepspeed"
GPT2_18B = "{name: gpt2-18b, layers: 40, d_model: 6144, d_ff: 24576, heads: 32, kv_heads: 32, vocab: 50257, mlp_matrices: 2}"


def _propose_ds(tmp_path: Path, name: str) -> dict:  # type: ignore[type-arg]
    run = tmp_path / "runs" / "gpt2"
    run.mkdir(parents=True)
    shutil.copy(DEEPSPEED / name, run / "ds_config.json")
    (run / "run.yaml").write_text(f"id: gpt2\nchip: a100-80gb\nnum_chips: 32\nnum_slices: 4\nconfig: ds_config.json\n"
                                  f"model: {GPT2_18B}\ntraining: {{global_batch: 32, seq_len: 512, micro_batch: 1, "
                                  "remat: full}\n")
    out = CliRunner().invoke(cli, ["--runs-dir", str(tmp_path / "runs"), "propose", "gpt2", "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.output)  # type: ignore[no-any-return]


def test_a_zero3_config_over_nodes_is_offered_hpz_per_node(tmp_path: Path) -> None:
    answer = _propose_ds(tmp_path, "ds_config_z3.json")
    [hpz] = _hsdp(answer)
    assert hpz["settings"] == {"zero_optimization.zero_hpz_partition_size": 8}  # the GPUs of one node
    assert '+      "zero_hpz_partition_size": 8,' in hpz["diff"]  # inserted into zero_optimization, its spacing kept
    base, new = answer["baseline"]["predicted"], hpz["predicted"]
    assert new["breakdown_ms"]["comm.fsdp"] < base["breakdown_ms"]["comm.fsdp"]
    assert new["memory_per_chip_bytes"] > base["memory_per_chip_bytes"]  # the second, node-sharded weight copy
    assert any("second copy of the weights" in t for t in hpz["tradeoffs"])


def test_a_config_with_hpz_already_is_not_offered_it_again(tmp_path: Path) -> None:
    assert _hsdp(_propose_ds(tmp_path, "zeropp_tutorial_ds_config.json")) == []  # its zero_hpz_partition_size 16


# A Megatron-Bridge YAML (the corpus's Megatron-Bridge 25.09 DGX-GB200 Llama 3 70B row: Megatron-FSDP under ``ddp:``)
# read over two nodes. A new key would be written beside the mesh keys under ``model:``, where Megatron-Bridge does not
# read ddp settings, so the lever is offered only when the file already holds the keys (edited in place).
BRIDGE = Path(__file__).parent.parent / "examples" / "eval" / "mbridge-25.09-gb200-llama3-70b-64gpu" / "megatron.yaml"


def test_a_bridge_yaml_gets_the_lever_only_where_the_edit_can_place_it(tmp_path: Path) -> None:
    from bot.configs.detect import load_config
    from bot.configs.mesh import Mesh
    from bot.proposals.hsdp import hsdp_changes

    mesh = Mesh(ici={"data": 32}, dcn={"data": 2})
    config = load_config(BRIDGE)
    assert hsdp_changes(settings_from_config(config), config, mesh) == []
    text = BRIDGE.read_text().replace("  data_parallel_sharding_strategy: optim_grads_params\n",
                                      "  data_parallel_sharding_strategy: optim_grads_params\n"
                                      "  num_distributed_optimizer_instances: 1\n  outer_dp_sharding_strategy: no_shard\n")
    (tmp_path / "megatron.yaml").write_text(text)
    config = load_config(tmp_path / "megatron.yaml")
    [change] = hsdp_changes(settings_from_config(config), config, mesh)
    assert change.config_values == {"ddp.num_distributed_optimizer_instances": 2, "ddp.outer_dp_sharding_strategy": "optim"}
    from bot.configs.edit import apply_settings

    edited = apply_settings(config, change.config_values)
    assert "  num_distributed_optimizer_instances: 2\n  outer_dp_sharding_strategy: optim\n" in edited  # in place
