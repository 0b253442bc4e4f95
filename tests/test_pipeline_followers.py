"""A proposal that changes a Megatron run's pipeline size rewrites what Megatron derives from it.

Megatron-Bridge 26.08's DeepSeek-V3 GB200 recipe (examples/eval/mbridge-26.08-gb200-deepseek-v3-256gpu-mxfp8, from
perf_recipes/deepseek/gb200 @ 4ab94dfad) runs PP 4 with ``pipeline_model_parallel_layout: Et*4|(t*4|)*14tmL`` (16
stages) and ``virtual_pipeline_model_parallel_size: 4``. Megatron-Core asserts that a stated virtual size equals
stages / pipeline size (transformer_config.py, "virtual_pipeline_model_parallel_size conflicts with
pipeline_model_parallel_layout"), and Megatron-LM's arguments.py asserts the layout's stage count divides the pipeline
size. Before, ASAP's proposals changed only the pipeline size: a PP 1 proposal kept a 16-stage layout.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.configs.detect import load_config, parse_config
from bot.configs.edit import apply_changes, config_diff
from bot.configs.mesh import Mesh
from bot.errors import ConfigError

CASE = Path(__file__).resolve().parents[1] / "examples" / "eval" / "mbridge-26.08-gb200-deepseek-v3-256gpu-mxfp8"


def _model(text: str) -> dict:  # type: ignore[type-arg]
    return yaml.safe_load(text)["model"]


def test_pipeline_one_drops_the_layout_and_the_virtual_stages() -> None:
    cfg = load_config(CASE / "megatron.yaml")
    text = apply_changes(cfg, Mesh(ici={"expert": 64}, dcn={"data": 4}), {})
    model = _model(text)
    assert model["pipeline_model_parallel_size"] == 1
    assert model["pipeline_model_parallel_layout"] is None and model["virtual_pipeline_model_parallel_size"] is None
    assert parse_config(text, cfg.source).setting("pipeline_model_parallel_layout") is None


def test_a_pipeline_size_the_layout_divides_keeps_it_with_the_virtual_size_megatron_derives() -> None:
    cfg = load_config(CASE / "megatron.yaml")
    model = _model(apply_changes(cfg, Mesh(ici={"expert": 32, "pipeline": 2}, dcn={"pipeline": 4}), {}))
    assert model["pipeline_model_parallel_size"] == 8
    assert model["pipeline_model_parallel_layout"] == "Et*4|(t*4|)*14tmL"
    assert model["virtual_pipeline_model_parallel_size"] == 2  # 16 stages / 8
    # the diff a proposal shows carries the same lines
    diff = config_diff(cfg, Mesh(ici={"expert": 32, "pipeline": 2}, dcn={"pipeline": 4}), None, "megatron.yaml")
    assert "+  virtual_pipeline_model_parallel_size: 2" in diff


def test_a_pipeline_size_the_layout_does_not_divide_is_refused_by_name() -> None:
    cfg = load_config(CASE / "megatron.yaml")
    with pytest.raises(ConfigError) as err:
        apply_changes(cfg, Mesh(ici={"expert": 16, "pipeline": 3}, dcn={"data": 4}), {})
    assert "16 stages" in err.value.message and "pipeline=3" in err.value.message


def test_megatron_lm_layers_per_virtual_stage_follow_the_pipeline_size() -> None:
    """Megatron-LM's BERT functional test (tests/data/real/megatron: PP 4, --num-layers-per-virtual-pipeline-stage 2,
    24 layers) at pipeline 1 drops the virtual-stage flag; 24 / 8 = 3 layers per stage cannot hold virtual stages
    of 2 layers, so pipeline 8 is refused."""
    src = Path(__file__).parent / "data" / "real" / "megatron" / "bert_mcore_tp1_pp4_vp2.model_config.yaml"
    cfg = load_config(src)
    text = apply_changes(cfg, Mesh(ici={"data": 8}), {})
    assert "--num-layers-per-virtual-pipeline-stage: null" in text
    with pytest.raises(ConfigError) as err:
        apply_changes(cfg, Mesh(ici={"pipeline": 8}), {})
    assert "num_layers_per_virtual_pipeline_stage=2" in err.value.message
