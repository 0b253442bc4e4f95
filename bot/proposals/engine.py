"""The proposal engine: three checked, distinct proposals (mesh and training settings) with predictions.

``propose(run, report)``:

1. reads the run's current (baseline) mesh and training settings from its config
   (:func:`knowledge.cost_settings.settings_from_config`) and calibrates the cost model on the baseline's
   measured step time, collective share and memory peak (:func:`knowledge.costmodel.calibrate`);
2. builds candidates: every enumerated mesh (:func:`knowledge.meshsearch.enumerate_mesh_arrays`, scored
   at once), the meshes the matching playbook rules produce (:mod:`bot.proposals.moves`), and the
   playbook's *settings* moves (larger micro-batch at the same global batch, larger per-device batch or
   more accumulation, lighter remat: :mod:`bot.proposals.settings`) on the baseline mesh and on the best
   meshes, each scored with its own settings;
3. walks the candidates fastest-per-token first, runs the Critic on each (memory and batch split with the
   candidate's settings), and keeps the first ``k`` that pass every hard check and differ *in kind* from
   those kept (:mod:`bot.proposals.kinds`; a settings change is a kind of its own);
4. labels a proposal whose predicted gain lies inside the prediction's uncertainty "within noise"; when the
   best is, the run looks near-optimal and the headline says so (no churn) while still showing the three
   nearest distinct checked alternatives; candidates predicted slower are only shown to complete three,
   labelled as such.

With the model unknown, candidates come from the playbook moves, their one-step neighbours and the settings
moves, predicted *relative to the profile* (:mod:`knowledge.cost_relative`): compute from the measured
step, each collective term scaled by how the change moves its volume and bandwidth, parameter count and
width inferred from the profile. Those predictions carry wider bands and lower confidence, and the answer
lists the run.yaml fields that would tighten them. A host-bound run is told that the mesh is not the
problem, with its three proposals labelled as not addressing it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from bot.configs.mesh import AXES, Mesh
from bot.errors import AsapError, ConfigError
from bot.proposals.critic import baseline_from_report, critique, gb
from bot.proposals.evidence import Knowledge, cite, load_knowledge, playbook_sections
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
from bot.proposals.settings import NO_CHANGE, SettingsChange, expand
from bot.proposals.settings import apply as apply_settings_change
from knowledge.cite import RunFacts

if TYPE_CHECKING:
    from bot.analysis.report import AnalysisReport
    from bot.runs.record import RunRecord
    from bot.runs.store import Run

MAX_CRITIQUED = 400
"""At most this many candidates are predicted in full and critiqued per request (fastest first)."""

SETTINGS_MESHES = 48
"""Settings changes are scored on the baseline mesh, the move meshes and this many best enumerated meshes."""

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


@dataclass
class _Cand:
    mesh: Mesh
    change: SettingsChange = NO_CHANGE
    time_ms: float | None = None  # predicted step time
    per_token_ms: float | None = None  # step time / tokens-per-step factor: the ranking key
    fits: bool | None = None
    rules: list[Rule] = field(default_factory=list)
    from_search: bool = False
    relative: Any | None = None  # knowledge.cost_relative.RelativePrediction (model unknown)


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
            step_time_ms_delta=None,
            step_time_percent=None,
            speedup=None,
            memory_per_chip_bytes_delta=None,
            within_noise=False,
            tokens_per_step_factor=tokens_factor,
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


def baseline_mesh(run: Run, report: AnalysisReport | None) -> tuple[Mesh, Any | None]:
    """The run's current mesh (from its config file, else the report) and the parsed config, if any."""
    record = run.record
    cfg = None
    if record.config:
        from bot.configs.detect import load_run_config

        cfg = load_run_config(run)
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


def config_diff(run: Run, cfg: Any | None, mesh: Mesh, settings: dict[str, Any] | None = None) -> str | None:
    """Unified diff of the run's config file with ``mesh`` (and setting values) applied; only those lines change."""
    if cfg is None:
        return None
    from bot.configs.edit import config_diff as diff_files

    return diff_files(cfg, mesh, settings or {}, run.record.config or cfg.source)


def missing_model_info(record: RunRecord) -> list[str]:
    return [name for name, get in MODEL_FIELDS if not get(record)]


def _cand_kind(base: Mesh, c: _Cand) -> str:
    mk = kind_of(base, c.mesh)
    if not c.change.kind:
        return mk
    return c.change.kind if mk == "unchanged" else f"{mk} + {c.change.kind}"


