"""The verdict on a proposal set says what is known, and no more.

* ``mesh_not_the_problem`` — host/input-bound: no mesh or settings change fixes it.
* ``current_fails`` — the current configuration itself fails a hard check (a recorded OOM, memory beyond
  even the optimistic band, arithmetic): the best checked alternative is the fix.
* ``improve`` — the best proposal is predicted faster beyond its band.
* ``near_optimal`` — only with **evidence of little headroom**: the measured MFU is near the best published
  for the chip family (:data:`HIGH_MFU_PERCENT`), the diagnosis itself found the run near-optimal, or the
  prediction band is tight (≤ :data:`TIGHT_BAND`) and the best gain lies inside it — but not when the run's
  MFU is far below the published best (:func:`low_mfu`): then the mesh is not the lever, and the answer says so.
* ``uncertain`` — otherwise: a gain inside a wide band, or a model that cannot vary the step's dominant term
  (model unknown: per-chip compute is the same for every mesh). "Improvement likely, size uncertain" when
  the best is predicted faster; proposals are then ranked by diagnosis-matched playbook moves first and
  predicted time second (:func:`rank_uncertain`).
* ``no_valid_proposals`` — nothing passed the checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.proposals.context import Context
    from bot.proposals.models import Proposal

TIGHT_BAND = 0.15
"""A prediction band (relative half-width) at or below this is tight enough to call a gain inside it noise."""

LIKELY_SHARE = 0.25
""""Improvement likely" needs the best gain to be at least this share of its band (a 60% chance of being
faster, reading the band as one standard deviation); a smaller gain is "not clearly faster"."""

HIGH_MFU_PERCENT = {"tpu": 55.0, "gpu": 45.0, "cpu": 101.0}
"""MFU at which little is left for sharding: the low end of the best published dense-model figures per family
(MaxText README, v5p 55-67% MFU for 32B-1160B; Megatron-LM README / NeMo performance summaries, 41-47% MFU on
H100 for GPT 175B-1T). A CPU run never qualifies."""


def _what(p: Proposal) -> str:
    return "; ".join([p.mesh_short] + p.settings_changes) if p.settings_changes else p.mesh_short


def _pct(p: Proposal) -> float:
    pct = p.change.time_per_token_percent if p.change.time_per_token_percent is not None else p.change.step_time_percent
    return float(pct or 0.0)


def matmul_basis(ctx: Context) -> tuple[str, float | None]:
    """(the dtype the run's matmuls run in, the chip's peak for it or None when none is published)."""
    from knowledge.cost_settings import matmul_dtype
    from knowledge.hardware import matmul_peak

    training = getattr(getattr(ctx, "record", None), "training", None)
    settings = getattr(ctx, "settings0", None)
    dtype = matmul_dtype(training.dtype if training is not None else None,
                         getattr(settings, "quantization", None))
    if dtype == "bf16":  # MFU's own basis
        return dtype, getattr(ctx.chip, "peak_bf16_flops", None)
    return dtype, matmul_peak(ctx.chip, dtype)


def _peak_words(dtype: str, peak: float) -> str:
    return f"{dtype} peak, {peak / 1e12:.0f} {'TOP' if dtype == 'int8' else 'TFLOP'}/s"


def quantized_mfu_note(ctx: Context) -> str | None:
    """Which peak a quantized (int8 / fp8) run's MFU is judged against, for the answer's notes; None for bf16.

    With a published peak for its dtype the run is judged against it; without one its MFU is stated against
    the bf16 peak and cannot show how close it runs to its own (no MFU-based near-optimal evidence).
    """
    dtype, peak = matmul_basis(ctx)
    mfu = ctx.report.kpis.mfu_percent
    if dtype == "bf16" or mfu is None:
        return None
    if peak is not None:
        own = mfu * ctx.chip.peak_bf16_flops / peak
        return (f"the run's matmuls run in {dtype}: MFU {mfu:.0f}% is against the bf16 peak; headroom is judged "
                f"against the {_peak_words(dtype, peak)} ({ctx.chip.display_name}), where it is {own:.0f}%")
    return (f"the run's matmuls are quantized to {dtype}, and ASAP's catalog has no published {dtype} peak for "
            f"{ctx.chip.display_name}: MFU {mfu:.0f}% is stated against the bf16 peak, so it is not evidence of how "
            "much headroom is left")


def headroom_evidence(ctx: Context) -> str | None:
    """Why the run has little headroom left, from measurements; None when nothing says so.

    MFU is judged against the peak of the dtype the matmuls run in (bf16; fp8 for an fp8 run; int8 for a
    MaxText ``quantization: int8`` run where the chip publishes an int8 peak) and the answer names that peak.
    A quantized run on a chip with no published peak for its dtype has no MFU evidence (:func:`quantized_mfu_note`).
    """
    mfu = ctx.report.kpis.mfu_percent
    limit = HIGH_MFU_PERCENT.get(ctx.chip.family, 101.0)
    dtype, peak = matmul_basis(ctx)
    if dtype != "bf16" and peak is None:
        return None  # neither MFU nor an MFU-based near-optimal diagnosis says anything about its own peak
    if mfu is not None and dtype != "bf16" and peak:
        # MFU is reported against the bf16 peak; a quantized / fp8 run's headroom is against its own.
        own = mfu * ctx.chip.peak_bf16_flops / peak
        if own >= limit:
            return (f"MFU {own:.0f}% of the {_peak_words(dtype, peak)} ({mfu:.0f}% of bf16) is at or above "
                    f"{limit:.0f}%, near the best published for {ctx.chip.family.upper()}s")
        mfu = None
    if mfu is not None and mfu >= limit:
        return f"MFU {mfu:.0f}% is at or above {limit:.0f}%, near the best published for {ctx.chip.family.upper()}s"
    if ctx.report.diagnosis.near_optimal:
        return "the diagnosis finds the step compute-bound close to the chip's peak"
    return None


LOW_MFU_SHARE = 0.6
"""An MFU below this share of :data:`HIGH_MFU_PERCENT` is far from the best published: a tight band around
"no mesh gain" then says the mesh is not the lever, not that the run is near-optimal."""


def low_mfu(ctx: Context) -> str | None:
    """'MFU 24% is well below the ~45% published for GPUs' when the run's MFU is far from the best; else None."""
    mfu = ctx.report.kpis.mfu_percent
    limit = HIGH_MFU_PERCENT.get(ctx.chip.family, 101.0)
    if mfu is None or limit > 100 or mfu >= LOW_MFU_SHARE * limit:
        return None
    return f"MFU {mfu:.0f}% is well below the ~{limit:.0f}% published for {ctx.chip.family.upper()}s"


