"""The proposal engine: checked, distinct proposals with predictions; near-optimal, host-bound and
model-unknown runs are answered honestly."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from test_proposals_support import LLAMA_70B, make_report, make_run, maxtext_config

from bot.configs.mesh import Mesh
from bot.proposals.critic import critique
from bot.proposals.engine import baseline_mesh, propose
from bot.proposals.kinds import MIN_DISTANCE, distance, mesh_key
from bot.proposals.settings import settings_of_proposal


def _mesh(p) -> Mesh:  # type: ignore[no-untyped-def]
    return Mesh(ici=p.mesh["ici"], dcn=p.mesh["dcn"])


SCENARIOS = [
    # (chip, chips, slices, ici, dcn, model, bottleneck, collective %, host %)
    ("tpu-v5p", 64, 1, {"fsdp": 8, "tensor": 8}, None, None, "communication", 45.0, 0.0),
    ("tpu-v5p", 128, 2, {"fsdp": 32, "tensor": 2}, {"fsdp": 2}, None, "communication", 50.0, 0.0),
    ("tpu-v5e", 256, 1, {"fsdp": 64, "tensor": 4}, None, None, "hbm", 10.0, 0.0),
    ("h100", 64, 8, {"tensor": 8}, {"data": 8}, LLAMA_70B, "compute", 8.0, 0.0),
    ("tpu-v6e", 32, 1, {"fsdp": 16, "tensor": 2}, None, None, "host", 5.0, 45.0),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[f"{s[0]}-{s[6]}" for s in SCENARIOS])
def test_every_proposal_passes_its_own_critic_and_differs_in_kind(tmp_path: Path, scenario: tuple) -> None:  # type: ignore[type-arg]
    chip, chips, slices, ici, dcn, model, bottleneck, coll, host = scenario
    kw = {"model": model} if model else {}
    run = make_run(tmp_path, chip=chip, num_chips=chips, num_slices=slices, ici=ici, dcn=dcn, step_ms=2000, **kw)
    base, _ = baseline_mesh(run, None)
    report = make_report(run, base, bottleneck, step_ms=2000, collective_pct=coll, host_pct=host)
    ps = propose(run, report)
    assert ps.proposals, ps.notes
    for p in ps.proposals:
        independent = critique(run, _mesh(p), report=report, settings=settings_of_proposal(run, p.settings))
        assert independent.ok, (p.mesh_short, [c.reason for c in independent.failures])
        assert all(c.passed or not c.hard for c in p.critic)
        assert p.predicted is not None and p.predicted.fits_memory
        assert 0.0 <= p.confidence <= 1.0 and p.confidence_reasons
        assert mesh_key(_mesh(p)) != mesh_key(base) or p.settings
        assert p.diff and ("parallelism" in p.diff or all(k in p.diff for k in p.settings))
    assert_distinct(base, ps.proposals)
    if len(ps.proposals) < 3:
        assert any("only" in n for n in ps.notes)
    per_token = [p.change.time_per_token_percent for p in ps.proposals]
    if ps.verdict == "uncertain":  # wide band: diagnosis-matched playbook moves first, then predicted time
        matched = [p.move is not None for p in ps.proposals]
        assert matched == sorted(matched, reverse=True)
    else:
        assert per_token == sorted(per_token)  # type: ignore[type-var]


def assert_distinct(base: Mesh, proposals: list) -> None:  # type: ignore[type-arg]
    """Distinct in kind: different kinds; two mesh-only changes also >= MIN_DISTANCE factors of 2 apart;
    a settings lever (micro-batch, remat, ...) at most once — except a proposal that says it is another step
    of an earlier proposal's lever (offered only when no third distinct kind passed the checks)."""
    variants = [p for p in proposals if any("the same lever as proposal" in t for t in p.tradeoffs)]
    for v in variants:
        earlier = int(next(t for t in v.tradeoffs if "the same lever as proposal" in t).split("proposal ")[1].split(",")[0])
        assert earlier < v.rank and proposals[earlier - 1].kind == v.kind
        assert proposals[earlier - 1].settings != v.settings or proposals[earlier - 1].mesh != v.mesh
    proposals = [p for p in proposals if p not in variants]
    for a, b in itertools.combinations(proposals, 2):
        assert a.kind != b.kind
        if not a.settings and not b.settings:
            assert distance(base, _mesh(a), _mesh(b)) >= MIN_DISTANCE
    levers = [p.kind.split(" + ")[-1] for p in proposals if p.settings_changes]
    assert len(levers) == len(set(levers))