def _near_duplicate(base: Mesh, a: _Cand, b: _Cand) -> bool:
    """Two candidates are near-duplicates when they pull the same lever.

    A settings lever (a larger micro-batch, a lighter remat policy, ...) is shown once, on the mesh that
    does best with it: the same change on a tweaked mesh is the same proposal. Mesh-only changes follow
    :mod:`bot.proposals.kinds` (same kind, or fewer than MIN_DISTANCE factors of two apart).
    """
    if a.change.kind or b.change.kind:
        return a.change.kind == b.change.kind
    return kind_of(base, a.mesh) == kind_of(base, b.mesh) or distance(base, a.mesh, b.mesh) < MIN_DISTANCE


def _variant_index(base: Mesh, cand: _Cand, chosen: list[_Cand]) -> int | None:
    """Index of the chosen candidate whose lever ``cand`` pulls by a different amount, else None.

    A variant differs in magnitude (other settings values of the same kind, or another mesh of the same
    kind), not merely in the mesh a settings change rides on; anything matching no chosen lever, or
    identical to one, is not a variant.
    """
    if any(key_of_cand(c) == key_of_cand(cand) for c in chosen):
        return None
    for i, c in enumerate(chosen):
        if cand.change.kind or c.change.kind:
            if (cand.change.kind == c.change.kind and cand.change.values != c.change.values
                    and mesh_key(cand.mesh) == mesh_key(c.mesh)):
                return i
        elif kind_of(base, cand.mesh) == kind_of(base, c.mesh):
            return i
    return None


def key_of_cand(c: _Cand) -> tuple[Any, ...]:
    return (mesh_key(c.mesh), c.change.values)


def _rationale(
    bottleneck: str | None,
    baseline: Mesh,
    cand: _Cand,
    pred: Any | None,
    base_pred: Any | None,
    rule: Rule | None,
) -> str:
    parts = []
    if bottleneck:
        parts.append(f"The run is {bottleneck}-bound.")
    what = []
    if mesh_key(cand.mesh) != mesh_key(baseline):
        what.append(describe_change(baseline, cand.mesh))
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
    if cand.change.global_batch_factor != 1.0:
        parts.append(
            f"Tokens per step x{cand.change.global_batch_factor:g}: compare time per token, not per step."
        )
    if rule is not None:
        parts.append(f"Playbook rule {rule.id}: {rule.rationale.strip()} (source: {rule.source})")
    return " ".join(parts)


def _tradeoffs(baseline: Mesh, cand: _Cand, pred: Any | None, base_pred: Any | None, rule: Rule | None) -> list[str]:
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
    reasons: list[str] = []
    if pred is None:
        c = 0.35
        reasons.append("model unknown: no computed prediction, the proposal rests on the playbook rule and the profile")
    else:
        pct = change.time_per_token_percent if change.time_per_token_percent is not None else change.step_time_percent
        rel_gain = -(pct or 0.0) / 100.0
        u = max(pred.uncertainty, 1e-6)
        c = 0.5 + 0.4 * min(1.0, max(0.0, rel_gain / (2 * u)))
        reasons.append(f"predicted gain {rel_gain:+.0%} against a +-{u:.0%} prediction band")
        if change.within_noise:
            c = min(c, 0.3)
            reasons.append("the gain is within the prediction's noise")
        elif rel_gain < 0:
            c = min(c, 0.2)
            reasons.append("predicted slower than the current run")
        if relative:
            c = min(c - 0.15, 0.6)
            reasons.append("model unknown: prediction relative to the profile, sizes inferred from it")
        elif not calibrated:
            c -= 0.1
            reasons.append("the cost model could not be calibrated on this run's profile")
        n = len(pred.assumptions)
        if n:
            c -= min(0.15, 0.03 * n)
            reasons.append(f"{n} assumption(s) in the prediction (e.g. {pred.assumptions[0]})")
        mem = getattr(pred, "memory_per_chip_bytes", None)
        usable = pred.memory_capacity_bytes * 0.9
        if mem is not None and usable > 0 and mem > 0.85 * usable:
            c -= 0.1
            reasons.append(f"tight memory: {gb(mem)} of {gb(usable)} usable")
    c *= 0.6 + 0.4 * diag_conf
    reasons.append(f"diagnosis confidence {diag_conf:.2f}")
    if rule is not None:
        c += 0.05
        reasons.append(f"matches the expert playbook move {rule.id}")
    if history is not None and history.reasons:  # knowledge.cite.ConfidenceAdjustment: similar past changes
        c += history.delta
        reasons.extend(history.reasons)
    soft = [ch for ch in critic.checks if not ch.passed and not ch.hard]
    for ch in soft:
        c -= 0.1
        reasons.append(f"critic warning ({ch.name}): {ch.reason}")
    if bottleneck == "host":
        c = min(c, 0.2)
    return round(min(0.95, max(0.05, c)), 2), reasons


