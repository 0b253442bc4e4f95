"""Stage 1, candidates: every mesh and settings change worth predicting, scored where that is cheap.

With the model known, every enumerated mesh (:func:`knowledge.meshsearch.enumerate_mesh_arrays`, scored
at once), the meshes the matching playbook rules produce (:mod:`bot.proposals.moves`) and the playbook's
*settings* moves (:mod:`bot.proposals.settings`) on the baseline mesh, the move meshes and the best
enumerated meshes, each scored with its own settings (:func:`score_known`).

With the model unknown, the playbook moves, their one-step neighbours and the settings moves, predicted
*relative to the profile* (:func:`score_relative`, :mod:`knowledge.cost_relative`).

The result is a :class:`Pool` keyed by (mesh, settings change); :meth:`Pool.ordered` gives the walk order
of the selection stage (fastest per token first, then the playbook rule's priority).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bot.configs.mesh import AXES, Mesh
from bot.errors import AsapError
from bot.proposals.kinds import mesh_key
from bot.proposals.moves import MoveCandidate, Rule, move_candidates
from bot.proposals.settings import NO_CHANGE, SettingsChange, expand
from bot.proposals.zero import KIND_DOWN

if TYPE_CHECKING:
    from bot.proposals.context import Context
    from bot.runs.record import RunRecord

REBATCHED = 200
"""The best enumerated meshes (by memory tier, then step time) tried with a micro-batch that splits the global
batch over their data ranks (:mod:`bot.proposals.rebatch`)."""

SETTINGS_MESHES = 48
"""Settings changes are scored on the baseline mesh, the move meshes and this many best enumerated meshes."""

MATERIALIZED = 1000
"""At most this many enumerated meshes (the best by memory tier, then step time) become candidates; the
selection critiques at most ``MAX_CRITIQUED`` (400) of them, so the rest could never be shown."""


@dataclass
class Candidate:
    """One (mesh, settings change) with its cheap score; the stages after this one fill in the rest."""

    mesh: Mesh
    change: SettingsChange = NO_CHANGE
    time_ms: float | None = None  # predicted step time
    per_token_ms: float | None = None  # step time / tokens-per-step factor: the ranking key
    fits: bool | None = None
    rules: list[Rule] = field(default_factory=list)
    from_search: bool = False
    relative: Any | None = None  # knowledge.cost_relative.RelativePrediction (model unknown)
    tier: int = 0  # memory: 0 fits as assumed, 1 fits with the unstated settings lean, 2 within HBM, 3 beyond

    @property
    def key(self) -> tuple[Any, ...]:
        return (mesh_key(self.mesh), self.change.values)

    @property
    def rule(self) -> Rule | None:
        """The highest-priority playbook rule this candidate came from."""
        return min(self.rules, key=lambda r: r.priority) if self.rules else None


class Pool:
    """Candidates by (mesh, settings change): adding one twice merges its rules and origin."""

    def __init__(self) -> None:
        self.items: dict[tuple[Any, ...], Candidate] = {}

    def add(self, mesh: Mesh, change: SettingsChange, rule: Rule | None, *, search: bool = False) -> Candidate:
        key = (mesh_key(mesh), change.values)
        cand = self.items.get(key)
        if cand is None:
            cand = self.items[key] = Candidate(mesh=mesh, change=change)
        if rule is not None and rule not in cand.rules:
            cand.rules.append(rule)
        cand.from_search = cand.from_search or search
        return cand

    def discard(self, mesh: Mesh, change: SettingsChange = NO_CHANGE) -> None:
        self.items.pop((mesh_key(mesh), change.values), None)

    def __len__(self) -> int:
        return len(self.items)

    def ordered(self) -> list[Candidate]:
        """Fastest per token first (unscored last), ties broken by the playbook rule's priority."""
        return sorted(self.items.values(), key=rank_key)


def rank_key(c: Candidate) -> tuple[int, float, int]:
    """Candidates that fit (as assumed, or with the unstated settings at their lean option) before tight ones;
    then fastest per token; then the playbook rule's priority."""
    return (0 if c.tier <= 1 else 1, c.per_token_ms if c.per_token_ms is not None else math.inf,
            min((r.priority for r in c.rules), default=1000))


