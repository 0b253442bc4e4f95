"""One attribution of the step: the profile's bound_by, its step window and its own breakdown lead.

Issue 12 item 1: a collective XProf marks HBM-bound is HBM time; op totals over a window of many steps are
per-step figures; a top-N export covering a tenth of the step cannot outvote the profiler's step breakdown;
the headline, the KPI table and the evidence come from one attribution; with no op data the answer says what
it cannot tell.
"""

from __future__ import annotations

import pytest
from test_analysis_support import STEP_US, collective, matmul, profiled, record, run_analysis, streaming

from bot.profiles.model import BoundBy
from knowledge.hardware import get_chip

V5P = get_chip("tpu-v5p")


def _hbm_bound_collective(name: str, share: float, category: str = "all-reduce") -> object:
    op = collective(name, share, group=8, category=category)
    op.bound_by = BoundBy.HBM
    op.bytes_accessed = 0.7 * V5P.hbm_bandwidth * op.total_time_us * 1e-6  # streams HBM at 70% of peak
    return op


def test_a_run_whose_top_collectives_are_hbm_bound_is_diagnosed_hbm() -> None:
    ops = [
        _hbm_bound_collective("all-reduce.1", 0.30),
        _hbm_bound_collective("all-reduce.2", 0.12),
        matmul("fusion.mlp", 0.35),
        streaming("fusion.norm", 0.10),
    ]
    rep = run_analysis(record(), profiled(ops, duty=97))
    d = rep.diagnosis
    assert d.bottleneck == "hbm"
    assert d.summary.startswith("HBM-bandwidth-bound")
    assert rep.kpis.collective_percent == pytest.approx(0.0)
    assert rep.kpis.hbm_bound_percent == pytest.approx(52.0)
    assert any("all-reduce.1" in c and "bound_by" in c for c in d.conflicts)
    assert "op:all-reduce.1" in {e.signal for e in d.evidence}


def test_a_top_five_export_does_not_outvote_the_profilers_step_breakdown() -> None:
    # Five ops covering 10% of the step (11% of its busy time), 6% of it in collectives; the profiler measured
    # 7.5% collectives and a 95% duty cycle over the whole step.
    ops = [
        collective("all-reduce.1", 0.035, group=8),
        collective("all-gather.1", 0.025, group=8, category="all-gather"),
        matmul("fusion.mlp", 0.02),
        matmul("fusion.attn", 0.01),
        streaming("fusion.norm", 0.01),
    ]
    rep = run_analysis(record(), profiled(ops, duty=95.0, communication_time_percent=7.5))
    k, d = rep.kpis, rep.diagnosis
    assert k.attribution_source == "profile"
    assert k.op_coverage_percent == pytest.approx(100 * 10.0 / 95.0, abs=0.01)  # of the busy 95% of the step
    assert k.collective_percent == pytest.approx(7.5)
    assert d.bottleneck == "compute"
    # busy time outside collectives (87.5%) split compute:HBM as the visible ops are (3:1)
    assert k.compute_bound_percent == pytest.approx(87.5 * 0.75, abs=0.1)
    assert "cover only 11%" in d.summary
    assert any("cover only 11%" in r for r in d.confidence_reasons)


def test_op_totals_over_a_window_of_many_steps_are_per_step_figures() -> None:
    # The export lists 10% of the op time (hlo_stats total_self_time_percent) of a 30-step window and no
    # step count: the step count comes from the op table's own share, so no op exceeds the step.
    ops = [matmul("fusion.mlp", 2.0), collective("all-reduce.1", 1.0, group=8)]  # 3 steps' worth of op time
    prof = profiled(ops, steps=None, duty=96.0, communication_time_percent=33.0, op_time_fraction=0.1)
    rep = run_analysis(record(), prof)
    assert any("inferred 30" in w for w in rep.warnings)
    assert rep.kpis.op_coverage_percent == pytest.approx(100 * 10.0 / 96.0, abs=0.01)
    assert all(op.time_percent <= 100.0 for op in rep.top_ops)
    assert rep.top_ops[0].time_per_step_ms == pytest.approx(2.0 * STEP_US / 30 / 1000)