def _neighbours(mesh: Mesh, num_slices: int) -> list[Mesh]:
    """Meshes one factor-of-2 shift away on the same network (the in-slice / across-slice alternatives)."""
    out: list[Mesh] = []
    for part in ("ici", "dcn"):
        sizes = dict(getattr(mesh, part))
        allowed = AXES if part == "ici" else ("data", "fsdp", "pipeline")
        for src, v in sizes.items():
            if v < 2 or v % 2:
                continue
            for dst in allowed:
                if dst == src or dst == "expert":
                    continue
                new = dict(sizes)
                new[src] = v // 2
                new[dst] = new.get(dst, 1) * 2
                new = {a: n for a, n in new.items() if n != 1}
                other = dict(mesh.dcn if part == "ici" else mesh.ici)
                out.append(Mesh(ici=new, dcn=other) if part == "ici" else Mesh(ici=other, dcn=new))  # type: ignore[arg-type]
    return out


def _settings_changes(
    rules: list[Rule], *, record: RunRecord, cfg: Any | None, settings: Any | None, base: Mesh
) -> list[tuple[SettingsChange, Rule]]:
    """Concrete settings changes from the matching rules' settings moves."""
    from knowledge.cost_shapes import config_global_batch

    t = record.training
    gb_ = (t.global_batch if t and t.global_batch else None) or config_global_batch(record, settings)
    s = base.sizes()
    dp = s["data"] * s["fsdp"] * s["expert"]
    out: list[tuple[SettingsChange, Rule]] = []
    seen: set[tuple[tuple[str, Any], ...]] = set()
    for r in rules:
        if r.settings is None:
            continue
        for ch in expand(
            r.settings,
            settings=settings,
            config=cfg,
            framework=record.framework,
            runyaml_remat=t.remat if t else None,
            runyaml_micro_batch=t.micro_batch if t else None,
            global_batch=gb_,
            data_parallel=dp,
        ):
            if ch.values not in seen:
                seen.add(ch.values)
                out.append((ch, r))
    return out


