"""From KPIs and the op attribution to a diagnosis: which resource bounds the step, why, how sure.

The method is attribution of the step's time. Every op's device time goes to the resource that bounds it
(:mod:`bot.analysis.roofline`): compute-bound ops to *compute*, HBM-bound ops and memory formatting to
*hbm*, device time in collectives (exposed communication) to *communication*, and time the device is idle
or waiting on input to *host*. The resource with the largest share is the bottleneck, with two rules of
thumb from XProf layered on top, because exposed communication and input stalls are pure overhead while
compute time is the work itself:

* collective-bound when collectives take >= 30% of the step (XProf's rule, DESIGN.md);
* input-bound when input wait takes >= 20% of the step (XProf input-pipeline analyzer,
  ``kHighlyInfeedBoundThresholdInPercent``).

The per-op verdict is the XProf rule of thumb made precise: an op is compute-bound when its arithmetic
intensity is above the chip's ridge point (MXU busy, HBM not saturated) and HBM-bound below it.

A busy device is not a compute-bound device: the duty cycle says whether the device is idle, the ops say
what it is busy with. Where the two (or any other KPI and the ops) disagree, the disagreement is reported
in ``conflicts`` with how it was resolved, and costs confidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.analysis.kpis import StepBasis
from bot.analysis.report import Bottleneck, Diagnosis, Evidence, Kpis
from bot.analysis.roofline import LOCAL_MIN_UTILISATION, Attribution, OpRoofline, resource_of
from bot.analysis.shares import LOW_COVERAGE, StepShares
from bot.profiles.model import Profile
from knowledge.hardware import Chip

RESOURCES: tuple[Bottleneck, ...] = ("compute", "hbm", "communication", "host")
LABEL = {
    "compute": "compute-bound",
    "hbm": "HBM-bandwidth-bound",
    "communication": "communication-bound",
    "host": "host/input-bound",
}

COLLECTIVE_BOUND_SHARE = 0.30  # XProf: collective-bound at >= 30% of the step
INPUT_BOUND_SHARE = 0.20  # XProf input-pipeline analyzer: "highly input-bound" at >= 20%
SECONDARY_SHARE = 0.10  # a resource taking >= 10% of the step is worth naming
BUSY_DUTY_CYCLE = 90.0  # "the device is never idle"
NEAR_OPTIMAL_MFU = 50.0  # well-tuned LLM training publishes 40-60% MFU (PaLM 46%, MaxText 55-65% on v5p)
NEAR_OPTIMAL_EFFICIENCY = 0.70
REMAT_HEADROOM_PERCENT = 50.0  # full recompute while less than half of HBM is used is a lever left unpulled
RECOMPUTE_RATIO = 1.2  # the device executing >= 1.2x the model FLOPs means recomputation or non-model work
LOW_MFU = 25.0
MIN_EVIDENCE_OP_SHARE = 1.0  # an op under 1% of the step is not evidence of anything


@dataclass
class OpLeader:
    name: str
    share: float  # percent of the step
    bound_by: str
    source: str


@dataclass
class DiagnosisInputs:
    """Everything the diagnosis reads; built by :func:`bot.analysis.analyze.analyze`."""

    kpis: Kpis
    att: Attribution
    basis: StepBasis
    chip: Chip
    leaders: dict[str, list[OpLeader]]  # resource -> its largest ops
    shares: StepShares  # the one attribution the KPIs were filled from (bot.analysis.shares)
    profile_communication_percent: float | None = None
    step_time_cv: float | None = None  # coefficient of variation of the step times
    chip_mismatch: bool = False
    ops_overlap: bool = False
    remat: str | None = None  # the stated remat policy (the config's, else run.yaml training.remat)
    recomputes: bool | None = None  # that policy recomputes activations; None = not stated (see remat)
    hardware_to_model_flops: float | None = None  # FLOPs the device executed / model FLOPs, when both known
    extra_reasons: list[str] = field(default_factory=list)


def op_leaders(profile: Profile, verdicts: list[OpRoofline], denominator_us: float, per: int = 3) -> dict[str, list[OpLeader]]:
    """The ``per`` largest ops of each resource (the evidence cites them)."""
    ops = profile.ops
    order = sorted(range(len(ops)), key=lambda i: ops[i].total_time_us, reverse=True)
    leaders: dict[str, list[OpLeader]] = {r: [] for r in RESOURCES}
    open_slots = len(RESOURCES) * per
    for i in order:
        op, v = ops[i], verdicts[i]
        res = resource_of(v.bound_by, op.kind)
        if res is None or len(leaders[res]) >= per:
            continue
        share = 100.0 * op.total_time_us / denominator_us if denominator_us > 0 else 0.0
        leaders[res].append(OpLeader(op.name, round(share, 2), v.bound_by, v.source))
        open_slots -= 1
        if not open_slots:
            break
    return leaders


def _pick_primary(scores: dict[str, float]) -> tuple[Bottleneck, str | None]:
    ranked = sorted(RESOURCES, key=lambda r: -scores[r])
    primary = ranked[0]
    if primary != "compute":
        return primary, None
    overhead = [
        r
        for r, threshold in (("communication", COLLECTIVE_BOUND_SHARE), ("host", INPUT_BOUND_SHARE))
        if scores[r] >= threshold
    ]
    if not overhead:
        return primary, None
    chosen = max(overhead, key=lambda r: scores[r])
    mark = "collectives >= 30%" if chosen == "communication" else "input wait >= 20%"
    why = (
        f"{LABEL[chosen]} although compute-bound ops take more of the step ({100 * scores['compute']:.0f}% vs "
        f"{100 * scores[chosen]:.0f}%): compute time is the work itself, {chosen} time is overhead on top of "
        f"it, and it crosses XProf's mark ({mark})"
    )
    return chosen, why  # type: ignore[return-value]


def _busy_evidence(k: Kpis) -> list[Evidence]:
    """Evidence when only the profiler's step breakdown exists: what it measured, and what it cannot tell."""
    out: list[Evidence] = []
    if k.device_duty_cycle_percent is not None:
        out.append(
            Evidence(
                signal="kpis.device_duty_cycle_percent",
                value=k.device_duty_cycle_percent,
                statement=f"the device is busy {k.device_duty_cycle_percent:.1f}% of the step, "
                f"{_fmt(k.collective_percent)} of it in collectives (profiler's step breakdown)",
            )
        )
    out.append(
        Evidence(
            signal="kpis.compute_bound_percent",
            value=None,
            statement="no op-level data: whether the busy time is limited by arithmetic or by HBM bandwidth is unknown",
        )
    )
    return out


