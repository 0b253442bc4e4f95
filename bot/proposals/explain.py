"""Stage 5, explain: turn the kept candidates into proposals people read, with the verdict and notes.

For each kept candidate: labels (within noise, predicted slower, does not address the bottleneck, changes
the global batch, ...), the rationale (which predicted per-step terms move, the playbook rule), trade-offs,
citations (:func:`bot.proposals.evidence.cite`) and a confidence whose reasons say what it rests on. For the
set: notes (playbook moves predicted slower, why fewer than ``k``, what the model-unknown path could not
do) and the verdict with its one-line summary. Nothing here computes a prediction: it reads the stages'.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from bot.configs.megatron import expert_grid_change
from bot.configs.mesh import AXES, Mesh
from bot.proposals.critic import gb
from bot.proposals.evidence import Knowledge, cite
from bot.proposals.kinds import describe_change, kind_of, mesh_dict, mesh_key
from bot.proposals.models import (
    Advice,
    Baseline,
    Change,
    CriticResult,
    MoveRef,
    Proposal,
    ProposalSet,
)
from bot.proposals.moves import Rule
from bot.proposals.predict import predicted_of
from bot.proposals.verdict import verdict_of
from bot.proposals.zero import stage_sentence
from knowledge.cite import RunFacts

if TYPE_CHECKING:
    from bot.proposals.candidates import Candidate, Candidates
    from bot.proposals.context import Context
    from bot.proposals.select import Chosen, Selection
    from bot.runs.record import RunRecord

AXIS_TRADEOFFS: dict[str, str] = {
    "data": "more data parallelism replicates weights and optimizer state over the data axis and all-reduces gradients across it",
    "fsdp": "more FSDP all-gathers weights before each layer and reduce-scatters gradients; it hides behind compute only with enough tokens per chip",
    "tensor": "more tensor parallelism adds activation collectives to every layer, forward and backward",
    "sequence": "more sequence parallelism exchanges keys/values in every attention layer",
    "expert": "more expert parallelism adds all-to-all token routing per MoE layer",
    "pipeline": "more pipeline stages add a pipeline bubble unless there are many micro-batches",
}

MODEL_FIELDS = (
    ("model.layers", lambda r: r.model and r.model.layers),
    ("model.d_model", lambda r: r.model and r.model.d_model),
    ("model.d_ff", lambda r: r.model and r.model.d_ff),
    ("model.heads", lambda r: r.model and r.model.heads),
    ("model.kv_heads", lambda r: r.model and r.model.kv_heads),
    ("model.vocab", lambda r: r.model and r.model.vocab),
    ("training.global_batch", lambda r: r.training and r.training.global_batch),
    ("training.seq_len", lambda r: r.training and r.training.seq_len),
)


def missing_model_info(record: RunRecord) -> list[str]:
    """run.yaml fields that would let the cost model predict absolutely (and check memory)."""
    return [name for name, get in MODEL_FIELDS if not get(record)]


def cand_kind(base: Mesh, c: Candidate) -> str:
    mk = kind_of(base, c.mesh)
    if not c.change.kind:
        return mk
    return c.change.kind if mk == "unchanged" else f"{mk} + {c.change.kind}"


def _rationale(
    bottleneck: str | None,
    baseline: Mesh,
    cand: Candidate,
    pred: Any | None,
    base_pred: Any | None,
    rule: Rule | None,
    grid_words: str | None = None,
) -> str:
    parts = []
    if bottleneck:
        parts.append(f"The run is {bottleneck}-bound.")
    what = []
    if mesh_key(cand.mesh) != mesh_key(baseline):
        what.append(describe_change(baseline, cand.mesh))
    if grid_words:
        what.append(grid_words)
    what.extend(cand.change.words)
    parts.append(f"This changes {'; '.join(what) or 'nothing'}.")
    if pred is not None and base_pred is not None:
        terms = sorted(
            set(pred.breakdown_ms) | set(base_pred.breakdown_ms),
            key=lambda t: pred.breakdown_ms.get(t, 0.0) - base_pred.breakdown_ms.get(t, 0.0),
        )
        moved = []
        for t in terms:
            old, new = base_pred.breakdown_ms.get(t, 0.0), pred.breakdown_ms.get(t, 0.0)
            if abs(new - old) >= max(0.05 * base_pred.step_time_ms, 0.01):
                moved.append(f"{t} {old:.1f} -> {new:.1f} ms")
        if moved:
            parts.append("Predicted per-step terms: " + ", ".join(moved[:4]) + ".")
        if getattr(base_pred, "exposed_comm_ms", None) is not None and getattr(pred, "exposed_comm_ms", None) is not None:
            if base_pred.exposed_comm_ms or pred.exposed_comm_ms:
                parts.append(
                    f"Exposed communication {base_pred.exposed_comm_ms:.1f} -> {pred.exposed_comm_ms:.1f} ms per step."
                )
    if (zero := stage_sentence(cand.change, pred, base_pred)) is not None:
        parts.append(zero)
    if cand.change.global_batch_factor != 1.0:
        parts.append(
            f"Tokens per step x{cand.change.global_batch_factor:g}: compare time per token, not per step."
        )
    if rule is not None:
        parts.append(f"Playbook rule {rule.id}: {rule.rationale.strip()} (source: {rule.source})")
    return " ".join(parts)


def _tradeoffs(baseline: Mesh, cand: Candidate, pred: Any | None, base_pred: Any | None, rule: Rule | None) -> list[str]:
    out = []
    if rule is not None:
        out.append(" ".join(rule.tradeoffs.split()))
    out.extend(cand.change.tradeoffs)
    for axis in AXES:
        if cand.mesh.size(axis) > baseline.size(axis):
            out.append(AXIS_TRADEOFFS[axis])
    if pred is not None and base_pred is not None and pred.memory_per_chip_bytes and base_pred.memory_per_chip_bytes:
        d = pred.memory_per_chip_bytes - base_pred.memory_per_chip_bytes
        if abs(d) > 0.02 * max(base_pred.memory_per_chip_bytes, 1):
            out.append(
                f"memory per chip {gb(base_pred.memory_per_chip_bytes)} -> {gb(pred.memory_per_chip_bytes)} "
                f"({'+' if d > 0 else ''}{100 * d / base_pred.memory_per_chip_bytes:.0f}%) of {gb(pred.memory_capacity_bytes)}"
            )
    elif pred is None or getattr(pred, "memory_per_chip_bytes", None) is None:
        if cand.change.values or mesh_key(cand.mesh) != mesh_key(baseline):
            out.append("memory per chip not computed (model unknown): check the fit before adopting")
    return out


WITHIN_NOISE_FACTOR = 0.35
"""A gain inside the band is weak evidence: its chance of being real is scaled down (0.06-0.29 after this)."""
WARNING_FACTOR = 0.8
"""Each Critic warning (a rule of thumb, a tight or conditional memory fit) weighs the confidence down."""
RELATIVE_CAP = 0.6
"""Profile-relative predictions (model unknown) never claim more than this."""


def p_faster(rel_gain: float, band: float) -> float:
    """Probability the change is faster, reading the band's half-width as one standard deviation (normal)."""
    return 0.5 * (1.0 + math.erf(rel_gain / max(band, 1e-6) / math.sqrt(2.0)))


