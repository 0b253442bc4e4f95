"""Collectives are charged to mesh axes by evidence (replica groups, frequency, payload), never first match.

Numbers are Llama-2 7B's (Touvron et al. 2023, Table 1 / model card: 32 layers, d_model 4096, 6.7B
parameters): a tensor-parallel layer issues 4 activation all-reduces per layer in forward+backward
(Shoeybi et al. 2019, §3) -> 128 per step, each a [4096 tokens, 4096] bf16 activation = 32 MiB; the
data-parallel gradient all-reduce moves 6.7e9 / 4 tensor shards x 2 B = 3.4 GB once per step.
"""

from __future__ import annotations

import pytest
from test_analysis_support import STEPS, collective, matmul, profiled, record, run_analysis

from bot.configs.mesh import Mesh
from knowledge.cost_relative import attribute_axes, predict_relative, profile_baseline
from knowledge.hardware import get_chip

MESH = Mesh(ici={"data": 2, "tensor": 4})
ACT = 4096 * 4096 * 2.0
GRAD = 6.7e9 / 4 * 2.0


def _baseline(ops):  # type: ignore[no-untyped-def]
    rec = record(model=False)
    prof = profiled(ops, duty=99.0)
    report = run_analysis(rec, prof, MESH)
    return profile_baseline(report=report, profile=prof, mesh=MESH, chip=get_chip("tpu-v5p"), num_chips=8,
                            num_slices=1, global_batch=None, seq_len=None, remat_flop_factor=1.0)


def test_per_layer_activation_allreduces_go_to_tensor_and_the_gradient_allreduce_to_data() -> None:
    tp = collective("all-reduce.7", 0.20, group=4, collective_bytes=ACT)
    tp.occurrences = 128 * STEPS
    dp = collective("all-reduce.9", 0.05, group=2, collective_bytes=GRAD)
    dp.occurrences = STEPS
    rb = _baseline([matmul("fusion.mlp", 0.7), tp, dp])
    by_axis = {c.axis: c.ms for c in rb.collectives}
    # before: first match charged both to data (the first axis > 1 that issues all-reduce)
    assert by_axis["tensor"] == pytest.approx(4 * by_axis["data"], rel=1e-6)
    assert rb.ambiguous_ms == 0
    # the gradient payload alone gives the parameter count: 3.4 GB x 4 weight shards / 2 B
    assert rb.params == pytest.approx(6.7e9, rel=1e-6)


def test_frequency_alone_separates_them_when_replica_groups_are_unknown() -> None:
    shares, why = attribute_axes("all-reduce", "ici", MESH, per_step=128.0, payload=ACT)
    assert max(shares, key=shares.__getitem__) == "tensor" and shares["tensor"] >= 0.85
    assert "per layer" in why
    shares, _ = attribute_axes("all-reduce", "ici", MESH, per_step=1.0, payload=GRAD)
    assert shares == {"data": 1.0}


def test_an_ambiguous_collective_is_split_and_widens_the_band() -> None:
    vague = collective("all-reduce.3", 0.25, group=None)
    vague.occurrences = 4 * STEPS  # neither per layer nor once per step, no group, no payload
    rb = _baseline([matmul("fusion.mlp", 0.7), vague])
    axes = {c.axis for c in rb.collectives}
    assert axes == {"data", "tensor"}
    assert rb.ambiguous_ms > 0
    clear_tp = collective("all-reduce.7", 0.25, group=4)
    clear_tp.occurrences = 128 * STEPS
    clear = _baseline([matmul("fusion.mlp", 0.7), clear_tp])
    other = Mesh(ici={"data": 4, "tensor": 2})
    chip = get_chip("tpu-v5p")
    wide = predict_relative(rb, MESH, other, chip, 8)
    narrow = predict_relative(clear, MESH, other, chip, 8)
    assert wide.uncertainty > narrow.uncertainty
    assert any("could not be tied to one mesh axis" in a for a in wide.assumptions)