def fixed_dominant_term(ctx: Context) -> str | None:
    """The dominant term the model holds fixed across meshes, if any (model unknown: per-chip compute)."""
    if not ctx.known and ctx.bottleneck in ("compute", "hbm"):
        return (f"the model is unknown, so per-chip {ctx.bottleneck} time is taken from the measured step and is the "
                "same for every mesh: the dominant term cannot move in the prediction")
    return None


def wide(p: Proposal) -> bool:
    """The proposal's prediction band is too wide to call a gain inside it noise."""
    return p.predicted is None or p.predicted.uncertainty > TIGHT_BAND


def memory_warned(p: Proposal) -> bool:
    """The proposal fits memory only with a setting the config does not state, or only tightly (a soft warning)."""
    return any(c.name == "memory" and not c.passed for c in p.critic)


def rank_uncertain(proposals: list[Proposal], bottleneck: str | None) -> list[Proposal]:
    """What to try first when no gain is certain: when some proposal predicted faster than now fits memory as the
    config stands, those before the ones that fit only with an unstated setting (or tightly); then
    diagnosis-matched playbook moves, then predicted time per token; ranks renumbered."""
    demote = any(not memory_warned(p) and p.predicted is not None and _pct(p) < 0 for p in proposals)

    def key(p: Proposal) -> tuple[int, int, float]:
        matched = p.move is not None and bottleneck is not None
        return (1 if demote and memory_warned(p) else 0, 0 if matched else 1,
                _pct(p) if p.predicted is not None else 0.0)

    out = sorted(proposals, key=key)
    return [p.model_copy(update={"rank": i}) for i, p in enumerate(out, start=1)]


def baseline_failure(ctx: Context) -> str | None:
    """The hard check the current configuration fails, in words; None when it passes."""
    bad = [c for c in ctx.baseline_critic.checks if not c.passed and c.hard]
    return f"{bad[0].name}: {bad[0].reason}" if bad else None