def _local_collective_conflicts(att: Attribution, denom: float) -> list[str]:
    """The profile marks collectives HBM-/compute-bound: their kind says network. Say which view was taken."""
    out: list[str] = []
    if denom <= 0:
        return out
    if att.collective_local_us > 0:
        names = ", ".join(att.collective_local[:3])
        out.append(
            f"{100 * att.collective_local_us / denom:.1f}% of the step is in collectives ({names}) that the profile "
            "marks HBM- or compute-bound: by kind they are communication, but the profiler measured their time going "
            "to the on-chip reduction/copy, not the network. Resolved in favour of the profile's bound_by; a mesh "
            "change that cuts their network traffic would not shorten them."
        )
    if att.collective_relabelled_us > 0:
        names = ", ".join(att.collective_relabelled[:3])
        out.append(
            f"the profile labels collectives ({names}, {100 * att.collective_relabelled_us / denom:.1f}% of the step) "
            f"HBM- or compute-bound, but their own byte/FLOP rates use under {100 * LOCAL_MIN_UTILISATION:.0f}% of "
            "that ceiling (XProf derives the label from the rates, not from what the op waits on). Counted as "
            "communication: their time is spent waiting on the network."
        )
    return out


def _coverage_drops(shares: StepShares) -> list[tuple[float, str]]:
    """Confidence lost when the visible ops cover little of the step."""
    c = shares.coverage
    if c is None or c >= LOW_COVERAGE:
        return []
    if shares.source == "profile":
        return [(0.1, f"the visible ops cover only {100 * c:.0f}% of the step: shares rest on the profiler's step "
                      "breakdown; the split of device time between compute and HBM rests on those few ops")]
    return [(0.2, f"the visible ops cover only {100 * c:.0f}% of the step and there is no step breakdown: the "
                  "bottleneck is read from a small part of the step")]


