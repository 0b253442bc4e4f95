"""Stage 4, select: walk the candidates in rank order and keep ``k`` that pass the Critic and differ in kind.

Three passes over the ranked candidates (:meth:`bot.proposals.candidates.Pool.ordered`):

1. fastest first: predict (:mod:`~bot.proposals.predict`) and critique (:mod:`~bot.proposals.critique`)
   each candidate that is not a near-duplicate *in kind* of one already kept (:func:`near_duplicate`);
   candidates predicted slower than the baseline are set aside; when the current configuration is out of
   memory, the best settings change that keeps its mesh takes the last place (:func:`_keep_the_mesh_fix`);
2. if fewer than ``k`` were kept, the set-aside slower ones, labelled as such, to complete the comparison;
3. if still fewer, another magnitude of a lever already shown (:func:`variant_index`), never the same change
   on a tweaked mesh and never one predicted slower; last, a mesh change that only adds up two shown ones
   (:func:`bot.proposals.kinds.combination_of`), labelled as such.

At most ``max_critiqued`` candidates are critiqued per request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.proposals.critique import Rejections, expressible, review_candidate, screen
from bot.proposals.kinds import MIN_DISTANCE, combination_of, distance, kind_of, mesh_key
from bot.proposals.predict import Prediction, predict

if TYPE_CHECKING:
    from bot.configs.mesh import Mesh
    from bot.proposals.candidates import Candidate
    from bot.proposals.context import Context
    from bot.proposals.critique import Reviewed

MAX_CRITIQUED = 400
"""At most this many candidates are predicted in full and critiqued per request (fastest first)."""


@dataclass
class Chosen:
    """A kept candidate with its prediction and the Critic's review."""

    cand: Candidate
    prediction: Prediction
    reviewed: Reviewed
    same_lever_of: int | None = None  # index of the kept proposal whose lever this one pulls by another amount


@dataclass
class Selection:
    chosen: list[Chosen] = field(default_factory=list)
    rejections: Rejections = field(default_factory=Rejections)
    slower: list[Candidate] = field(default_factory=list)
    filled_with_slower: int = 0
    filled_same_lever: int = 0
    order: list[Candidate] = field(default_factory=list)
    predictions: dict[tuple[object, ...], Prediction | None] = field(default_factory=dict)  # by candidate key
    inexpressible: set[tuple[object, ...]] = field(default_factory=set)


def near_duplicate(base: Mesh, a: Candidate, b: Candidate) -> bool:
    """Two candidates are near-duplicates when they pull the same lever.

    A settings lever (a larger micro-batch, a lighter remat policy, ...) is shown once, on the mesh that
    does best with it: the same change on a tweaked mesh is the same proposal. Mesh-only changes follow
    :mod:`bot.proposals.kinds` (same kind, or fewer than MIN_DISTANCE factors of two apart).
    """
    if a.change.kind or b.change.kind:
        return a.change.kind == b.change.kind
    return kind_of(base, a.mesh) == kind_of(base, b.mesh) or distance(base, a.mesh, b.mesh) < MIN_DISTANCE


def variant_index(base: Mesh, cand: Candidate, chosen: list[Candidate]) -> int | None:
    """Index of the chosen candidate whose lever ``cand`` pulls by a different amount, else None.

    A variant differs in magnitude (other settings values of the same kind, or another mesh of the same
    kind), not merely in the mesh a settings change rides on; anything matching no chosen lever, or
    identical to one, is not a variant.
    """
    if any(c.key == cand.key for c in chosen):
        return None
    for i, c in enumerate(chosen):
        if cand.change.kind or c.change.kind:
            if (cand.change.kind == c.change.kind and cand.change.values != c.change.values
                    and mesh_key(cand.mesh) == mesh_key(c.mesh)):
                return i
        elif kind_of(base, cand.mesh) == kind_of(base, c.mesh):
            return i
    return None


def _combination(ctx: Context, sel: Selection, cand: Candidate) -> tuple[int, int] | None:
    """The two kept mesh-only proposals whose changes ``cand``'s mesh change adds up, if any."""
    if cand.change.values:
        return None
    kept = [c for c in sel.chosen if not c.cand.change.values]
    pair = combination_of(ctx.base, cand.mesh, [c.cand.mesh for c in kept])
    if pair is None:
        return None
    return sel.chosen.index(kept[pair[0]]), sel.chosen.index(kept[pair[1]])


