"""Pre-flight analysis: a run with a config (and perhaps a few measured numbers) but no profile.

Teams ask "is this config sensible?" before they have a profile. The answer is the cost model's
prediction for the run's own mesh and settings, labelled ``predicted — no profile`` everywhere it shows:

* **step time**: ``measured.step_time_ms``; else ``measured.tokens_per_second`` (tokens per step ÷
  tokens/s); else ``measured.mfu_percent`` (model FLOPs per step ÷ (MFU × peak FLOP/s × chips), the same
  FLOP count ``asap why`` uses for MFU). With one of them the cost model is calibrated on it (compute
  scale fitted; collectives kept at the model's estimate, since nothing measured their share); without,
  the prediction is absolute from public chip figures, with the wider band that implies.
* **memory**: ``measured.hbm_peak_bytes`` calibrates the activation term of the memory model.
* **out of memory**: ``measured.oom: true`` is a fact: the diagnosis says so and the Critic rejects the
  configuration as it stands (:mod:`bot.proposals.context`).

The diagnosis is the predicted split of the step (compute, HBM, exposed collectives per axis, pipeline
bubble) with the same bottleneck rule as a profile (collectives ≥ 30% of the step: communication-bound,
else the larger of compute and HBM), at a confidence that says it is a prediction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.analysis.kpis import model_flops_per_step
from bot.analysis.report import AnalysisReport, Diagnosis, Evidence, Kpis, PredictedStep, RunSummary
from bot.errors import AsapError

if TYPE_CHECKING:
    from bot.configs.mesh import Mesh
    from bot.runs.record import RunRecord
    from bot.runs.store import Run
    from knowledge.hardware import Chip

LABEL = "predicted — no profile"
COMM_BOUND_SHARE = 0.30  # XProf's rule of thumb, as the profile diagnosis uses it
CONFIDENCE_CALIBRATED = 0.5  # a measured step fixes the total; the split is still the model's
CONFIDENCE_UNCALIBRATED = 0.35  # public peaks and a default efficiency: the split and the total are the model's


@dataclass
class MeasuredStep:
    """The step time a pre-flight run measured, and which field it came from."""

    ms: float | None
    source: str | None  # measured | measured-tokens | measured-mfu
    words: str


def measured_step(record: RunRecord, chip: Chip) -> MeasuredStep:
    """The run's measured step time from run.yaml: step time, else tokens/s, else MFU (through the FLOPs)."""
    m = record.measured
    if m is None:
        return MeasuredStep(None, None, "nothing measured")
    if m.step_time_ms:
        return MeasuredStep(float(m.step_time_ms), "measured", f"measured step {m.step_time_ms:g} ms")
    tokens = record.training.tokens_per_step if record.training else None
    if m.tokens_per_second and tokens:
        ms = 1000.0 * tokens / m.tokens_per_second
        return MeasuredStep(ms, "measured-tokens",
                            f"step {ms:.1f} ms from measured {m.tokens_per_second:g} tokens/s x {tokens} tokens/step")
    flops = model_flops_per_step(record).per_step
    if m.mfu_percent and flops:
        ms = 1000.0 * flops / (m.mfu_percent / 100.0 * chip.peak_bf16_flops * record.num_chips)
        return MeasuredStep(ms, "measured-mfu",
                            f"step {ms:.1f} ms from measured MFU {m.mfu_percent:g}% ({flops:.3g} model FLOPs/step, "
                            f"{chip.peak_bf16_flops:.3g} FLOP/s x {record.num_chips} chips)")
    return MeasuredStep(None, None, "no step time, tokens/s or MFU measured (with the model and batch to convert it)")


def _kpis(record: RunRecord, chip: Chip, step: MeasuredStep) -> Kpis:
    m = record.measured
    flops = model_flops_per_step(record).per_step
    mfu, mfu_source = None, None
    if step.ms and flops:
        # a step derived from the measured MFU gives that MFU back: it is the measurement, not a computation
        source = "measured" if step.source == "measured-mfu" else "computed"
        mfu, mfu_source = round(100.0 * flops / (step.ms / 1000.0 * record.num_chips * chip.peak_bf16_flops), 2), source
    elif m is not None and m.mfu_percent is not None:
        mfu, mfu_source = m.mfu_percent, "measured"
    tokens = record.training.tokens_per_step if record.training else None
    tps = round(1000.0 * tokens / step.ms, 1) if tokens and step.ms else (m.tokens_per_second if m else None)
    used = float(m.hbm_peak_bytes) if m is not None and m.hbm_peak_bytes else None
    return Kpis(
        step_time_ms=round(step.ms, 4) if step.ms else None,
        step_time_source=step.source,
        device_duty_cycle_percent=None, collective_percent=None, host_wait_percent=None,
        compute_bound_percent=None, hbm_bound_percent=None, idle_percent=None,
        mfu_percent=mfu, mfu_source=mfu_source,  # type: ignore[arg-type]
        achieved_tflops_per_chip=round(flops / (step.ms / 1000.0) / record.num_chips / 1e12, 3)
        if flops and step.ms else None,
        hbm_used_bytes=used,
        hbm_capacity_bytes=float(chip.hbm_bytes),
        hbm_use_percent=round(100.0 * used / chip.hbm_bytes, 2) if used else None,
        tokens_per_second=tps,
    )


