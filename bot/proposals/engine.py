"""The proposal engine: three checked, distinct sharding proposals with computed predictions.

``propose(run, report)``:

1. reads the run's current (baseline) mesh from its config and calibrates the cost model on the
   baseline's measured step time and collective share (:func:`knowledge.costmodel.calibrate`);
2. scores every enumerated mesh at once (:func:`knowledge.meshsearch.score_meshes`) and adds the meshes
   the matching playbook rules produce (:mod:`bot.proposals.moves`);
3. walks the candidates fastest-first, runs the Critic on each, and keeps the first ``k`` that pass every
   hard check and differ *in kind* from those already kept (:mod:`bot.proposals.kinds`): different sets of
   axes grown/shrunk, and at least :data:`~bot.proposals.kinds.MIN_DISTANCE` factors of two apart;
4. labels a proposal whose predicted gain lies inside the prediction's uncertainty "within noise" and, if
   the best one is, says the run looks near-optimal; drops candidates predicted slower beyond the noise.

With the model unknown, no absolute prediction is possible: candidates come from the playbook moves only,
ranked by rule priority, with lower confidence and a list of the inputs that would raise it. A host-bound
run is told that the mesh is not the problem.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bot.configs.mesh import AXES, Mesh
from bot.errors import AsapError, ConfigError
from bot.proposals.critic import baseline_from_report, critique, gb
from bot.proposals.failures import FailureHistory, load_failures
from bot.proposals.kinds import MIN_DISTANCE, describe_change, distance, kind_of, mesh_dict, mesh_key
from bot.proposals.models import (
    Advice,
    Baseline,
    Change,
    Check,
    CriticResult,
    MoveRef,
    Predicted,
    Proposal,
    ProposalSet,
)
from bot.proposals.moves import MoveCandidate, Playbook, Rule, load_playbook, matching_rules, move_candidates

if TYPE_CHECKING:
    from bot.analysis.report import AnalysisReport
    from bot.runs.record import RunRecord
    from bot.runs.store import Run

MAX_CRITIQUED = 400
"""At most this many candidates are predicted in full and critiqued per request (fastest first)."""

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
    ("model.vocab", lambda r: r.model and r.model.vocab),
    ("training.global_batch", lambda r: r.training and r.training.global_batch),
    ("training.seq_len", lambda r: r.training and r.training.seq_len),
)


@dataclass
class _Cand:
    mesh: Mesh
    time_ms: float | None
    rules: list[Rule] = field(default_factory=list)
    from_search: bool = False


def predicted_of(p: Any) -> Predicted:
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
    )


def compare(baseline: Any | None, p: Any | None, *, baseline_ms: float | None = None) -> Change:
    """Proposal vs baseline; ``within_noise`` when the gain is inside the proposal's uncertainty band."""
    base_ms = baseline.step_time_ms if baseline is not None else baseline_ms
    if p is None or base_ms is None:
        return Change(
            step_time_ms_delta=None,
            step_time_percent=None,
            speedup=None,
            memory_per_chip_bytes_delta=None,
            within_noise=False,
        )
    delta = p.step_time_ms - base_ms
    noise = p.uncertainty * base_ms
    return Change(
        step_time_ms_delta=delta,
        step_time_percent=100.0 * delta / base_ms,
        speedup=base_ms / p.step_time_ms if p.step_time_ms > 0 else None,
        memory_per_chip_bytes_delta=(p.memory_per_chip_bytes - baseline.memory_per_chip_bytes) if baseline else None,
        within_noise=abs(delta) <= noise,
    )


def baseline_mesh(run: Run, report: AnalysisReport | None) -> tuple[Mesh, Any | None]:
    """The run's current mesh (from its config file, else the report) and the parsed config, if any."""
    record = run.record
    cfg = None
    if record.config:
        from bot.configs.detect import load_config

        cfg = load_config(run.path(record.config, field="config"))
        return cfg.mesh(record.num_chips, record.num_slices), cfg
    mesh = baseline_from_report(report)
    if mesh is None:
        raise ConfigError(
            "the run names no sharding config, so there is no current mesh to improve on",
            source=str(run.folder / "run.yaml"),
            field="config",
            hint="add 'config: <file>' with the MaxText, ici_mesh or Megatron settings the job used",
        )
    return mesh, None


def config_diff(run: Run, cfg: Any | None, mesh: Mesh) -> str | None:
    """Unified diff of the run's config file with ``mesh`` applied (only the mesh lines change)."""
    if cfg is None:
        return None
    from bot.configs.edit import apply_mesh, diff_text

    new = apply_mesh(cfg, mesh)
    return diff_text(cfg.text, new, run.record.config or cfg.source)