def verdict(ctx: Context, proposals: list[Proposal]) -> tuple[str, str]:
    """(verdict, one-line summary) for the set; see the module docstring."""
    if ctx.bottleneck == "host":
        return (
            "mesh_not_the_problem",
            "The run is host/input-bound: the devices wait for input, and no mesh or settings change fixes that. "
            "Fix the input pipeline first (see advice); the proposals below only shorten the device part of the step.",
        )
    failing = baseline_failure(ctx)
    if failing and proposals:
        return ("current_fails", f"The current configuration fails a hard check ({failing}). Best checked "
                f"alternative: {_what(proposals[0])}" + _predicted_words(ctx, proposals[0]) + ".")
    if not proposals and not ctx.known:
        return (
            "no_valid_proposals",
            f"The model is unknown and no playbook move applies to this mesh for a {ctx.bottleneck}-bound run: "
            "see the advice, and add the model to run.yaml for a full search with predictions.",
        )
    if not proposals:
        return "no_valid_proposals", "No mesh passed every Critic check and beats the current one." + (
            f" The current configuration fails: {failing}." if failing else "")
    best = proposals[0]
    if best.predicted is None:
        return ("uncertain", f"{len(proposals)} playbook move(s) for a {ctx.bottleneck}-bound run, without computed "
                "predictions (model unknown): improvement likely, size unknown.")
    pct = _pct(best)
    if not best.change.within_noise and pct < 0:
        return "improve", _improve_summary(ctx, proposals)
    v, summary, _ = _no_clear_gain(ctx, proposals)
    note = quantized_mfu_note(ctx)
    if note and v == "near_optimal" and matmul_basis(ctx)[1] is None:
        summary += f" Lower confidence: {note}."
    return v, summary


def _predicted_words(ctx: Context, p: Proposal) -> str:
    if p.predicted is None:
        return ""
    basis = " (profile-relative: model unknown)" if p.predicted.basis == "profile" else ""
    return f", predicted {p.predicted.step_time_ms:.1f} ms/step +-{p.predicted.uncertainty:.0%}{basis}"


def _no_clear_gain(ctx: Context, proposals: list[Proposal]) -> tuple[str, str, list[Proposal]]:
    """The best alternative's gain is inside its band, or it is slower: near-optimal only with evidence."""
    best = proposals[0]
    pct = _pct(best)
    u = best.predicted.uncertainty if best.predicted is not None else 1.0
    how = f"{pct:+.1f}% vs +-{u:.0%}"
    evidence = headroom_evidence(ctx)
    fixed = fixed_dominant_term(ctx)
    low = low_mfu(ctx)
    if fixed is None and evidence is None and low is not None and u <= TIGHT_BAND and pct > -100 * u:
        # The mesh is not the lever, but a run far below the published MFU is not "near-optimal" either.
        return (
            "uncertain",
            f"No mesh change is predicted to help: the prediction band is tight (+-{u:.0%}) and the best valid "
            f"alternative ({_what(best)}) is predicted {how}. But {low}, so the headroom is likely outside the "
            "mesh (kernels, micro-batch, input pipeline, precision): not near-optimal.",
            proposals,
        )
    if fixed is None and (evidence is not None or (u <= TIGHT_BAND and pct > -100 * u)):
        why = evidence or f"the prediction band is tight (+-{u:.0%}) and the best gain lies inside it"
        return (
            "near_optimal",
            f"The run looks near-optimal: {why}; the best valid alternative ({_what(best)}) is predicted {how}. "
            "No change recommended; the proposals below are the nearest distinct checked alternatives.",
            proposals,
        )
    reason = fixed or f"the prediction band (+-{u:.0%}) is too wide to tell, and nothing measured shows little headroom"
    ranked = rank_uncertain(proposals, ctx.bottleneck)
    first = ranked[0]
    why_first = (f"the playbook move {first.move.id} for a {ctx.bottleneck}-bound run" if first.move is not None
                 else "the fastest alternative" if (first.mesh_short, first.settings) == (best.mesh_short, best.settings) else
                 "the fastest alternative that fits memory as the config stands")
    # an alternative predicted slower than now is worth measuring only because the band is wide: say it is slower
    slower = ": slower than now, but inside the band" if _pct(first) > 0 else ""
    needs = ""
    if memory_warned(first):
        check = next(c for c in first.critic if c.name == "memory" and not c.passed)
        needs = "; memory: " + check.reason.split(": needs", 1)[0]
    first_words = f"{_what(first)} ({why_first}, predicted {_pct(first):+.1f}% +-{_band(first)}{slower}{needs})"
    if pct < -100 * LIKELY_SHARE * u:
        return (
            "uncertain",
            f"Improvement likely, size uncertain: the fastest alternative, {_what(best)}, is predicted {how}; {reason}. "
            f"Try first: {first_words}; measure it before adopting.",
            ranked,
        )
    return (
        "uncertain",
        f"No alternative is predicted clearly faster ({_reference(proposals, how)}), but {reason}: not enough to call "
        f"the run near-optimal. Worth measuring first: {first_words}.",
        ranked,
    )


