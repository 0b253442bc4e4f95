"""Diagnosis of constructed profiles: each bottleneck kind, conflicts, confidence and near-optimal runs."""

from __future__ import annotations

import pytest
from test_analysis_support import STEP_US, collective, host_op, matmul, profiled, record, run_analysis, streaming

from bot.profiles.model import BoundBy, OpKind, OpStat


def _compute_bound() -> list[OpStat]:
    return [
        matmul("fusion.mlp", 0.55),
        matmul("fusion.attn", 0.25),
        streaming("fusion.norm", 0.10),
        collective("all-reduce.1", 0.05, group=8),
    ]


def test_compute_bound_run_cites_compute_share_and_mfu() -> None:
    rep = run_analysis(record(), profiled(_compute_bound(), duty=97))
    d = rep.diagnosis
    assert d.bottleneck == "compute"
    assert d.scores["compute"] == pytest.approx(0.80, abs=1e-3)
    signals = {e.signal for e in d.evidence}
    assert {"kpis.compute_bound_percent", "kpis.mfu_percent", "op:fusion.mlp"} <= signals
    assert d.conflicts == []
    assert "hbm" in d.secondary  # 10% of the step is worth naming
    assert not d.near_optimal  # 42% MFU is good, not near the ceiling


def test_hbm_bound_run_with_busy_device_reports_the_duty_cycle_conflict() -> None:
    ops = [
        streaming("fusion.softmax", 0.40),
        streaming("fusion.layernorm", 0.20),
        matmul("fusion.mlp", 0.25),
        collective("all-reduce.1", 0.12, group=8),
    ]
    rep = run_analysis(record(), profiled(ops, duty=99))
    d = rep.diagnosis
    assert d.bottleneck == "hbm"
    assert rep.kpis.hbm_bound_percent == pytest.approx(60.0)
    assert len(d.conflicts) == 1
    assert "99.0%" in d.conflicts[0] and "a busy device is not a compute-bound device" in d.conflicts[0]
    assert any("disagreement" in r for r in d.confidence_reasons)
    # the top HBM ops are cited with their share
    cited = {e.signal: e.value for e in d.evidence}
    assert cited["op:fusion.softmax"] == pytest.approx(40.0)


def test_communication_bound_at_xprof_threshold_even_when_compute_is_larger() -> None:
    # 36% collectives vs 44% compute: collectives >= 30% are overhead on top of the work (XProf's rule).
    ops = [matmul("fusion.mlp", 0.44), streaming("fusion.x", 0.10), collective("all-gather.1", 0.36, group=8, category="all-gather")]
    rep = run_analysis(record(), profiled(ops, duty=99))
    d = rep.diagnosis
    assert d.bottleneck == "communication"
    assert "compute" in d.secondary
    assert any("30%" in r and "overhead" in r for r in d.confidence_reasons)
    assert any("busy device" in c for c in d.conflicts)


def test_below_the_collective_threshold_compute_stays_primary() -> None:
    ops = [matmul("fusion.mlp", 0.60), collective("all-gather.1", 0.25, group=8, category="all-gather")]
    rep = run_analysis(record(), profiled(ops, duty=90))
    assert rep.diagnosis.bottleneck == "compute"
    assert rep.diagnosis.secondary[0] == "communication"


def test_low_duty_cycle_with_input_wait_is_host_bound() -> None:
    ops = [matmul("fusion.mlp", 0.45), streaming("fusion.x", 0.10)]
    rep = run_analysis(record(), profiled(ops, duty=58, host_wait=38))
    d = rep.diagnosis
    assert d.bottleneck == "host"
    assert rep.kpis.idle_percent == pytest.approx(42.0)
    assert {"kpis.idle_percent", "kpis.host_wait_percent"} <= {e.signal for e in d.evidence}
    assert "input" in d.summary


def test_host_ops_without_overview_still_show_input_wait() -> None:
    # No overview page: infeed ops' device time is the input wait; idle comes from the step window.
    ops = [matmul("fusion.mlp", 0.40), host_op("infeed.1", 0.35)]
    rep = run_analysis(record(), profiled(ops))
    assert rep.kpis.host_wait_percent == pytest.approx(35.0)
    assert rep.kpis.device_duty_cycle_percent == pytest.approx(40.0)
    assert rep.diagnosis.bottleneck == "host"


def test_idle_without_input_wait_is_host_side_with_a_reason() -> None:
    rep = run_analysis(record(), profiled([matmul("fusion.mlp", 0.35)], duty=35))
    d = rep.diagnosis
    assert d.bottleneck == "host"
    assert any("not explained by input wait" in r for r in d.confidence_reasons)


def test_busy_device_at_99_percent_on_collectives_is_not_called_compute_bound() -> None:
    ops = [collective("all-reduce.grad", 0.50, group=8), matmul("fusion.mlp", 0.45)]
    rep = run_analysis(record(), profiled(ops, duty=99))
    d = rep.diagnosis
    assert d.bottleneck == "communication"
    assert rep.kpis.device_duty_cycle_percent == 99
    assert any("never idle" in c and "collectives" in c for c in d.conflicts)


