"""Eval figures: each measured outcome of a case next to ASAP's prediction, and the corpus-level metrics.

Per case (:func:`measured_points`): the measured step time (stated, or derived from the stated throughput:
tokens/s per chip exactly, TFLOP/s per chip or MFU through ASAP's model-FLOP count), ASAP's uncalibrated
predicted step time and memory, whether the Critic calls the configuration out of memory or rejects it.

Over a group of cases (:func:`figures`): top-1 / top-3 adopted-configuration match, OOM recall and false-OOM
rate, Critic false rejections, one calibration per hardware family (median measured/predicted step time; a
family needs >= 3 points, otherwise it is left uncalibrated and out of the calibrated error), the median
|error| of step time before and after it, memory error and ratio range, and per published table the
Spearman rank correlation of the predicted vs the measured throughput metric that every row of it states.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

from bot.configs.mesh import Mesh
from bot.proposals.models import CaseResult, EvalFigures, MeasuredPoint, TableFigures

if TYPE_CHECKING:
    from bot.proposals.evaluate import Expected, MeasuredOutcome

GIB = float(2**30)
MIN_CALIBRATION_POINTS = 3
# a table is ranked by the first metric every row states: model-FLOP normalised ones first, so rows of
# different models compare by how well they use the chip rather than by model size
METRIC_ORDER = ("tflops_per_chip", "mfu_percent", "tokens_per_second_per_chip")


def family_of(record: Any, variant: str | None = None, dtype: str | None = None) -> str:
    """Hardware family one calibration covers: the chip (and its variant), split by fp8 / fp4 (another peak and
    kernels)."""
    if dtype is None:
        dtype = record.training.dtype if record.training else "bf16"
    return record.chip + (f"-{variant}" if variant else "") + (f"-{dtype}" if dtype in ("fp8", "fp4") else "")


def _chip_peak(record: Any) -> float | None:
    from knowledge.hardware import get_chip

    try:
        return float(get_chip(record.chip).peak_bf16_flops)
    except Exception:  # noqa: BLE001 - an unknown chip already fails the run's own validation
        return None


def measured_step_ms(record: Any, m: MeasuredOutcome, flops: float | None,
                     tokens: float | None = None) -> tuple[float | None, str | None]:
    """The measured step time: as stated, or derived from the stated throughput, and from which field
    (``tokens``: tokens per step when run.yaml does not state them and the config does)."""
    chips = record.num_chips
    tokens = tokens or (record.training.tokens_per_step if record.training else None)
    if m.step_time_ms is not None:
        return float(m.step_time_ms), "step_time_ms"
    if m.tokens_per_second_per_chip is not None and tokens:
        return 1000.0 * tokens / (m.tokens_per_second_per_chip * chips), "tokens_per_second_per_chip"
    if m.tflops_per_chip is not None and flops:
        return 1000.0 * flops / (m.tflops_per_chip * 1e12 * chips), "tflops_per_chip"
    peak = _chip_peak(record)
    if m.mfu_percent is not None and flops and peak:
        return 1000.0 * flops / (m.mfu_percent / 100.0 * peak * chips), "mfu_percent"
    return None, None


def _metrics(record: Any, m: MeasuredOutcome, pred_ms: float | None, flops: float | None,
             measured: tuple[float | None, str | None] = (None, None),
             tokens: float | None = None) -> dict[str, list[float]]:
    """Each throughput metric the source states, with ASAP's predicted value of the same metric.

    When the measured step comes from a stated step time or tokens/s, a stated TFLOP/s or MFU is predicted in the
    source's own FLOP count (stated value x measured step / predicted step): sources count model FLOPs differently
    (Megatron-Bridge halves causal attention; sliding windows, MoE routing), and within a table of different
    models a ranking must compare throughput, not FLOP conventions. Otherwise (the step itself derived through
    ASAP's count) ASAP's count is used for both sides, which is the same thing.
    """
    if pred_ms is None:
        return {}
    chips = record.num_chips
    tokens = tokens or (record.training.tokens_per_step if record.training else None)
    meas_ms, step_from = measured
    own_count = meas_ms is not None and step_from in ("step_time_ms", "tokens_per_second_per_chip")
    out: dict[str, list[float]] = {}
    if m.tokens_per_second_per_chip is not None and tokens:
        out["tokens_per_second_per_chip"] = [float(m.tokens_per_second_per_chip), tokens / (pred_ms / 1000.0) / chips]
    if flops or own_count:
        pred_tflops = flops / (pred_ms / 1000.0) / chips / 1e12 if flops else None
        if m.tflops_per_chip is not None:
            pred = float(m.tflops_per_chip) * meas_ms / pred_ms if own_count and meas_ms else pred_tflops
            if pred is not None:
                out["tflops_per_chip"] = [float(m.tflops_per_chip), pred]
        peak = _chip_peak(record)
        if m.mfu_percent is not None and (peak or own_count):
            pred = float(m.mfu_percent) * meas_ms / pred_ms if own_count and meas_ms else (
                100.0 * pred_tflops * 1e12 / peak if pred_tflops is not None and peak else None)
            if pred is not None:
                out["mfu_percent"] = [float(m.mfu_percent), pred]
    if m.step_time_ms is not None and tokens and "tokens_per_second_per_chip" not in out:
        out["tokens_per_second_per_chip"] = [tokens / (m.step_time_ms / 1000.0) / chips, tokens / (pred_ms / 1000.0) / chips]
    return out


def measured_points(run: Any, expected: Expected, default_mesh: Mesh | None, calibration: Any = None) -> list[MeasuredPoint]:
    """Every measured outcome of the case next to the prediction for its mesh (uncalibrated unless given)."""
    from bot.analysis.kpis import model_flops_per_step
    from bot.proposals.critic import critique
    from knowledge import costmodel
    from knowledge.cost_settings import settings_for_run

    record = run.record
    settings = settings_for_run(run)
    known = costmodel.model_known(record, settings)
    flops = model_flops_per_step(record).per_step
    tokens, dtype = _from_config(record, settings) if known else (None, None)
    out: list[MeasuredPoint] = []
    for m in expected.measured:
        mesh = m.mesh or default_mesh
        if mesh is None:
            continue
        pred = costmodel.predict(record, mesh, calibration=calibration, settings=settings) if known else None
        check = critique(run, mesh, settings=settings)
        hard = [c for c in check.failures if c.hard]
        if not expected.memory_capacity_matches:
            hard = [c for c in hard if c.name != "memory"]
        meas_ms, step_from = measured_step_ms(record, m, flops, tokens)
        pred_ms = pred.step_time_ms if pred is not None else None
        out.append(MeasuredPoint(
            mesh=mesh.short(),
            family=family_of(record, expected.hardware_variant, dtype),
            measured_step_ms=meas_ms,
            step_from=step_from,
            predicted_step_ms=pred_ms,
            predicted_band_ms=[pred.step_time_low_ms, pred.step_time_high_ms] if pred is not None else None,
            metrics=_metrics(record, m, pred_ms, flops, (meas_ms, step_from), tokens),
            measured_memory_gib=m.peak_memory_gib,
            predicted_memory_gib=(pred.memory_per_chip_bytes / GIB) if pred is not None and pred.memory_per_chip_bytes else None,
            measured_oom=m.oom,
            predicted_oom=None if pred is None else any(c.name == "memory" and c.hard for c in check.failures),
            oom_scored=expected.memory_capacity_matches,
            critic_rejects=bool(hard),
            critic_reasons=[f"{c.name}: {c.reason}" for c in hard],
            anomaly=m.anomaly,
        ))
    return out


def _from_config(record: Any, settings: Any) -> tuple[float | None, str | None]:
    """Tokens per step and the matmul dtype as the run's config resolves them (a torchtitan TOML or a Megatron
    launch states its batch and its fp8 / fp4 where run.yaml may not): run.yaml's own figures win."""
    from knowledge.cost_shapes import resolve_shape

    shape = resolve_shape(record, settings)
    tokens = None if record.training and record.training.tokens_per_step else float(shape.global_batch * shape.seq_len)
    stated = record.training.dtype if record.training else None
    dtype = "fp8" if shape.fp8 else "fp4" if shape.fp4 else None
    return tokens, (dtype if stated in (None, "bf16") and dtype else None)