def _coverage_clause(shares: StepShares) -> str:
    c = shares.coverage
    if c is None or c >= LOW_COVERAGE:
        return ""
    if shares.source == "profile":
        return f" (from the profiler's step breakdown: the listed ops cover only {100 * c:.0f}% of the step)"
    return f" (the listed ops cover only {100 * c:.0f}% of the step)"


def _fmt(v: float | None, unit: str = "%") -> str:
    return "n/a" if v is None else f"{v:.1f}{unit}"


@dataclass
class _Ctx:
    """What every stage of :func:`diagnose` reads: the inputs, the scores and the chosen bottleneck."""

    inp: DiagnosisInputs
    k: Kpis
    att: Attribution
    chip: Chip
    scores: dict[str, float]
    primary: Bottleneck
    override: str | None
    others: list[str]
    secondary: list[Bottleneck]
    ici_pct: float
    dcn_pct: float
    remat_lever: bool = False
    near_optimal: bool = False


def diagnose(inp: DiagnosisInputs) -> Diagnosis:
    """Primary bottleneck, secondary signals, evidence, conflicts and confidence (in named stages)."""
    c = _context(inp)
    evidence, reasons = _primary_evidence(c)
    conflicts = _conflicts(c)
    evidence.extend(_recompute_evidence(c))
    c.near_optimal = _near_optimal(c)
    confidence, reasons = _confidence(c, conflicts, reasons)
    summary, confidence = _summary(c, confidence)
    return Diagnosis(
        bottleneck=c.primary,
        secondary=c.secondary,
        summary=summary,
        evidence=evidence,
        conflicts=conflicts,
        confidence=confidence,
        confidence_reasons=reasons,
        scores=c.scores,
        near_optimal=c.near_optimal,
    )


def _context(inp: DiagnosisInputs) -> _Ctx:
    """Scores from the one attribution, the primary bottleneck and the secondary ones."""
    att = inp.att
    scores = dict(inp.shares.scores)
    primary, override = _pick_primary(scores)
    others = sorted((r for r in RESOURCES if r != primary), key=lambda r: -scores[r])
    secondary: list[Bottleneck] = [r for r in others if scores[r] >= SECONDARY_SHARE]  # type: ignore[misc]
    denom = inp.basis.share_denominator_us
    ici_pct = 100.0 * att.ici_us / denom if denom > 0 else 0.0
    dcn_pct = 100.0 * att.dcn_us / denom if denom > 0 else 0.0
    remat_lever = (
        inp.remat == "full" and inp.kpis.hbm_use_percent is not None
        and inp.kpis.hbm_use_percent < REMAT_HEADROOM_PERCENT
    )
    return _Ctx(inp, inp.kpis, att, inp.chip, scores, primary, override, others, secondary, ici_pct, dcn_pct,
                remat_lever)