def _quality(pred: Any, *, calibrated: bool, relative: bool, reasons: list[str]) -> float:
    """How much the prediction itself can be trusted, as a factor on the probability of a gain."""
    q = 1.0
    if relative:
        q *= 0.8
        reasons.append("x0.8: model unknown, prediction relative to the profile with sizes inferred from it")
    elif not calibrated:
        q *= 0.85
        reasons.append("x0.85: not calibrated on a measured step (public chip figures)")
    n = len(pred.assumptions)
    if n:
        f = 1.0 - min(0.15, 0.02 * n)
        q *= f
        reasons.append(f"x{f:.2f}: {n} assumption(s) in the prediction (e.g. {pred.assumptions[0]})")
    mem = getattr(pred, "memory_per_chip_bytes", None)
    usable = pred.memory_capacity_bytes * 0.9
    if mem is not None and usable > 0 and mem > 0.85 * usable:
        q *= 0.9
        low = getattr(pred, "memory_low_bytes", None)
        if mem > usable:  # it passed the memory check on the band's optimistic edge only: say so, not "tight"
            edge = f" (the band's low edge, {gb(low)}, fits)" if low is not None and low <= usable else ""
            reasons.append(f"x0.9: over usable memory at the central estimate, {gb(mem)} of {gb(usable)} usable{edge}")
        else:
            reasons.append(f"x0.9: tight memory, {gb(mem)} of {gb(usable)} usable")
    return q