def test_communication_bound_tensor_heavy_run_is_told_to_shrink_tensor(tmp_path: Path) -> None:
    run = make_run(tmp_path, num_chips=64, ici={"fsdp": 8, "tensor": 8}, step_ms=3000)
    base, _ = baseline_mesh(run, None)
    ps = propose(run, make_report(run, base, "communication", step_ms=3000, collective_pct=45))
    assert ps.verdict == "improve"
    best = ps.proposals[0]
    assert _mesh(best).size("tensor") < 8
    assert best.change.step_time_percent is not None and best.change.step_time_percent < 0
    assert "communication-bound" in best.rationale
    assert any(p.move is not None and p.move.source for p in ps.proposals)  # a playbook move, cited
    assert ps.baseline.predicted is not None
    assert ps.baseline.predicted.step_time_ms == pytest.approx(3000, rel=0.02)  # calibrated on the measurement


def test_near_optimal_run_is_labelled_and_not_churned(tmp_path: Path) -> None:
    # No remat left to lighten (remat_policy none), pure FSDP, collectives hidden: nothing beats it. One
    # 4096-token sequence per chip: with no remat, Llama-3-8B keeps ~0.6 GB of activations per layer per
    # sequence (Korthikanti et al. 2022, 34·s·h bytes), so 4 per chip (the old scenario) cannot fit 96 GB.
    text = maxtext_config({"fsdp": 64}, per_device_batch=1).replace("remat_policy: full", "remat_policy: none")
    run = make_run(tmp_path, num_chips=64, ici={"fsdp": 64}, step_ms=2500, config_text=text,
                   training={"global_batch": 64, "seq_len": 4096, "remat": "none"})
    base, _ = baseline_mesh(run, None)
    report = make_report(run, base, "compute", step_ms=2500, collective_pct=3)
    measured = report.model_copy(update={"kpis": report.kpis.model_copy(update={"mfu_percent": 61.0})})
    ps = propose(run, measured)  # evidence of little headroom: 61% MFU on a TPU
    assert ps.verdict == "near_optimal"
    assert "near-optimal" in ps.summary and "MFU 61%" in ps.summary
    assert len(ps.proposals) == 3  # still three checked alternatives, none recommended
    for p in ps.proposals:
        assert "within noise" in p.labels or "predicted slower" in p.labels
        assert p.confidence <= 0.3
    # The same predictions without a measurement that shows little headroom: not "near-optimal".
    ps = propose(run, report)
    assert ps.verdict == "uncertain" and "near-optimal" not in ps.summary.replace("not enough to call the run near-optimal", "")
    assert len({p.confidence for p in ps.proposals}) > 1  # confidence says why, it is not one flat figure


def test_host_bound_run_is_told_the_mesh_is_not_the_problem(tmp_path: Path) -> None:
    run = make_run(tmp_path, chip="tpu-v6e", num_chips=32, ici={"fsdp": 16, "tensor": 2}, step_ms=2000)
    base, _ = baseline_mesh(run, None)
    ps = propose(run, make_report(run, base, "host", step_ms=2000, collective_pct=5, host_pct=45))
    assert ps.verdict == "mesh_not_the_problem"
    assert "input" in ps.summary
    assert any(a.id == "host-input-pipeline" for a in ps.advice)
    assert all("does not address the bottleneck" in p.labels for p in ps.proposals)