def propose(
    run: Run,
    report: AnalysisReport,
    *,
    k: int = 3,
    playbook: Playbook | None = None,
    history: FailureHistory | None = None,
    max_critiqued: int = MAX_CRITIQUED,
    knowledge: Knowledge | Literal[False] | None = None,
) -> ProposalSet:
    """Up to ``k`` checked proposals for ``run`` given its analysis ``report`` (see module docstring).

    ``knowledge``: the index, history and playbooks to cite from (:func:`bot.proposals.evidence.load_knowledge`
    under ``$ASAP_STATE_DIR`` when None, built lazily); ``False`` skips retrieval (citations then come from
    the playbook move and bottleneck sections only, read from ``playbooks/``).
    """
    from knowledge import costmodel
    from knowledge.cost_settings import settings_from_config
    from knowledge.hardware import get_chip

    t0 = time.perf_counter()
    record = run.record
    chip = get_chip(record.chip)
    notes: list[str] = []
    playbook = playbook or load_playbook()
    if knowledge is None:
        knowledge = load_knowledge()
    elif knowledge is False:
        knowledge = Knowledge(index=None, sections=playbook_sections())
    if knowledge.problem:
        notes.append(knowledge.problem)
    facts = RunFacts.from_record(record, bottleneck=report.diagnosis.bottleneck)
    history = history if history is not None else load_failures(run.folder)
    base, cfg = baseline_mesh(run, report)
    if cfg is not None:  # issue 13: what the framework refuses, a launch for another device count
        from bot.configs.checks import startup_problems

        notes.extend(p.render() for p in startup_problems(cfg, record.num_chips, record.num_slices, record.model)
                     if p.rule != "note")
    settings0 = settings_from_config(cfg) if cfg is not None else None
    bottleneck = report.diagnosis.bottleneck
    diag_conf = float(report.diagnosis.confidence)
    known = costmodel.model_known(record, settings0)
    measured_ms = report.kpis.step_time_ms or (record.measured.step_time_ms if record.measured else None)

    calibration = None
    base_pred = None
    if known:
        try:
            calibration = costmodel.calibrate(record, base, report, settings=settings0)
        except AsapError as exc:
            notes.append(f"calibration failed, predictions are uncalibrated: {exc.message}")
        base_pred = costmodel.predict(record, base, calibration=calibration, chip=chip, settings=settings0)
    baseline_critic = critique(
        run, base, report=report, prediction=base_pred, history=history, baseline=base, settings=settings0
    )

    rules = matching_rules(
        playbook,
        bottleneck=bottleneck,
        mesh=base,
        chip_family=chip.family,
        num_slices=record.num_slices,
        moe=bool(record.model and record.model.is_moe),
    )
    advice = [Advice(id=r.id, text=" ".join(r.advice.split()), source=r.source, citation=r.citation)
              for r in rules if r.advice]
    moves = move_candidates(rules, base)
    changes = _settings_changes(rules, record=record, cfg=cfg, settings=settings0, base=base)

    counts = {"enumerated": 0, "scored": 0, "move_candidates": len(moves) + len(changes), "critiqued": 0, "rejected": 0}
    pool: dict[Any, _Cand] = {}

    def key_of(mesh: Mesh, change: SettingsChange) -> Any:
        return (mesh_key(mesh), change.values)

    def add(mesh: Mesh, change: SettingsChange, rule: Rule | None, *, search: bool = False) -> _Cand:
        key = key_of(mesh, change)
        cand = pool.get(key)
        if cand is None:
            cand = pool[key] = _Cand(mesh=mesh, change=change)
        if rule is not None and rule not in cand.rules:
            cand.rules.append(rule)
        cand.from_search = cand.from_search or search
        return cand

    rel_base = None
    if known:
        _score_known(run, record, chip, base, calibration, settings0, moves, changes, add, counts, notes)
    else:
        rel_base = _score_relative(run, record, chip, report, base, settings0, moves, changes, add, pool, notes)
    pool.pop(key_of(base, NO_CHANGE), None)
    if cfg is not None:  # issue 13: never propose an axis the config's framework (its MaxText's mesh_axes) lacks
        allowed = cfg.allowed_axes()
        for drop in [key for key, c in pool.items() if any(v > 1 and a not in allowed for a, v in c.mesh.sizes().items())]:
            pool.pop(drop)

    def rank_key(c: _Cand) -> tuple[float, int]:
        return (c.per_token_ms if c.per_token_ms is not None else math.inf,
                min((r.priority for r in c.rules), default=1000))

    order = sorted(pool.values(), key=rank_key)

    chosen: list[tuple[_Cand, Any, CriticResult, Change, str | None, list[str]]] = []
    rejected_reasons: dict[str, int] = {}
    examples: dict[str, str] = {}  # check name -> one rejected candidate with the Critic's reason
    slower: list[_Cand] = []
    base_ms_for_compare = base_pred.step_time_ms if base_pred is not None else measured_ms

    def consider(cand: _Cand, *, allow_slower: bool, same_lever_of: int | None = None) -> bool:
        """Critique one candidate and keep it when it passes; True when kept.

        ``same_lever_of`` (an index into ``chosen``) admits a different magnitude of a lever already shown.
        """
        if same_lever_of is None and any(_near_duplicate(base, cand, c) for c, *_ in chosen):
            return False
        pred = None
        settings_c = apply_settings_change(settings0, cand.change, framework=record.framework)
        if known:
            if cand.fits is False:
                counts["rejected"] += 1
                rejected_reasons["memory"] = rejected_reasons.get("memory", 0) + 1
                return False
            try:
                pred = costmodel.predict(record, cand.mesh, calibration=calibration, chip=chip, settings=settings_c)
            except AsapError:
                return False
        elif cand.relative is not None:
            pred = predicted_relative(cand.relative, chip.hbm_bytes)
        tf = cand.change.global_batch_factor
        change = compare(base_pred, pred, baseline_ms=base_ms_for_compare, tokens_factor=tf)
        slower_now = pred is not None and not change.within_noise and (change.time_per_token_percent or 0) > 0
        if slower_now and not allow_slower:
            slower.append(cand)
            return False
        counts["critiqued"] += 1
        result = critique(
            run, cand.mesh, report=report, prediction=pred, history=history, baseline=base,
            baseline_prediction=base_pred, settings=settings_c,
        )
        if not result.ok:
            counts["rejected"] += 1
            for ch in result.failures:
                if ch.hard:
                    rejected_reasons[ch.name] = rejected_reasons.get(ch.name, 0) + 1
                    examples.setdefault(ch.name, f"{cand.mesh.short()}: {ch.reason}")
            return False
        extra: list[str] = []
        try:
            diff = config_diff(run, cfg, cand.mesh)
        except ConfigError:
            # e.g. FSDP in a Megatron config: a mesh the run's own format cannot express is not a proposal.
            counts["rejected"] += 1
            why = f"not expressible in the {getattr(cfg, 'format', '?')} config"
            rejected_reasons[why] = rejected_reasons.get(why, 0) + 1
            return False
        if cand.change.config_values:
            try:
                diff = config_diff(run, cfg, cand.mesh, cand.change.config_values)
            except ConfigError as exc:
                extra.append(f"the config file cannot carry this setting ({exc.message}): set it where the trainer reads it")
        elif cand.change.values and cfg is not None:
            extra.append("the config file has no key for this setting: set it where the trainer reads it")
        if same_lever_of is not None:
            extra.append(
                f"the same lever as proposal {same_lever_of + 1}, a different step: shown because no third distinct "
                "kind of change passed the checks"
            )
        chosen.append((cand, pred, result, change, diff, extra))
        return True

    for cand in order:
        if len(chosen) >= k or counts["critiqued"] >= max_critiqued:
            break
        consider(cand, allow_slower=False)
    filled_with_slower = 0
    if len(chosen) < k:
        for cand in slower:
            if len(chosen) >= k or counts["critiqued"] >= max_critiqued:
                break
            if consider(cand, allow_slower=True):
                filled_with_slower += 1
    filled_same_lever = 0
    if len(chosen) < k:
        # Fewer distinct kinds than asked for: offer another magnitude of a lever already shown (micro-batch 4
        # after micro-batch 2), never the same change on a tweaked mesh, and never one predicted slower.
        for cand in order:
            if len(chosen) >= k or counts["critiqued"] >= max_critiqued:
                break
            variant_of = _variant_index(base, cand, [c for c, *_ in chosen])
            if variant_of is not None and consider(cand, allow_slower=False, same_lever_of=variant_of):
                filled_same_lever += 1

    proposals = []
    for rank, (cand, pred, result, change, diff, extra) in enumerate(chosen, start=1):
        rule = min(cand.rules, key=lambda r: r.priority) if cand.rules else None
        labels = []
        if change.within_noise:
            labels.append("within noise")
        elif pred is not None and (change.time_per_token_percent or 0) > 0:
            labels.append("predicted slower")
        if bottleneck == "host":
            labels.append("does not address the bottleneck")
        if pred is None:
            labels.append("no prediction (model unknown)")
        elif getattr(pred, "basis", "model") == "profile":
            labels.append("profile-relative (model unknown)")
        if cand.change.global_batch_factor != 1.0:
            labels.append("changes the global batch")
        citations, adjustment = cite(
            knowledge, facts=facts, bottleneck=bottleneck, base=base, mesh=cand.mesh, kind=_cand_kind(base, cand),
            rule=rule, settings_words=list(cand.change.words), num_slices=record.num_slices,
        )
        conf, conf_reasons = _confidence(
            pred=pred,
            change=change,
            calibrated=calibration is not None,
            diag_conf=diag_conf,
            rule=rule,
            critic=result,
            bottleneck=bottleneck,
            relative=not known,
            history=adjustment,
        )
        tradeoffs = _tradeoffs(base, cand, pred, base_pred, rule) + extra
        proposals.append(
            Proposal(
                rank=rank,
                mesh=mesh_dict(cand.mesh),
                mesh_short=cand.mesh.short(),
                kind=_cand_kind(base, cand),
                origin="both" if (cand.rules and cand.from_search) else ("playbook" if cand.rules else "search"),
                predicted=(predicted_of(pred) if known else pred) if pred is not None else None,
                change=change,
                labels=labels,
                rationale=_rationale(bottleneck, base, cand, pred, base_pred, rule),
                tradeoffs=tradeoffs,
                move=MoveRef(id=rule.id, rationale=" ".join(rule.rationale.split()),
                             tradeoffs=" ".join(rule.tradeoffs.split()), source=rule.source, citation=rule.citation)
                if rule
                else None,
                confidence=conf,
                confidence_reasons=conf_reasons,
                critic=result.checks,
                diff=diff,
                config_format=getattr(cfg, "format", None),
                settings=dict(cand.change.config_values),
                settings_changes=list(cand.change.words),
                citations=citations,
            )
        )

    missing = [] if known else missing_model_info(record)
    if not known:
        notes.append(_unknown_model_note(bottleneck, missing, cfg, rel_base))
    chosen_keys = {(mesh_key(c.mesh), c.change.values) for c, *_ in chosen}
    passed_over = [
        c for c in order
        if c.rules and (mesh_key(c.mesh), c.change.values) not in chosen_keys and c.per_token_ms is not None
        and base_ms_for_compare and c.per_token_ms > base_ms_for_compare and c.fits is not False
    ]
    if passed_over and base_ms_for_compare:
        shown = []
        for c in passed_over[:3]:
            what = "; ".join([describe_change(base, c.mesh)] + list(c.change.words)) or c.mesh.short()
            pct = 100.0 * ((c.per_token_ms or 0.0) - base_ms_for_compare) / base_ms_for_compare
            why = ""
            if c.relative is not None and c.relative.breakdown_ms.get("pipeline_bubble"):
                why = f", pipeline bubble {c.relative.breakdown_ms['pipeline_bubble']:.0f} ms"
            shown.append(f"{what} (playbook {c.rules[0].id}: {pct:+.0f}% per token{why})")
        notes.append("playbook moves considered and predicted slower, so not shown: " + "; ".join(shown))
    if filled_with_slower:
        notes.append(
            f"{filled_with_slower} of the proposals are predicted slower than the current run: no other distinct "
            "checked candidate exists; they are shown for comparison, not as recommendations"
        )
    if filled_same_lever:
        notes.append(
            f"{filled_same_lever} proposal(s) pull the same lever as another by a different amount: no further "
            "distinct kind of change passed the checks"
        )
    if len(proposals) < k:
        why = []
        if rejected_reasons:
            why.append(
                "every other candidate either pulls the same lever as one shown or was rejected: "
                + "; ".join(
                    f"{n} for {name}" + (f" (e.g. {examples[name]})" if name in examples else "")
                    for name, n in sorted(rejected_reasons.items(), key=lambda x: -x[1])
                )
            )
        if not known and not pool:
            why.append(f"no playbook move or neighbouring mesh applies to this mesh for a {bottleneck}-bound run")
        if counts["critiqued"] >= max_critiqued:
            why.append(f"stopped after critiquing {max_critiqued} candidates")
        if not why:
            why.append(
                f"only {len(pool)} candidate(s) besides the current configuration exist, and the rest are near-duplicates "
                "in kind of those shown"
            )
        notes.append(f"only {len(proposals)} distinct valid proposal(s) of {k}: " + "; ".join(why))

    verdict, summary = _verdict(bottleneck, proposals, measured_ms, base_pred, known=known)
    base_out: Predicted | None = None
    if base_pred is not None:
        base_out = predicted_of(base_pred)
    return ProposalSet(
        run_id=record.id,
        bottleneck=bottleneck,
        verdict=verdict,
        summary=summary,
        baseline=Baseline(
            mesh=mesh_dict(base),
            mesh_short=base.short(),
            measured_step_ms=measured_ms,
            predicted=base_out,
            critic=baseline_critic.checks,
        ),
        proposals=proposals,
        advice=advice,
        notes=notes,
        missing_info=missing,
        model_known=known,
        calibration=calibration.model_dump(mode="json") if calibration is not None else None,
        candidates=counts,
        elapsed_ms=round((time.perf_counter() - t0) * 1000, 2),
    )