def test_unknown_model_nulls_mfu_lists_the_inputs_and_lowers_confidence() -> None:
    known = run_analysis(record(), profiled(_compute_bound(), duty=97))
    unknown = run_analysis(record(model=False), profiled(_compute_bound(), duty=97))
    assert known.kpis.mfu_percent is not None
    assert unknown.kpis.mfu_percent is None
    line = next(u for u in unknown.unavailable if u.startswith("MFU"))
    for needed in ("model.layers", "model.d_model", "model.d_ff", "model.heads", "training.global_batch", "training.seq_len"):
        assert needed in line
    assert "run.yaml" in line
    assert unknown.diagnosis.bottleneck == known.diagnosis.bottleneck == "compute"
    assert unknown.diagnosis.confidence < known.diagnosis.confidence
    assert any("model unknown" in r for r in unknown.diagnosis.confidence_reasons)


def test_profile_roofline_raises_confidence_over_computed_one() -> None:
    computed = _compute_bound()
    from_profile = _compute_bound()
    for op in from_profile[:3]:
        op.bound_by = BoundBy.COMPUTE if op.name != "fusion.norm" else BoundBy.HBM
        op.roofline_efficiency = 0.6
    a = run_analysis(record(), profiled(computed, duty=97)).diagnosis
    b = run_analysis(record(), profiled(from_profile, duty=97)).diagnosis
    assert b.confidence > a.confidence
    assert any("computed from op FLOPs" in r for r in a.confidence_reasons)


def test_few_steps_and_close_call_lower_confidence() -> None:
    clear = run_analysis(record(), profiled(_compute_bound(), duty=97)).diagnosis
    # one step of 1 s holding the same op time (a one-step window)
    one_step = run_analysis(record(), profiled(_compute_bound(), duty=97, steps=1, step_us=10 * STEP_US)).diagnosis
    assert one_step.confidence < clear.confidence
    assert any("only 1 step" in r for r in one_step.confidence_reasons)

    close = [streaming("fusion.a", 0.45), matmul("fusion.b", 0.43)]
    d = run_analysis(record(), profiled(close, duty=95)).diagnosis
    assert d.bottleneck == "hbm"
    assert any(r.split(": ", 1)[1].startswith("close call") for r in d.confidence_reasons)
    assert d.confidence < clear.confidence


def test_near_optimal_from_mfu() -> None:
    ops = [matmul("fusion.mlp", 0.70, eff=0.75), matmul("fusion.attn", 0.22, eff=0.7), collective("all-reduce", 0.03, group=8)]
    rec = record(model=False, measured={"mfu_percent": 58.0})
    rep = run_analysis(rec, profiled(ops, duty=99))
    assert rep.kpis.mfu_percent == 58.0 and rep.kpis.mfu_source == "measured"
    assert rep.diagnosis.bottleneck == "compute"
    assert rep.diagnosis.near_optimal
    assert "near-optimal" in rep.diagnosis.summary


def test_near_optimal_from_roofline_efficiency_when_model_unknown() -> None:
    ops = [matmul("fusion.mlp", 0.60, eff=0.8), matmul("fusion.attn", 0.30, eff=0.75), streaming("fusion.n", 0.05)]
    assert run_analysis(record(model=False), profiled(ops, duty=99)).diagnosis.near_optimal
    slow = [matmul("fusion.mlp", 0.60, eff=0.3), matmul("fusion.attn", 0.30, eff=0.3), streaming("fusion.n", 0.05)]
    assert not run_analysis(record(model=False), profiled(slow, duty=99)).diagnosis.near_optimal


def test_low_mfu_with_compute_bound_ops_is_reported_as_a_conflict() -> None:
    ops = [matmul("fusion.mlp", 0.80, eff=0.5), collective("all-reduce", 0.05, group=8)]
    rec = record(training={"global_batch": 1, "seq_len": 512})  # little model math per step -> MFU ~7%
    d = run_analysis(rec, profiled(ops, duty=97)).diagnosis
    assert d.bottleneck == "compute"
    assert any("MFU is only" in c for c in d.conflicts)


def test_ops_without_roofline_data_are_counted_but_cost_confidence() -> None:
    ops = [
        OpStat("fusion.1", "fusion", OpKind.COMPUTE, 10, 0.7 * 1e6),  # no FLOPs or bytes
        collective("all-reduce", 0.1, group=8),
    ]
    d = run_analysis(record(), profiled(ops, duty=95)).diagnosis
    assert d.bottleneck == "compute"
    assert any("no FLOPs or byte counts" in r for r in d.confidence_reasons)
    assert any("cannot be told apart" in r for r in d.confidence_reasons)