def _primary_evidence(c: _Ctx) -> tuple[list[Evidence], list[str]]:
    """Evidence for the primary bottleneck, its largest ops, and the KPIs that frame it."""
    inp, k, att, chip, scores, primary = c.inp, c.k, c.att, c.chip, c.scores, c.primary
    ici_pct, dcn_pct = c.ici_pct, c.dcn_pct
    evidence: list[Evidence] = []
    reasons: list[str] = []
    # --- evidence for the primary -------------------------------------------------------------------
    if primary == "communication":
        split = f" (ICI/NVLink {ici_pct:.1f}%, DCN/inter-node {dcn_pct:.1f}%)" if att.total_us > 0 else ""
        evidence.append(
            Evidence(
                signal="kpis.collective_percent",
                value=k.collective_percent,
                statement=f"{_fmt(k.collective_percent)} of the step is device time in collectives{split}"
                + (" — at or above XProf's 30% collective-bound mark" if scores["communication"] >= COLLECTIVE_BOUND_SHARE else ""),
            )
        )
    elif primary == "compute" and inp.shares.busy_undetermined:
        evidence.extend(_busy_evidence(k))
    elif primary == "compute":
        evidence.append(
            Evidence(
                signal="kpis.compute_bound_percent",
                value=k.compute_bound_percent,
                statement=f"{_fmt(k.compute_bound_percent)} of the step is in ops above the ridge point "
                f"({chip.ridge_point:.0f} FLOP/byte on {chip.display_name}): limited by arithmetic throughput",
            )
        )
    elif primary == "hbm":
        evidence.append(
            Evidence(
                signal="kpis.hbm_bound_percent",
                value=k.hbm_bound_percent,
                statement=f"{_fmt(k.hbm_bound_percent)} of the step is in ops below the ridge point "
                f"({chip.ridge_point:.0f} FLOP/byte on {chip.display_name}): limited by HBM bandwidth",
            )
        )
    else:
        if k.idle_percent is not None:
            evidence.append(
                Evidence(
                    signal="kpis.idle_percent",
                    value=k.idle_percent,
                    statement=f"the device is idle {_fmt(k.idle_percent)} of the step "
                    f"(duty cycle {_fmt(k.device_duty_cycle_percent)})",
                )
            )
        if k.host_wait_percent:
            evidence.append(
                Evidence(
                    signal="kpis.host_wait_percent",
                    value=k.host_wait_percent,
                    statement=f"{_fmt(k.host_wait_percent)} of the step waits on input from the host"
                    + (" — at or above XProf's 20% 'highly input-bound' mark" if k.host_wait_percent >= 20 else ""),
                )
            )
        elif k.idle_percent is not None and k.idle_percent >= 10:
            reasons.append(
                "idle time is not explained by input wait: it may be host-side dispatch, synchronization or "
                "checkpointing rather than the input pipeline"
            )
    evidence.extend(_framing_evidence(c))
    return evidence, reasons


def _framing_evidence(c: _Ctx) -> list[Evidence]:
    """The primary's largest ops, then the KPIs that frame it: duty cycle, MFU, secondary shares, HBM use."""
    inp, k, chip, scores, primary, secondary = c.inp, c.k, c.chip, c.scores, c.primary, c.secondary
    evidence: list[Evidence] = []
    for lead in inp.leaders.get(primary, []):
        if lead.share < MIN_EVIDENCE_OP_SHARE:
            continue
        evidence.append(
            Evidence(
                signal=f"op:{lead.name}",
                value=lead.share,
                statement=f"{lead.name} takes {lead.share:.1f}% of the step, bound by {lead.bound_by} ({lead.source})",
            )
        )
    if k.device_duty_cycle_percent is not None and primary != "host":
        evidence.append(
            Evidence(
                signal="kpis.device_duty_cycle_percent",
                value=k.device_duty_cycle_percent,
                statement=f"device duty cycle {k.device_duty_cycle_percent:.1f}%: the device is "
                + ("almost never idle" if k.device_duty_cycle_percent >= BUSY_DUTY_CYCLE else "idle part of the step"),
            )
        )
    if k.mfu_percent is not None:
        evidence.append(
            Evidence(
                signal="kpis.mfu_percent",
                value=k.mfu_percent,
                statement=f"model FLOPs utilization is {k.mfu_percent:.1f}% of the {chip.display_name} bf16 peak"
                + (" (as reported in run.yaml)" if k.mfu_source == "measured" else ""),
            )
        )
    for r in secondary:
        evidence.append(
            Evidence(
                signal=f"diagnosis.scores.{r}",
                value=scores[r],
                statement=f"secondary: {100 * scores[r]:.1f}% of the step is {r} time",
            )
        )
    if k.hbm_use_percent is not None and k.hbm_use_percent >= 90:
        evidence.append(
            Evidence(
                signal="kpis.hbm_use_percent",
                value=k.hbm_use_percent,
                statement=f"peak HBM use is {k.hbm_use_percent:.0f}% of capacity: little headroom for a mesh that "
                "shards weights or activations less",
            )
        )

    return evidence