def _score_known(run, record, chip, base, calibration, settings0, moves, changes, add, counts, notes) -> None:  # type: ignore[no-untyped-def]
    """Score every enumerated mesh, the move meshes and the settings changes with the cost model."""
    import numpy as np

    from knowledge import meshsearch
    from knowledge.costmodel import mesh_arrays

    ici, dcn = meshsearch.enumerate_mesh_arrays(record, chip=chip)
    counts["enumerated"] = int(ici.shape[0])
    extra = [base] + [mc.mesh for mc in moves]
    ei, ed = mesh_arrays(extra)
    all_i = np.concatenate([ici, ei]) if ici.size else ei
    all_d = np.concatenate([dcn, ed]) if dcn.size else ed
    meshes = meshsearch.arrays_to_meshes(all_i, all_d)
    scores = meshsearch.evaluate_mesh_arrays(record, all_i, all_d, calibration, chip=chip, settings=settings0)
    counts["scored"] = int(all_i.shape[0])
    n_enum = int(ici.shape[0])
    move_rule = {mesh_key(mc.mesh): mc.rule for mc in moves}
    for j, (m, t, fits) in enumerate(zip(meshes, scores.step_ms, scores.fits_memory, strict=True)):
        if not math.isfinite(float(t)):
            continue
        rule = move_rule.get(mesh_key(m)) if j >= n_enum else None
        c = add(m, NO_CHANGE, rule, search=j < n_enum)
        c.time_ms = c.per_token_ms = float(t)
        c.fits = bool(fits)
    for mc in moves:  # a move that enumeration also found keeps its rule
        add(mc.mesh, NO_CHANGE, mc.rule)
    if not changes:
        return
    # Settings changes: on the baseline mesh, the move meshes and the best enumerated meshes that fit.
    order = np.argsort(np.where(scores.fits_memory, scores.step_ms, np.inf))[:SETTINGS_MESHES]
    idx = sorted(set(order.tolist()) | set(range(n_enum, all_i.shape[0])))
    si, sd = all_i[idx], all_d[idx]
    sub = [meshes[j] for j in idx]
    from bot.proposals.settings import apply as apply_change

    for change, rule in changes:
        st = apply_change(settings0, change, framework=record.framework)
        try:
            sc = meshsearch.evaluate_mesh_arrays(record, si, sd, calibration, chip=chip, settings=st)
        except AsapError as exc:
            notes.append(f"settings change {', '.join(change.words)} could not be costed: {exc.message}")
            continue
        counts["scored"] += len(sub)
        for m, t, fits in zip(sub, sc.step_ms, sc.fits_memory, strict=True):
            if not math.isfinite(float(t)):
                continue
            c = add(m, change, rule)
            c.time_ms = float(t)
            c.per_token_ms = float(t) / change.global_batch_factor
            c.fits = bool(fits)


