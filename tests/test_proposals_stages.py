"""Each stage of the proposal engine on its own: candidates -> predict -> critique -> select -> explain.

A bug in one stage shows up here by name, not only as a different ``asap propose`` answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_proposals_support import make_report, make_run

from bot.configs.mesh import Mesh
from bot.proposals import candidates, critique, explain, predict, select
from bot.proposals.context import Context, baseline_mesh, prepare
from bot.proposals.engine import rules_for
from bot.proposals.failures import FailedConfig, FailureHistory
from bot.proposals.kinds import kind_of, mesh_key
from bot.proposals.moves import load_playbook
from bot.proposals.settings import NO_CHANGE


def _ctx(tmp_path: Path, *, ici: dict[str, int] | None = None, bottleneck: str = "communication",
         coll: float = 45.0, history: FailureHistory | None = None) -> Context:
    run = make_run(tmp_path, num_chips=64, ici=ici or {"fsdp": 8, "tensor": 8}, step_ms=3000)
    base, _ = baseline_mesh(run, None)
    return prepare(run, make_report(run, base, bottleneck, step_ms=3000, collective_pct=coll), history=history)


def test_context_calibrates_the_baseline_on_its_measurement(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    assert ctx.known and ctx.calibration is not None
    assert ctx.base_pred.step_time_ms == pytest.approx(3000, rel=0.02)
    assert ctx.base_ms == ctx.base_pred.step_time_ms
    assert ctx.baseline_critic.ok


def test_candidates_pool_merges_rules_drops_the_baseline_and_orders_fastest_first(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    rules = rules_for(ctx, load_playbook())
    cands = candidates.build(ctx, rules)
    assert ctx.counts["enumerated"] > 0 and ctx.counts["scored"] >= ctx.counts["enumerated"]
    keys = set(cands.pool.items)
    assert (mesh_key(ctx.base), ()) not in keys  # the current config is not a candidate of itself
    order = cands.pool.ordered()
    fitting = [c for c in order if c.tier <= 1]
    assert order[: len(fitting)] == fitting  # meshes that fit come before tight ones ...
    times = [c.per_token_ms for c in fitting if c.per_token_ms is not None]
    assert times == sorted(times)  # ... each group fastest first
    assert all(c.fits == (c.tier < 3) for c in order)  # only beyond HBM even at the leanest is screened out
    moved = [c for c in order if c.rules]
    assert moved and all(c.rule is not None and c.rule in c.rules for c in moved)  # playbook moves carry rules

    pool = candidates.Pool()
    a = pool.add(Mesh(ici={"fsdp": 64}), NO_CHANGE, None, search=True)
    b = pool.add(Mesh(ici={"fsdp": 64}), NO_CHANGE, rules[0])
    assert a is b and a.from_search and a.rules == [rules[0]] and len(pool) == 1


def test_neighbours_are_one_factor_of_two_shifts_on_the_same_network() -> None:
    base = Mesh(ici={"fsdp": 8, "tensor": 8}, dcn={"data": 2})
    out = candidates.neighbours(base, 2)
    assert Mesh(ici={"fsdp": 16, "tensor": 4}, dcn={"data": 2}) in out
    assert Mesh(ici={"fsdp": 8, "tensor": 8}, dcn={"fsdp": 2}) in out
    assert all(m.num_devices == base.num_devices for m in out)
    assert not any(m.dcn.get("tensor") for m in out)  # tensor never offered across slices


def test_predict_compares_per_token_and_flags_slower_beyond_the_band(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    faster = predict.predict(ctx, candidates.Candidate(mesh=Mesh(ici={"fsdp": 64})))
    assert faster is not None and faster.change.step_time_percent < 0 and not faster.slower
    assert faster.change.speedup > 1.0
    c = predict.compare(None, predict.predicted_relative(_Rel(2000.0, 0.1), 1e10), baseline_ms=1000.0, tokens_factor=2.0)
    assert c.step_time_percent == pytest.approx(100.0) and c.time_per_token_percent == pytest.approx(0.0)
    assert c.within_noise  # twice the tokens in twice the time: no gain per token


class _Rel:
    def __init__(self, ms: float, u: float) -> None:
        self.step_time_ms, self.uncertainty = ms, u
        self.step_time_low_ms, self.step_time_high_ms = ms * (1 - u), ms * (1 + u)
        self.breakdown_ms: dict[str, float] = {}
        self.assumptions: list[str] = []


def test_critique_stage_tallies_rejections_with_an_example(tmp_path: Path) -> None:
    bad = Mesh(ici={"fsdp": 4, "tensor": 16})
    ctx = _ctx(tmp_path, history=FailureHistory(failures=[
        FailedConfig(mesh=bad, outcome="oom")]))
    rej = critique.Rejections()
    cand = candidates.Candidate(mesh=bad)
    p = predict.predict(ctx, cand)
    assert p is not None
    assert critique.review_candidate(ctx, cand, p, rej) is None
    assert rej.counts.get("known_failure") == 1 and "failed before" in rej.examples["known_failure"]
    oom = candidates.Candidate(mesh=Mesh(ici={"tensor": 64}), fits=False)
    assert not critique.screen(ctx, oom, rej) and rej.counts["memory"] == 1
    ok = candidates.Candidate(mesh=Mesh(ici={"fsdp": 64}))
    reviewed = critique.review_candidate(ctx, ok, predict.predict(ctx, ok), rej)  # type: ignore[arg-type]
    assert reviewed is not None and reviewed.result.ok
    assert reviewed.diff and "ici_fsdp_parallelism" in reviewed.diff


def test_select_keeps_distinct_kinds_and_completes_with_slower_ones_labelled(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    cands = candidates.build(ctx, rules_for(ctx, load_playbook()))
    sel = select.select(ctx, cands.pool.ordered(), k=3)
    kinds = [kind_of(ctx.base, c.cand.mesh) + c.cand.change.kind for c in sel.chosen]
    assert len(sel.chosen) == 3 and len(set(kinds)) == 3
    same = [candidates.Candidate(mesh=Mesh(ici={"fsdp": 64})), candidates.Candidate(mesh=Mesh(ici={"fsdp": 32, "tensor": 2}))]
    assert select.near_duplicate(ctx.base, same[0], same[1])  # same kind (tensor->fsdp), one step apart
    # Only slower candidates: the selection still shows them, counted as fillers.
    ctx2 = _ctx(tmp_path / "b", bottleneck="compute", coll=5.0)
    pool2 = candidates.build(ctx2, []).pool.ordered()
    slow = [c for c in pool2 if (p := predict.predict(ctx2, c)) is not None and p.slower][:20]
    assert slow
    sel2 = select.select(ctx2, slow, k=2)
    assert sel2.chosen and sel2.filled_with_slower == len(sel2.chosen)
    assert all(c.prediction.slower for c in sel2.chosen)


def test_explain_labels_and_verdict_follow_the_predictions(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    cands = candidates.build(ctx, rules_for(ctx, load_playbook()))
    sel = select.select(ctx, cands.pool.ordered(), k=3)
    ps = explain.explain(ctx, cands, sel, advice=[], knowledge=explain.Knowledge(index=None, sections={}), k=3,
                         max_critiqued=400, started=0.0)
    assert ps.verdict == "improve" and ps.proposals[0].mesh_short in ps.summary
    assert all(p.rationale.startswith("The run is communication-bound.") for p in ps.proposals)
    assert [p.rank for p in ps.proposals] == [1, 2, 3]
    missing = explain.missing_model_info(ctx.record.model_copy(update={"model": None}))
    assert "model.layers" in missing and "model.d_model" in missing


def test_select_offers_another_step_of_a_lever_only_when_no_other_kind_passes(example_runs: Path) -> None:
    from bot.analysis.analyze import analyze_run
    from bot.runs.store import LocalRunStore

    run = LocalRunStore(example_runs).get("204")
    ctx = prepare(run, analyze_run(run))
    cands = candidates.build(ctx, rules_for(ctx, load_playbook()))
    same = [c for c in cands.pool.ordered() if c.change.kind == "micro_batch+" and mesh_key(c.mesh) == mesh_key(ctx.base)]
    assert len(same) >= 2  # micro-batch 1 -> 2 and 1 -> 4 on the current mesh
    sel = select.select(ctx, same, k=3)
    assert len(sel.chosen) == min(3, len(same)) and sel.filled_same_lever == len(sel.chosen) - 1
    assert all(c.same_lever_of == 0 for c in sel.chosen[1:])
    assert all(any("the same lever as proposal 1" in t for t in c.reviewed.extra) for c in sel.chosen[1:])


def test_a_mix_of_two_shown_changes_is_not_a_new_kind() -> None:
    from bot.proposals.kinds import combination_of

    base = Mesh(ici={"fsdp": 256}, dcn={"data": 16})
    shown = [Mesh(ici={"data": 2, "fsdp": 128}, dcn={"data": 16}), Mesh(ici={"fsdp": 256}, dcn={"data": 8, "fsdp": 2})]
    assert combination_of(base, Mesh(ici={"data": 2, "fsdp": 128}, dcn={"data": 8, "fsdp": 2}), shown) == (0, 1)
    assert combination_of(base, Mesh(ici={"data": 4, "fsdp": 64}, dcn={"data": 4, "fsdp": 4}), shown) == (0, 1)
    assert combination_of(base, Mesh(ici={"fsdp": 128, "sequence": 2}, dcn={"data": 16}), shown) is None


def test_select_shows_a_combination_only_last_and_says_so(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, ici={"fsdp": 8, "tensor": 8}, bottleneck="compute", coll=5.0)
    a = candidates.Candidate(mesh=Mesh(ici={"fsdp": 16, "tensor": 4}))  # tensor->fsdp
    b = candidates.Candidate(mesh=Mesh(ici={"data": 2, "fsdp": 4, "tensor": 8}))  # fsdp->data
    mix = candidates.Candidate(mesh=Mesh(ici={"data": 2, "fsdp": 8, "tensor": 4}))  # both at once
    other = candidates.Candidate(mesh=Mesh(ici={"fsdp": 8, "tensor": 4, "sequence": 2}))  # tensor->sequence
    sel = select.select(ctx, [a, b, mix, other], k=3)
    assert [c.cand.mesh for c in sel.chosen] == [a.mesh, b.mesh, other.mesh]  # another kind beats the mix
    sel = select.select(_ctx(tmp_path / "b", ici={"fsdp": 8, "tensor": 8}, bottleneck="compute", coll=5.0),
                        [a, b, mix], k=3)
    assert [c.cand.mesh for c in sel.chosen] == [a.mesh, b.mesh, mix.mesh]  # shown only when nothing else is
    assert any("combines proposals 1 and 2" in t for t in sel.chosen[2].reviewed.extra)
