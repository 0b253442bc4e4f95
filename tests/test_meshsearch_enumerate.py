"""Mesh enumeration checked by brute force; divisibility sentences; placement rules."""

from __future__ import annotations

import itertools
import math

import pytest

from bot.configs.mesh import AXES, Mesh
from bot.runs.record import RunRecord
from knowledge.meshsearch import (
    DCN_AXES,
    divisibility_problems,
    enumerate_mesh_arrays,
    enumerate_meshes,
    placement_problems,
    score_meshes,
)


def run_record(num_chips: int, *, chip: str = "tpu-v5p", num_slices: int = 1, model: dict | None = None,
               training: dict | None = None) -> RunRecord:
    body: dict = {"id": "e", "chip": chip, "num_chips": num_chips, "num_slices": num_slices}
    if model is not None:
        body["model"] = model
    if training is not None:
        body["training"] = training
    return RunRecord.model_validate(body)


SMALL_MODEL = {"layers": 6, "d_model": 512, "d_ff": 2048, "heads": 12, "kv_heads": 4, "vocab": 1000}
SMALL_TRAIN = {"global_batch": 24, "seq_len": 1024}


def brute_force(run: RunRecord, *, gpu_domain: int | None = None) -> set[tuple]:
    """Every ICI x DCN assignment by exhaustive search over each axis' possible sizes (the divisors of the
    slice size, found by trial), filtered by the stated rules."""
    per_slice, slices = run.chips_per_slice, run.num_slices
    out: set[tuple] = set()
    sizes = [d for d in range(1, per_slice + 1) if per_slice % d == 0]
    for ici in itertools.product(sizes, repeat=6):
        if math.prod(ici) != per_slice:
            continue
        if gpu_domain is not None and gpu_domain % ici[AXES.index("tensor")]:
            continue
        for dcn in itertools.product(range(1, slices + 1), repeat=6):
            if math.prod(dcn) != slices:
                continue
            if any(v > 1 and a not in DCN_AXES for a, v in zip(AXES, dcn, strict=True)):
                continue
            mesh = Mesh(ici=dict(zip(AXES, ici, strict=True)), dcn=dict(zip(AXES, dcn, strict=True))).normalized()
            if not divisibility_problems(run, mesh):
                out.add((tuple(mesh.ici.get(a, 1) for a in AXES), tuple(mesh.dcn.get(a, 1) for a in AXES)))
    return out


def as_keys(meshes: list[Mesh]) -> set[tuple]:
    return {(tuple(m.ici.get(a, 1) for a in AXES), tuple(m.dcn.get(a, 1) for a in AXES)) for m in meshes}


@pytest.mark.parametrize(
    "run",
    [
        run_record(8),
        run_record(12),
        run_record(16, num_slices=2),
        run_record(16, model=SMALL_MODEL, training=SMALL_TRAIN),
        run_record(24, num_slices=2, model=SMALL_MODEL, training=SMALL_TRAIN),
    ],
    ids=["8", "12", "16-2slices", "16-model", "24-2slices-model"],
)
def test_enumeration_matches_brute_force(run: RunRecord) -> None:
    meshes = enumerate_meshes(run)
    assert len(meshes) == len(as_keys(meshes))  # no duplicates
    assert as_keys(meshes) == brute_force(run)


def test_unconstrained_count_is_stars_and_bars() -> None:
    # 4096 = 2^12 over 6 axes: C(12 + 5, 5) ordered factorizations.
    ici, _ = enumerate_mesh_arrays(run_record(4096))
    assert ici.shape[0] == math.comb(17, 5) == 6188


def test_gpu_tensor_stays_in_nvlink_domain() -> None:
    run = run_record(16, chip="h100", model=SMALL_MODEL, training=SMALL_TRAIN)
    meshes = enumerate_meshes(run)
    assert as_keys(meshes) == brute_force(run, gpu_domain=8)
    assert all(m.size("tensor") in (1, 2, 4) for m in meshes)  # 8 does not divide heads=12... 4 divides both


