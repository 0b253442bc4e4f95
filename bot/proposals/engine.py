"""The proposal engine: three checked, distinct proposals (mesh and training settings) with predictions.

``propose(run, report)`` runs five stages, each a module with its own tests:

1. :mod:`~bot.proposals.context` — read the run's baseline mesh and training settings from its config,
   calibrate the cost model on the baseline's measurement, predict and critique the baseline;
2. :mod:`~bot.proposals.candidates` — every enumerated mesh (scored at once), the playbook's mesh moves
   and settings moves, or, with the model unknown, the moves and their neighbours predicted relative to
   the profile;
3. :mod:`~bot.proposals.predict` — the full prediction of one candidate with its own settings, compared
   per token with the baseline;
4. :mod:`~bot.proposals.critique` — the Critic's checks on it and whether the run's config can carry it;
5. :mod:`~bot.proposals.select` walks the candidates fastest first through 3 and 4 and keeps ``k`` that
   pass and differ in kind; :mod:`~bot.proposals.explain` turns them into proposals with labels,
   rationale, trade-offs, citations, confidence, notes and the verdict.

Proposing reads only: nothing here writes history (recording an applied proposal's outcome is the explicit
step :func:`bot.proposals.outcomes.record_run_outcome`, ``asap record-outcome``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Literal

from bot.proposals import candidates as candidates_stage
from bot.proposals.context import Context, baseline_mesh, prepare
from bot.proposals.critique import config_diff
from bot.proposals.evidence import Knowledge, load_knowledge, playbook_sections
from bot.proposals.explain import AXIS_TRADEOFFS, MODEL_FIELDS, explain, missing_model_info
from bot.proposals.failures import FailureHistory
from bot.proposals.models import Advice, Check, ProposalSet
from bot.proposals.moves import MoveCandidate, Playbook, Rule, load_playbook, matching_rules
from bot.proposals.predict import compare, predicted_of, predicted_relative
from bot.proposals.select import MAX_CRITIQUED, select

if TYPE_CHECKING:
    from bot.analysis.report import AnalysisReport
    from bot.runs.store import Run

SETTINGS_MESHES = candidates_stage.SETTINGS_MESHES


def _knowledge(knowledge: Knowledge | Literal[False] | None, playbook: Playbook) -> Knowledge:
    if knowledge is None:
        return load_knowledge()
    if knowledge is False:
        return Knowledge(index=None, sections=playbook_sections())
    return knowledge


def rules_for(ctx: Context, playbook: Playbook) -> list[Rule]:
    """The playbook rules that match this run's diagnosis, mesh, chip and model."""
    return matching_rules(
        playbook,
        bottleneck=ctx.bottleneck,
        mesh=ctx.base,
        chip_family=ctx.chip.family,
        num_slices=ctx.record.num_slices,
        moe=bool(ctx.record.model and ctx.record.model.is_moe),
        recomputes=ctx.remat.recomputes,
        memory=ctx.memory,
        fp8_recipe=ctx.fp8_recipe,
    )


def advice_for(ctx: Context, rules: list[Rule]) -> list[Advice]:
    """The matching advice rules' texts; a remat lever on a run whose policy is not stated says it depends."""
    out = []
    for r in rules:
        if not r.advice:
            continue
        text = " ".join(r.advice.split())
        if r.when.recomputes and ctx.remat.recomputes is None:
            text = ("Depends on the remat policy, which neither the config nor run.yaml states (ASAP assumed "
                    f"'{ctx.remat.policy}'): only if the run recomputes activations does this apply. " + text)
        out.append(Advice(id=r.id, text=text, source=r.source, citation=r.citation))
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
    started = time.perf_counter()
    playbook = playbook or load_playbook()
    kn = _knowledge(knowledge, playbook)
    ctx = prepare(run, report, history=history)
    if kn.problem:
        ctx.notes.insert(0, kn.problem)
    from bot.proposals.verdict import quantized_mfu_note

    if note := quantized_mfu_note(ctx):
        ctx.notes.append(note)
    rules = rules_for(ctx, playbook)
    advice = advice_for(ctx, rules)
    cands = candidates_stage.build(ctx, rules)
    sel = select(ctx, cands.pool.ordered(), k=k, max_critiqued=max_critiqued)
    return explain(ctx, cands, sel, advice=advice, knowledge=kn, k=k, max_critiqued=max_critiqued, started=started)


__all__ = [
    "propose", "baseline_mesh", "config_diff", "compare", "predicted_of", "predicted_relative", "missing_model_info",
    "MoveCandidate", "Check", "AXIS_TRADEOFFS", "MODEL_FIELDS", "MAX_CRITIQUED",
]
