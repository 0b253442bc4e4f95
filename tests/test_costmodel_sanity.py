"""Behaviour a user would notice: monotonic trends, memory fit, clear errors for unknown models."""

from __future__ import annotations

import pytest

from bot.configs.mesh import Mesh
from bot.errors import AsapError, ConfigError
from bot.runs.record import RunRecord
from knowledge.costmodel import model_known, predict
from knowledge.meshsearch import score_meshes


def run_record(model: dict | None = None, training: dict | None = None, **extra: object) -> RunRecord:
    body = {
        "id": "s",
        "framework": "maxtext",
        "chip": "tpu-v5p",
        "num_chips": 64,
        "model": model
        if model is not None
        else {"layers": 32, "d_model": 4096, "d_ff": 14336, "heads": 32, "kv_heads": 8, "vocab": 128256},
        "training": training if training is not None else {"global_batch": 256, "seq_len": 4096, "remat": "full"},
    }
    body.update(extra)
    return RunRecord.model_validate(body)


def test_more_tensor_parallelism_raises_tensor_comm() -> None:
    run = run_record()
    comm = [
        predict(run, Mesh(ici={"fsdp": 64 // t, "tensor": t})).breakdown_ms.get("comm.tensor", 0.0)
        for t in (1, 2, 4, 8)
    ]
    assert comm[0] == 0.0
    assert comm[1] < comm[2] < comm[3]


def test_memory_falls_as_fsdp_grows() -> None:
    run = run_record()
    mems = [predict(run, Mesh(ici={"data": 64 // f, "fsdp": f})).memory_per_chip_bytes for f in (1, 2, 4, 8, 16, 32, 64)]
    assert all(a > b for a, b in zip(mems, mems[1:], strict=False))


def test_replicated_8b_does_not_fit_but_fsdp_does() -> None:
    run = run_record()
    replicated = predict(run, Mesh(ici={"data": 64}))
    # MaxText keeps fp32 parameters (weight_dtype default), fp32 gradients and two fp32 Adam moments:
    # 16 B per parameter, 8 B of it optimizer state, all replicated by pure data parallelism.
    assert replicated.memory_breakdown_bytes["optimizer"] > 60e9  # 8 B x 8 G params
    assert replicated.memory_per_chip_bytes > 120e9
    assert not replicated.fits_memory
    assert predict(run, Mesh(ici={"fsdp": 64})).fits_memory


def test_distributed_optimizer_shards_optimizer_over_data() -> None:
    model = {"layers": 32, "d_model": 4096, "d_ff": 14336, "heads": 32, "kv_heads": 8, "vocab": 128256}
    train = {"global_batch": 256, "seq_len": 4096, "remat": "full", "micro_batch": 1}
    plain = run_record(model, train, framework="megatron", chip="h100", num_chips=64, num_slices=8)
    zero1 = run_record(model, train, framework="megatron", chip="h100", num_chips=64, num_slices=8,
                       tags=["distributed-optimizer"])
    mesh = Mesh(ici={"tensor": 8}, dcn={"data": 8})
    a, b = predict(plain, mesh), predict(zero1, mesh)
    assert b.memory_breakdown_bytes["optimizer"] == pytest.approx(a.memory_breakdown_bytes["optimizer"] / 8)
    assert a.memory_breakdown_bytes["gradients"] == pytest.approx(2 * a.memory_breakdown_bytes["weights"])  # fp32 main_grad


def test_pipeline_with_few_microbatches_pays_a_bubble() -> None:
    few = run_record(training={"global_batch": 64, "seq_len": 4096, "remat": "full", "micro_batch": 8})
    many = run_record(training={"global_batch": 64, "seq_len": 4096, "remat": "full", "micro_batch": 1})
    mesh = Mesh(ici={"fsdp": 8, "pipeline": 8})
    assert predict(few, mesh).breakdown_ms["pipeline_bubble"] > predict(many, mesh).breakdown_ms["pipeline_bubble"]


def test_model_unknown_raises_clear_error() -> None:
    run = RunRecord.model_validate({"id": "x", "chip": "tpu-v5p", "num_chips": 64})
    assert not model_known(run)
    with pytest.raises(AsapError) as err:
        predict(run, Mesh(ici={"fsdp": 64}))
    assert "model (layers" in err.value.message and "training" in err.value.message
    assert err.value.hint
    with pytest.raises(AsapError):
        score_meshes(run, [Mesh(ici={"fsdp": 64})], None)


def test_partially_known_model_names_missing_fields() -> None:
    run = run_record(model={"layers": 32, "d_model": 4096}, training={"global_batch": 8})
    assert not model_known(run)
    with pytest.raises(AsapError) as err:
        predict(run, Mesh(ici={"fsdp": 64}))
    for name in ("model.heads", "model.d_ff (or model.params)", "training.seq_len"):
        assert name in err.value.message


def test_params_without_d_ff_derives_d_ff() -> None:
    run = run_record(model={"layers": 32, "d_model": 4096, "heads": 32, "kv_heads": 8, "vocab": 128256,
                            "params": 8.03e9})
    assert model_known(run)
    pred = predict(run, Mesh(ici={"fsdp": 64}))
    assert any("d_ff not given: derived from params as 14336" in a for a in pred.assumptions)


def test_mesh_not_covering_the_run_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="32 devices, but the run has 64"):
        predict(run_record(), Mesh(ici={"fsdp": 32}))


def test_score_meshes_matches_predict() -> None:
    run = run_record()
    meshes = [Mesh(ici={"fsdp": 64}), Mesh(ici={"fsdp": 16, "tensor": 4}), Mesh(ici={"fsdp": 8, "pipeline": 8}),
              Mesh(ici={"data": 2, "fsdp": 8, "sequence": 4})]
    scores = score_meshes(run, meshes, None)
    for mesh, score in zip(meshes, scores, strict=True):
        assert score == pytest.approx(predict(run, mesh).step_time_ms)


def test_uncalibrated_prediction_is_in_a_plausible_range() -> None:
    # Llama-3-8B, 1M tokens per step on 64 v5p chips: 6 x 8e9 x 1.05e6 x 4/3 / (64 x 4.59e14 x 0.55) ~ 4.5 s.
    pred = predict(run_record(), Mesh(ici={"fsdp": 64}))
    assert 3000 < pred.step_time_ms < 7000
    assert pred.uncertainty >= 0.3