def _confidence(
    *,
    pred: Any | None,
    change: Change,
    calibrated: bool,
    diag_conf: float,
    rule: Rule | None,
    critic: CriticResult,
    bottleneck: str | None,
    relative: bool = False,
    history: Any | None = None,
) -> tuple[float, list[str]]:
    """Confidence that the proposal helps: the chance it is faster under its band, times the prediction's and
    the diagnosis's quality, moved by the playbook, past outcomes and the Critic's warnings; reasons say each."""
    reasons: list[str] = []
    if pred is None:
        c = 0.35
        reasons.append("0.35: model unknown, no computed prediction; the proposal rests on the playbook rule and the profile")
    else:
        pct = change.time_per_token_percent if change.time_per_token_percent is not None else change.step_time_percent
        rel_gain = -(pct or 0.0) / 100.0
        u = max(pred.uncertainty, 1e-6)
        c = p_faster(rel_gain, u)
        reasons.append(f"{c:.2f}: chance it is faster, predicted gain {rel_gain:+.0%} against a +-{u:.0%} band")
        if change.within_noise:
            c *= WITHIN_NOISE_FACTOR
            reasons.append(f"x{WITHIN_NOISE_FACTOR}: the gain is within the prediction's noise, not evidence of one")
        c *= _quality(pred, calibrated=calibrated, relative=relative, reasons=reasons)
        if relative and c > RELATIVE_CAP:
            c = RELATIVE_CAP
            reasons.append(f"at most {RELATIVE_CAP}: a profile-relative prediction cannot rule out unmodelled terms")
    f = 0.6 + 0.4 * diag_conf
    c *= f
    reasons.append(f"x{f:.2f}: diagnosis confidence {diag_conf:.2f}")
    if rule is not None:
        c += 0.05
        reasons.append(f"+0.05: matches the expert playbook move {rule.id}")
    if history is not None and history.reasons:  # knowledge.cite.ConfidenceAdjustment: similar past changes
        c += history.delta
        reasons.extend(history.reasons)
    for ch in (ch for ch in critic.checks if not ch.passed and not ch.hard):
        c *= WARNING_FACTOR
        reasons.append(f"x{WARNING_FACTOR}: critic warning ({ch.name}): {ch.reason}")
    if bottleneck == "host":
        c = min(c, 0.2)
        reasons.append("at most 0.20: the run is host-bound, the mesh does not address it")
    return round(min(0.95, max(0.02, c)), 2), reasons


def _unknown_model_note(bottleneck: str | None, missing: list[str], cfg: Any | None, rb: Any | None) -> str:
    parts = [
        "the model is unknown, so predictions are relative to the measured profile (compute per chip taken from "
        "the measured step, each collective scaled by how the change moves its bytes and bandwidth) with wider "
        f"bands, and memory cannot be checked; candidates come from the playbook moves for a {bottleneck}-bound "
        "run, their one-step neighbours and the settings moves"
    ]
    if rb is not None and rb.params:
        parts.append(f"{rb.params_source}")
    fields = ", ".join(missing) or "the model dimensions"
    parts.append(
        f"to tighten them add {fields} to run.yaml (absolute predictions, memory checks and a search over every "
        "mesh), measured.hbm_peak_bytes (memory calibration), and the compiled HLO text with the profile "
        "(collective byte counts instead of inferred ones)"
    )
    name = cfg.setting("model_name") if cfg is not None else None
    if isinstance(name, str) and name:
        parts.append(f"the config names model_name: {name}; its published dimensions would do")
    return "; ".join(parts)


