"""KPIs: step time sources, duty cycle, MFU (hand-checked formula), HBM use, and what is unavailable."""

from __future__ import annotations

import pytest
from test_analysis_support import STEP_US, collective, matmul, profiled, record, run_analysis, streaming

from bot.analysis.kpis import model_flops_per_step
from bot.profiles.model import OpKind, OpStat


def _ops() -> list[OpStat]:
    return [matmul("fusion.mm", 0.6), streaming("fusion.ln", 0.2), collective("all-reduce", 0.1, group=8)]


def test_step_time_prefers_the_profile_then_measured_then_op_sum() -> None:
    rec = record(measured={"step_time_ms": 120.0})
    assert run_analysis(rec, profiled(_ops())).kpis.step_time_source == "profile"

    k = run_analysis(rec, profiled(_ops(), step_us=None)).kpis
    assert (k.step_time_ms, k.step_time_source) == (120.0, "measured")

    rep = run_analysis(record(), profiled(_ops(), step_us=None))
    assert rep.kpis.step_time_source == "op-sum"
    assert rep.kpis.step_time_ms == pytest.approx(90.0)  # 90% of the 100 ms steps is op time
    assert any("sum of op time" in w for w in rep.warnings)
    assert rep.kpis.device_duty_cycle_percent is None  # op-sum cannot see idle time


def test_no_step_time_at_all_is_unavailable_with_the_unlocking_input() -> None:
    rep = run_analysis(record(), profiled(_ops(), steps=None, step_us=None))
    assert rep.kpis.step_time_ms is None and rep.kpis.mfu_percent is None
    assert any(u.startswith("step time:") and "measured.step_time_ms" in u for u in rep.unavailable)
    # shares fall back to the profiled op time
    assert rep.kpis.compute_bound_percent == pytest.approx(100 * 0.6 / 0.9, abs=0.01)


def test_duty_cycle_from_ops_when_the_profile_has_none() -> None:
    k = run_analysis(record(), profiled(_ops())).kpis
    assert k.device_duty_cycle_percent == pytest.approx(90.0)
    assert k.idle_percent == pytest.approx(10.0)
    assert k.collective_percent == pytest.approx(10.0)
    assert k.compute_bound_percent == pytest.approx(60.0)
    assert k.hbm_bound_percent == pytest.approx(20.0)


def test_profile_duty_cycle_is_used_as_reported() -> None:
    k = run_analysis(record(), profiled(_ops(), duty=87.5)).kpis
    assert k.device_duty_cycle_percent == 87.5 and k.idle_percent == 12.5


def test_mfu_matches_the_hand_computed_formula() -> None:
    rec = record(
        model={"params": 1e9, "layers": 10, "d_model": 1024, "heads": 8},
        training={"global_batch": 4, "seq_len": 1000},
    )
    tokens = 4 * 1000
    flops = 6 * 1e9 * tokens + 12 * 10 * 1000 * (8 * 128) * tokens  # 6N + 12·L·T·(H·Q) per token (PaLM App. B)
    expected = 100 * flops / (STEP_US * 1e-6 * 8 * 4.59e14)
    k = run_analysis(rec, profiled(_ops())).kpis
    assert k.mfu_percent == pytest.approx(expected, abs=0.01)
    assert k.mfu_source == "computed"
    assert k.tokens_per_second == pytest.approx(tokens / 0.1)


def test_moe_counts_only_active_experts() -> None:
    dense = record(model={"layers": 4, "d_model": 512, "d_ff": 2048, "heads": 8}, training={"global_batch": 8, "seq_len": 512})
    moe = record(
        model={"layers": 4, "d_model": 512, "d_ff": 2048, "heads": 8, "experts": 8, "experts_per_token": 1},
        training={"global_batch": 8, "seq_len": 512},
    )
    # top-1 of 8 experts does the same math per token as the dense model, though it has ~8x the MLP weights
    assert model_flops_per_step(moe).per_step == pytest.approx(model_flops_per_step(dense).per_step)
    assert moe.model.derived_params() > 4 * dense.model.derived_params()