def test_headline_kpi_table_and_evidence_agree_when_ops_lack_roofline_data() -> None:
    # A real JAX trace gives op times but no FLOPs/bytes for most fusions: the headline used to count
    # them as compute while the KPI table said 0% compute-bound.
    from bot.profiles.model import OpKind, OpStat

    ops = [OpStat(f"fusion.{i}", "fusion", OpKind.COMPUTE, 10, 0.2 * 10 * STEP_US) for i in range(4)]
    ops.append(collective("all-reduce.1", 0.1, group=8))
    rep = run_analysis(record(), profiled(ops))
    d, k = rep.diagnosis, rep.kpis
    assert k.compute_bound_percent == pytest.approx(100 * d.scores["compute"])
    assert f"{100 * d.scores['compute']:.0f}%" in d.summary
    first = next(e for e in d.evidence if e.signal == "kpis.compute_bound_percent")
    assert first.value == pytest.approx(k.compute_bound_percent)


def test_with_no_op_data_the_answer_says_what_it_cannot_tell() -> None:
    rep = run_analysis(record(), profiled([], duty=92.0, communication_time_percent=12.0))
    d = rep.diagnosis
    assert not d.summary.startswith("compute-bound")
    assert "cannot be told" in d.summary
    assert rep.kpis.attribution_source == "breakdown"
    assert rep.kpis.compute_bound_percent is None
    assert d.evidence[0].signal == "kpis.device_duty_cycle_percent"
    assert all("n/a" not in e.statement for e in d.evidence)


def test_an_op_table_covering_more_steps_than_the_step_table_lists_is_divided_by_its_own_window() -> None:
    # The overview lists 10 steps of 100 ms (95% busy) but the op table sums 30 steps' device time: dividing
    # by 10 would put 285% of the step in ops. It covers ~30 steps; each op's share is of that window.
    ops = [matmul("fusion.mlp", 2.4), collective("all-reduce.1", 0.45, group=8)]  # x WINDOW_US (10 steps)
    rep = run_analysis(record(), profiled(ops, duty=95.0))
    assert any("covers ~30 steps" in w for w in rep.warnings)
    assert rep.kpis.compute_bound_percent == pytest.approx(80.0, abs=0.5)
    assert rep.kpis.collective_percent == pytest.approx(15.0, abs=0.5)
    assert rep.kpis.op_coverage_percent == pytest.approx(100.0, abs=0.5)  # all of the busy time


def test_a_real_jax_trace_headline_matches_its_kpi_table() -> None:
    # examples/runs/jax-cpu-8dev: a real sharded JAX run (scripts/jax_sample_run.py, docs/real-jax-run.md);
    # trace op times with no FLOPs/bytes for most fusions, which once read "80% compute-bound" in the headline
    # above a KPI table showing 0.0% compute-bound.
    import re
    from pathlib import Path

    from bot.analysis.analyze import analyze_run
    from bot.runs.store import LocalRunStore

    runs = Path(__file__).resolve().parents[1] / "examples" / "runs"
    rep = analyze_run(LocalRunStore(runs).get("jax-cpu-8dev"))
    k, d = rep.kpis, rep.diagnosis
    kpi = {"compute": k.compute_bound_percent, "hbm": k.hbm_bound_percent, "communication": k.collective_percent}
    assert k.attribution_source == "ops"
    shown = dict(re.findall(r"(compute|hbm|communication) (\d+)%", d.summary))
    lead = re.match(r"[\w/-]+-bound: (\d+)%", d.summary)
    assert lead is not None and int(lead.group(1)) == round(kpi[d.bottleneck])
    for resource, pct in shown.items():
        assert int(pct) == round(kpi[resource])
    cited = {e.signal: e.value for e in d.evidence}
    assert cited.get(f"kpis.{'collective_percent' if d.bottleneck == 'communication' else d.bottleneck + '_bound_percent'}") == kpi[d.bottleneck]


def test_an_idle_input_bound_device_is_not_a_partial_op_table() -> None:
    # 55% idle waiting on input: the ops cover all of the busy 45%, so the op table leads.
    ops = [matmul("fusion.mlp", 0.35), streaming("fusion.x", 0.10)]
    rep = run_analysis(record(), profiled(ops, duty=45.0, host_wait=50.0))
    assert rep.kpis.op_coverage_percent == pytest.approx(100.0, abs=0.5)
    assert rep.kpis.attribution_source == "ops"
    assert rep.diagnosis.bottleneck == "host"
    assert "cover only" not in rep.diagnosis.summary
