"""GB300 runs a configuration faster than GB200 at the same catalog peak: its fitted matmul efficiency says so.

NVIDIA publishes the same dense fp8 peak for both (720 PFLOPS sparse per NVL72 rack), yet Megatron-Bridge measures
GB300 faster at identical configurations (docs/performance-summary-archive.md @ 067f987df0, 25.11 container, and
docs/performance-summary.md @ 63b08b397a3e, 26.06 container), tokens/s/GPU GB300 vs GB200:

* Llama 3 8B, 8 GPUs, FP8-CS, DP 8:               37,556 vs 31,508 (+19%)
* Qwen3 30B-A3B, 8 GPUs, EP 8:                    28,934 vs 23,766 (+22%)
* Llama 3 70B, 64 GPUs, FSDP:                     4,520 vs 4,312 (+5%)
* Llama 3 70B LoRA, 8 GPUs, FP8, DP 4 PP 2:       7,481 vs 6,206 (+21%)

Before the fit ASAP predicted the same step for both, which cost the 26.06 LoRA table its ranking (Spearman 0.70).
The catalog's GB300 ``matmul_efficiency`` was fitted across these pairs and the Nemotron 3 Nano pair at 0.85 against
GB200's 0.75 (docs/cost-model.md, "GB300 against GB200"); the Blackwell refit of GEMMs and attention scaled both by the
same factor (0.75 against 0.66: "Blackwell: attention core and GEMMs"), keeping their ratio.
"""

from __future__ import annotations

import pytest

from knowledge.cost_core import DEFAULT_EFFICIENCY
from knowledge.hardware import get_chip
from tests.published_cases import predict_case

# (case stem with {chip}, measured GB200 / GB300 step ratio from the tokens/s/GPU above)
PAIRS = [
    ("mbridge-25.11-{chip}-llama3-8b-8gpu", 37556 / 31508),
    ("mbridge-25.11-{chip}-qwen3-30b-a3b-8gpu", 28934 / 23766),
    ("mbridge-26.06-{chip}-llama3-70b-lora-8gpu-fp8", 7481 / 6206),
]


def test_the_catalog_gives_gb300_a_higher_fitted_efficiency_than_gb200() -> None:
    gb300, gb200 = get_chip("gb300").matmul_efficiency, get_chip("gb200").matmul_efficiency
    assert gb300 == 0.75 and gb200 == 0.66
    assert gb300 / gb200 == pytest.approx(0.85 / DEFAULT_EFFICIENCY, rel=0.01)  # the pairs' fit, kept by the refit
    # the vendor peaks stay the published ones: the gap is an achieved-rate fit, not a changed datasheet figure
    assert get_chip("gb300").peak_fp8_flops == get_chip("gb200").peak_fp8_flops


@pytest.mark.parametrize(("stem", "measured_ratio"), PAIRS)
def test_gb300_is_predicted_faster_than_gb200_on_compute_bound_published_pairs(stem: str,
                                                                              measured_ratio: float) -> None:
    gb200 = predict_case(stem.format(chip="gb200"))
    gb300 = predict_case(stem.format(chip="gb300"))
    assert gb200.mesh == gb300.mesh
    predicted_ratio = gb200.step_time_ms / gb300.step_time_ms
    # measured +19% to +22%; the one efficiency predicts +7% to +13% on these (the Qwen3 row's MoE host time does
    # not scale with it) and stays within 13% of each measured ratio
    assert 1.05 < predicted_ratio < measured_ratio
    assert abs(predicted_ratio / measured_ratio - 1.0) < 0.13

