"""Every bundled sample run gets three checked, distinct proposals with predictions (or the exact reason
why fewer exist), and each is answered the way its situation calls for."""

from __future__ import annotations

import itertools
from functools import cache
from pathlib import Path

import pytest

from bot.analysis.analyze import analyze_run
from bot.configs.mesh import Mesh
from bot.proposals.critic import critique
from bot.proposals.engine import baseline_mesh, propose
from bot.proposals.kinds import MIN_DISTANCE, distance
from bot.proposals.models import ProposalSet
from bot.proposals.settings import settings_of_proposal
from bot.runs.store import LocalRunStore

RUNS = Path(__file__).resolve().parents[1] / "examples" / "runs"
STORE = LocalRunStore(RUNS)
IDS = STORE.list_ids()


@cache
def _answer(rid: str) -> tuple[ProposalSet, object, object]:
    run = STORE.get(rid)
    report = analyze_run(run)
    return propose(run, report), run, report


def _mesh(p) -> Mesh:  # type: ignore[no-untyped-def]
    return Mesh(ici=p.mesh["ici"], dcn=p.mesh["dcn"])


@pytest.mark.parametrize("rid", IDS)
def test_three_checked_distinct_proposals_with_predictions(rid: str) -> None:
    ps, run, report = _answer(rid)
    if len(ps.proposals) < 3:
        reason = [n for n in ps.notes if n.startswith(f"only {len(ps.proposals)} distinct valid proposal")]
        assert reason and ("rejected" in reason[0] or "near-duplicates" in reason[0]), ps.notes
    assert ps.proposals, ps.notes
    base, _ = baseline_mesh(run, report)  # type: ignore[arg-type]
    for p in ps.proposals:
        assert p.predicted is not None, (rid, p.mesh_short)
        assert all(c.passed or not c.hard for c in p.critic)
        # independently: the config edited with the proposal's settings, re-read, the Critic run afresh
        again = critique(run, _mesh(p), report=report, settings=settings_of_proposal(run, p.settings))  # type: ignore[arg-type]
        assert again.ok, (rid, p.mesh_short, [c.reason for c in again.failures])
        assert p.confidence_reasons and 0 <= p.confidence <= 1
    # A proposal that names itself another step of an earlier one's lever is the only same-kind pair allowed.
    distinct = [p for p in ps.proposals if not any("the same lever as proposal" in t for t in p.tradeoffs)]
    assert len(distinct) >= min(2, len(ps.proposals)), rid
    for a, b in itertools.combinations(distinct, 2):
        assert a.kind != b.kind, rid
        if not a.settings and not b.settings:
            assert distance(base, _mesh(a), _mesh(b)) >= MIN_DISTANCE, rid


def test_near_optimal_run_says_so_and_labels_every_alternative() -> None:
    ps, _, _ = _answer("618")
    assert ps.verdict == "near_optimal" and "near-optimal" in ps.summary
    assert len(ps.proposals) == 3
    for p in ps.proposals:
        assert {"within noise", "predicted slower"} & set(p.labels)
        assert p.confidence <= 0.3


def test_compute_bound_run_keeps_its_mesh_and_is_shown_the_remat_lever() -> None:
    ps, _, _ = _answer("123")
    assert "mesh looks near-optimal" in ps.summary
    mesh_only = [p for p in ps.proposals if not p.settings_changes]
    assert mesh_only and all("within noise" in p.labels or "predicted slower" in p.labels for p in mesh_only)
    best = ps.proposals[0]
    assert best.kind == "remat-lighter" and best.predicted.fits_memory  # type: ignore[union-attr]
    assert "remat_policy" in best.diff  # type: ignore[operator]


def test_host_bound_run_is_pointed_at_the_input_pipeline() -> None:
    ps, _, _ = _answer("415")
    assert ps.verdict == "mesh_not_the_problem" and "input" in ps.summary
    assert len(ps.proposals) == 3
    assert all("does not address the bottleneck" in p.labels for p in ps.proposals)


def test_hbm_bound_run_gets_a_larger_micro_batch_at_the_same_global_batch() -> None:
    ps, _, _ = _answer("204")
    best = ps.proposals[0]
    assert best.kind == "micro_batch+" and best.change.tokens_per_step_factor == 1.0
    assert best.change.step_time_percent is not None and best.change.step_time_percent < -10
    assert best.settings and all(k.endswith("micro_batch_size") for k in best.settings)
    assert "micro_batch_size: 1" in best.diff and "global_batch_size" not in "".join(  # type: ignore[operator]
        ln for ln in best.diff.splitlines() if ln.startswith(("+", "-")) and not ln.startswith(("+++", "---")))  # type: ignore[union-attr]


def test_model_unknown_run_gets_profile_relative_predictions_and_what_would_tighten_them() -> None:
    ps, _, _ = _answer("520")
    assert not ps.model_known and len(ps.proposals) == 3
    for p in ps.proposals:
        assert p.predicted is not None and p.predicted.basis == "profile" and p.predicted.memory_per_chip_bytes is None
        assert p.confidence <= 0.6
    assert {"model.d_model", "model.layers", "training.global_batch"} <= set(ps.missing_info)
    note = next(n for n in ps.notes if "model is unknown" in n)
    assert "inferred from the profile" in note and "run.yaml" in note
    # a batch-raising lever says it changes the global batch and compares per token
    raising = [p for p in ps.proposals if p.change.tokens_per_step_factor != 1.0]
    assert raising and all("changes the global batch" in p.labels for p in raising)
    assert all(any("global batch" in t for t in p.tradeoffs) for p in raising)
