"""The verdict says what is known: near-optimal only with evidence, otherwise 'improvement likely, size
uncertain', with the ranking that verdict implies (bot/proposals/verdict.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from bot.proposals.models import Change, CriticResult, MoveRef, Predicted, Proposal
from bot.proposals.verdict import verdict_of


def _proposal(rank: int, pct: float, band: float, *, move: bool = False, mesh: str = "fsdp=64") -> Proposal:
    step = 1000.0 * (1 + pct / 100)
    return Proposal(
        rank=rank, mesh={"ici": {}, "dcn": {}}, mesh_short=mesh, kind="k", origin="playbook" if move else "search",
        predicted=Predicted(step_time_ms=step, step_time_low_ms=step * (1 - band), step_time_high_ms=step * (1 + band),
                            uncertainty=band, memory_per_chip_bytes=1e9, memory_capacity_bytes=1e10,
                            fits_memory=True, breakdown_ms={}, memory_breakdown_bytes={}, assumptions=[]),
        change=Change(step_time_ms_delta=step - 1000, step_time_percent=pct, speedup=1000 / step,
                      memory_per_chip_bytes_delta=0.0, within_noise=abs(pct) <= 100 * band,
                      time_per_token_percent=pct),
        labels=[], rationale="", tradeoffs=[],
        move=MoveRef(id="comm-shrink-tensor", rationale="", tradeoffs="", source="") if move else None,
        confidence=0.3, confidence_reasons=[], critic=[], diff=None, config_format=None,
    )


def _ctx(*, bottleneck: str = "communication", mfu: float | None = None, near: bool = False, known: bool = True,
         family: str = "tpu") -> Any:
    report = SimpleNamespace(kpis=SimpleNamespace(mfu_percent=mfu), diagnosis=SimpleNamespace(near_optimal=near))
    return SimpleNamespace(bottleneck=bottleneck, report=report, known=known, chip=SimpleNamespace(family=family),
                           baseline_critic=CriticResult(mesh={}, mesh_short="x", checks=[]), base_pred=None,
                           measured_ms=1000.0)


def test_a_gain_inside_a_wide_band_is_uncertain_not_near_optimal_and_playbook_moves_rank_first() -> None:
    props = [_proposal(1, -25.0, 0.45, mesh="search-mesh"), _proposal(2, -10.0, 0.45, move=True, mesh="move-mesh")]
    v, summary, ranked = verdict_of(_ctx(), props)
    assert v == "uncertain" and summary.startswith("Improvement likely, size uncertain")
    assert "near-optimal" not in summary and "-25.0% vs +-45%" in summary
    assert [p.mesh_short for p in ranked] == ["move-mesh", "search-mesh"] and [p.rank for p in ranked] == [1, 2]
    assert "Try first: move-mesh (the playbook move comm-shrink-tensor" in summary


def test_near_optimal_needs_evidence_of_little_headroom() -> None:
    props = [_proposal(1, -3.0, 0.30)]
    assert verdict_of(_ctx(), props)[0] == "uncertain"  # a wide band and nothing measured
    v, summary, _ = verdict_of(_ctx(mfu=62.0), props)  # measured MFU near the best published for TPUs
    assert v == "near_optimal" and "MFU 62%" in summary
    assert verdict_of(_ctx(mfu=62.0, family="gpu"), props)[0] == "near_optimal"  # 62% is high on GPUs too
    assert verdict_of(_ctx(mfu=40.0, family="gpu"), props)[0] == "uncertain"
    assert verdict_of(_ctx(near=True), props)[0] == "near_optimal"  # the diagnosis's own near-optimal finding
    v, summary, _ = verdict_of(_ctx(), [_proposal(1, -3.0, 0.10)])  # a tight band holding the gain
    assert v == "near_optimal" and "band is tight" in summary


def test_a_tight_band_at_low_mfu_says_the_mesh_is_not_the_lever_not_near_optimal() -> None:
    # e.g. a 7B run on A100s at 24% MFU whose meshes all predict about the same step
    v, summary, _ = verdict_of(_ctx(mfu=24.0, family="gpu"), [_proposal(1, -3.0, 0.10)])
    assert v == "uncertain" and "not near-optimal" in summary
    assert "No mesh change is predicted to help" in summary and "MFU 24% is well below the ~45%" in summary
    assert verdict_of(_ctx(mfu=40.0, family="gpu"), [_proposal(1, -3.0, 0.10)])[0] == "near_optimal"


def test_a_model_that_cannot_move_the_dominant_term_never_calls_the_run_near_optimal() -> None:
    v, summary, _ = verdict_of(_ctx(bottleneck="compute", known=False, mfu=70.0), [_proposal(1, -2.0, 0.10)])
    assert v == "uncertain" and "the dominant term cannot move in the prediction" in summary


def test_a_gain_beyond_the_band_is_improve() -> None:
    v, summary, ranked = verdict_of(_ctx(), [_proposal(1, -40.0, 0.15), _proposal(2, -5.0, 0.15, move=True)])
    assert v == "improve" and summary.startswith("Best: fsdp=64") and ranked[0].rank == 1


def test_try_first_prefers_a_proposal_that_fits_memory_as_the_config_stands() -> None:
    from bot.proposals.models import Check

    needs = _proposal(1, -40.0, 0.5, move=True, mesh="needs-optimizer")
    needs = needs.model_copy(update={"critic": [Check(
        name="memory", passed=False, hard=False,
        reason="fits only with the distributed optimizer (set use_distributed_optimizer: true): needs 64 GB to 96 GB")]})
    fits = _proposal(2, -12.0, 0.5, mesh="fits-as-is")
    v, summary, ranked = verdict_of(_ctx(), [needs, fits])
    assert v == "uncertain" and "the fastest alternative, needs-optimizer" in summary
    assert "Try first: fits-as-is (the fastest alternative that fits memory as the config stands" in summary
    assert [p.mesh_short for p in ranked] == ["fits-as-is", "needs-optimizer"]
    # with nothing faster that fits as stated, the faster one leads and its try-first names what it needs
    slower = _proposal(2, 5.0, 0.5, mesh="slower-fits")
    _, summary2, ranked2 = verdict_of(_ctx(), [needs, slower])
    assert ranked2[0].mesh_short == "needs-optimizer"
    assert "memory: fits only with the distributed optimizer (set use_distributed_optimizer: true))" in summary2