def spearman(measured: list[float], predicted: list[float]) -> float | None:
    """Spearman rank correlation (average ranks for ties); None below 3 rows or when one side is constant."""
    if len(measured) < 3 or len(measured) != len(predicted):
        return None

    def ranks(xs: list[float]) -> np.ndarray:
        a = np.asarray(xs, dtype=float)
        order = a.argsort(kind="mergesort")
        r = np.empty(len(a))
        r[order] = np.arange(len(a), dtype=float)
        for v in np.unique(a):  # ties share their average rank
            tie = a == v
            r[tie] = r[tie].mean()
        return r

    rm, rp = ranks(measured), ranks(predicted)
    if rm.std() == 0 or rp.std() == 0:
        return None
    return float(np.corrcoef(rm, rp)[0, 1])


def _rate(xs: list[bool]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def calibrations(points: list[MeasuredPoint]) -> dict[str, float]:
    """One factor per hardware family: the median measured/predicted step time over its points (>= 3)."""
    by: dict[str, list[float]] = defaultdict(list)
    for p in points:
        if p.measured_step_ms and p.predicted_step_ms:
            by[p.family].append(p.measured_step_ms / p.predicted_step_ms)
    return {f: statistics.median(r) for f, r in sorted(by.items()) if len(r) >= MIN_CALIBRATION_POINTS}


def step_errors(points: list[MeasuredPoint], cal: dict[str, float] | None) -> list[float]:
    """|predicted - measured| / measured step time per point; with ``cal``, after its family's factor (families
    without one are left out)."""
    errs = []
    for p in points:
        if not (p.measured_step_ms and p.predicted_step_ms):
            continue
        if cal is None:
            errs.append(abs(p.predicted_step_ms - p.measured_step_ms) / p.measured_step_ms)
        elif p.family in cal:
            errs.append(abs(cal[p.family] * p.predicted_step_ms - p.measured_step_ms) / p.measured_step_ms)
    return errs


def band_coverage(points: list[MeasuredPoint]) -> tuple[int, int]:
    """(points whose measured step lies inside the uncalibrated prediction's band, points with both): how often the
    band an answer states holds what was measured."""
    both = [p for p in points if p.measured_step_ms is not None and p.predicted_band_ms is not None]
    inside = sum(1 for p in both if p.predicted_band_ms[0] <= p.measured_step_ms <= p.predicted_band_ms[1])  # type: ignore[index, operator]
    return inside, len(both)


def memory_ratios(points: list[MeasuredPoint]) -> list[float]:
    """Predicted / measured peak memory per point that publishes one."""
    return [p.predicted_memory_gib / p.measured_memory_gib for p in points if p.measured_memory_gib and p.predicted_memory_gib]


def points_by_table(cases: list[CaseResult]) -> dict[str, list[MeasuredPoint]]:
    """The measured points of each published table (rows that ran; a recorded OOM has no throughput), by name."""
    by: dict[str, list[MeasuredPoint]] = defaultdict(list)
    for c in cases:
        if c.table:
            by[c.table].extend(p for p in c.points if not p.measured_oom)
    return dict(sorted(by.items()))


def table_figures(cases: list[CaseResult], cal: dict[str, float]) -> list[TableFigures]:
    """Per published table: the metric every row states, Spearman on it, calibrated error, memory ratios."""
    out = []
    for table, pts in points_by_table(cases).items():
        metric = next((k for k in METRIC_ORDER if pts and all(k in p.metrics for p in pts)), None)
        ranked = [p for p in pts if not p.anomaly]
        rho = rho_all = None
        if metric:
            rho = spearman([p.metrics[metric][0] for p in ranked], [p.metrics[metric][1] for p in ranked])
            rho_all = spearman([p.metrics[metric][0] for p in pts], [p.metrics[metric][1] for p in pts])
        ratios = memory_ratios(pts)
        out.append(TableFigures(
            table=table, metric=metric, rows=len(pts), spearman=rho, spearman_all_rows=rho_all,
            flagged_rows=len(pts) - len(ranked),
            step_time_error_median=_median(step_errors(pts, cal)),
            memory_ratio_min=min(ratios) if ratios else None, memory_ratio_max=max(ratios) if ratios else None,
        ))
    return out


def figures(cases: list[CaseResult]) -> EvalFigures:
    """The headline figures over one group of cases."""
    ok = [c for c in cases if not c.error]
    adopted = [c for c in ok if c.adopted is not None and c.top1 is not None]
    points = [p for c in ok for p in c.points]
    scored = [p for p in points if p.oom_scored and p.predicted_oom is not None]
    ooms = [p for p in scored if p.measured_oom]
    ran = [p for p in scored if not p.measured_oom]
    ran_checked = [p for p in points if not p.measured_oom and p.critic_rejects is not None]
    cal = calibrations(points)
    ratios = memory_ratios(points)
    return EvalFigures(
        cases=len(cases),
        adopted_cases=len(adopted),
        top1_rate=_rate([bool(c.top1) for c in adopted]),
        top3_rate=_rate([bool(c.top3) for c in adopted]),
        oom_cases=len(ooms),
        oom_recall=_rate([bool(p.predicted_oom) for p in ooms]),
        ran_cases=len(ran),
        false_oom_rate=_rate([bool(p.predicted_oom) for p in ran]),
        critic_false_rejections=sum(bool(p.critic_rejects) for p in ran_checked),
        critic_false_rejection_rate=_rate([bool(p.critic_rejects) for p in ran_checked]),
        calibration=cal,
        step_time_points=len(step_errors(points, None)),
        step_time_error_median_uncalibrated=_median(step_errors(points, None)),
        step_time_error_median=_median(step_errors(points, cal)),
        memory_points=len(ratios),
        memory_error_median=_median([abs(r - 1.0) for r in ratios]),
        memory_ratio_min=min(ratios) if ratios else None,
        memory_ratio_max=max(ratios) if ratios else None,
        tables=table_figures(ok, cal),
    )