def missing_model_info(record: RunRecord) -> list[str]:
    return [name for name, get in MODEL_FIELDS if not get(record)]


def _rationale(
    bottleneck: str | None,
    baseline: Mesh,
    mesh: Mesh,
    pred: Any | None,
    base_pred: Any | None,
    rule: Rule | None,
) -> str:
    parts = []
    if bottleneck:
        parts.append(f"The run is {bottleneck}-bound.")
    parts.append(f"This changes {describe_change(baseline, mesh)}.")
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
        if base_pred.exposed_comm_ms or pred.exposed_comm_ms:
            parts.append(
                f"Exposed communication {base_pred.exposed_comm_ms:.1f} -> {pred.exposed_comm_ms:.1f} ms per step."
            )
    if rule is not None:
        parts.append(f"Playbook rule {rule.id}: {rule.rationale.strip()} (source: {rule.source})")
    return " ".join(parts)


def _tradeoffs(baseline: Mesh, mesh: Mesh, pred: Any | None, base_pred: Any | None, rule: Rule | None) -> list[str]:
    out = []
    if rule is not None:
        out.append(rule.tradeoffs.strip())
    for axis in AXES:
        if mesh.size(axis) > baseline.size(axis):
            out.append(AXIS_TRADEOFFS[axis])
    if pred is not None and base_pred is not None:
        d = pred.memory_per_chip_bytes - base_pred.memory_per_chip_bytes
        if abs(d) > 0.02 * max(base_pred.memory_per_chip_bytes, 1):
            out.append(
                f"memory per chip {gb(base_pred.memory_per_chip_bytes)} -> {gb(pred.memory_per_chip_bytes)} "
                f"({'+' if d > 0 else ''}{100 * d / base_pred.memory_per_chip_bytes:.0f}%) of {gb(pred.memory_capacity_bytes)}"
            )
    return out


def _confidence(
    *,
    pred: Any | None,
    change: Change,
    calibrated: bool,
    diag_conf: float,
    rule: Rule | None,
    critic: CriticResult,
    bottleneck: str | None,
) -> tuple[float, list[str]]:
    reasons: list[str] = []
    if pred is None:
        c = 0.35
        reasons.append("model unknown: no computed prediction, the proposal rests on the playbook rule and the profile")
    else:
        rel_gain = -(change.step_time_percent or 0.0) / 100.0
        u = max(pred.uncertainty, 1e-6)
        c = 0.5 + 0.4 * min(1.0, max(0.0, rel_gain / (2 * u)))
        reasons.append(f"predicted gain {rel_gain:+.0%} against a +-{u:.0%} prediction band")
        if change.within_noise:
            c = min(c, 0.3)
            reasons.append("the gain is within the prediction's noise")
        if not calibrated:
            c -= 0.1
            reasons.append("the cost model could not be calibrated on this run's profile")
        n = len(pred.assumptions)
        if n:
            c -= min(0.15, 0.03 * n)
            reasons.append(f"{n} assumption(s) in the prediction (e.g. {pred.assumptions[0]})")
        usable = pred.memory_capacity_bytes * 0.9
        if usable > 0 and pred.memory_per_chip_bytes > 0.85 * usable:
            c -= 0.1
            reasons.append(f"tight memory: {gb(pred.memory_per_chip_bytes)} of {gb(usable)} usable")
    c *= 0.6 + 0.4 * diag_conf
    reasons.append(f"diagnosis confidence {diag_conf:.2f}")
    if rule is not None:
        c += 0.05
        reasons.append(f"matches the expert playbook move {rule.id}")
    soft = [ch for ch in critic.checks if not ch.passed and not ch.hard]
    for ch in soft:
        c -= 0.1
        reasons.append(f"critic warning ({ch.name}): {ch.reason}")
    if bottleneck == "host":
        c = min(c, 0.2)
    return round(min(0.95, max(0.05, c)), 2), reasons


