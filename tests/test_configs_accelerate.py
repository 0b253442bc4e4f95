"""Hugging Face Accelerate configs are named as such, with the file ASAP reads for the same layout.

Fixtures: Accelerate's own templates (tests/data/real/accelerate, huggingface/accelerate examples/config_yaml_templates
@ 16cb6eb8). ASAP answered all of them with "no sharding keys found; expected one of: MaxText ... Megatron ...", which
tells an Accelerate user nothing about what to give instead.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.configs.detect import load_config
from bot.configs.mesh import Mesh
from bot.errors import ConfigError

ACCELERATE = Path(__file__).parent / "data" / "real" / "accelerate"


def _refusal(name: str) -> ConfigError:
    with pytest.raises(ConfigError, match="Hugging Face Accelerate config") as info:
        load_config(ACCELERATE / name)
    return info.value


def _suggested_mesh(err: ConfigError, tmp_path: Path, devices: int, nodes: int) -> Mesh:
    """The plain mesh the hint suggests, written as a file and read back the way a user would give it."""
    assert err.hint is not None
    text = re.search(r"(ici_mesh: \{[^}]*\}(?:, dcn_mesh: \{[^}]*\})?)", err.hint)
    assert text, err.hint
    path = tmp_path / "mesh.yaml"
    path.write_text(text.group(1).replace("}, ", "}\n") + "\n")
    return load_config(path).mesh(devices, nodes)


def test_an_fsdp_config_is_answered_with_the_plain_mesh_of_its_layout(tmp_path: Path) -> None:
    err = _refusal("fsdp.yaml")  # distributed_type FSDP, FULL_SHARD, 2 processes
    assert "distributed_type: FSDP" in err.message and "FULL_SHARD" in (err.hint or "")
    assert _suggested_mesh(err, tmp_path, 2, 1) == Mesh(ici={"fsdp": 2})


def test_a_multi_node_data_parallel_config_counts_processes_over_machines(tmp_path: Path) -> None:
    err = _refusal("multi_node.yaml")  # MULTI_GPU, num_processes 8 over num_machines 2
    assert _suggested_mesh(err, tmp_path, 8, 2) == Mesh(ici={"data": 4}, dcn={"data": 2})


def test_a_deepspeed_config_points_at_the_json_it_names() -> None:
    err = _refusal("deepspeed.yaml")
    assert "../deepspeed_config_templates/zero_stage1_config.json" in (err.hint or "")


def test_a_numbered_strategy_reads_as_torchs_sharding_strategy(tmp_path: Path) -> None:
    """Accelerate also takes torch's ShardingStrategy number (utils/dataclasses.py: ``ShardingStrategy(int(...))``);
    4 is HYBRID_SHARD: shards inside a machine, replicates across machines."""
    text = (ACCELERATE / "fsdp.yaml").read_text().replace("fsdp_sharding_strategy: FULL_SHARD", "fsdp_sharding_strategy: 4")
    text = text.replace("num_processes: 2", "num_processes: 16\nnum_machines: 2")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "fsdp.yaml").write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "old" / "fsdp.yaml")
    assert "HYBRID_SHARD" in (info.value.hint or "")
    assert _suggested_mesh(info.value, tmp_path, 16, 2) == Mesh(ici={"fsdp": 8}, dcn={"data": 2})