def memory_tiers(ctx: Context, central: Any, lean_mem: Any) -> Any:
    """Per mesh: 0 fits as assumed, 1 fits with every unstated setting lean, 2 within the HBM, 3 beyond it.

    Only tier 3 is screened out before the Critic (memory beyond the chip even at the leanest option); the
    Critic judges the rest against the band (:func:`bot.proposals.critic.check_memory`)."""
    import numpy as np

    from knowledge.costmodel import DEFAULT_HEADROOM

    cap = float(ctx.chip.hbm_bytes)
    usable = cap * (1 - DEFAULT_HEADROOM)
    return np.where(central.fits_memory, 0, np.where(lean_mem <= usable, 1, np.where(lean_mem <= cap, 2, 3)))


def neighbours(mesh: Mesh, num_slices: int) -> list[Mesh]:
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


def settings_changes(
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
            r.settings, settings=settings, config=cfg, framework=record.framework,
            runyaml_remat=t.remat if t else None, runyaml_micro_batch=t.micro_batch if t else None,
            global_batch=gb_, data_parallel=dp, base=base,
        ):
            if ch.values not in seen:
                seen.add(ch.values)
                out.append((ch, r))
    return out


@dataclass
class Candidates:
    """What the candidates stage hands on."""

    pool: Pool
    moves: list[MoveCandidate]
    changes: list[tuple[SettingsChange, Rule]]
    relative_baseline: Any | None = None  # knowledge.cost_relative.RelativeBaseline (model unknown)


def build(ctx: Context, rules: list[Rule]) -> Candidates:
    """Every candidate for this request, scored (see the module docstring); the baseline itself is dropped."""
    moves = move_candidates(rules, ctx.base)
    changes = settings_changes(rules, record=ctx.record, cfg=ctx.cfg, settings=ctx.settings0, base=ctx.base)
    ctx.counts["move_candidates"] = len(moves) + len(changes)
    pool = Pool()
    rel = None
    if ctx.known:
        score_known(ctx, moves, changes, pool)
    else:
        rel = score_relative(ctx, moves, changes, pool)
    pool.discard(ctx.base)
    return Candidates(pool=pool, moves=moves, changes=changes, relative_baseline=rel)


def score_known(ctx: Context, moves: list[MoveCandidate], changes: list[tuple[SettingsChange, Rule]], pool: Pool) -> None:
    """Score every enumerated mesh, the move meshes and the settings changes with the cost model."""
    import numpy as np

    from knowledge import meshsearch
    from knowledge.costmodel import mesh_arrays

    record, chip = ctx.record, ctx.chip
    ici, dcn = meshsearch.enumerate_mesh_arrays(record, chip=chip)
    ctx.counts["enumerated"] = int(ici.shape[0])
    ei, ed = mesh_arrays([ctx.base] + [mc.mesh for mc in moves])
    all_i = np.concatenate([ici, ei]) if ici.size else ei
    all_d = np.concatenate([dcn, ed]) if dcn.size else ed
    scores = meshsearch.evaluate_mesh_arrays(record, all_i, all_d, ctx.calibration, chip=chip, settings=ctx.settings0)
    tiers = memory_tiers(ctx, scores, _lean_memory(ctx, all_i, all_d, ctx.lean0, scores))
    ctx.counts["scored"] = int(all_i.shape[0])
    n_enum = int(ici.shape[0])
    # Only the best enumerated meshes become Python objects (thousands on multi-slice jobs): the selection walks
    # at most MAX_CRITIQUED of them; every move mesh is kept.
    rank = np.lexsort((scores.step_ms[:n_enum], tiers[:n_enum] > 1))[:MATERIALIZED]
    settings_rows = np.argsort(np.where(scores.fits_memory, scores.step_ms, np.inf))[:SETTINGS_MESHES]
    keep = sorted(set(rank.tolist()) | set(settings_rows.tolist()) | set(range(n_enum, all_i.shape[0])))
    meshes = dict(zip(keep, meshsearch.arrays_to_meshes(all_i[keep], all_d[keep]), strict=True))
    move_rule = {mesh_key(mc.mesh): mc.rule for mc in moves}
    for j in keep:
        m, t, tier = meshes[j], scores.step_ms[j], tiers[j]
        if not math.isfinite(float(t)):
            continue
        c = pool.add(m, NO_CHANGE, move_rule.get(mesh_key(m)) if j >= n_enum else None, search=j < n_enum)
        c.time_ms = c.per_token_ms = float(t)
        c.tier, c.fits = int(tier), bool(tier < 3)
    for mc in moves:  # a move that enumeration also found keeps its rule
        pool.add(mc.mesh, NO_CHANGE, mc.rule)
    _score_rebatched(ctx, [meshes[j] for j in rank.tolist()[:REBATCHED]], pool)
    if not changes:
        return
    # Settings changes: on the baseline mesh, the move meshes and the best enumerated meshes that fit.
    idx = sorted(set(settings_rows.tolist()) | set(range(n_enum, all_i.shape[0])))
    si, sd = all_i[idx], all_d[idx]
    sub = [meshes[j] for j in idx]

    for change, rule in changes:
        if change.only_mesh is not None:
            _score_pinned(ctx, change, rule, pool, base_ms=float(scores.step_ms[n_enum]))
            continue
        # a change that acts on one axis (TP overlap: tensor) rides only on the meshes that have it
        rows = [i for i, m in enumerate(sub) if change.needs_axis is None or m.size(change.needs_axis) > 1]
        if not rows:
            continue
        scored = _score_change(ctx, change, si[rows], sd[rows])
        if scored is None:
            continue
        for m, t, tier in zip([sub[i] for i in rows], *scored, strict=True):
            if not math.isfinite(float(t)):
                continue
            c = pool.add(m, change, rule)
            c.time_ms = float(t)
            c.per_token_ms = float(t) / change.global_batch_factor
            c.tier, c.fits = int(tier), bool(tier < 3)


