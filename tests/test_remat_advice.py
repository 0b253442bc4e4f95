"""A lighter-remat answer only where the run recomputes activations; "depends" where the policy is unstated.

Real published configs (examples/eval): NeMo 24.07 GPT3-5B (activations_checkpoint_granularity: null, no
recompute), MaxText v5e 16B (remat_policy: full) and Megatron-Bridge 25.11 Llama3-8B (no recompute key).
"""

from __future__ import annotations

from pathlib import Path

from bot.analysis.analyze import analyze_run
from bot.proposals.engine import propose
from bot.runs.store import LocalRunStore

EVAL = Path(__file__).resolve().parent.parent / "examples" / "eval"


def _answer(case: str) -> tuple[list[str], list[str]]:
    run = LocalRunStore(EVAL).get(case)
    ps = propose(run, analyze_run(run), knowledge=False)
    return [a.text for a in ps.advice], [f"{p.kind} {' '.join(p.settings_changes)}" for p in ps.proposals]


def test_no_lighter_remat_advice_for_a_run_that_recomputes_nothing() -> None:
    """Before: NeMo's GPT3-5B config (no recompute) was told "a lighter remat policy removes recomputed FLOPs"."""
    advice, kinds = _answer("nemo-24.07-h100-gpt3-5b-64gpu")
    assert not any("remat" in a.lower() or "recomput" in a.lower() for a in advice), advice
    assert not any("remat" in k for k in kinds), kinds


def test_lighter_remat_advice_stays_for_a_run_with_full_remat() -> None:
    advice, _ = _answer("maxtext-v5e-16b-1x256")
    assert any("lighter remat policy" in a and not a.startswith("Depends") for a in advice), advice


def test_lighter_remat_advice_says_it_depends_when_the_policy_is_not_stated() -> None:
    advice, _ = _answer("mbridge-25.11-h100-llama3-8b-8gpu")
    remat = [a for a in advice if "lighter remat policy" in a]
    assert remat and remat[0].startswith("Depends on the remat policy, which neither the config nor run.yaml states"), advice