def _score_relative(run, record, chip, report, base, settings0, moves, changes, add, pool, notes):  # type: ignore[no-untyped-def]
    """Model unknown: candidates from moves, one-step neighbours and settings changes, profile-relative."""
    from knowledge.cost_relative import predict_relative, profile_baseline
    from knowledge.cost_shapes import config_global_batch
    from knowledge.meshsearch import divisibility_problems

    try:
        from bot.profiles.loader import load_profile

        profile = load_profile(run)
    except AsapError as exc:
        profile = None
        notes.append(f"profile not re-read for per-collective times ({exc.message}): collectives kept as one term")
    if not report.kpis.step_time_ms:
        notes.append("no measured step time: profile-relative predictions are not possible")
        for mc in moves:
            add(mc.mesh, NO_CHANGE, mc.rule)
        return None
    t = record.training
    gb_ = (t.global_batch if t and t.global_batch else None) or config_global_batch(record, settings0)
    seq = (t.seq_len if t and t.seq_len else None) or (settings0.seq_len if settings0 else None)
    from bot.proposals.settings import current_remat
    from knowledge.cost_remat import Dims, recompute_params_per_layer

    spec = current_remat(settings0, record.framework, t.remat if t else None)
    # Remat FLOP factor for a typical dense decoder (d_ff = 3.5 d, MHA), only to turn FLOPs into parameters.
    dims = Dims(d_model=4096, d_ff=14336, heads=32, kv_heads=32, head_dim=128, mlp_matrices=3, top_k=1, seq_len=seq or 2048)
    ra, rm, _ = recompute_params_per_layer(spec, dims)
    layer_params = 4096 * 128 * 64 * 2 + 3 * 4096 * 14336
    remat_factor = 1.0 + (ra + rm) / (3.0 * layer_params)
    grad_bytes = 4.0 if (settings0 is not None and settings0.weight_dtype and "32" in settings0.weight_dtype) else 2.0
    rb = profile_baseline(
        report=report, profile=profile, mesh=base, chip=chip, num_chips=record.num_chips,
        num_slices=record.num_slices, global_batch=gb_, seq_len=seq, remat_flop_factor=remat_factor,
        grad_bytes=grad_bytes,
    )
    notes.extend(rb.notes)
    cands: list[tuple[Mesh, SettingsChange, Rule | None]] = []
    for mc in moves:
        cands.append((mc.mesh, NO_CHANGE, mc.rule))
    for m in _neighbours(base, record.num_slices):
        cands.append((m, NO_CHANGE, None))
    for change, rule in changes:
        # Without the model, memory cannot be checked: only the smallest step of a batch-raising lever.
        if change.values and change.values[0][0] in ("per_device_batch", "grad_accum") and change.global_batch_factor == 2:
            cands.append((base, change, rule))
    for mesh, change, rule in cands:
        if mesh.num_devices != record.num_chips or divisibility_problems(record, mesh):
            continue
        if mesh_key(mesh) == mesh_key(base) and not change.values:
            continue
        accum = change.global_batch_factor if change.values and change.values[0][0] == "grad_accum" else 1.0
        rp = predict_relative(
            rb, base, mesh, chip, record.num_chips, tokens_factor=change.global_batch_factor, accum_factor=accum
        )
        c = add(mesh, change, rule, search=rule is None)
        c.relative = rp
        c.time_ms = rp.step_time_ms
        c.per_token_ms = rp.step_time_ms / change.global_batch_factor
    return rb


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