def _score_change(ctx: Context, change: SettingsChange, ici: Any, dcn: Any) -> tuple[Any, Any] | None:
    """Step times and memory tiers of the meshes ``ici``/``dcn`` with ``change`` applied (one vectorised call);
    None, with a note, when the cost model cannot cost the change."""
    from bot.proposals.settings import apply as apply_change
    from knowledge import meshsearch

    st = apply_change(ctx.settings0, change, framework=ctx.record.framework)
    lean = apply_change(ctx.lean0, change, framework=ctx.record.framework) if ctx.lean0 is not None else None
    try:
        sc = meshsearch.evaluate_mesh_arrays(ctx.record, ici, dcn, ctx.calibration, chip=ctx.chip, settings=st)
        tiers = memory_tiers(ctx, sc, _lean_memory(ctx, ici, dcn, lean, sc))
    except AsapError as exc:
        ctx.notes.append(f"settings change {', '.join(change.words)} could not be costed: {exc.message}")
        return None
    ctx.counts["scored"] += int(ici.shape[0])
    return sc.step_ms, tiers


def _score_rebatched(ctx: Context, meshes: list[Mesh], pool: Pool) -> None:
    """The best enumerated meshes whose data-parallel degree does not split the global batch at today's
    micro-batch, scored again with the micro-batch that does (:mod:`bot.proposals.rebatch`)."""
    from bot.proposals.rebatch import rebatch_change
    from knowledge.costmodel import mesh_arrays

    groups: dict[tuple[tuple[str, Any], ...], list[tuple[Mesh, SettingsChange]]] = {}
    for mesh in meshes:
        change = rebatch_change(mesh, record=ctx.record, settings=ctx.settings0, config=ctx.cfg)
        if change is not None:
            groups.setdefault(change.values, []).append((mesh, change))
    for pairs in groups.values():  # one vectorised scoring per new micro-batch
        scored = _score_change(ctx, pairs[0][1], *mesh_arrays([m for m, _ in pairs]))
        if scored is None:
            continue
        for (mesh, change), t, tier in zip(pairs, *scored, strict=True):
            if not math.isfinite(float(t)):
                continue
            pool.discard(mesh, NO_CHANGE)  # the mesh alone cannot split the batch: this replaces it
            c = pool.add(mesh, change, None, search=True)
            c.time_ms = c.per_token_ms = float(t)
            c.tier, c.fits = int(tier), bool(tier < 3)


