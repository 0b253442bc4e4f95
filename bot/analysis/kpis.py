"""Run-level KPIs: step time, duty cycle, where the step goes, MFU and HBM use.

Every KPI that cannot be computed is ``None`` and gets an ``unavailable`` line naming the input that
would unlock it, so a person sees what to add to ``run.yaml`` (or which profile tool to export) rather
than a silent blank.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.analysis.report import Kpis
from bot.analysis.roofline import Attribution
from bot.analysis.shares import StepShares, facts_for, step_shares
from bot.profiles.model import Profile
from bot.runs.record import RunRecord
from knowledge.hardware import Chip

# When the op totals exceed the stated window by more than this, ops overlap (several streams) or the
# window is wrong; shares are then taken of the op time instead.
_OVERLAP_TOLERANCE = 1.05


@dataclass
class StepBasis:
    """How window totals turn into per-step figures and shares of the step."""

    step_time_us: float | None
    source: str | None  # profile | measured | op-sum
    num_steps: float  # steps the op totals cover (1 when unknown, with a warning)
    num_steps_known: bool
    share_denominator_us: float  # shares of "the step" are op time / this
    window_us: float | None = None  # steps x step time: the device time the op totals should cover
    warnings: list[str] = field(default_factory=list)
    unavailable: list[str] = field(default_factory=list)


def step_basis(record: RunRecord, profile: Profile, op_time_us: float) -> StepBasis:
    """Pick the step time (profile, else run.yaml ``measured``, else op time per step) and the window."""
    warnings: list[str] = []
    unavailable: list[str] = []
    steps_known = bool(profile.num_steps and profile.num_steps > 0)
    steps = float(profile.num_steps) if steps_known else 1.0
    step_us: float | None
    source: str | None
    if profile.step_time_us and profile.step_time_us > 0:
        step_us, source = float(profile.step_time_us), "profile"
    elif profile.step_times_us and any(t > 0 for t in profile.step_times_us):
        good = [t for t in profile.step_times_us if t > 0]
        step_us, source = sum(good) / len(good), "profile"
        if not steps_known:
            steps, steps_known = float(len(good)), True
    elif record.measured and record.measured.step_time_ms:
        step_us, source = record.measured.step_time_ms * 1000.0, "measured"
    elif op_time_us > 0 and steps_known:
        step_us, source = op_time_us / steps, "op-sum"
        warnings.append(
            "step time is the sum of op time per step (the profile has no step time and run.yaml no "
            "measured.step_time_ms); idle time between ops is not included"
        )
    else:
        step_us, source = None, None
        unavailable.append(
            "step time: add measured.step_time_ms to run.yaml, or export a profile with step markers "
            "(XProf overview_page)"
        )

    # The op table's own share of the profile's op time (hlo_stats total_self_time_percent): a top-N export
    # holds part of the window's op time, so the whole window's op time is what it shows / that share.
    fraction = profile.op_time_fraction
    window_op_us = op_time_us / fraction if fraction and fraction > 0 else op_time_us
    if not steps_known and step_us and window_op_us > _OVERLAP_TOLERANCE * step_us:
        # The window holds several steps but the profile does not say how many: infer it from the op time.
        steps = max(1.0, round(window_op_us / step_us))
        shown = f" ({100 * fraction:.0f}% of it listed)" if fraction and fraction < 0.95 else ""
        warnings.append(
            f"the profile does not say how many steps it covers; inferred {steps:.0f} from op time "
            f"{window_op_us / 1000:.3f} ms{shown} / step time {step_us / 1000:.3f} ms"
        )
    elif not steps_known and op_time_us > 0:
        warnings.append("the profile does not say how many steps it covers; per-step op figures assume one")

    denominator = op_time_us
    window: float | None = None
    if step_us and steps_known and source == "profile":
        steps = _op_window_steps(profile, steps, step_us, window_op_us, warnings)
    if step_us:
        window = steps * step_us
        if op_time_us > _OVERLAP_TOLERANCE * window:
            warnings.append(
                f"op time ({op_time_us / 1000:.3f} ms) exceeds the profiled window ({window / 1000:.3f} ms = "
                f"{steps:g} steps x step time): ops overlap or the step time is wrong; shares are of op time"
            )
        else:
            denominator = window
    return StepBasis(step_us, source, steps, steps_known, denominator, window, warnings, unavailable)


# Op time beyond this multiple of the stated window is not overlap between streams: the op table covers more
# steps than the step table lists (e.g. an overview that shows the last steps of a longer session).
_OTHER_WINDOW = 1.5


def _op_window_steps(profile: Profile, steps: float, step_us: float, window_op_us: float,
                     warnings: list[str]) -> float:
    """Steps the op table covers when it is clearly more than the step table lists (op time / busy step)."""
    busy = step_us * (profile.device_duty_cycle_percent or 100.0) / 100.0
    if busy <= 0 or window_op_us <= _OTHER_WINDOW * steps * step_us:
        return steps
    covered = float(max(round(window_op_us / busy), steps))
    warnings.append(
        f"the op table holds {window_op_us / 1000:.3f} ms of device time, {window_op_us / (steps * step_us):.1f}x the "
        f"{steps:g} listed steps: it covers ~{covered:.0f} steps (op time / busy time per step), and its totals are "
        "divided by that"
    )
    return covered


def _pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 2) if whole > 0 else 0.0


@dataclass
class ModelFlops:
    """Model FLOPs per optimizer step, and what was missing to count them fully."""

    per_step: float | None
    missing: list[str]
    notes: list[str]


def model_flops_per_step(record: RunRecord) -> ModelFlops:
    """Training FLOPs of one optimizer step from the model's shape.

    Dense part: 6 x active parameters x tokens (2 forward + 4 backward FLOPs per parameter per token;
    Kaplan et al. 2020; "How to Scale Your Model", transformer-math chapter). Attention scores and the
    weighted sum add 12 x layers x seq_len x (heads x head_dim) FLOPs per token for forward+backward —
    PaLM (Chowdhery et al. 2022), Appendix B, "6N + 12LHQT" — counted without the causal-mask halving, as
    PaLM does, so MFU stays comparable with published figures. Rematerialization is not model FLOPs and is
    not counted (that is what separates MFU from hardware FLOPs utilization).
    """
    model = record.model
    training = record.training
    missing: list[str] = []
    notes: list[str] = []
    n_active = model.active_params() if model else None
    if n_active is None:
        if model and model.is_moe:
            missing.append("model.experts_per_token with layers, d_model, d_ff")
        else:
            missing.extend(["model.layers", "model.d_model", "model.d_ff", "model.heads"])
    tokens = training.tokens_per_step if training else None
    if tokens is None:
        missing.extend(["training.global_batch", "training.seq_len"])
    if missing:
        return ModelFlops(None, missing, notes)
    assert model is not None and training is not None and n_active is not None and tokens is not None
    # LoRA: the frozen base computes no weight gradients, 4 FLOPs per parameter per token instead of 6 (Megatron-Bridge
    # flop_utils counts a LoRA step as the frozen model's FLOPs x 2/3; the small adapters are left out as it does)
    per_param = 6.0
    if training.peft == "lora":
        per_param = 4.0
        notes.append("LoRA: model FLOPs count the frozen base at 4 FLOPs per parameter per token (no weight gradients)")
    flops = per_param * n_active * tokens
    # multi-token prediction: each module runs the shared output layer again (Megatron-LM training.py
    # num_floating_point_operations: logits x (mtp_num_layers + 1)); its decoder layer is in n_active
    mtp = model.mtp_modules
    flops += per_param * mtp * (model.vocab or 0) * (model.d_model or 0) * tokens
    dims = model.attention_head_dims()
    attention_layers = model.attention_layers + model.mtp_attention_layers  # a hybrid stack's * layers only
    if model.layers and model.heads and dims:
        # 3 x (2·H·qk·S for QK^T + 2·H·v·S for AV): 12·L·H·hd·S when qk = v = head_dim (MLA: qk_nope + rope, v_head_dim);
        # a local (sliding-window) layer attends to at most its window of keys (MaxText maxtext_utils counts it so)
        keys = model.attention_keys(training.seq_len)  # type: ignore[arg-type]
        flops += 6.0 * attention_layers * keys * model.heads * (dims[0] + dims[1]) * tokens
    else:
        notes.append("MFU leaves out attention FLOPs: add model.layers, heads and d_model to run.yaml")
    return ModelFlops(flops, [], notes)


@dataclass
class KpiResult:
    kpis: Kpis
    unavailable: list[str]
    warnings: list[str]
    mfu_source: str | None
    shares: StepShares


def _mfu(record: RunRecord, chip: Chip, mflops: ModelFlops, step_s: float | None, unavailable: list[str],
         warnings: list[str]) -> tuple[float | None, str | None]:
    """MFU computed from the model FLOPs and the step time (checked against a reported one), else as reported."""
    mfu: float | None = None
    mfu_source: str | None = None
    if mflops.per_step is not None and step_s:
        mfu = round(100.0 * mflops.per_step / (step_s * record.num_chips * chip.peak_bf16_flops), 2)
        mfu_source = "computed"
        if mfu > 100.0:
            unavailable.append(
                f"MFU: computed {mfu:.0f}%, above the physical 100%: the model shape, training.global_batch/"
                "seq_len or the step time in run.yaml are inconsistent"
            )
            mfu = mfu_source = None
        if mfu is not None and record.training and record.training.dtype not in ("bf16", "fp16"):
            warnings.append(
                f"MFU is against the chip's bf16 peak; training.dtype is {record.training.dtype}"
            )
        if mfu is not None and record.measured and record.measured.mfu_percent is not None and mfu > 0:
            reported = record.measured.mfu_percent
            if abs(reported - mfu) > 0.25 * max(reported, mfu):
                warnings.append(
                    f"computed MFU {mfu:.1f}% differs from measured.mfu_percent {reported:.1f}%: check the "
                    "model shape, batch and step time in run.yaml"
                )
            elif abs(reported - mfu) >= 3.0:
                # Within reach of a counting convention: say which one ASAP uses so the two can be compared.
                warnings.append(
                    f"the job reports MFU {reported:.1f}%, ASAP computes {mfu:.1f}%: ASAP counts 6 x active "
                    "params (embeddings included) + 12 x layers x seq x heads x head_dim FLOPs per token "
                    "(PaLM, Appendix B: attention without the causal-mask halving); jobs that halve causal "
                    "attention or leave out embeddings report less"
                )
    elif record.measured and record.measured.mfu_percent is not None:
        mfu, mfu_source = round(record.measured.mfu_percent, 2), "measured"
    if mfu is None and not any(u.startswith("MFU:") for u in unavailable):
        if mflops.missing:
            unavailable.append(f"MFU: add {', '.join(mflops.missing)} to run.yaml")
        else:
            unavailable.append("MFU: needs a step time (see step time)")
    return mfu, mfu_source


def _hbm_use(record: RunRecord, profile: Profile, chip: Chip, unavailable: list[str],
             warnings: list[str]) -> tuple[float | None, float, float | None]:
    """(peak bytes in use, capacity, percent): the profile's peak, else run.yaml's measured one."""
    capacity = float(profile.hbm_capacity_bytes or chip.hbm_bytes)
    used: float | None = None
    if profile.peak_hbm_bytes:
        used = float(profile.peak_hbm_bytes)
    elif record.measured and record.measured.hbm_peak_bytes:
        used = float(record.measured.hbm_peak_bytes)
    else:
        unavailable.append(
            "HBM use: add measured.hbm_peak_bytes to run.yaml or export XProf memory data (peak heap)"
        )
    use_pct = round(100.0 * used / capacity, 2) if used is not None and capacity > 0 else None
    if use_pct is not None and use_pct > 100:
        warnings.append(
            f"peak HBM {used / 1e9:.1f} GB exceeds the {chip.display_name} capacity {capacity / 1e9:.1f} GB: "
            "check the chip in run.yaml"
        )
    return used, capacity, use_pct


def _duty_and_wait(profile: Profile, att: Attribution, basis: StepBasis,
                   unavailable: list[str]) -> tuple[float | None, float | None, float | None]:
    """(duty cycle, idle, host wait) in percent of the step: the profiler's figures, else from the ops."""
    denom = basis.share_denominator_us
    have_ops = att.total_us > 0
    # Duty cycle: the profiler's figure when it reports one, else busy op time over the window. Only a
    # real window (steps x step time) gives a meaningful idle share.
    window_known = basis.step_time_us is not None and denom == basis.num_steps * basis.step_time_us
    duty: float | None
    if profile.device_duty_cycle_percent is not None:
        duty = round(min(100.0, max(0.0, profile.device_duty_cycle_percent)), 2)
    elif have_ops and window_known and basis.source != "op-sum":
        duty = round(min(100.0, _pct(att.busy_us, denom)), 2)
    else:
        duty = None
        unavailable.append(
            "device duty cycle: export XProf overview_page, or give measured.step_time_ms so idle time "
            "between ops can be measured"
        )
    idle = round(100.0 - duty, 2) if duty is not None else None

    if profile.host_wait_percent is not None:
        host_wait: float | None = round(max(0.0, profile.host_wait_percent), 2)
    elif have_ops:
        host_wait = _pct(att.host_us, denom)
    else:
        host_wait = None
        unavailable.append("host wait: export XProf overview_page (input time) or op-level stats")
    return duty, idle, host_wait