def _shares(pred: Any) -> dict[str, float]:
    """Share of the predicted step per resource: compute, hbm, communication, pipeline bubble, fixed."""
    b = pred.breakdown_ms
    step = max(pred.step_time_ms, 1e-9)
    comm = sum(v for k, v in b.items() if k.startswith("comm."))
    return {
        "compute": b.get("compute", 0.0) / step,
        "hbm": b.get("hbm", 0.0) / step,
        "communication": comm / step,
        "pipeline_bubble": b.get("pipeline_bubble", 0.0) / step,
        "offload": b.get("offload", 0.0) / step,  # DeepSpeed ZeRO offload: host link and CPU optimizer
        # MoE layers' fixed per-micro-batch time (routing, token-count exchange, permutation, small kernels)
        "moe_overhead": b.get("moe_layer_overhead", 0.0) / step,
        # MaxText's routed-expert path on TPU beyond its GEMM FLOPs (sort, grouped matmuls, unsort)
        "moe_dispatch": b.get("moe_dispatch", 0.0) / step,
        "host": (b.get("fixed", 0.0) + b.get("offload", 0.0)) / step,
    }


_SPLIT_TERMS = ("compute", "hbm", "communication", "pipeline_bubble", "moe_overhead", "moe_dispatch", "offload")


def _predicted(record: RunRecord, chip: Chip, pred: Any, calibrated: bool) -> PredictedStep:
    """The predicted step as the figures a KPI table shows (MFU and tokens/s at the predicted step)."""
    shares = _shares(pred)
    split = {k: round(100 * shares[k], 1) for k in _SPLIT_TERMS if shares[k] > 0.0005}
    fixed = pred.breakdown_ms.get("fixed", 0.0) / max(pred.step_time_ms, 1e-9)
    if fixed > 0.0005:
        split["fixed"] = round(100 * fixed, 1)
    seconds = pred.step_time_ms / 1000.0
    flops = model_flops_per_step(record).per_step
    tokens = record.training.tokens_per_step if record.training else None
    return PredictedStep(
        step_time_ms=round(pred.step_time_ms, 3), step_time_low_ms=round(pred.step_time_low_ms, 3),
        step_time_high_ms=round(pred.step_time_high_ms, 3), calibrated=calibrated, split_percent=split,
        mfu_percent=round(100.0 * flops / (seconds * record.num_chips * chip.peak_bf16_flops), 2)
        if flops and seconds > 0 else None,
        tokens_per_second=round(tokens / seconds, 1) if tokens and seconds > 0 else None,
        memory_per_chip_bytes=float(pred.memory_per_chip_bytes),
        memory_capacity_bytes=float(pred.memory_capacity_bytes), fits_memory=bool(pred.fits_memory),
        **_memory_band(pred),
    )


def _memory_band(pred: Any) -> dict[str, Any]:
    """The memory band and the fit verdict it supports: a point just over the usable memory whose band's low edge fits
    is "may not fit", not a flat "does not fit" (a published configuration that ran was told it does not fit)."""
    from knowledge.costmodel import DEFAULT_HEADROOM

    usable = float(pred.memory_capacity_bytes) * (1.0 - DEFAULT_HEADROOM)
    low, high = pred.memory_low_bytes, pred.memory_high_bytes
    if pred.fits_memory:
        fit = "fits"
    else:
        fit = "may_not_fit" if low is not None and float(low) <= usable else "does_not_fit"
    return {"memory_low_bytes": None if low is None else float(low), "memory_high_bytes": None if high is None
            else float(high), "memory_usable_bytes": usable, "memory_fit": fit}


def _bottleneck(shares: dict[str, float]) -> str:
    if shares["communication"] >= COMM_BOUND_SHARE:
        return "communication"
    return "compute" if shares["compute"] >= shares["hbm"] else "hbm"


