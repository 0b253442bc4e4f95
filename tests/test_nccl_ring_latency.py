"""FSDP over hundreds of GPUs pays NCCL's ring latency in every per-layer collective.

NCCL's own latency model (NVIDIA/nccl src/graph/tuning.cc @ 5067397c, BSD-3-Clause; ``ncclTunerConstantsDefaults``,
Simple protocol): a ring all-gather or reduce-scatter over nRanks GPUs on nNodes nodes costs 8.4 us plus 3.4 us per
NVLink step and 14 us per step between nodes, nRanks - 1 steps of which nNodes - 1 cross the network.

llm-foundry's 'H100 80GB BF16 large scale' table (mosaicml/llm-foundry scripts/train/benchmarking/README.md @
495218376, Apache-2.0; ``scripts/eval_cases_llm_foundry.py``) runs each MPT model at 128, 256 and 512 GPUs with FSDP over
all of them and the same 12 sequences per GPU: MPT-1B measures 44,123 / 42,555 / 39,837 tokens/s per GPU, its step
557 -> 578 -> 617 ms, 10.8% slower at 512 GPUs than at 128. With bandwidth alone a two-level ring moves the same bytes
per GPU at any node count, and the model priced the three rows within 0.1% of each other.
"""

from __future__ import annotations

import numpy as np
import pytest

from knowledge import cost_core
from knowledge.cost_network import axis_networks, ring_latency
from knowledge.hardware import get_chip
from tests.published_cases import predict_case

FSDP = 1  # bot.configs.mesh.AXES: data, fsdp, tensor, sequence, expert, pipeline
MPT_1B = {  # GPUs -> measured tokens/s per GPU (row '1b | 2048 | <gpus> | h100_80gb', micro-batch 12, 2,048 tokens)
    128: 44123.0,
    256: 42555.0,
    512: 39837.0,
}


def _case(gpus: int) -> str:
    return f"llmfoundry-h100-bf16-ls-mpt-1b-s2048-{gpus}gpu-mb12"


def _measured_step_ms(gpus: int) -> float:
    return 1e3 * 12 * 2048 / MPT_1B[gpus]


def test_ring_latency_follows_nccls_model() -> None:
    """One node of eight H100s: 8.4 + 7 x 3.4 us; 64 nodes of eight: 8.4 + 448 x 3.4 + 63 x 14 us; a TPU torus: none."""
    h100 = get_chip("h100")
    ici = np.array([[1, 8, 1, 1, 1, 1], [1, 8, 1, 1, 1, 1]])
    dcn = np.array([[1, 1, 1, 1, 1, 1], [1, 64, 1, 1, 1, 1]])
    lat = ring_latency(axis_networks(h100, 8, ici, dcn), FSDP)
    assert lat[0] == pytest.approx(32.2e-6)
    assert lat[1] == pytest.approx(2413.6e-6)
    v5p = get_chip("tpu-v5p")
    torus = axis_networks(v5p, 256, np.array([[1, 256, 1, 1, 1, 1]]), np.array([[1, 1, 1, 1, 1, 1]]))
    assert ring_latency(torus, FSDP)[0] == 0.0


def test_fsdp_over_more_gpus_slows_as_measured() -> None:
    """MPT-1B at 128 -> 512 GPUs: measured 10.8% slower; predicted within 3% of each measured step, and slower by at
    least half the measured growth (bandwidth alone: under 1%)."""
    pred = {g: predict_case(_case(g)).step_time_ms for g in MPT_1B}
    for g in MPT_1B:
        assert pred[g] == pytest.approx(_measured_step_ms(g), rel=0.03)
    measured_growth = _measured_step_ms(512) / _measured_step_ms(128) - 1.0
    assert pred[512] / pred[128] - 1.0 > 0.5 * measured_growth


def test_without_the_latency_the_rows_price_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same rows with the latency removed come out within 1% of each other: the growth is the latency's."""
    monkeypatch.setattr(cost_core, "ring_latency", lambda net, axis, group=None: np.zeros(net.n_fast.shape[0]))
    steps = [predict_case(_case(g)).step_time_ms for g in MPT_1B]
    assert max(steps) / min(steps) < 1.01


def test_the_answer_names_the_latency_and_the_way_out() -> None:
    """At 512 GPUs the prediction's assumptions say what the latency costs and that HSDP keeps the rings short."""
    notes = [a for a in predict_case(_case(512)).assumptions if "ring latency" in a]
    assert len(notes) == 1
    assert "FSDP over 512 GPUs" in notes[0] and "2,414 us" in notes[0] and "HSDP" in notes[0]


def test_one_node_pays_microseconds_and_is_not_named() -> None:
    """Eight GPUs in one node (the same table's 8-GPU rows): 32 us per collective, under 1% of the step, not named."""
    pred = predict_case("llmfoundry-h100-bf16-mpt-1b-s2048-8gpu-mb14")
    assert not [a for a in pred.assumptions if "ring latency" in a]