def _conflicts(c: _Ctx) -> list[str]:
    """Where KPIs and ops (or the profile's verdicts and op kinds) disagree, and how it was resolved."""
    inp, k, att, scores, primary = c.inp, c.k, c.att, c.scores, c.primary
    denom = inp.basis.share_denominator_us
    conflicts: list[str] = []
    # --- conflicts between KPIs and ops ---------------------------------------------------------------
    if k.device_duty_cycle_percent is not None and k.device_duty_cycle_percent >= BUSY_DUTY_CYCLE and primary in (
        "communication",
        "hbm",
    ):
        what = "waiting on collectives" if primary == "communication" else "moving data to and from HBM"
        conflicts.append(
            f"device duty cycle is {k.device_duty_cycle_percent:.1f}%, which looks compute-bound, but "
            f"{100 * scores[primary]:.0f}% of the step is {primary} time. Resolved as {LABEL[primary]}: a busy "
            f"device is not a compute-bound device — the duty cycle says it is never idle, the ops say it is "
            f"busy {what}."
        )
    if (
        k.device_duty_cycle_percent is not None
        and k.device_duty_cycle_percent >= BUSY_DUTY_CYCLE
        and k.host_wait_percent is not None
        and k.host_wait_percent >= INPUT_BOUND_SHARE * 100
    ):
        conflicts.append(
            f"device duty cycle is {k.device_duty_cycle_percent:.1f}% yet {k.host_wait_percent:.0f}% of the step "
            "waits on input: the profiler counts infeed/transfer ops as busy. Resolved in favour of the input "
            "wait: time spent waiting for data is not useful work."
        )
    conflicts.extend(_local_collective_conflicts(att, denom))
    if (
        inp.profile_communication_percent is not None
        and k.collective_percent is not None
        and att.total_us > 0
        and inp.shares.source == "ops"
    ):
        diff = abs(inp.profile_communication_percent - k.collective_percent)
        if diff > 15:
            conflicts.append(
                f"the profiler's own step breakdown puts communication at {inp.profile_communication_percent:.1f}% "
                f"but collective ops take {k.collective_percent:.1f}% of the step. Resolved in favour of the op "
                "times, which are measured per op; the breakdown may count overlapped or host-side time differently."
            )
    if k.mfu_percent is not None:
        if k.mfu_percent >= NEAR_OPTIMAL_MFU and primary != "compute":
            conflicts.append(
                f"MFU is {k.mfu_percent:.0f}%, which means most of the step is useful math, yet the ops attribute "
                f"{100 * scores[primary]:.0f}% of it to {primary}. Kept {LABEL[primary]} from the op times; check "
                "the model shape, batch and step time in run.yaml, which MFU rests on."
            )
        elif k.mfu_percent < LOW_MFU and primary == "compute" and scores["compute"] >= 0.5:
            eff = att.compute_efficiency
            eff_txt = f" (time-weighted roofline efficiency {100 * eff:.0f}%)" if eff is not None else ""
            conflicts.append(
                f"{100 * scores['compute']:.0f}% of the step is in compute-bound ops, yet MFU is only "
                f"{k.mfu_percent:.0f}%{eff_txt}. Kept compute-bound: the ops are limited by arithmetic, but much "
                "of it is not model math (rematerialization, padding, or unfused small matmuls) or runs below peak."
            )

    return conflicts


def _recompute_evidence(c: _Ctx) -> list[Evidence]:
    """Recomputation: FLOPs the device executes that are not model FLOPs."""
    inp, k = c.inp, c.k
    evidence: list[Evidence] = []
    remat_lever = c.remat_lever
    if remat_lever:
        evidence.append(
            Evidence(
                signal="kpis.hbm_use_percent",
                value=k.hbm_use_percent,
                statement=f"training.remat is full while peak HBM is only {k.hbm_use_percent:.0f}% used: the whole "
                "forward pass is recomputed (about a third more FLOPs) to save memory the run does not need",
            )
        )
    ratio = inp.hardware_to_model_flops
    if ratio is not None and ratio >= RECOMPUTE_RATIO:
        evidence.append(
            Evidence(
                signal="kpis.achieved_tflops_per_chip",
                value=k.achieved_tflops_per_chip,
                statement=f"the device executes {ratio:.2f}x the model FLOPs: the excess is recomputation "
                "(rematerialization) or other non-model work",
            )
        )

    return evidence


