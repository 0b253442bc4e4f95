"""Calibration: the baseline prediction reproduces the measurement; other meshes move relative to it."""

from __future__ import annotations

import pytest

from bot.analysis.report import AnalysisReport
from bot.configs.mesh import Mesh
from bot.errors import AsapError
from bot.runs.record import RunRecord
from knowledge.cost_settings import TrainingSettings
from knowledge.costmodel import calibrate, predict
from knowledge.meshsearch import score_meshes


def run_record(**training: object) -> RunRecord:
    train = {"global_batch": 128, "seq_len": 4096, "remat": "full", "micro_batch": 1}
    train.update(training)
    return RunRecord.model_validate(
        {
            "id": "cal",
            "framework": "maxtext",
            "chip": "tpu-v5p",
            "num_chips": 64,
            "model": {"layers": 32, "d_model": 4096, "d_ff": 14336, "heads": 32, "kv_heads": 8, "vocab": 128256},
            "training": train,
        }
    )


def report(step_ms: float | None, collective: float | None, host: float | None = 0.0, idle: float | None = 0.0) -> AnalysisReport:
    kpis = {
        "step_time_ms": step_ms,
        "step_time_source": "profile",
        "device_duty_cycle_percent": None,
        "collective_percent": collective,
        "host_wait_percent": host,
        "compute_bound_percent": None,
        "hbm_bound_percent": None,
        "idle_percent": idle,
        "mfu_percent": None,
        "achieved_tflops_per_chip": None,
        "hbm_used_bytes": None,
        "hbm_capacity_bytes": 96e9,
        "hbm_use_percent": None,
        "tokens_per_second": None,
    }
    return AnalysisReport.model_validate(
        {
            "run": {
                "id": "cal", "name": None, "chip": "tpu-v5p", "chip_name": "TPU v5p", "num_chips": 64,
                "num_slices": 1, "mesh": None, "mesh_short": None, "config_format": None, "model": None,
                "params": None, "profile_sources": [],
            },
            "kpis": kpis,
            "top_ops": [],
            "diagnosis": {
                "bottleneck": "communication", "secondary": [], "summary": "", "evidence": [], "conflicts": [],
                "confidence": 0.5, "confidence_reasons": [], "scores": {},
            },
            "unavailable": [],
            "warnings": [],
        }
    )


BASE_MESHES = [
    Mesh(ici={"fsdp": 16, "tensor": 4}),
    Mesh(ici={"fsdp": 64}),
    Mesh(ici={"fsdp": 8, "pipeline": 8}),
    Mesh(ici={"data": 4, "fsdp": 8, "sequence": 2}),
]


@pytest.mark.parametrize("mesh", BASE_MESHES, ids=lambda m: m.short())
@pytest.mark.parametrize("kpis", [(3000.0, 35.0, 5.0, 2.0), (1200.0, 10.0, 0.0, 0.0), (5000.0, None, 20.0, None)])
def test_baseline_prediction_reproduces_measurement(mesh: Mesh, kpis: tuple) -> None:
    run = run_record()
    cal = calibrate(run, mesh, report(*kpis))
    pred = predict(run, mesh, calibration=cal)
    assert pred.step_time_ms == pytest.approx(kpis[0], rel=1e-9)
    assert score_meshes(run, [mesh], cal)[0] == pytest.approx(kpis[0], rel=1e-9)
    assert cal.baseline_mesh == mesh


def test_calibration_splits_measured_time_into_terms() -> None:
    run = run_record()
    mesh = Mesh(ici={"fsdp": 16, "tensor": 4})
    cal = calibrate(run, mesh, report(3000.0, 40.0, host=10.0, idle=0.0))
    pred = predict(run, mesh, calibration=cal)
    # 40% of 3000 ms in collectives, 10% host wait, the rest device work.
    assert pred.exposed_comm_ms == pytest.approx(1200.0, rel=1e-6)
    assert cal.fixed_ms == pytest.approx(300.0)
    assert pred.breakdown_ms["compute"] + pred.breakdown_ms["hbm"] == pytest.approx(1500.0, rel=1e-6)
    assert abs(cal.residual_ms) < 1e-6