def _diagnosis(record: RunRecord, pred: Any, calibrated: bool, step: MeasuredStep, mesh: Mesh) -> Diagnosis:
    shares = _shares(pred)
    bottleneck = _bottleneck(shares)
    comm_axes = sorted(((k[5:], v) for k, v in pred.breakdown_ms.items() if k.startswith("comm.") and v > 0),
                       key=lambda x: -x[1])
    evidence = [
        Evidence(signal="predicted.compute_percent", value=round(100 * shares["compute"], 1),
                 statement=f"{LABEL}: {100 * shares['compute']:.0f}% of the step in matmul compute"),
        Evidence(signal="predicted.hbm_percent", value=round(100 * shares["hbm"], 1),
                 statement=f"{LABEL}: {100 * shares['hbm']:.0f}% in HBM-bound work"),
        Evidence(signal="predicted.collective_percent", value=round(100 * shares["communication"], 1),
                 statement=f"{LABEL}: {100 * shares['communication']:.0f}% in exposed collectives"
                 + (" (" + ", ".join(f"{a} {v:.0f} ms" for a, v in comm_axes[:3]) + ")" if comm_axes else "")),
    ]
    if shares["offload"] > 0.005:
        evidence.append(Evidence(signal="predicted.offload_percent", value=round(100 * shares["offload"], 1),
                                 statement=f"{LABEL}: {100 * shares['offload']:.0f}% waiting on DeepSpeed ZeRO offload "
                                 "(host-link transfers and the CPU optimizer step, at an assumed bandwidth and "
                                 "CPU-Adam rate)"))
    if shares["moe_overhead"] > 0.005:
        evidence.append(Evidence(signal="predicted.moe_overhead_percent", value=round(100 * shares["moe_overhead"], 1),
                                 statement=f"{LABEL}: {100 * shares['moe_overhead']:.0f}% in MoE layers' fixed "
                                 "per-micro-batch time (routing, the token-count exchange, permutation, small kernels: "
                                 "fewer, larger micro-batches or CUDA graphs reduce it)"))
    if shares["moe_dispatch"] > 0.005:
        evidence.append(Evidence(signal="predicted.moe_dispatch_percent", value=round(100 * shares["moe_dispatch"], 1),
                                 statement=f"{LABEL}: {100 * shares['moe_dispatch']:.0f}% in the routed experts' path "
                                 "beyond their matmul FLOPs (MaxText's sort, grouped matmuls and unsort on TPU; fitted "
                                 "across published TPU MoE recipes, not measured on this run)"))
    if shares["pipeline_bubble"] > 0.005:
        evidence.append(Evidence(signal="predicted.pipeline_bubble_percent", value=round(100 * shares["pipeline_bubble"], 1),
                                 statement=f"{LABEL}: {100 * shares['pipeline_bubble']:.0f}% pipeline bubble"))
    oom = bool(record.measured and record.measured.oom)
    if oom:
        evidence.insert(0, Evidence(signal="measured.oom", value="true",
                                    statement="measured: the job ran out of device memory with this config"))
    reasons = [f"{LABEL}: the split of the step is the cost model's, not a measurement"]
    if calibrated:
        conf = CONFIDENCE_CALIBRATED
        reasons.append(f"total calibrated on the {step.words}")
    else:
        conf = CONFIDENCE_UNCALIBRATED
        reasons.append("not calibrated: " + step.words + "; absolute prediction from public chip figures")
    summary = (
        f"{LABEL}: {bottleneck}-bound by the cost model for {mesh.short()}: compute {100 * shares['compute']:.0f}%, "
        f"HBM {100 * shares['hbm']:.0f}%, exposed collectives {100 * shares['communication']:.0f}%"
        + (f", ZeRO offload {100 * shares['offload']:.0f}%" if shares["offload"] > 0.005 else "")
        + (f", MoE per-layer overhead {100 * shares['moe_overhead']:.0f}%" if shares["moe_overhead"] > 0.005 else "")
        + (f", MoE routed path {100 * shares['moe_dispatch']:.0f}%" if shares["moe_dispatch"] > 0.005 else "")
        + " of a "
        f"{pred.step_time_ms:.1f} ms step" + (" (calibrated on the measurement)" if calibrated else " (uncalibrated)")
    )
    if oom:
        summary += "; the job ran out of memory with this config (measured.oom)"
    return Diagnosis(
        bottleneck=bottleneck,  # type: ignore[arg-type]
        secondary=[],
        summary=summary,
        evidence=evidence,
        conflicts=[],
        confidence=conf,
        confidence_reasons=reasons,
        scores={k: round(v, 4) for k, v in shares.items() if k in ("compute", "hbm", "communication", "host")},
    )


