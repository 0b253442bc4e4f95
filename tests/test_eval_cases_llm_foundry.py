"""MosaicML's MPT training benchmarks (mosaicml/llm-foundry scripts/train/benchmarking/README.md @ 495218376, section
"Results"; scripts/eval_cases_llm_foundry.py writes them): one PyTorch-FSDP trainer (Composer), MPT-125M to 70B,
512 to 65,536 tokens per sequence, 8 to 512 GPUs, each row at the largest micro-batch that fit:

===============================  ====  ==========================================================
table                            rows  e.g. (model TFLOP/s per GPU as published)
===============================  ====  ==========================================================
H100 80GB BF16 (large scale)      18   70b on 128 GPUs 428, on 512 GPUs 408; 1b / 3b with SHARD_GRAD_OP
H100 80GB BF16                    52   7b at 2048 tokens 459, at 65,536 tokens 282
H100 80GB FP8                      7   3b at 512 tokens 598, at 32,768 tokens 284
A100 80GB                         61   7b at 2048 tokens 200, 125m at 512 tokens 132
A100 40GB                         78   13b on 8 GPUs 137 (micro-batch 4), on 16 GPUs 163 (micro-batch 10)
===============================  ====  ==========================================================

Every row ran, most of them at the edge of the GPU's memory: a user who shows ASAP one of these configurations must
not be told it runs out of memory.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.proposals.evaluate import run_eval
from tests.published_cases import EVAL, assert_script_writes, load_script

PREFIX = "llmfoundry-"
CASES = sorted(p.name for p in EVAL.iterdir() if p.name.startswith(PREFIX))


def test_the_committed_cases_are_what_the_script_writes(tmp_path: Path) -> None:
    assert len(CASES) == 216
    assert_script_writes("eval_cases_llm_foundry", CASES, tmp_path)


def test_each_case_quotes_its_row_and_states_what_mpt_runs() -> None:
    case = EVAL / "llmfoundry-a100-40gb-mpt-13b-s2048-128gpu-mb16"
    expected = yaml.safe_load((case / "expected.yaml").read_text())
    assert "| 13b | 2048 | 128 | a100_40gb | 51.93 | 69.24 | 162 | 16 | 1 | 2048 |" in expected["stated"][1]
    assert expected["measured"][0]["tokens_per_second_per_chip"] == 1972.0
    assert expected["url"].endswith("495218376830947dce625efabc4d86be7c47cc45/scripts/train/benchmarking/README.md")
    mesh = (case / "mesh.yml").read_text()
    assert "ici_mesh: {fsdp: 8}" in mesh and "dcn_mesh: {fsdp: 16}" in mesh
    assert "cross_entropy_loss_fusion: true" in mesh and "attention: flash" in mesh
    run = yaml.safe_load((case / "run.yaml").read_text())
    assert run["chip"] == "a100-40gb" and run["training"]["remat"] == "full"
    assert run["model"]["d_ff"] == 4 * run["model"]["d_model"] and run["model"]["tied_embeddings"] is True


def test_every_row_is_a_case_with_its_sharding_strategy() -> None:
    """The H100 large-scale table ran its 1B and 3B rows with SHARD_GRAD_OP: their mesh file says so, and ASAP prices
    one all-gather per micro-batch and the whole gathered model in memory for them."""
    mod = load_script("eval_cases_llm_foundry")
    tables = mod.parse_tables(mod.DATA.read_text())
    rows = [r for t in mod.TABLES for r in tables[t]]
    assert len(rows) == len(CASES) == 216
    zero2 = [c for c in CASES if "sharding_strategy: SHARD_GRAD_OP" in (EVAL / c / "mesh.yml").read_text()]
    assert len(zero2) == sum(r["Sharding Strategy"] == "SHARD_GRAD_OP" for r in rows) == 6
    assert all("-ls-mpt-1b-" in c or "-ls-mpt-3b-" in c for c in zero2)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("llmfoundry")
    for case in CASES:
        (root / case).symlink_to(EVAL / case)
    return run_eval(root)


def test_no_configuration_that_ran_is_called_out_of_memory(report) -> None:  # type: ignore[no-untyped-def]
    """Before the cross-entropy kernel was a setting, 72 of the 210 FULL_SHARD rows (every small model at its largest micro-batch)
    were called out of memory: the logits priced at eager PyTorch's 12 bytes where MPT's fused loss keeps 4."""
    points = [p for c in report.cases for p in c.points]
    assert len(points) == 216 and not any(c.error for c in report.cases)
    assert [p.mesh for p in points if p.predicted_oom] == []
    assert [p.mesh for p in points if p.critic_rejects] == []


def test_throughput_is_predicted_within_the_published_band(report) -> None:  # type: ignore[no-untyped-def]
    """Untuned, the step time ASAP predicts for the 216 rows is within 20% of the measured one for most rows and the
    measured step lies inside the stated band for nearly all of them."""
    points = [p for c in report.cases for p in c.points]
    errors = sorted(abs(p.predicted_step_ms / p.measured_step_ms - 1.0) for p in points)
    assert errors[len(errors) // 2] < 0.15
    inside = sum(p.predicted_band_ms[0] <= p.measured_step_ms <= p.predicted_band_ms[1] for p in points)
    assert inside >= 0.9 * len(points)


def test_shard_grad_op_gathers_once_and_holds_the_whole_model() -> None:
    """MPT-3B on 512 H100s ran SHARD_GRAD_OP (H100 large-scale table): FSDP's weights gathered once per micro-batch and
    kept to backward. Against FULL_SHARD on the same mesh: two thirds of the FSDP traffic (one all-gather and one
    reduce-scatter instead of two and one), and the whole bf16 model (2.65e9 x 2 bytes) in memory, not two layers."""
    from tests.published_cases import predict_case

    case = "llmfoundry-h100-bf16-ls-mpt-3b-s2048-512gpu-mb8"
    kept, full = predict_case(case), predict_case(case, fsdp_sharding_strategy="full_shard")
    assert kept.breakdown_ms["comm.fsdp"] == pytest.approx(full.breakdown_ms["comm.fsdp"] * 2.0 / 3.0, rel=1e-6)
    extra = (kept.memory_breakdown_bytes["weights"] - full.memory_breakdown_bytes["weights"]) / 1e9
    assert 4.5 < extra < 5.5
    assert any("SHARD_GRAD_OP" in a for a in kept.assumptions)