def test_model_unknown_predicts_relative_to_the_profile_and_says_what_is_missing(tmp_path: Path) -> None:
    run = make_run(tmp_path, num_chips=64, ici={"fsdp": 8, "tensor": 8}, model=None)
    base, _ = baseline_mesh(run, None)
    ps = propose(run, make_report(run, base, "communication", collective_pct=45))
    assert not ps.model_known
    assert ps.proposals
    assert any(p.move is not None for p in ps.proposals)  # the playbook's moves are among them
    for p in ps.proposals:
        assert p.predicted is not None and p.predicted.basis == "profile"
        assert p.predicted.memory_per_chip_bytes is None and p.predicted.fits_memory is None
        assert p.predicted.uncertainty >= 0.15
        assert p.confidence <= 0.6
        assert "profile-relative (model unknown)" in p.labels
        assert p.critic[2].name == "memory" and p.critic[2].skipped
    assert "model.d_model" in ps.missing_info and "training.global_batch" in ps.missing_info
    assert any("model is unknown" in n for n in ps.notes)
    assert ps.candidates["enumerated"] == 0


def test_recorded_failure_is_never_proposed(tmp_path: Path) -> None:
    run = make_run(tmp_path, num_chips=64, ici={"fsdp": 8, "tensor": 8}, step_ms=3000)
    base, _ = baseline_mesh(run, None)
    report = make_report(run, base, "communication", step_ms=3000, collective_pct=45)
    first = propose(run, report).proposals[0]
    (run.folder / "failures.yaml").write_text(
        f"schema_version: 1\nfailures:\n  - mesh: {{ici: {dict(first.mesh['ici'])}}}\n    outcome: oom\n    source: job 7\n"
    )
    again = propose(run, report)
    assert mesh_key(_mesh(first)) not in {mesh_key(_mesh(p)) for p in again.proposals}
    assert again.candidates["rejected"] >= 1


def test_proposal_diff_changes_only_mesh_lines(tmp_path: Path) -> None:
    run = make_run(tmp_path, num_chips=64, ici={"fsdp": 8, "tensor": 8}, step_ms=3000)
    base, _ = baseline_mesh(run, None)
    ps = propose(run, make_report(run, base, "communication", step_ms=3000, collective_pct=45))
    for p in ps.proposals:
        changed = [ln for ln in p.diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]  # type: ignore[union-attr]
        assert changed and all("parallelism" in ln or any(k in ln for k in p.settings) for ln in changed)
        assert p.config_format == "maxtext"


def test_sample_runs_get_checked_distinct_proposals(example_runs: Path) -> None:
    from bot.analysis.analyze import analyze_run
    from bot.runs.store import LocalRunStore

    store = LocalRunStore(example_runs)
    ids = store.list_ids()
    assert ids
    for rid in ids:
        run = store.get(rid)
        report = analyze_run(run)
        ps = propose(run, report)
        assert ps.proposals or ps.notes, rid
        base, _ = baseline_mesh(run, report)
        for p in ps.proposals:
            assert critique(run, _mesh(p), report=report, settings=settings_of_proposal(run, p.settings)).ok, (
                rid, p.mesh_short)
        assert_distinct(base, ps.proposals)


def test_hbm_bound_run_shows_another_kind_before_another_step_of_the_same_lever(example_runs: Path) -> None:
    """Run 204 has one strong lever (a larger micro-batch). When another kind of change passes the checks it is
    shown (labelled, with the Critic's warning) rather than a second step of the same lever."""
    from bot.analysis.analyze import analyze_run
    from bot.runs.store import LocalRunStore

    run = LocalRunStore(example_runs).get("204")
    ps = propose(run, analyze_run(run))
    assert len(ps.proposals) == 3
    assert not [p for p in ps.proposals if any("the same lever as proposal" in t for t in p.tradeoffs)]
    assert len({p.kind for p in ps.proposals}) == 3
    assert ps.proposals[0].settings_changes and "micro_batch" in ps.proposals[0].kind
    slower = [p for p in ps.proposals if "predicted slower" in p.labels]
    for p in slower:  # shown for comparison, and the confidence says so
        assert p.confidence < ps.proposals[0].confidence