def _consider(ctx: Context, sel: Selection, cand: Candidate, *, allow_slower: bool,
              same_lever_of: int | None = None, allow_combination: bool = False) -> bool:
    """Predict and critique one candidate and keep it when it passes; True when kept."""
    if same_lever_of is None and any(near_duplicate(ctx.base, cand, c.cand) for c in sel.chosen):
        return False
    combo = _combination(ctx, sel, cand)
    if combo is not None and not allow_combination:
        return False
    if not screen(ctx, cand, sel.rejections):
        return False
    if not expressible(ctx, cand):  # cheap, remembered per axis layout: before predicting in full
        if cand.key not in sel.inexpressible:
            sel.inexpressible.add(cand.key)
            ctx.counts["rejected"] += 1
            sel.rejections.add(f"not expressible in the {getattr(ctx.cfg, 'format', '?')} config")
        return False
    prediction = sel.predictions.get(cand.key)
    if prediction is None:
        prediction = sel.predictions[cand.key] = predict(ctx, cand)
    if prediction is None:
        return False
    if prediction.slower and not allow_slower:
        sel.slower.append(cand)
        return False
    reviewed = review_candidate(ctx, cand, prediction, sel.rejections)
    if reviewed is None:
        return False
    if combo is not None:
        reviewed.extra.append(
            f"combines proposals {combo[0] + 1} and {combo[1] + 1}: shown because no other distinct kind of change "
            "passed the checks"
        )
    if same_lever_of is not None:
        reviewed.extra.append(
            f"the same lever as proposal {same_lever_of + 1}, a different step: shown because no third distinct "
            "kind of change passed the checks"
        )
    sel.chosen.append(Chosen(cand=cand, prediction=prediction, reviewed=reviewed, same_lever_of=same_lever_of))
    return True


def _keep_the_mesh_fix(ctx: Context, sel: Selection, order: list[Candidate], k: int) -> None:
    """When the current configuration is out of memory, a settings change that keeps its mesh (heavier remat, a
    smaller micro-batch, a higher ZeRO stage) is shown among the proposals even if a mesh change is faster: it is
    the change a person makes first, and the mesh changes cannot show what it costs."""
    if not any(c.name == "memory" and c.hard and not c.passed for c in ctx.baseline_critic.checks):
        return
    base = mesh_key(ctx.base)
    if any(mesh_key(c.cand.mesh) == base for c in sel.chosen):
        return
    same_mesh = [c for c in order if c.change.kind and mesh_key(c.mesh) == base]
    if not same_mesh:
        return
    dropped = sel.chosen.pop() if len(sel.chosen) >= k else None
    for cand in same_mesh:
        if _consider(ctx, sel, cand, allow_slower=True):
            return
    if dropped is not None:
        sel.chosen.append(dropped)


def select(ctx: Context, order: list[Candidate], *, k: int, max_critiqued: int = MAX_CRITIQUED) -> Selection:
    """Up to ``k`` checked, distinct candidates from ``order`` (see the module docstring)."""
    sel = Selection(order=order)

    def full() -> bool:
        return len(sel.chosen) >= k or ctx.counts["critiqued"] >= max_critiqued

    for cand in order:
        if full():
            break
        _consider(ctx, sel, cand, allow_slower=False)
    _keep_the_mesh_fix(ctx, sel, order, k)
    for cand in list(sel.slower):
        if full():
            break
        if _consider(ctx, sel, cand, allow_slower=True):
            sel.filled_with_slower += 1
    for cand in order:
        if full():
            break
        variant_of = variant_index(ctx.base, cand, [c.cand for c in sel.chosen])
        if variant_of is not None and _consider(ctx, sel, cand, allow_slower=False, same_lever_of=variant_of):
            sel.filled_same_lever += 1
    for cand in order:  # last: a mesh change that only combines two shown ones
        if full():
            break
        if _combination(ctx, sel, cand) is not None and _consider(ctx, sel, cand, allow_slower=False,
                                                                  allow_combination=True):
            sel.filled_same_lever += 1
    return sel