def _what(p: Proposal) -> str:
    return "; ".join([p.mesh_short] + p.settings_changes) if p.settings_changes else p.mesh_short


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
            "The run is host/input-bound: the devices wait for input, and no mesh or settings change fixes that. "
            "Fix the input pipeline first (see advice); the proposals below only shorten the device part of the step.",
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
    pct = best.change.time_per_token_percent if best.change.time_per_token_percent is not None else best.change.step_time_percent
    if best.predicted is not None and (best.change.within_noise or (pct or 0) > 0):
        how = (
            f"within the model's noise ({pct:+.1f}% vs +-{best.predicted.uncertainty:.0%})"
            if best.change.within_noise
            else f"slower ({pct:+.1f}%)"
        )
        return (
            "near_optimal",
            f"The run looks near-optimal: the best valid alternative ({_what(best)}) is predicted {how}. "
            "No change recommended; the proposals below are the nearest distinct checked alternatives.",
        )
    if best.predicted is None:
        return (
            "improve",
            f"{len(proposals)} playbook move(s) for a {bottleneck}-bound run, without computed predictions (model unknown).",
        )
    per_token = best.change.tokens_per_step_factor != 1.0
    basis = " (profile-relative: model unknown)" if best.predicted.basis == "profile" else ""
    now = (base_pred.step_time_ms if base_pred is not None else measured_ms) or float("nan")
    mesh_only = [p for p in proposals if not p.settings_changes]
    if best.settings_changes and "->" not in best.kind and all(
        p.change.within_noise or (p.change.time_per_token_percent or 0) >= 0 for p in mesh_only
    ):
        return (
            "improve",
            f"The mesh looks near-optimal: no mesh change is predicted to beat it beyond noise. The lever left is a "
            f"settings change: {'; '.join(best.settings_changes)}, predicted {best.predicted.step_time_ms:.1f} ms/step "
            f"({pct:+.1f}% {'per token' if per_token else 'per step'}) vs {now:.1f} ms now{basis}.",
        )
    if per_token:
        return (
            "improve",
            f"Best: {_what(best)}, predicted {best.predicted.step_time_ms:.1f} ms/step for "
            f"x{best.change.tokens_per_step_factor:g} tokens per step ({pct:+.1f}% time per token, "
            f"{best.change.speedup:.2f}x throughput) vs {now:.1f} ms now{basis}; it changes the global batch.",
        )
    return (
        "improve",
        f"Best: {_what(best)}, predicted {best.predicted.step_time_ms:.1f} ms/step "
        f"({best.change.step_time_percent:+.1f}%, {best.change.speedup:.2f}x) vs {now:.1f} ms now{basis}.",
    )


__all__ = ["propose", "baseline_mesh", "config_diff", "compare", "predicted_of", "MoveCandidate", "Check"]