def _near_optimal(c: _Ctx) -> bool:
    """Compute-bound close to the chip's peak, with little overhead: little for a mesh change to win."""
    k, att, scores, primary = c.k, c.att, c.scores, c.primary
    remat_lever = c.remat_lever
    # --- near-optimal ----------------------------------------------------------------------------------
    near_optimal = False
    if primary == "compute" and not remat_lever and scores["communication"] < 0.15 and scores["host"] < 0.10:
        eff = att.compute_efficiency
        if k.mfu_percent is not None and k.mfu_percent >= NEAR_OPTIMAL_MFU:
            near_optimal = True
        elif k.mfu_percent is None and scores["compute"] >= 0.7 and eff is not None and eff >= NEAR_OPTIMAL_EFFICIENCY:
            near_optimal = True

    return near_optimal


def _confidence(c: _Ctx, conflicts: list[str], reasons: list[str]) -> tuple[float, list[str]]:
    """Start at 0.95 and subtract, with the reason, for everything that makes the attribution less certain."""
    inp, k, att, chip, scores, primary = c.inp, c.k, c.att, c.chip, c.scores, c.primary
    override, others = c.override, c.others
    score_notes = list(inp.shares.notes)
    # --- confidence --------------------------------------------------------------------------------------
    confidence = 0.95
    reasons = list(inp.extra_reasons) + reasons
    drops: list[tuple[float, str]] = []
    if att.total_us <= 0:
        drops.append((0.3, "no op-level data: the diagnosis rests on the profiler's step breakdown alone"))
    else:
        roofline_us = att.compute_us + att.hbm_us + att.unclassified_compute_us
        if roofline_us > 0 and att.profile_bound_us < 0.5 * roofline_us:
            amount = 0.1 if primary in ("compute", "hbm") else 0.04
            drops.append((amount, "no roofline data in the profile: compute- vs HBM-bound computed from op FLOPs, bytes "
                          f"and the {chip.display_name} peaks"))
        if roofline_us > 0 and att.unclassified_compute_us / roofline_us > 0.2:
            u = att.unclassified_compute_us / roofline_us
            drops.append((round(0.25 * u, 3), f"{100 * u:.0f}% of compute-op time has no FLOPs or byte counts"))
        if att.collective_unknown_net_us > 0.05 * att.total_us:
            drops.append((0.05, "some collectives have no replica-group size: ICI vs DCN could not be told"))
        elif att.inferred_net_us > 0.05 * att.total_us and primary == "communication":
            drops.append((0.03, "ICI vs DCN for some collectives inferred from their type and the mesh (no replica groups)"))
    drops.extend(_coverage_drops(inp.shares))
    if k.mfu_percent is None:
        drops.append((0.05, "model unknown: no MFU to cross-check the op attribution"))
    if not inp.basis.num_steps_known:
        drops.append((0.1, "the profile does not state how many steps it covers"))
    elif inp.basis.num_steps < 3:
        drops.append((0.1, f"only {inp.basis.num_steps:g} step(s) profiled: step-to-step variation is not covered"))
    if inp.step_time_cv is not None and inp.step_time_cv > 0.2:
        drops.append((0.05, f"step time varies {100 * inp.step_time_cv:.0f}% between steps"))
    if k.step_time_source == "op-sum":
        drops.append((0.1, "step time is the sum of op times (no measured step time)"))
    elif k.step_time_source is None:
        drops.append((0.15, "no step time: shares are of the profiled op time"))
    best_other = others[0]
    margin = scores[primary] - scores[best_other]
    if override:
        drops.append((0.05, override))
    elif margin < 0.15:
        drops.append(
            (
                round(0.2 * (1 - max(margin, 0.0) / 0.15), 3),
                f"close call: {primary} {100 * scores[primary]:.0f}% vs {best_other} {100 * scores[best_other]:.0f}% of the step",
            )
        )
    if scores[primary] < 0.3:
        drops.append((0.1, f"the bottleneck accounts for only {100 * scores[primary]:.0f}% of the step"))
    if sum(scores.values()) < 0.5:
        drops.append((0.15, f"only {100 * sum(scores.values()):.0f}% of the step could be attributed to a resource"))
    if conflicts:
        drops.append((min(0.15, 0.05 * len(conflicts)), f"{len(conflicts)} disagreement(s) between KPIs and ops (see conflicts)"))
    if inp.ops_overlap:
        drops.append((0.1, "ops overlap in time (op time exceeds the step window): collective time may be partly "
                      "hidden behind compute, so the communication share is an upper bound"))
    if inp.chip_mismatch:
        drops.append((0.1, "the profile was recorded on a different device than run.yaml names"))
    for amount, why in drops:
        confidence -= amount
        reasons.append(f"-{amount:.2f}: {why}")
    reasons.extend(score_notes)
    confidence = round(min(0.99, max(0.05, confidence)), 2)

    return confidence, reasons


