"""Profile-relative predictions (model unknown): the measured step's terms move by how a change moves them."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.analysis.analyze import analyze_run
from bot.configs.mesh import Mesh
from bot.profiles.loader import load_profile
from bot.runs.store import LocalRunStore
from knowledge.cost_relative import predict_relative, profile_baseline
from knowledge.hardware import get_chip

RUNS = Path(__file__).resolve().parents[1] / "examples" / "runs"


@pytest.fixture(scope="module")
def dcn_bound():  # type: ignore[no-untyped-def]
    run = LocalRunStore(RUNS).get("520")  # 8 x v5e-16 slices, fsdp=16 ICI x data=8 DCN, model not recorded
    report = analyze_run(run)
    chip = get_chip(run.record.chip)
    base = Mesh(ici={"fsdp": 16}, dcn={"data": 8})
    rb = profile_baseline(report=report, profile=load_profile(run), mesh=base, chip=chip, num_chips=128,
                          num_slices=8, global_batch=128, seq_len=2048, remat_flop_factor=4 / 3)
    return run, report, chip, base, rb


def test_baseline_splits_the_step_into_measured_terms(dcn_bound) -> None:  # type: ignore[no-untyped-def]
    _, report, chip, base, rb = dcn_bound
    assert rb.step_ms == pytest.approx(report.kpis.step_time_ms)
    dcn = [c for c in rb.collectives if c.network == "dcn"]
    assert [c.axis for c in dcn] == ["data"] and dcn[0].ms > 300  # the gradient all-reduce across slices
    assert any(c.axis == "fsdp" and c.network == "ici" for c in rb.collectives)
    total = rb.compute_ms + rb.fixed_ms + sum(c.ms for c in rb.collectives) + rb.unattributed_ms
    assert total == pytest.approx(rb.step_ms, rel=1e-6)
    # parameters inferred from the profile's FLOPs: a ~7B model (the config names llama2-7b)
    assert rb.params is not None and 5e9 < rb.params < 9e9
    assert "inferred from the profile" in rb.params_source
    same = predict_relative(rb, base, base, chip, 128)
    assert same.step_time_ms == pytest.approx(rb.step_ms, rel=1e-6)


def test_larger_batch_amortizes_the_dcn_allreduce(dcn_bound) -> None:  # type: ignore[no-untyped-def]
    _, _, chip, base, rb = dcn_bound
    more = predict_relative(rb, base, base, chip, 128, tokens_factor=2.0)
    assert more.step_time_ms > rb.step_ms  # twice the tokens take longer per step
    assert more.step_time_ms / 2 < rb.step_ms * 0.9  # but less time per token
    assert more.breakdown_ms["comm.data"] == pytest.approx(
        next(c.ms for c in rb.collectives if c.axis == "data"))  # same gradient bytes once per step
    accum = predict_relative(rb, base, base, chip, 128, tokens_factor=2.0, accum_factor=2.0)
    assert accum.breakdown_ms["comm.fsdp"] > more.breakdown_ms["comm.fsdp"]  # weights re-gathered per micro-batch


def test_pipeline_across_slices_trades_the_allreduce_for_a_bubble(dcn_bound) -> None:  # type: ignore[no-untyped-def]
    _, _, chip, base, rb = dcn_bound
    pp = predict_relative(rb, base, Mesh(ici={"fsdp": 16}, dcn={"pipeline": 8}), chip, 128)
    assert "comm.data" not in pp.breakdown_ms or pp.breakdown_ms["comm.data"] == 0
    assert pp.breakdown_ms["pipeline_bubble"] > 0 and pp.breakdown_ms["comm.pipeline"] > 0
    assert pp.uncertainty > predict_relative(rb, base, Mesh(ici={"data": 2, "fsdp": 8}, dcn={"data": 8}), chip,
                                              128).uncertainty  # new traffic rests on inferred sizes
    assert any("layer count" in a for a in pp.assumptions)
    hybrid = predict_relative(rb, base, Mesh(ici={"fsdp": 16}, dcn={"data": 4, "pipeline": 2}), chip, 128)
    base_dcn = next(c.ms for c in rb.collectives if c.axis == "data")
    assert hybrid.breakdown_ms["comm.data"] < base_dcn  # half the gradient per slice, fewer ring steps


def test_trading_ici_fsdp_for_data_keeps_dcn_bytes_but_adds_an_ici_stage(dcn_bound) -> None:  # type: ignore[no-untyped-def]
    # Two-level all-reduce: the gradient shard doubles (fsdp 16 -> 8), but it is reduce-scattered over the
    # 2-way ICI data axis first, so each chip still sends the same bytes over DCN; the ICI stage is added.
    _, _, chip, base, rb = dcn_bound
    alt = predict_relative(rb, base, Mesh(ici={"data": 2, "fsdp": 8}, dcn={"data": 8}), chip, 128)
    base_dcn = next(c.ms for c in rb.collectives if c.axis == "data" and c.network == "dcn")
    assert base_dcn < alt.breakdown_ms["comm.data"] < 1.5 * base_dcn
    assert alt.step_time_ms > rb.step_ms  # no help for a DCN-bound step


def test_parameter_count_from_the_allreduce_payload_when_the_profile_gives_bytes(dcn_bound) -> None:  # type: ignore[no-untyped-def]
    import copy

    run, report, chip, base, _ = dcn_bound
    profile = copy.deepcopy(load_profile(run))
    ar = next(op for op in profile.ops if op.name.startswith("all-reduce"))
    # 6.74B bf16 gradients over 16 ICI shards, split into the op's occurrences per step
    per_step = 6.74e9 * 2 / 16
    ar.collective_bytes = per_step * profile.num_steps / ar.occurrences  # type: ignore[operator]
    rb = profile_baseline(report=report, profile=profile, mesh=base, chip=chip, num_chips=128, num_slices=8,
                          global_batch=128, seq_len=2048, remat_flop_factor=4 / 3)
    assert rb.params == pytest.approx(6.74e9, rel=1e-6)
    assert "payload" in rb.params_source