def _score_pinned(ctx: Context, change: SettingsChange, rule: Rule, pool: Pool, *, base_ms: float) -> None:
    """Score a change that rides on one mesh only (a DeepSpeed ZeRO stage: :mod:`bot.proposals.zero`).

    The mesh-only candidate on that mesh is the same edit (a ds_config JSON at stage 3 *is* the fsdp mesh), so it
    is dropped in favour of this one; a stage lowered for communication that is not predicted faster is not a
    candidate (it would only cost memory).
    """
    from knowledge.costmodel import mesh_arrays

    mesh = change.only_mesh
    assert mesh is not None
    scored = _score_change(ctx, change, *mesh_arrays([mesh]))
    if scored is None:
        return
    t, tier = float(scored[0][0]), int(scored[1][0])
    if not math.isfinite(t) or (change.kind == KIND_DOWN and t >= base_ms):
        return
    if mesh_key(mesh) != mesh_key(ctx.base):
        pool.discard(mesh, NO_CHANGE)
    c = pool.add(mesh, change, rule)
    c.time_ms = c.per_token_ms = t
    c.tier, c.fits = tier, tier < 3


def _lean_memory(ctx: Context, ici: Any, dcn: Any, lean: Any | None, central: Any) -> Any:
    """Memory per chip of each mesh with every unstated setting at its least memory-hungry option."""
    if lean is None:
        return central.memory_per_chip_bytes
    from knowledge import meshsearch

    return meshsearch.evaluate_mesh_arrays(ctx.record, ici, dcn, ctx.calibration, chip=ctx.chip,
                                           settings=lean).memory_per_chip_bytes


def _relative_baseline(ctx: Context) -> Any:
    """The profile-relative baseline (knowledge.cost_relative.profile_baseline) of the run."""
    from bot.proposals.settings import current_remat
    from knowledge.cost_relative import profile_baseline
    from knowledge.cost_remat import Dims, recompute_params_per_layer
    from knowledge.cost_shapes import config_global_batch

    record, settings0 = ctx.record, ctx.settings0
    try:
        from bot.profiles.loader import load_profile

        profile = load_profile(ctx.run)
    except AsapError as exc:
        profile = None
        ctx.notes.append(f"profile not re-read for per-collective times ({exc.message}): collectives kept as one term")
    t = record.training
    gb_ = (t.global_batch if t and t.global_batch else None) or config_global_batch(record, settings0)
    seq = (t.seq_len if t and t.seq_len else None) or (settings0.seq_len if settings0 else None)
    spec = current_remat(settings0, record.framework, t.remat if t else None)
    # Remat FLOP factor for a typical dense decoder (d_ff = 3.5 d, MHA), only to turn FLOPs into parameters.
    dims = Dims(d_model=4096, d_ff=14336, heads=32, kv_heads=32, head_dim=128, mlp_matrices=3, top_k=1, seq_len=seq or 2048)
    ra, rm, _ = recompute_params_per_layer(spec, dims)
    layer_params = 4096 * 128 * 64 * 2 + 3 * 4096 * 14336
    remat_factor = 1.0 + (ra + rm) / (3.0 * layer_params)
    grad_bytes = 4.0 if (settings0 is not None and settings0.weight_dtype and "32" in settings0.weight_dtype) else 2.0
    return profile_baseline(
        report=ctx.report, profile=profile, mesh=ctx.base, chip=ctx.chip, num_chips=record.num_chips,
        num_slices=record.num_slices, global_batch=gb_, seq_len=seq, remat_flop_factor=remat_factor,
        grad_bytes=grad_bytes,
    )


def score_relative(
    ctx: Context, moves: list[MoveCandidate], changes: list[tuple[SettingsChange, Rule]], pool: Pool
) -> Any | None:
    """Model unknown: candidates from moves, one-step neighbours and settings changes, profile-relative."""
    from knowledge.cost_relative import predict_relative
    from knowledge.meshsearch import divisibility_problems

    record, base = ctx.record, ctx.base
    if not ctx.report.kpis.step_time_ms:
        ctx.notes.append("no measured step time: profile-relative predictions are not possible")
        for mc in moves:
            pool.add(mc.mesh, NO_CHANGE, mc.rule)
        return None
    rb = _relative_baseline(ctx)
    ctx.notes.extend(rb.notes)
    cands: list[tuple[Mesh, SettingsChange, Rule | None]] = [(mc.mesh, NO_CHANGE, mc.rule) for mc in moves]
    cands += [(m, NO_CHANGE, None) for m in neighbours(base, record.num_slices)]
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
            rb, base, mesh, ctx.chip, record.num_chips, tokens_factor=change.global_batch_factor, accum_factor=accum
        )
        c = pool.add(mesh, change, rule, search=rule is None)
        c.relative = rp
        c.time_ms = rp.step_time_ms
        c.per_token_ms = rp.step_time_ms / change.global_batch_factor
    return rb