def labels_of(ctx: Context, c: Chosen) -> list[str]:
    """Short labels a person sees next to a proposal."""
    pred, change = c.prediction.pred, c.prediction.change
    labels = []
    if change.within_noise:
        labels.append("within noise")
    elif pred is not None and (change.time_per_token_percent or 0) > 0:
        labels.append("predicted slower")
    if ctx.bottleneck == "host":
        labels.append("does not address the bottleneck")
    if pred is None:
        labels.append("no prediction (model unknown)")
    elif getattr(pred, "basis", "model") == "profile":
        labels.append("profile-relative (model unknown)")
    if c.cand.change.global_batch_factor != 1.0:
        labels.append("changes the global batch")
    return labels


def _expert_grid_words(ctx: Context, mesh: Mesh) -> str | None:
    """A Megatron run's folded expert grid as the move changes it (bot.configs.megatron.expert_grid_change)."""
    if getattr(ctx.cfg, "format", None) != "megatron":
        return None
    return expert_grid_change(getattr(ctx.settings0, "expert_parallel", None), ctx.base, mesh)


def proposal_of(ctx: Context, rank: int, c: Chosen, knowledge: Knowledge, facts: RunFacts) -> Proposal:
    """One kept candidate as a :class:`Proposal` (labels, rationale, trade-offs, citations, confidence)."""
    cand, pred, change = c.cand, c.prediction.pred, c.prediction.change
    rule = cand.rule
    kind = cand_kind(ctx.base, cand)
    citations, adjustment = cite(
        knowledge, facts=facts, bottleneck=ctx.bottleneck, base=ctx.base, mesh=cand.mesh, kind=kind,
        rule=rule, settings_words=list(cand.change.words), num_slices=ctx.record.num_slices,
        fp8_recipe=ctx.fp8_recipe,
    )
    conf, conf_reasons = _confidence(
        pred=pred, change=change, calibrated=ctx.time_calibrated, diag_conf=ctx.diag_conf, rule=rule,
        critic=c.reviewed.result, bottleneck=ctx.bottleneck, relative=not ctx.known, history=adjustment,
    )
    return Proposal(
        rank=rank,
        mesh=mesh_dict(cand.mesh),
        mesh_short=cand.mesh.short(),
        kind=kind,
        origin="both" if (cand.rules and cand.from_search) else ("playbook" if cand.rules else "search"),
        predicted=(predicted_of(pred) if ctx.known else pred) if pred is not None else None,
        change=change,
        labels=labels_of(ctx, c),
        rationale=_rationale(ctx.bottleneck, ctx.base, cand, pred, ctx.base_pred, rule,
                             grid_words=_expert_grid_words(ctx, cand.mesh)),
        tradeoffs=_tradeoffs(ctx.base, cand, pred, ctx.base_pred, rule) + c.reviewed.extra,
        move=MoveRef(id=rule.id, rationale=" ".join(rule.rationale.split()),
                     tradeoffs=" ".join(rule.tradeoffs.split()), source=rule.source, citation=rule.citation)
        if rule else None,
        confidence=conf,
        confidence_reasons=conf_reasons,
        critic=c.reviewed.result.checks,
        diff=c.reviewed.diff,
        config_format=getattr(ctx.cfg, "format", None),
        settings=dict(cand.change.config_values),
        settings_changes=list(cand.change.words),
        citations=citations,
    )


def _passed_over_note(ctx: Context, sel: Selection) -> str | None:
    """Playbook moves predicted slower than the run, so not shown (people expect to see them considered)."""
    base_ms = ctx.base_ms
    if not base_ms:
        return None
    chosen_keys = {c.cand.key for c in sel.chosen}
    passed_over = [
        c for c in sel.order
        if c.rules and c.key not in chosen_keys and c.per_token_ms is not None
        and c.per_token_ms > base_ms and c.fits is not False
    ]
    if not passed_over:
        return None
    shown = []
    for c in passed_over[:3]:
        what = "; ".join([describe_change(ctx.base, c.mesh)] + list(c.change.words)) or c.mesh.short()
        pct = 100.0 * ((c.per_token_ms or 0.0) - base_ms) / base_ms
        why = ""
        if c.relative is not None and c.relative.breakdown_ms.get("pipeline_bubble"):
            why = f", pipeline bubble {c.relative.breakdown_ms['pipeline_bubble']:.0f} ms"
        shown.append(f"{what} (playbook {c.rules[0].id}: {pct:+.0f}% per token{why})")
    return "playbook moves considered and predicted slower, so not shown: " + "; ".join(shown)