def test_every_enumerated_mesh_multiplies_and_divides() -> None:
    run = run_record(
        128, num_slices=2,
        model={"layers": 32, "d_model": 4096, "d_ff": 14336, "heads": 32, "kv_heads": 8, "vocab": 128256,
               "experts": 8, "experts_per_token": 2},
        training={"global_batch": 256, "seq_len": 8192},
    )
    meshes = enumerate_meshes(run)
    assert meshes
    for mesh in meshes:
        assert mesh.num_devices == 128 and mesh.num_slices == 2
        assert math.prod(mesh.ici.values()) == 64
        assert set(mesh.dcn) <= set(DCN_AXES)
        assert divisibility_problems(run, mesh) == []
        Mesh.model_validate(mesh.model_dump())  # valid as a real model, not just constructed
    assert any(m.size("expert") == 8 for m in meshes)


def test_axes_argument_restricts_search() -> None:
    meshes = enumerate_meshes(run_record(16), axes=("fsdp", "tensor"))
    assert {m.short() for m in meshes} == {"fsdp=16", "fsdp=8 tensor=2", "fsdp=4 tensor=4", "fsdp=2 tensor=8",
                                           "tensor=16"}


def test_dense_model_never_gets_expert_axis() -> None:
    run = run_record(16, model=SMALL_MODEL, training=SMALL_TRAIN)
    assert all(m.size("expert") == 1 for m in enumerate_meshes(run))


def test_divisibility_sentences_name_the_arithmetic() -> None:
    run = run_record(64, model={**SMALL_MODEL, "layers": 6}, training={"global_batch": 24, "seq_len": 1002})
    problems = divisibility_problems(run, Mesh(ici={"tensor": 16, "pipeline": 4}))
    assert "tensor=16 does not divide heads=12" in problems
    assert "pipeline=4 does not divide layers=6" in problems
    assert not any("kv_heads" in p for p in problems)  # 16 = 4 x kv_heads: each KV head replicated 4 times
    problems = divisibility_problems(run, Mesh(ici={"tensor": 6, "fsdp": 8}))
    assert any("tensor=6 neither divides kv_heads=4 nor is a multiple of it" in p for p in problems)
    problems = divisibility_problems(run, Mesh(ici={"data": 16, "sequence": 4}))
    assert any("data x fsdp x expert = 16 x 1 x 1 = 16 does not divide global_batch=24" in p for p in problems)
    assert "sequence=4 does not divide seq_len=1002" in problems
    problems = divisibility_problems(run, Mesh(ici={"fsdp": 8, "tensor": 4}))
    assert problems == ["mesh fsdp=8 tensor=4 multiplies to 32 chips, but the run has 64"]
    assert any("less than one" in p for p in divisibility_problems(run, Mesh(ici={"fsdp": 64})))
    assert any("model is dense" in p for p in divisibility_problems(run, Mesh(ici={"fsdp": 8, "expert": 8})))


def test_kv_heads_replicate_when_tensor_is_a_multiple() -> None:
    model = {**SMALL_MODEL, "d_ff": 3072}  # heads 12, kv_heads 4
    run = run_record(12, model=model, training=SMALL_TRAIN)
    assert divisibility_problems(run, Mesh(ici={"tensor": 4, "fsdp": 3})) == []
    assert divisibility_problems(run, Mesh(ici={"tensor": 12})) == []  # each KV head on 3 chips
    assert any(m.size("tensor") == 12 for m in enumerate_meshes(run))


def test_dcn_mismatch_is_reported() -> None:
    run = run_record(16, num_slices=2)
    problems = divisibility_problems(run, Mesh(ici={"fsdp": 16}))
    assert problems and "num_slices=2" in problems[0]


def test_placement_advice() -> None:
    tpu = run_record(16, num_slices=2)
    assert any("tensor=2 runs over DCN" in p for p in placement_problems(tpu, Mesh(ici={"fsdp": 8}, dcn={"tensor": 2})))
    assert placement_problems(tpu, Mesh(ici={"fsdp": 8}, dcn={"data": 2})) == []
    gpu = run_record(16, chip="h100")
    assert any("NVLink domain" in p for p in placement_problems(gpu, Mesh(ici={"tensor": 16})))


def test_enumerated_meshes_score_without_error() -> None:
    run = run_record(64, model=SMALL_MODEL, training={"global_batch": 64, "seq_len": 1024})
    meshes = enumerate_meshes(run)
    scores = score_meshes(run, meshes, None)
    assert scores.shape == (len(meshes),)
    assert (scores > 0).all()