def test_profile_without_ops_uses_the_step_breakdown() -> None:
    prof = profiled([], duty=96, communication_time_percent=45.0)
    rep = run_analysis(record(model=False), prof)
    assert rep.top_ops == []
    assert rep.kpis.collective_percent == 45.0
    assert rep.diagnosis.bottleneck == "communication"
    assert any("no op-level data" in r for r in rep.diagnosis.confidence_reasons)
    assert any(u.startswith("op roofline") for u in rep.unavailable)


def test_profiler_breakdown_disagreeing_with_ops_is_a_conflict() -> None:
    prof = profiled(_compute_bound(), duty=97, communication_time_percent=40.0)
    d = run_analysis(record(), prof).diagnosis
    assert any("profiler's own step breakdown" in c for c in d.conflicts)


def test_device_mismatch_is_warned_and_costs_confidence() -> None:
    same = run_analysis(record(), profiled(_compute_bound(), duty=97, device_kind="TPU v5p")).diagnosis
    other = run_analysis(record(), profiled(_compute_bound(), duty=97, device_kind="TPU v4"))
    assert any("recorded on TPU v4" in w for w in other.warnings)
    assert other.diagnosis.confidence < same.confidence


def test_confidence_is_bounded_and_reasons_are_signed_drops() -> None:
    rep = run_analysis(record(model=False), profiled([OpStat("x", "fusion", OpKind.OTHER, 1, 10.0)], steps=None, step_us=None))
    d = rep.diagnosis
    assert 0.0 <= d.confidence <= 1.0
    assert d.confidence <= 0.5
    assert all(r.startswith("-") or "%" in r for r in d.confidence_reasons)


def test_full_remat_with_hbm_headroom_is_a_lever_not_near_optimal() -> None:
    ops = [matmul("fusion.mlp", 0.70, eff=0.75), matmul("fusion.attn", 0.22, eff=0.7), collective("all-reduce", 0.03, group=8)]
    tight = run_analysis(record(model=False, measured={"mfu_percent": 58.0, "hbm_peak_bytes": 80e9},
                                training={"remat": "full"}), profiled(ops, duty=99)).diagnosis
    assert tight.near_optimal  # full remat is needed when HBM is 83% used
    roomy = run_analysis(record(model=False, measured={"mfu_percent": 58.0, "hbm_peak_bytes": 20e9},
                                training={"remat": "full"}), profiled(ops, duty=99)).diagnosis
    assert roomy.bottleneck == "compute" and not roomy.near_optimal
    assert "remat" in roomy.summary
    assert any("recomputed" in e.statement for e in roomy.evidence)


def test_device_family_mismatch_is_flagged_but_generic_names_of_the_right_family_are_not() -> None:
    gpu = run_analysis(record(chip="h100"), profiled(_compute_bound(), duty=97, device_kind="Nvidia GPU (Hopper)"))
    assert not any("recorded on" in w for w in gpu.warnings)
    wrong = run_analysis(record(chip="h100"), profiled(_compute_bound(), duty=97, device_kind="TPU"))
    assert any("recorded on 'TPU'" in w for w in wrong.warnings)


def test_nothing_to_attribute_says_so_with_minimal_confidence() -> None:
    d = run_analysis(record(model=False), profiled([], duty=None)).diagnosis
    assert d.confidence == 0.05
    assert d.summary.startswith("not enough data to diagnose")


def test_evidence_never_cites_negligible_ops() -> None:
    """An op under 1% of the step is noise, not evidence (run 311 has a 0.1% all-gather)."""
    from bot.analysis.analyze import analyze_run
    from bot.runs.store import LocalRunStore
    from tests.conftest import EXAMPLE_RUNS

    report = analyze_run(LocalRunStore(EXAMPLE_RUNS).get("311"))
    cited = [e for e in report.diagnosis.evidence if e.signal.startswith("op:")]
    assert cited, "the leading collectives should be cited"
    assert all(isinstance(e.value, float) and e.value >= 1.0 for e in cited), cited


@pytest.mark.parametrize(("remat", "says"), [
    ("none", "the run recomputes no activations (remat 'none'), so remat has nothing to give"),
    ("full", "a lighter rematerialization policy than 'full'"),
    (None, "a lighter rematerialization policy only if the run recomputes activations, which its config and "
           "run.yaml do not say"),
])
def test_near_optimal_names_remat_only_when_the_run_recomputes(remat: str | None, says: str) -> None:
    """Before: every near-optimal run was told gains come from the "rematerialization policy", even one that
    recomputes nothing."""
    ops = [matmul("fusion.mlp", 0.70, eff=0.75), matmul("fusion.attn", 0.22, eff=0.7), collective("all-reduce", 0.03, group=8)]
    training = {"training": {"remat": remat}} if remat else {}
    rec = record(model=False, measured={"mfu_percent": 58.0, "hbm_peak_bytes": 90e9}, **training)
    summary = run_analysis(rec, profiled(ops, duty=99)).diagnosis.summary
    assert "near-optimal" in summary and says in summary, summary
