"""NeMo's long-sequence pre-training tables (NVIDIA/NeMo docs/source/performance/performance_long_sequence.md @
a2c4cc8ee6; scripts/eval_cases_nemo_long_context.py writes them): one model trained at 4K-1M tokens per sequence with
Megatron-Core context parallelism, the with-CP layout and TFLOP/s per GPU of each row:

==========  ============================  ============================================  =========================
table       model, container              layouts (TP / PP / DP / CP)                   TFLOP/s per GPU, 4K/8K -> 1M
==========  ============================  ============================================  =========================
DGX-H100    Llama 2 7B FP8, NeMo 24.03.01  1/1/4/1 at 4K ... 8/1/4/32 at 1M, 4-1024 GPUs   768, 730, 660, 610, 574, 555, 549, 549, 536
DGX-B200    Llama 3 8B FP8, NeMo 25.04.rc2 1/1/2/1 at 8K ... 4/1/4/16 at 1M, 2-256 GPUs    1671, 1717, 1624, 1600, 1588, 1590, 1619, 1608
==========  ============================  ============================================  =========================

As the sequence grows, attention goes from ~10% to ~97% of the FLOPs and the K/V ring passes of context parallelism
come onto the step: what a user asking "which CP for 256K?" needs priced.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from bot.analysis.kpis import model_flops_per_step
from bot.proposals.eval_figures import spearman
from bot.runs.store import LocalRunStore
from tests.published_cases import EVAL, assert_script_writes, predict_case

H100 = [("4k-4gpu", 768), ("8k-8gpu", 730), ("16k-16gpu", 660), ("32k-32gpu", 610), ("64k-64gpu", 574),
        ("128k-128gpu", 555), ("256k-256gpu", 549), ("512k-512gpu", 549), ("1024k-1024gpu", 536)]
B200 = [("8k-2gpu", 1671), ("16k-4gpu", 1717), ("32k-8gpu", 1624), ("64k-16gpu", 1600), ("128k-32gpu", 1588),
        ("256k-64gpu", 1590), ("512k-128gpu", 1619), ("1024k-256gpu", 1608)]
H100_CASES = [f"nemo-long-context-h100-llama2-7b-{r}" for r, _ in H100]
B200_CASES = [f"nemo-long-context-b200-llama3-8b-{r}" for r, _ in B200]
CASES = H100_CASES + B200_CASES


def test_the_committed_cases_are_what_the_script_writes(tmp_path: Path) -> None:
    assert_script_writes("eval_cases_nemo_long_context", CASES, tmp_path)


def test_each_case_states_its_row_and_layout() -> None:
    """The 1M-token H100 row runs TP 8 in a node and CP 32 x DP 4 across 128 nodes; the B200 table's GPU count is the
    layout's (its first version's), and the case says why it differs from the reformatted table."""
    h100 = yaml.safe_load((EVAL / H100_CASES[-1] / "expected.yaml").read_text())
    assert h100["adopted_mesh"] == {"ici": {"tensor": 8}, "dcn": {"sequence": 32, "data": 4}}
    assert h100["measured"][0]["tflops_per_chip"] == 536.0
    b200 = yaml.safe_load((EVAL / B200_CASES[-1] / "expected.yaml").read_text())
    assert LocalRunStore(EVAL).get(B200_CASES[-1]).record.num_chips == 256
    assert any("not the row's '# of GPUs' 1024" in a for a in b200["assumed"])
    run = yaml.safe_load((EVAL / B200_CASES[-1] / "run.yaml").read_text())
    assert run["training"]["seq_len"] == 1024 * 1024


def _predicted_tflops(case: str) -> float:
    """ASAP's predicted model TFLOP/s per GPU: the model-FLOP count (PaLM's 6N + 12LHQT, the count NeMo's formula
    makes) over the predicted step."""
    run = LocalRunStore(EVAL).get(case)
    flops = model_flops_per_step(run.record).per_step
    assert flops is not None
    return flops / run.record.num_chips / (predict_case(case).step_time_ms / 1000.0) / 1e12


def test_h100_throughput_falls_with_sequence_length_as_measured() -> None:
    """Measured 768 TFLOP/s per GPU at 4K down to 536 at 1M as attention takes over the FLOPs (12 x layers x hidden x
    sequence per token) and CP rings K/V: ASAP ranks the nine rows in the measured order (Spearman >= 0.95) and keeps
    every row within 20% of the measured figure after one scale for the table."""
    predicted = [_predicted_tflops(c) for c in H100_CASES]
    measured = [float(t) for _, t in H100]
    assert spearman(measured, predicted) >= 0.95
    scale = float(np.median(np.array(measured) / np.array(predicted)))
    assert all(abs(scale * p / m - 1.0) < 0.20 for p, m in zip(predicted, measured, strict=True)), predicted
    # the longest sequences cost more per FLOP than the shortest, as measured (536 vs 768)
    assert predicted[-1] < 0.8 * predicted[0]


@pytest.mark.parametrize("case", ["nemo-long-context-h100-llama2-7b-1024k-1024gpu",
                                  "nemo-long-context-b200-llama3-8b-1024k-256gpu"])
def test_a_million_token_step_is_attention_and_ring_passes(case: str) -> None:
    """At 1M tokens per sequence the step is the attention core (over 90% of the FLOPs), and context parallelism's
    K/V ring passes are priced on the CP axis; the run fits in memory (it ran), and the answer names recompute as
    not stated rather than guessing it."""
    pred = predict_case(case)
    assert pred.breakdown_ms["compute"] > 0.85 * pred.step_time_ms
    assert pred.breakdown_ms.get("comm.sequence", 0.0) > 0.0
    assert pred.fits_memory
    assert any("remat policy not given" in a for a in pred.assumptions)


@pytest.mark.parametrize("case", CASES)
def test_every_row_ran_and_its_band_holds_the_measured_step(case: str) -> None:
    """Each row ran: ASAP must not call it out of memory, and its step-time band must hold the measured step."""
    run = LocalRunStore(EVAL).get(case)
    pred = predict_case(case)
    measured = yaml.safe_load((EVAL / case / "expected.yaml").read_text())["measured"][0]["tflops_per_chip"]
    flops = model_flops_per_step(run.record).per_step
    assert flops is not None
    measured_ms = flops / run.record.num_chips / (measured * 1e12) * 1000.0
    assert pred.fits_memory
    assert pred.step_time_low_ms <= measured_ms <= pred.step_time_high_ms