def propose(
    run: Run,
    report: AnalysisReport,
    *,
    k: int = 3,
    playbook: Playbook | None = None,
    history: FailureHistory | None = None,
    max_critiqued: int = MAX_CRITIQUED,
) -> ProposalSet:
    """Up to ``k`` checked proposals for ``run`` given its analysis ``report`` (see module docstring)."""
    from knowledge import costmodel
    from knowledge.hardware import get_chip

    t0 = time.perf_counter()
    record = run.record
    chip = get_chip(record.chip)
    playbook = playbook or load_playbook()
    history = history if history is not None else load_failures(run.folder)
    base, cfg = baseline_mesh(run, report)
    bottleneck = report.diagnosis.bottleneck
    diag_conf = float(report.diagnosis.confidence)
    notes: list[str] = []
    known = costmodel.model_known(record)
    measured_ms = report.kpis.step_time_ms or (record.measured.step_time_ms if record.measured else None)

    calibration = None
    base_pred = None
    if known:
        try:
            calibration = costmodel.calibrate(record, base, report)
        except AsapError as exc:
            notes.append(f"calibration failed, predictions are uncalibrated: {exc.message}")
        base_pred = costmodel.predict(record, base, calibration=calibration, chip=chip)
    baseline_critic = critique(run, base, report=report, prediction=base_pred, history=history, baseline=base)

    rules = matching_rules(
        playbook,
        bottleneck=bottleneck,
        mesh=base,
        chip_family=chip.family,
        num_slices=record.num_slices,
        moe=bool(record.model and record.model.is_moe),
    )
    advice = [Advice(id=r.id, text=" ".join(r.advice.split()), source=r.source) for r in rules if r.advice]
    moves = move_candidates(rules, base)

    counts = {"enumerated": 0, "scored": 0, "move_candidates": len(moves), "critiqued": 0, "rejected": 0}
    pool: dict[Any, _Cand] = {}
    if known:
        from knowledge import meshsearch

        meshes = meshsearch.enumerate_meshes(record)
        counts["enumerated"] = len(meshes)
        times = meshsearch.score_meshes(record, meshes, calibration) if meshes else []
        counts["scored"] = len(meshes)
        for m, t in zip(meshes, times, strict=True):
            t = float(t)
            if math.isfinite(t):
                pool[mesh_key(m)] = _Cand(mesh=m, time_ms=t, from_search=True)
    for mc in moves:
        key = mesh_key(mc.mesh)
        if key in pool:
            pool[key].rules.append(mc.rule)
        else:
            pool[key] = _Cand(mesh=mc.mesh, time_ms=None, rules=[mc.rule])
    pool.pop(mesh_key(base), None)

    if known:
        # Move candidates the search did not score (e.g. outside its axes) get a full prediction up front.
        for cand in pool.values():
            if cand.time_ms is None:
                try:
                    cand.time_ms = costmodel.predict(record, cand.mesh, calibration=calibration, chip=chip).step_time_ms
                except AsapError:
                    cand.time_ms = math.inf
        order = sorted(pool.values(), key=lambda c: (c.time_ms, min((r.priority for r in c.rules), default=1000)))
    else:
        order = sorted(pool.values(), key=lambda c: min((r.priority for r in c.rules), default=1000))

    chosen: list[tuple[_Cand, Any, CriticResult, Change, str | None]] = []
    rejected_reasons: dict[str, int] = {}
    slower = 0
    for cand in order:
        if len(chosen) >= k or counts["critiqued"] >= max_critiqued:
            break
        kind = kind_of(base, cand.mesh)
        if any(kind == kind_of(base, c.mesh) or distance(base, c.mesh, cand.mesh) < MIN_DISTANCE for c, *_ in chosen):
            continue
        pred = None
        if known:
            try:
                pred = costmodel.predict(record, cand.mesh, calibration=calibration, chip=chip)
            except AsapError:
                continue
        counts["critiqued"] += 1
        result = critique(
            run, cand.mesh, report=report, prediction=pred, history=history, baseline=base, baseline_prediction=base_pred
        )
        if not result.ok:
            counts["rejected"] += 1
            for ch in result.failures:
                if ch.hard:
                    rejected_reasons[ch.name] = rejected_reasons.get(ch.name, 0) + 1
            continue
        change = compare(base_pred, pred, baseline_ms=measured_ms)
        if pred is not None and not change.within_noise and (change.step_time_ms_delta or 0) > 0:
            slower += 1
            break  # sorted fastest-first: everything after this is slower than the baseline beyond noise
        try:
            diff = config_diff(run, cfg, cand.mesh)
        except ConfigError:
            # e.g. FSDP in a Megatron config: a mesh the run's own format cannot express is not a proposal.
            counts["rejected"] += 1
            rejected_reasons[f"not expressible in the {getattr(cfg, 'format', '?')} config"] = (
                rejected_reasons.get(f"not expressible in the {getattr(cfg, 'format', '?')} config", 0) + 1
            )
            continue
        chosen.append((cand, pred, result, change, diff))

    proposals = []
    for rank, (cand, pred, result, change, diff) in enumerate(chosen, start=1):
        rule = min(cand.rules, key=lambda r: r.priority) if cand.rules else None
        labels = []
        if change.within_noise:
            labels.append("within noise")
        if bottleneck == "host":
            labels.append("does not address the bottleneck")
        if pred is None:
            labels.append("no prediction (model unknown)")
        conf, conf_reasons = _confidence(
            pred=pred,
            change=change,
            calibrated=calibration is not None,
            diag_conf=diag_conf,
            rule=rule,
            critic=result,
            bottleneck=bottleneck,
        )
        proposals.append(
            Proposal(
                rank=rank,
                mesh=mesh_dict(cand.mesh),
                mesh_short=cand.mesh.short(),
                kind=kind_of(base, cand.mesh),
                origin="both" if (cand.rules and cand.from_search) else ("playbook" if cand.rules else "search"),
                predicted=predicted_of(pred) if pred is not None else None,
                change=change,
                labels=labels,
                rationale=_rationale(bottleneck, base, cand.mesh, pred, base_pred, rule),
                tradeoffs=_tradeoffs(base, cand.mesh, pred, base_pred, rule),
                move=MoveRef(id=rule.id, rationale=" ".join(rule.rationale.split()), tradeoffs=" ".join(rule.tradeoffs.split()), source=rule.source)
                if rule
                else None,
                confidence=conf,
                confidence_reasons=conf_reasons,
                critic=result.checks,
                diff=diff,
                config_format=getattr(cfg, "format", None),
            )
        )

    missing = [] if known else missing_model_info(record)
    if not known:
        notes.append(
            "the model is unknown, so no absolute predictions: proposals come from the playbook moves for a "
            f"{bottleneck}-bound run only; add {', '.join(missing) or 'the model dimensions'} to run.yaml to get "
            "predicted step time and memory per chip, memory checks and a search over every mesh"
        )
    if len(proposals) < k:
        why = []
        if rejected_reasons:
            why.append(
                "the Critic rejected "
                + ", ".join(f"{n} for {name}" for name, n in sorted(rejected_reasons.items(), key=lambda x: -x[1]))
            )
        if slower:
            why.append("every remaining distinct mesh is predicted slower than the current one beyond the noise")
        if not known and not moves:
            why.append(f"no playbook move applies to this mesh for a {bottleneck}-bound run")
        if known and counts["critiqued"] >= max_critiqued:
            why.append(f"stopped after critiquing {max_critiqued} candidates")
        if not why:
            why.append("there are no more meshes that differ in kind from those shown")
        notes.append(f"only {len(proposals)} distinct valid proposal(s) of {k}: " + "; ".join(why))

    verdict, summary = _verdict(bottleneck, proposals, measured_ms, base_pred, known=known)
    return ProposalSet(
        run_id=record.id,
        bottleneck=bottleneck,
        verdict=verdict,
        summary=summary,
        baseline=Baseline(
            mesh=mesh_dict(base),
            mesh_short=base.short(),
            measured_step_ms=measured_ms,
            predicted=predicted_of(base_pred) if base_pred is not None else None,
            critic=baseline_critic.checks,
        ),
        proposals=proposals,
        advice=advice,
        notes=notes,
        missing_info=missing,
        model_known=known,
        calibration=calibration.model_dump() if calibration is not None else None,
        candidates=counts,
        elapsed_ms=round((time.perf_counter() - t0) * 1000, 2),
    )