def test_params_without_shape_gives_mfu_without_attention_and_says_so() -> None:
    rec = record(model={"params": 1e9}, training={"global_batch": 4, "seq_len": 1000})
    rep = run_analysis(rec, profiled(_ops()))
    assert rep.kpis.mfu_percent == pytest.approx(100 * 6e9 * 4000 / (0.1 * 8 * 4.59e14), abs=0.01)
    assert any("attention FLOPs" in w for w in rep.warnings)


def test_impossible_mfu_is_refused_not_reported() -> None:
    rec = record(training={"global_batch": 512, "seq_len": 8192})
    rep = run_analysis(rec, profiled(_ops()))
    assert rep.kpis.mfu_percent is None
    assert any("above the physical 100%" in u for u in rep.unavailable)


def test_measured_mfu_disagreeing_with_computed_is_warned() -> None:
    rep = run_analysis(record(measured={"mfu_percent": 10.0}), profiled(_ops()))
    assert rep.kpis.mfu_source == "computed"
    assert any("measured.mfu_percent" in w for w in rep.warnings)


def test_hbm_use_from_profile_or_measured_against_capacity() -> None:
    prof = profiled(_ops())
    prof.peak_hbm_bytes = 72e9
    k = run_analysis(record(), prof).kpis
    assert (k.hbm_used_bytes, k.hbm_capacity_bytes, k.hbm_use_percent) == (72e9, 96e9, 75.0)

    k = run_analysis(record(measured={"hbm_peak_bytes": 90e9}), profiled(_ops())).kpis
    assert k.hbm_use_percent == pytest.approx(93.75)

    rep = run_analysis(record(), profiled(_ops()))
    assert rep.kpis.hbm_used_bytes is None and rep.kpis.hbm_use_percent is None
    assert any(u.startswith("HBM use:") and "measured.hbm_peak_bytes" in u for u in rep.unavailable)


def test_nearly_full_hbm_is_cited_as_evidence() -> None:
    d = run_analysis(record(measured={"hbm_peak_bytes": 93e9}), profiled(_ops())).diagnosis
    assert any(e.signal == "kpis.hbm_use_percent" for e in d.evidence)


def test_overlapping_ops_are_warned_and_shares_use_op_time() -> None:
    ops = [matmul("fusion.mm", 0.9), collective("all-reduce", 0.6, group=8)]  # 150% of the window
    rep = run_analysis(record(), profiled(ops, duty=99))
    assert any("ops overlap" in w for w in rep.warnings)
    assert rep.kpis.collective_percent == pytest.approx(40.0)
    assert any("upper bound" in r for r in rep.diagnosis.confidence_reasons)


def test_unknown_step_count_is_inferred_from_op_time() -> None:
    rep = run_analysis(record(), profiled(_ops(), steps=None))
    assert any("inferred 9" in w for w in rep.warnings)
    assert rep.top_ops[0].time_per_step_ms == pytest.approx(600 / 9, rel=1e-3)


def test_achieved_flop_rate_uses_profile_flops() -> None:
    k = run_analysis(record(), profiled([matmul("fusion.mm", 0.5, eff=0.6)])).kpis
    assert k.achieved_tflops_per_chip == pytest.approx(0.5 * 0.6 * 459, abs=0.01)


def test_host_op_and_idle_ops_are_not_busy_time() -> None:
    ops = [matmul("fusion.mm", 0.5), OpStat("IDLE", "idle", OpKind.IDLE, 10, 0.3 * 1e6)]
    k = run_analysis(record(), profiled(ops)).kpis
    assert k.device_duty_cycle_percent == pytest.approx(50.0)


def test_a_reported_mfu_under_another_convention_is_explained_not_hidden() -> None:
    """Run 123's job reports 55.9% MFU; ASAP's PaLM-convention figure differs and the report says why."""
    from bot.analysis.analyze import analyze_run
    from bot.runs.store import LocalRunStore
    from tests.conftest import EXAMPLE_RUNS

    report = analyze_run(LocalRunStore(EXAMPLE_RUNS).get("123"))
    assert report.kpis.mfu_source == "computed"
    notes = [w for w in report.warnings if "the job reports MFU 55.9%" in w]
    assert notes and "PaLM" in notes[0]