def _fewer_note(ctx: Context, sel: Selection, cands: Candidates, n: int, k: int, max_critiqued: int) -> str:
    """Why only ``n`` of ``k`` distinct proposals were found."""
    why = []
    rej = sel.rejections
    if rej.counts:
        why.append(
            "every other candidate either pulls the same lever as one shown or was rejected: "
            + "; ".join(
                f"{count} for {name}" + (f" (e.g. {rej.examples[name]})" if name in rej.examples else "")
                for name, count in sorted(rej.counts.items(), key=lambda x: -x[1])
            )
        )
    if not ctx.known and not len(cands.pool):
        why.append(f"no playbook move or neighbouring mesh applies to this mesh for a {ctx.bottleneck}-bound run")
    if ctx.counts["critiqued"] >= max_critiqued:
        why.append(f"stopped after critiquing {max_critiqued} candidates")
    if not why:
        why.append(
            f"only {len(cands.pool)} candidate(s) besides the current configuration exist, and the rest are "
            "near-duplicates in kind of those shown"
        )
    return f"only {n} distinct valid proposal(s) of {k}: " + "; ".join(why)


def set_notes(ctx: Context, cands: Candidates, sel: Selection, n: int, *, k: int, max_critiqued: int) -> list[str]:
    """Notes on the whole answer: what the model-unknown path could not do, what was passed over, gaps."""
    notes: list[str] = []
    if not ctx.known:
        notes.append(_unknown_model_note(ctx.bottleneck, missing_model_info(ctx.record), ctx.cfg,
                                         cands.relative_baseline))
    passed = _passed_over_note(ctx, sel)
    if passed:
        notes.append(passed)
    if sel.filled_with_slower:
        notes.append(
            f"{sel.filled_with_slower} of the proposals are predicted slower than the current run: no other distinct "
            "checked candidate exists; they are shown for comparison, not as recommendations"
        )
    if sel.filled_same_lever:
        notes.append(
            f"{sel.filled_same_lever} proposal(s) pull the same lever as another by a different amount: no further "
            "distinct kind of change passed the checks"
        )
    if n < k:
        notes.append(_fewer_note(ctx, sel, cands, n, k, max_critiqued))
    return notes


def explain(
    ctx: Context,
    cands: Candidates,
    sel: Selection,
    *,
    advice: list[Advice],
    knowledge: Knowledge,
    k: int,
    max_critiqued: int,
    started: float,
) -> ProposalSet:
    """The answer: proposals, verdict and summary, notes, the baseline and what was searched."""
    facts = RunFacts.from_record(ctx.record, bottleneck=ctx.bottleneck)
    proposals = [proposal_of(ctx, rank, c, knowledge, facts) for rank, c in enumerate(sel.chosen, start=1)]
    notes = ctx.notes + set_notes(ctx, cands, sel, len(proposals), k=k, max_critiqued=max_critiqued)
    verdict, summary, proposals = verdict_of(ctx, proposals)
    return ProposalSet(
        run_id=ctx.record.id,
        bottleneck=ctx.bottleneck,
        verdict=verdict,  # type: ignore[arg-type]
        summary=summary,
        baseline=Baseline(
            mesh=mesh_dict(ctx.base),
            mesh_short=ctx.base.short(),
            measured_step_ms=ctx.measured_ms,
            predicted=predicted_of(ctx.base_pred) if ctx.base_pred is not None else None,
            critic=ctx.baseline_critic.checks,
        ),
        proposals=proposals,
        advice=advice,
        notes=notes,
        missing_info=[] if ctx.known else missing_model_info(ctx.record),
        model_known=ctx.known,
        calibration=ctx.calibration.model_dump(mode="json") if ctx.calibration is not None else None,
        candidates=ctx.counts,
        elapsed_ms=round((time.perf_counter() - started) * 1000, 2),
    )
