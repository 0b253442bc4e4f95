"""Stage 2, predict: the full prediction for one candidate and how it compares with the baseline.

The candidates stage scores meshes in bulk (vectorised, step time and fit only); this stage predicts one
candidate in full (terms, memory breakdown and band, assumptions) with the candidate's own settings, or
turns its profile-relative prediction into our JSON form when the model is unknown, and compares it with
the baseline per token (:func:`compare`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.errors import AsapError
from bot.proposals.models import Change, Predicted
from bot.proposals.settings import apply as apply_settings_change

if TYPE_CHECKING:
    from bot.proposals.candidates import Candidate
    from bot.proposals.context import Context


def predicted_of(p: Any, *, tokens_per_step: float | None = None) -> Predicted:
    """Our JSON form of a :class:`knowledge.costmodel.Prediction`."""
    return Predicted(
        step_time_ms=float(p.step_time_ms),
        step_time_low_ms=float(p.step_time_low_ms),
        step_time_high_ms=float(p.step_time_high_ms),
        uncertainty=float(p.uncertainty),
        memory_per_chip_bytes=float(p.memory_per_chip_bytes),
        memory_capacity_bytes=float(p.memory_capacity_bytes),
        fits_memory=bool(p.fits_memory),
        breakdown_ms={k: float(v) for k, v in p.breakdown_ms.items()},
        memory_breakdown_bytes={k: float(v) for k, v in p.memory_breakdown_bytes.items()},
        assumptions=list(p.assumptions),
        memory_low_bytes=getattr(p, "memory_low_bytes", None),
        memory_high_bytes=getattr(p, "memory_high_bytes", None),
        tokens_per_step=tokens_per_step,
    )


def predicted_relative(r: Any, capacity: float, *, tokens_per_step: float | None = None) -> Predicted:
    """JSON form of a profile-relative prediction (memory unknown)."""
    return Predicted(
        step_time_ms=float(r.step_time_ms),
        step_time_low_ms=float(r.step_time_low_ms),
        step_time_high_ms=float(r.step_time_high_ms),
        uncertainty=float(r.uncertainty),
        memory_per_chip_bytes=None,
        memory_capacity_bytes=float(capacity),
        fits_memory=None,
        breakdown_ms={k: float(v) for k, v in r.breakdown_ms.items()},
        memory_breakdown_bytes={},
        assumptions=list(r.assumptions),
        basis="profile",
        tokens_per_step=tokens_per_step,
    )


def compare(
    baseline: Any | None, p: Any | None, *, baseline_ms: float | None = None, tokens_factor: float = 1.0
) -> Change:
    """Proposal vs baseline; ``within_noise`` when the gain per token is inside the proposal's band."""
    base_ms = baseline.step_time_ms if baseline is not None else baseline_ms
    if p is None or base_ms is None:
        return Change(
            step_time_ms_delta=None, step_time_percent=None, speedup=None, memory_per_chip_bytes_delta=None,
            within_noise=False, tokens_per_step_factor=tokens_factor,
        )
    delta = p.step_time_ms - base_ms
    per_token = p.step_time_ms / tokens_factor
    noise = p.uncertainty * base_ms
    mem_delta = None
    if baseline is not None and p.memory_per_chip_bytes is not None and baseline.memory_per_chip_bytes is not None:
        mem_delta = p.memory_per_chip_bytes - baseline.memory_per_chip_bytes
    return Change(
        step_time_ms_delta=delta,
        step_time_percent=100.0 * delta / base_ms,
        speedup=base_ms / per_token if per_token > 0 else None,
        memory_per_chip_bytes_delta=mem_delta,
        within_noise=abs(per_token - base_ms) <= noise,
        tokens_per_step_factor=tokens_factor,
        time_per_token_percent=100.0 * (per_token - base_ms) / base_ms,
    )


@dataclass
class Prediction:
    """One candidate's full prediction: ``pred`` is a cost-model Prediction (model known), a
    :class:`Predicted` (profile-relative) or None; ``settings`` the training settings it runs with."""

    pred: Any | None
    settings: Any | None
    change: Change

    @property
    def slower(self) -> bool:
        """Predicted slower per token beyond the band."""
        return self.pred is not None and not self.change.within_noise and (self.change.time_per_token_percent or 0) > 0


def predict(ctx: Context, cand: Candidate) -> Prediction | None:
    """Predict ``cand`` in full; None when the cost model cannot cost it (the candidate is dropped)."""
    from knowledge import costmodel

    settings_c = apply_settings_change(ctx.settings0, cand.change, framework=ctx.record.framework)
    pred: Any | None = None
    if ctx.known:
        try:
            pred = costmodel.predict(ctx.record, cand.mesh, calibration=ctx.calibration, chip=ctx.chip,
                                     settings=settings_c)
            if not ctx.time_calibrated:  # calibrated: the measured step already pins the unstated settings' time
                pred = widen_for_unknowns(ctx.record, ctx.chip, ctx.calibration, ctx.unknowns, cand.mesh, settings_c,
                                          pred)
        except AsapError:
            return None
    elif cand.relative is not None:
        pred = predicted_relative(cand.relative, ctx.chip.hbm_bytes)
    change = compare(ctx.base_pred, pred, baseline_ms=ctx.base_ms, tokens_factor=cand.change.global_batch_factor)
    return Prediction(pred=pred, settings=settings_c, change=change)


def widen_for_unknowns(record: Any, chip: Any, calibration: Any, unknowns: list[Any], mesh: Any, settings: Any,
                       pred: Any) -> Any:
    """Widen the step-time band of ``pred`` to span the options of the settings the run leaves unstated.

    An unstated setting (recompute, the distributed optimizer, sequence parallelism; see
    :func:`knowledge.cost_settings.unknown_settings`) is not assumed at either end: the band covers the step
    time with every one at its leanest (most recompute) and at its most memory-hungry option, and an
    assumption line says so. Memory is judged across the same options by the Critic.
    """
    if not unknowns:
        return pred
    from knowledge import costmodel
    from knowledge.cost_settings import with_options

    ends = [costmodel.predict(record, mesh, calibration=calibration, chip=chip,
                              settings=with_options(settings, unknowns, which)) for which in ("lean", "hungry")]
    low = min([pred.step_time_low_ms] + [e.step_time_low_ms for e in ends])
    high = max([pred.step_time_high_ms] + [e.step_time_high_ms for e in ends])
    if low >= pred.step_time_low_ms and high <= pred.step_time_high_ms:
        return pred
    names = ", ".join(u.words for u in unknowns)
    return pred.model_copy(update={
        "step_time_low_ms": low, "step_time_high_ms": high,
        "uncertainty": max(pred.uncertainty, (high - low) / 2.0 / pred.step_time_ms),
        "assumptions": [*pred.assumptions, f"not stated: {names}; the step-time band spans their options "
                        f"({ends[0].step_time_ms:.1f} ms at the leanest, {ends[1].step_time_ms:.1f} ms at the most "
                        "memory-hungry)"],
    })
