"""A MoE layer's fixed time under a whole-iteration CUDA graph (knowledge/cost_cuda_graph.py).

Megatron-Bridge's 26.08 summary (docs/performance-summary.md @ 4ab94dfad366, "26.08 NeMo Container" > "Pre-Training
Performance") re-measured its MoE models with recipes that capture the whole step in one CUDA graph with MoE paged
stashing (``cuda_graph_impl = "full_iteration"``: perf_recipes/qwen/common.py::_enable_hybridep_full_iteration_mxfp8,
gpt_oss/common.py, deepseek/common.py at that commit). Qwen3 235B-A22B on 256 GB200 at micro-batch 1 measured
7,280 tokens/s/GPU: 8,192 x 4,096 tokens over 256 GPUs is an 18.0 s step. Priced at the 3.5 ms per MoE layer per
micro-batch fitted on recipes without the whole-step graph, ASAP put it at 27.1 s.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.configs.detect import load_config
from knowledge.cost_core import MOE_LAYER_GRAPHED_S, MOE_LAYER_HOST_S
from knowledge.cost_settings import settings_from_config
from tests.published_cases import megatron_yaml_settings, predict_case

QWEN235_GB200 = "mbridge-26.08-gb200-qwen3-235b-a22b-256gpu-mxfp8"


def test_the_whole_step_graph_is_read_from_bridge_yaml(tmp_path: Path) -> None:
    full = "model:\n  cuda_graph_impl: full_iteration\n  cuda_graph_scope: []\n"
    assert megatron_yaml_settings(tmp_path, full).full_iteration_graph is True
    local = "model:\n  cuda_graph_impl: local\n  cuda_graph_scope: [full_iteration]\n"
    assert megatron_yaml_settings(tmp_path, local).full_iteration_graph is True
    # Transformer Engine's partial capture keeps the host between the captured pieces
    partial = "model:\n  cuda_graph_impl: transformer_engine\n  cuda_graph_scope: [attn, moe_router, moe_preprocess]\n"
    assert megatron_yaml_settings(tmp_path, partial).full_iteration_graph is False
    assert megatron_yaml_settings(tmp_path, "model:\n  cuda_graph_impl: none\n").full_iteration_graph is False
    assert megatron_yaml_settings(tmp_path, "").full_iteration_graph is None


@pytest.mark.parametrize(("flags", "full"), [
    ("--cuda-graph-impl local --cuda-graph-scope full_iteration", True),
    ("--enable-cuda-graph --cuda-graph-scope full_iteration", True),  # deprecated: means local (arguments.py)
    ("--cuda-graph-impl transformer_engine --cuda-graph-scope attn moe_router moe_preprocess", False),
    ("--external-cuda-graph", False),
    ("--cuda-graph-impl local --cuda-graph-scope full", False),  # per-layer graphs
    ("--cuda-graph-impl local --cuda-graph-scope full_iteration_inference", False),  # an inference server's graph
    ("", None),
])
def test_the_whole_step_graph_is_read_from_megatron_lm_flags(tmp_path: Path, flags: str, full: bool | None) -> None:
    sh = tmp_path / "train.sh"
    sh.write_text("torchrun --nproc_per_node 8 pretrain_gpt.py --num-experts 8 --expert-model-parallel-size 8 "
                  f"{flags} --seq-length 4096\n")
    assert settings_from_config(load_config(sh, root=tmp_path)).full_iteration_graph is full


def test_the_published_graphed_row_is_priced_at_the_graphed_per_layer_time() -> None:
    measured_ms = 8192 * 4096 / 256 / 7280 * 1000.0  # 18,005 ms
    graphed = predict_case(QWEN235_GB200)
    ungraphed = predict_case(QWEN235_GB200, full_iteration_graph=False)
    assert abs(graphed.step_time_ms / measured_ms - 1.0) < 0.10
    assert ungraphed.step_time_ms > 1.3 * measured_ms
    ratio = graphed.breakdown_ms["moe_layer_overhead"] / ungraphed.breakdown_ms["moe_layer_overhead"]
    assert ratio == pytest.approx(MOE_LAYER_GRAPHED_S / MOE_LAYER_HOST_S, rel=1e-6)
    assert any(a.startswith("whole-iteration CUDA graph") for a in graphed.assumptions)
    assert any(f"MoE layers: {MOE_LAYER_GRAPHED_S * 1e3:g} ms per layer" in a for a in graphed.assumptions)
    assert not any(a.startswith("whole-iteration CUDA graph") for a in ungraphed.assumptions)


@pytest.mark.parametrize(("chip", "slug", "gpus", "batch", "tps"), [
    ("gb200", "qwen3-235b-a22b", 256, 8192, 7280), ("gb300", "qwen3-235b-a22b", 256, 8192, 8816),
    ("gb200", "qwen3-30b-a3b", 8, 512, 39936), ("gb300", "qwen3-30b-a3b", 8, 512, 44544),
])
def test_each_graphed_qwen3_row_is_priced_within_ten_percent(chip: str, slug: str, gpus: int, batch: int,
                                                             tps: int) -> None:
    """The four 26.08 Qwen3 rows (4,096-token sequences; tokens/s/GPU as published): within 10% of the measured step
    with the graph read; without it (the fixed per-layer time fitted on ungraphed recipes) over 5% slow and over 10%
    slower than with it (GB300 Qwen3 30B: 0.92 with the graph, 1.09 without, since the Blackwell GEMM refit)."""
    measured_ms = batch * 4096 / gpus / tps * 1000.0
    case = f"mbridge-26.08-{chip}-{slug}-{gpus}gpu-mxfp8"
    graphed = predict_case(case).step_time_ms
    assert abs(graphed / measured_ms - 1.0) < 0.10
    ungraphed = predict_case(case, full_iteration_graph=False).step_time_ms
    assert ungraphed > 1.05 * measured_ms and ungraphed > 1.1 * graphed