def _verdict(
    bottleneck: str | None,
    proposals: list[Proposal],
    measured_ms: float | None,
    base_pred: Any | None,
    *,
    known: bool = True,
) -> tuple[str, str]:
    if bottleneck == "host":
        return (
            "mesh_not_the_problem",
            "The run is host/input-bound: the devices wait for input, and no mesh change fixes that. "
            "Fix the input pipeline first (see advice); the meshes below only shorten the device part of the step.",
        )
    if not proposals and not known:
        return (
            "no_valid_proposals",
            f"The model is unknown and no playbook move applies to this mesh for a {bottleneck}-bound run: "
            "see the advice, and add the model to run.yaml for a full search with predictions.",
        )
    if not proposals:
        return "no_valid_proposals", "No mesh passed every Critic check and beats the current one."
    best = proposals[0]
    if best.predicted is not None and best.change.within_noise:
        return (
            "near_optimal",
            f"The run looks near-optimal for its mesh: the best valid alternative ({best.mesh_short}) is predicted "
            f"within the model's noise ({best.change.step_time_percent:+.1f}% vs +-{best.predicted.uncertainty:.0%}). "
            "No change recommended.",
        )
    if best.predicted is None:
        return (
            "improve",
            f"{len(proposals)} playbook move(s) for a {bottleneck}-bound run, without computed predictions (model unknown).",
        )
    return (
        "improve",
        f"Best: {best.mesh_short}, predicted {best.predicted.step_time_ms:.1f} ms/step "
        f"({best.change.step_time_percent:+.1f}%, {best.change.speedup:.2f}x) vs "
        f"{(base_pred.step_time_ms if base_pred is not None else measured_ms) or float('nan'):.1f} ms now.",
    )


__all__ = ["propose", "baseline_mesh", "config_diff", "compare", "predicted_of", "MoveCandidate", "Check"]