def test_other_meshes_move_relative_to_the_measurement() -> None:
    run = run_record()
    base = Mesh(ici={"fsdp": 16, "tensor": 4})
    target = Mesh(ici={"fsdp": 64})
    raw_base, raw_target = predict(run, base), predict(run, target)
    slow = calibrate(run, base, report(2 * raw_base.step_time_ms, None))
    # Twice the modelled time measured on the baseline, all of it device work: compute scales ~x2 and the
    # prediction for the other mesh grows with it.
    pred = predict(run, target, calibration=slow)
    assert pred.breakdown_ms["compute"] == pytest.approx(slow.compute_scale * raw_target.breakdown_ms["compute"])
    assert pred.step_time_ms > 1.5 * raw_target.step_time_ms


def test_pipeline_bubble_is_not_fixed_time() -> None:
    run = run_record()
    pipe = Mesh(ici={"fsdp": 8, "pipeline": 8})
    cal = calibrate(run, pipe, report(4000.0, 5.0, host=0.0, idle=30.0))
    # The modelled bubble (7/16 of stage time) explains the idle share; it must not stay as fixed time on
    # a mesh without pipelining.
    assert cal.fixed_ms < 0.3 * 4000.0
    assert predict(run, Mesh(ici={"fsdp": 64}), calibration=cal).step_time_ms < 4000.0


def test_uncertainty_grows_with_what_was_assumed() -> None:
    run = run_record()
    base = Mesh(ici={"fsdp": 16, "tensor": 4})
    cal = calibrate(run, base, report(3000.0, 30.0))
    at_base = predict(run, base, calibration=cal)
    near = predict(run, Mesh(ici={"fsdp": 32, "tensor": 2}), calibration=cal)
    far = predict(run, Mesh(ici={"fsdp": 4, "tensor": 2, "pipeline": 8}), calibration=cal)
    uncal = predict(run, base)
    assert at_base.uncertainty < near.uncertainty < far.uncertainty
    assert at_base.uncertainty < uncal.uncertainty
    guessed = run_record(remat=None, micro_batch=None)
    cal_g = calibrate(guessed, base, report(3000.0, 30.0))
    assert predict(guessed, base, calibration=cal_g).uncertainty > at_base.uncertainty
    assert any("remat" in a for a in predict(guessed, base).assumptions)
    assert any("not calibrated" in a for a in uncal.assumptions)


def test_the_measured_mesh_gets_the_calibrated_band_not_the_overlap_range() -> None:
    """At the mesh the profile measured, how much overlappable traffic shows is inside the measurement; a wide band
    there (the whole overlap range times a fitted comm scale: 2,436-4,522 ms around a measured 3,000) says nothing."""
    run = run_record()
    base = Mesh(ici={"fsdp": 16, "tensor": 4})
    cal = calibrate(run, base, report(3000.0, 30.0))
    at_base = predict(run, base, calibration=cal)
    assert at_base.step_time_ms == pytest.approx(3000.0)
    assert at_base.step_time_low_ms == pytest.approx(2850.0) and at_base.step_time_high_ms == pytest.approx(3150.0)
    # the same mesh with a changed setting is a prediction, not the measurement: the overlap range is back
    assert cal.settings is None  # run.yaml only: the changed setting below is the first config setting
    changed = predict(run, base, calibration=cal, settings=TrainingSettings(micro_batch=2))
    assert changed.uncertainty > 0.1


def test_calibrate_without_measured_step_is_a_clear_error() -> None:
    with pytest.raises(AsapError, match="no measured step time") as err:
        calibrate(run_record(), Mesh(ici={"fsdp": 64}), report(None, 30.0))
    assert err.value.field == "measured.step_time_ms"


