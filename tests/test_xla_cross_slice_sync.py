"""MaxText's data-parallel gradient reduction across slices / hosts runs on the critical path.

Published evidence: MaxText's multi-slice README tables measure every added slice at or above the cost of the whole
ring all-reduce of the gradient shard at the NIC's line rate (30 of 37 multi-slice rows over the TPU v4, v5e and v5p
READMEs and the A3 H100 table), where ASAP priced the reduction as overlapped with the backward pass (a quarter of it
exposed). Rows used here (eval cases, sources in their expected.yaml):

* MaxText README.md @ e47fa1b5d3, 64b model on TPU v5e: 118 TFLOP/s per chip on one v5e-256, 112 on two, 99 on 32.
* MaxText src/maxtext/configs/gpu/a3/llama_2_7b/README.md: Llama 2 7B, 492 TFLOP/s per chip on one A3 VM, 407 on four.
"""

from __future__ import annotations

from tests.published_cases import predict_case

EXPOSED = "exposed: the data-parallel gradient reduction across slices / hosts"


def _drop(one: str, many: str) -> float:
    """Predicted per-chip throughput lost going from case ``one`` to case ``many`` (same per-chip work)."""
    return 1.0 - predict_case(one).step_time_ms / predict_case(many).step_time_ms


def test_a_second_v5e_slice_costs_its_whole_gradient_ring() -> None:
    measured = 1.0 - 112.0 / 118.0  # 5.1%
    drop = _drop("maxtext-v5e-64b-1x256", "maxtext-v5e-64b-2x256")
    # overlapped, the second slice cost 0.5%; exposed, 1.9%: closer, and still not more than was measured
    assert 0.015 < drop < measured
    two = predict_case("maxtext-v5e-64b-2x256")
    assert any(EXPOSED in a for a in two.assumptions), two.assumptions
    # 64.8B fp32 gradients over 256 chips, half of them each way over 3.125 GB/s of DCN per chip: ~324 ms, all of it
    assert 300.0 < two.breakdown_ms["comm.data"] < 350.0


def test_more_slices_cost_more_and_a_single_slice_keeps_its_overlap() -> None:
    assert _drop("maxtext-v5e-64b-1x256", "maxtext-v5e-64b-32x256") > _drop("maxtext-v5e-64b-1x256",
                                                                             "maxtext-v5e-64b-2x256")
    one = predict_case("maxtext-v5e-64b-1x256")
    assert not any(EXPOSED in a for a in one.assumptions)
    assert one.breakdown_ms.get("comm.data", 0.0) == 0.0


def test_maxtext_on_gpu_vms_pays_the_exposed_reduction_over_the_inter_host_network() -> None:
    measured = 1.0 - 407.0 / 492.0  # 17%
    drop = _drop("maxtext-a3-llama2-7b-1vm", "maxtext-a3-llama2-7b-4vm")
    assert 0.05 < drop < measured  # 1.7% before


def test_megatron_keeps_its_overlapped_data_parallel_sync_across_nodes() -> None:
    # Megatron-Bridge 25.09 DGX-GB200 Llama 3.1 405B: Megatron-FSDP with data parallelism across two NVL domains
    pred = predict_case("mbridge-25.09-gb200-llama31-405b-128gpu")
    overlap = next(a for a in pred.assumptions if a.startswith("overlap:"))
    assert overlap.startswith("overlap: data,") and EXPOSED not in overlap