def _reference(proposals: list[Proposal], how: str) -> str:
    """The alternative the headline measures the run against: the engine's first (it fits memory as the config
    stands), and, when a faster one fits only tightly and so ranks below it, that one too, so the headline never
    quotes a slower figure than the list below it shows."""
    best = proposals[0]
    timed = [p for p in proposals if p.predicted is not None]
    fastest = min(timed, key=_pct) if timed else best
    if fastest is best or _pct(fastest) >= _pct(best):
        return f"{_what(best)}: {how}"
    tight = ", fits memory only tightly" if memory_warned(fastest) else ""
    return (f"the fastest, {_what(fastest)}: {_pct(fastest):+.1f}% vs +-{_band(fastest)}{tight}; the best that fits "
            f"memory as the config stands, {_what(best)}: {how}")


def _band(p: Proposal) -> str:
    return f"{p.predicted.uncertainty:.0%}" if p.predicted is not None else "?"


def _improve_summary(ctx: Context, proposals: list[Proposal]) -> str:
    best = proposals[0]
    assert best.predicted is not None
    pct = _pct(best)
    per_token = best.change.tokens_per_step_factor != 1.0
    basis = " (profile-relative: model unknown)" if best.predicted.basis == "profile" else ""
    now = (ctx.base_pred.step_time_ms if ctx.base_pred is not None else ctx.measured_ms) or float("nan")
    mesh_only = [p for p in proposals if not p.settings_changes]
    if best.settings_changes and "->" not in best.kind and all(
        p.change.within_noise or (p.change.time_per_token_percent or 0) >= 0 for p in mesh_only
    ):
        return (
            f"The mesh looks near-optimal: no mesh change is predicted to beat it beyond noise. The lever left is a "
            f"settings change: {'; '.join(best.settings_changes)}, predicted {best.predicted.step_time_ms:.1f} ms/step "
            f"({pct:+.1f}% {'per token' if per_token else 'per step'}) vs {now:.1f} ms now{basis}."
        )
    if per_token:
        return (
            f"Best: {_what(best)}, predicted {best.predicted.step_time_ms:.1f} ms/step for "
            f"x{best.change.tokens_per_step_factor:g} tokens per step ({pct:+.1f}% time per token, "
            f"{best.change.speedup:.2f}x throughput) vs {now:.1f} ms now{basis}; it changes the global batch."
        )
    return (
        f"Best: {_what(best)}, predicted {best.predicted.step_time_ms:.1f} ms/step "
        f"({best.change.step_time_percent:+.1f}%, {best.change.speedup:.2f}x) vs {now:.1f} ms now{basis}."
    )


def baseline_memory_condition(ctx: Context) -> str | None:
    """The current config's conditional memory fit ("fits only with ..."), when an unstated setting decides it."""
    m = ctx.baseline_critic.check("memory")
    if m is not None and not m.passed and not m.hard and m.reason.startswith("fits only with"):
        return m.reason.split(": needs", 1)[0]
    return None


def verdict_of(ctx: Context, proposals: list[Proposal]) -> tuple[str, str, list[Proposal]]:
    """The verdict, its summary, and the proposals in the order that verdict implies."""
    v, summary = verdict(ctx, proposals)
    cond = baseline_memory_condition(ctx)
    if cond:
        summary += f" Memory: the current config {cond}."
    if v == "uncertain" and proposals and proposals[0].predicted is not None:
        proposals = _no_clear_gain(ctx, proposals)[2]
    return v, summary, proposals


__all__ = ["verdict", "verdict_of", "rank_uncertain", "headroom_evidence", "TIGHT_BAND", "HIGH_MFU_PERCENT"]