def _summary(record: RunRecord, chip: Chip, mesh: Mesh, config_format: str | None) -> RunSummary:
    model = record.model
    return RunSummary(
        id=record.id, name=record.name, chip=chip.key, chip_name=chip.display_name, num_chips=record.num_chips,
        num_slices=record.num_slices, mesh={"ici": dict(mesh.ici), "dcn": dict(mesh.dcn)}, mesh_short=mesh.short(),
        config_format=config_format, model=model.name if model else None,
        params=model.derived_params() if model else None, profile_sources=[],
    )


def preflight_report(
    run: Run, mesh: Mesh | None, config_format: str | None, *, warnings: list[str] | None = None,
    kpi_record: RunRecord | None = None,
) -> AnalysisReport:
    """The pre-flight :class:`AnalysisReport` of a run without a profile (see the module docstring).

    ``kpi_record`` is the record the KPIs use (run.yaml's, with the training shape the config states filled
    in where run.yaml omits it: :func:`bot.analysis.shape_source.kpi_shape`); default: the run's own.

    Raises :class:`AsapError` naming what to add when neither a profile nor the model and config are there.
    """
    from knowledge import costmodel
    from knowledge.cost_settings import settings_for_run
    from knowledge.hardware import get_chip

    record = run.record
    source = str(run.folder / "run.yaml")
    if mesh is None:
        # The config may be there and readable but unusable for this run (a mesh for another device count):
        # say why, not only that nothing could be predicted.
        why_not = [w.removeprefix("sharding config not used: ") for w in (warnings or [])
                   if w.startswith("sharding config not used: ")]
        if record.config and why_not:
            sizes = any(w in why_not[0] for w in ("WORLD_SIZE", "chips", "devices", "GPUs", "product"))
            raise AsapError("no profile, and the sharding config cannot be used for this run, so nothing can be "
                            f"predicted: {why_not[0]}", source=source, field="config",
                            hint="make run.yaml's chip count (num_chips, num_slices) and the config's parallel "
                            "sizes agree, or add a profile" if sizes else "fix what the config's error names, or add "
                            "a profile")
        raise AsapError("no profile and no readable sharding config: nothing to analyse or predict", source=source,
                        field="config", hint="add 'config: <file>' (and the model) for a pre-flight answer, or a profile")
    settings = settings_for_run(run)
    if not costmodel.model_known(record, settings):
        from knowledge.cost_shapes import missing_for_prediction

        missing = ", ".join(missing_for_prediction(record, settings)) or "the model and training shape"
        # a launch whose config file is missing states neither: say so, it is usually the real cause
        unread = [w for w in (warnings or []) if "was not found" in w or "not read" in w]
        cause = f"; {unread[0]}" if unread else ""
        raise AsapError(f"no profile, and the model is unknown, so nothing can be predicted (missing: {missing}){cause}",
                        source=source, field="model",
                        hint="add the model dimensions and training shape for a pre-flight answer, or a profile")
    chip = get_chip(record.chip)
    step = measured_step(kpi_record or record, chip)
    kpis = _kpis(kpi_record or record, chip, step)
    notes = list(warnings or [])
    notes.append(f"no profile: the diagnosis is the cost model's prediction ({LABEL}); {step.words}")
    unavailable = ["profile: op table, collective share, duty cycle and roofline need a profile (XProf exports or a "
                   "trace); the split of the step below is predicted"]
    draft = AnalysisReport(run=_summary(kpi_record or record, chip, mesh, config_format), kpis=kpis, top_ops=[],
                           diagnosis=Diagnosis(bottleneck="compute", secondary=[], summary="", evidence=[],
                                               conflicts=[], confidence=0.0, confidence_reasons=[], scores={}),
                           unavailable=unavailable, warnings=notes, basis="predicted")
    calibration = None
    try:
        if step.ms:
            calibration = costmodel.calibrate(record, mesh, draft, settings=settings)
        elif kpis.hbm_used_bytes:  # memory only: the step-time band stays uncalibrated
            calibration = costmodel.calibrate_memory(record, mesh, kpis.hbm_used_bytes, settings=settings)
    except AsapError as exc:
        notes.append(f"not calibrated: {exc.message}")
    pred = costmodel.predict(record, mesh, calibration=calibration, chip=chip, settings=settings)
    timed = calibration is not None and calibration.time_measured
    return draft.model_copy(update={"diagnosis": _diagnosis(record, pred, timed, step, mesh),
                                    "predicted": _predicted(kpi_record or record, chip, pred, timed)})