def test_measured_step_from_run_record_when_report_has_none() -> None:
    run = RunRecord.model_validate({**run_record().model_dump(), "measured": {"step_time_ms": 2500.0}})
    cal = calibrate(run, Mesh(ici={"fsdp": 64}), report(None, 20.0))
    assert cal.measured_step_ms == 2500.0
    assert predict(run, Mesh(ici={"fsdp": 64}), calibration=cal).step_time_ms == pytest.approx(2500.0)


def test_collectives_the_model_does_not_predict_are_noted() -> None:
    run = run_record()
    one_axis = Mesh(ici={"data": 64})  # no fsdp/tensor/...: only a once-per-step gradient all-reduce
    cal = calibrate(run, one_axis, report(3000.0, 75.0))
    assert predict(run, one_axis, calibration=cal).step_time_ms == pytest.approx(3000.0)
    assert any("comm_scale" in n and "disagree" in n for n in cal.notes)
    assert any("shorter than the modelled FLOPs" in n for n in cal.notes)
    assert cal.residual_ms > 0


def test_memory_calibrated_on_measured_peak() -> None:
    run = run_record()
    mesh = Mesh(ici={"fsdp": 64})
    raw = predict(run, mesh)
    measured = raw.memory_per_chip_bytes + 5e9  # XLA kept 5 GB more activations than modelled
    rep = report(3000.0, 5.0)
    rep = rep.model_copy(update={"kpis": rep.kpis.model_copy(update={"hbm_used_bytes": measured})})
    cal = calibrate(run, mesh, rep)
    assert cal.activation_scale > 1.0
    assert predict(run, mesh, calibration=cal).memory_per_chip_bytes == pytest.approx(measured)
    # Another mesh's activations move by the same factor; model state is not scaled.
    other = Mesh(ici={"fsdp": 32, "tensor": 2})
    a, b = predict(run, other), predict(run, other, calibration=cal)
    assert b.memory_breakdown_bytes["activations"] == pytest.approx(a.memory_breakdown_bytes["activations"] * cal.activation_scale)
    assert b.memory_breakdown_bytes["optimizer"] == a.memory_breakdown_bytes["optimizer"]


def test_baseline_that_ran_near_capacity_still_fits() -> None:
    run = run_record(remat="none", micro_batch=2)  # ~47 GB modelled; measured 90 GB -> activations x~2
    mesh = Mesh(ici={"fsdp": 64})
    rep = report(3000.0, 5.0)
    rep = rep.model_copy(update={"kpis": rep.kpis.model_copy(update={"hbm_used_bytes": 90e9})})  # 94% of 96 GB
    cal = calibrate(run, mesh, rep)
    assert 1.5 < cal.activation_scale < 2.5
    assert predict(run, mesh, calibration=cal).fits_memory
    assert score_fits(run, mesh, cal)
    # A mesh needing more than the baseline does not inherit the exemption.
    assert not predict(run, Mesh(ici={"data": 2, "fsdp": 32}), calibration=cal).fits_memory


def score_fits(run: RunRecord, mesh: Mesh, cal) -> bool:
    from knowledge.costmodel import mesh_arrays
    from knowledge.meshsearch import evaluate_mesh_arrays

    ici, dcn = mesh_arrays([mesh])
    return bool(evaluate_mesh_arrays(run, ici, dcn, cal).fits_memory[0])


def test_hidden_collectives_are_not_fitted_as_a_tiny_ratio() -> None:
    run = run_record()
    mesh = Mesh(ici={"fsdp": 64})
    cal = calibrate(run, mesh, report(3000.0, 0.0))
    assert cal.comm_scale == 1.0
    assert any("hidden in both" in n for n in cal.notes)
    # Tensor traffic on another mesh keeps its modelled size (not shrunk by a 0/x ratio).
    other = Mesh(ici={"fsdp": 16, "tensor": 4})
    assert predict(run, other, calibration=cal).breakdown_ms["comm.tensor"] == pytest.approx(
        predict(run, other).breakdown_ms["comm.tensor"]
    )