def _fewer_flops(inp: DiagnosisInputs) -> str:
    """Where fewer FLOPs could come from: a lighter remat policy only when the run recomputes activations."""
    recomputes = inp.recomputes
    if recomputes is None and inp.remat is not None:
        recomputes = inp.remat != "none"
    if recomputes is None:
        return "fusion; a lighter rematerialization policy only if the run recomputes activations, which its " \
               "config and run.yaml do not say"
    if recomputes:
        than = f" than '{inp.remat}'" if inp.remat else ""
        return f"a lighter rematerialization policy{than}, fusion"
    return f"fusion; the run recomputes no activations (remat '{inp.remat}'), so remat has nothing to give"


def _summary(c: _Ctx, confidence: float) -> tuple[str, float]:
    """The headline, from the same scores as the KPI table and the evidence."""
    inp, k, att, scores, primary = c.inp, c.k, c.att, c.scores, c.primary
    secondary, ici_pct, dcn_pct = c.secondary, c.ici_pct, c.dcn_pct
    remat_lever, near_optimal = c.remat_lever, c.near_optimal
    # --- summary ------------------------------------------------------------------------------------------
    share = 100 * scores[primary]
    if primary == "communication":
        net = ""
        if att.total_us > 0 and (ici_pct or dcn_pct):
            net = " (mostly DCN/inter-node)" if dcn_pct > ici_pct else " (mostly ICI/NVLink)"
        summary = f"communication-bound: {share:.0f}% of the step is exposed collective time{net}"
    elif primary == "compute" and inp.shares.busy_undetermined:
        summary = (
            f"device busy outside collectives {share:.0f}% of the step: compute- or HBM-bandwidth-bound cannot be "
            "told without op-level data (export XProf hlo_stats or op_profile)"
        )
    elif primary == "compute":
        summary = f"compute-bound: {share:.0f}% of the step is in compute-bound ops"
        if k.mfu_percent is not None:
            summary += f" at {k.mfu_percent:.0f}% MFU"
        if remat_lever:
            summary += (
                f"; full rematerialization with HBM {k.hbm_use_percent:.0f}% used — a lighter remat policy "
                "would cut the recomputed FLOPs"
            )
        if near_optimal:
            summary += (
                "; near-optimal: the chips run close to their peak, so a sharding change has little to win — "
                f"gains come from doing fewer FLOPs ({_fewer_flops(inp)}) or more chips"
            )
    elif primary == "hbm":
        summary = f"HBM-bandwidth-bound: {share:.0f}% of the step is in ops below the ridge point"
    else:
        summary = f"host/input-bound: the device is idle or waiting on input for {share:.0f}% of the step"
    if secondary:
        summary += "; also " + ", ".join(f"{r} {100 * scores[r]:.0f}%" for r in secondary)
    summary += _coverage_clause(inp.shares)
    if sum(scores.values()) == 0:
        summary = (
            "not enough data to diagnose: the profile has no op times and no step breakdown, so no time could "
            "be attributed to a resource (the bottleneck field defaults to compute)"
        )
        confidence = 0.05

    return summary, confidence


__all__ = ["DiagnosisInputs", "OpLeader", "diagnose", "op_leaders", "RESOURCES", "LABEL"]