def compute_kpis(record: RunRecord, profile: Profile, chip: Chip, att: Attribution, basis: StepBasis) -> KpiResult:
    """Fill :class:`Kpis` from the profile, the run record and the op attribution."""
    unavailable = list(basis.unavailable)
    warnings = list(basis.warnings)
    denom = basis.share_denominator_us
    have_ops = att.total_us > 0

    step_ms = basis.step_time_us / 1000.0 if basis.step_time_us else None

    duty, idle, host_wait = _duty_and_wait(profile, att, basis, unavailable)

    # One attribution for the KPI table, the headline and the evidence (bot.analysis.shares).
    window = basis.window_us if basis.source != "op-sum" else None
    shares = step_shares(att, facts_for(profile, duty, idle, host_wait, window, denom))
    pct = shares.percent
    collective: float | None = pct["communication"] if shares.source != "none" else None
    if shares.source in ("ops", "profile"):
        compute_bound: float | None = pct["compute"]
        hbm_bound: float | None = pct["hbm"]
    else:
        compute_bound = hbm_bound = None
        unavailable.append(
            "op roofline (compute-/HBM-bound shares, top ops): export XProf hlo_stats or op_profile, or a "
            "JAX trace"
        )
    if profile.communication_time_percent is None and not have_ops:
        collective = None
    coverage = round(100.0 * shares.coverage, 2) if shares.coverage is not None else None

    # MFU and throughput.
    mflops = model_flops_per_step(record)
    warnings.extend(mflops.notes)
    step_s = basis.step_time_us * 1e-6 if basis.step_time_us else None
    mfu, mfu_source = _mfu(record, chip, mflops, step_s, unavailable, warnings)
    achieved: float | None = None

    # Achieved FLOP rate per chip: hardware FLOPs the profile counted (includes rematerialization) when it
    # counts them over most of the busy time, else the model FLOPs.
    if have_ops and att.total_flops > 0 and basis.step_time_us and denom > 0:
        achieved = att.total_flops / (denom * 1e-6) / 1e12
    elif mflops.per_step is not None and step_s:
        achieved = mflops.per_step / step_s / record.num_chips / 1e12
    if achieved is not None:
        achieved = round(achieved, 3)

    tokens_per_s: float | None = None
    tokens = record.training.tokens_per_step if record.training else None
    if tokens and step_s:
        tokens_per_s = round(tokens / step_s, 1)
    elif record.measured and record.measured.tokens_per_second:
        tokens_per_s = record.measured.tokens_per_second

    used, capacity, use_pct = _hbm_use(record, profile, chip, unavailable, warnings)

    kpis = Kpis(
        step_time_ms=round(step_ms, 4) if step_ms is not None else None,
        step_time_source=basis.source,
        device_duty_cycle_percent=duty,
        collective_percent=collective,
        host_wait_percent=host_wait,
        compute_bound_percent=compute_bound,
        hbm_bound_percent=hbm_bound,
        idle_percent=idle,
        mfu_percent=mfu,
        mfu_source=mfu_source,
        achieved_tflops_per_chip=achieved,
        hbm_used_bytes=used,
        hbm_capacity_bytes=capacity,
        hbm_use_percent=use_pct,
        tokens_per_second=tokens_per_s,
        op_coverage_percent=coverage,
        attribution_source=shares.source if shares.source != "none" else None,
    )
    return KpiResult(kpis, unavailable, warnings, mfu_source, shares)