def test_with_the_model_unknown_compute_still_moves_with_the_matmul_shapes() -> None:
    # Compute per chip is the same FLOPs for any mesh of the same chips, but not the same time: tensor=8 cuts
    # each chip's d_ff to an eighth (d_model ~4096 assumed without a parameter count), so the same FLOPs run
    # slower, while trading tensor for data keeps matmul rows and widths in balance.
    rb = _baseline([matmul("fusion.mlp", 0.95)])
    chip = get_chip("tpu-v5p")
    same = predict_relative(rb, MESH, MESH, chip, 8)
    narrow = predict_relative(rb, MESH, Mesh(ici={"tensor": 8}), chip, 8)
    assert same.breakdown_ms["compute"] == pytest.approx(rb.compute_ms)
    assert narrow.breakdown_ms["compute"] > 1.02 * same.breakdown_ms["compute"]
    assert any("per-chip matmul shapes change" in a for a in narrow.assumptions)


def test_replica_group_spacing_tells_two_axes_of_the_same_size_apart() -> None:
    # MaxText numbers partitions row-major over mesh_axes (data outer, tensor inner): on data=4 x tensor=4 a
    # group of 4 neighbours ({{0,1,2,3},...}) is tensor, a group 4 apart ({{0,4,8,12},...}) is data.
    from bot.profiles.hlo_text import group_stride

    mesh = Mesh(ici={"data": 4, "tensor": 4})
    order = ("data", "pipeline", "fsdp", "sequence", "tensor", "expert")
    size_only, _ = attribute_axes("all-reduce", "ici", mesh, group_size=4, per_step=4.0)
    assert len(size_only) == 2  # ambiguous on size alone
    near = group_stride("replica_groups={{0,1,2,3},{4,5,6,7},{8,9,10,11},{12,13,14,15}}")
    far = group_stride("replica_groups=[4,4]<=[4,4]T(1,0)")
    assert (near, far) == (1, 4)
    assert attribute_axes("all-reduce", "ici", mesh, group_size=4, per_step=4.0, group_stride=near,
                          device_order=order)[0] == {"tensor": 1.0}
    assert attribute_axes("all-reduce", "ici", mesh, group_size=4, per_step=4.0, group_stride=far,
                          device_order=order)[0] == {"data": 1.0}


def test_profile_baseline_reads_the_spacing_from_the_compiled_hlo() -> None:
    # A MaxText run on data=4 x tensor=4: two all-reduces of 4 chips, 4 per step each. Size and frequency
    # cannot tell them apart; the compiled HLO's replica groups can (neighbours: tensor; 4 apart: data).
    from bot.profiles.model import CollectiveOp

    mesh = Mesh(ici={"data": 4, "tensor": 4})
    a = collective("all-reduce.1", 0.10, group=4)
    b = collective("all-reduce.2", 0.05, group=4)
    a.occurrences = b.occurrences = 4 * STEPS
    hlo = [CollectiveOp("all-reduce.1", "all-reduce", "bf16", 1 << 20, 4, 4, group_stride=1),
           CollectiveOp("all-reduce.2", "all-reduce", "bf16", 1 << 20, 4, 4, group_stride=4)]
    prof = profiled([matmul("fusion.mlp", 0.8), a, b], duty=99.0, collectives=hlo)
    rec = record(model=False, num_chips=16)
    report = run_analysis(rec, prof, mesh)
    rb = profile_baseline(report=report, profile=prof, mesh=mesh, chip=get_chip("tpu-v5p"), num_chips=16,
                          num_slices=1, global_batch=None, seq_len=None, remat_flop_factor=1.0)
    by_axis = {c.axis: c.ms for c in rb.collectives}
    assert by_axis["tensor"] == pytest.approx(2 * by_axis["data"], rel=1e-6)
    assert rb.ambiguous_ms == 0
