"""benchmarks/accuracy.py's noise-aware ranking figure: the row pairs a table's measurements can decide.

A Spearman over rows closer together than one configuration's release-to-release spread ranks run-to-run noise
(tpu-recipes' Trillium Llama 3.1 8B rows are 3.1% apart; the same Megatron-Bridge configuration re-measured by a later
release moves 0.5-5.8%). The benchmark counts only pairs further apart than that floor.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from published_cases import load_script  # noqa: E402

# tokens/s per chip of tpu-recipes' Trillium Llama 3.1 8B rows (8, 16, 32, 64, 128, 256 chips; README log lines at
# tpu-recipes c8cfe2f, examples/eval/tpu-recipes-v6e-llama3.1-8b-*)
TRILLIUM_8B = [7138.9, 7243.4, 7031.7, 7247.1, 7119.6, 7207.3]


def test_only_pairs_further_apart_than_the_noise_floor_are_judged() -> None:
    acc = load_script("accuracy", "benchmarks")
    # a model that ranks these rows exactly backwards
    backwards = [(m, -m) for m in TRILLIUM_8B]
    ordered, pairs = acc.resolvable_pairs(backwards, 0.026)
    assert pairs == 2  # 7247.1 and 7243.4 vs 7031.7: the only gaps above 2.6%
    assert ordered == 0
    assert acc.resolvable_pairs([(m, m) for m in TRILLIUM_8B], 0.026) == [2, 2]
    assert acc.resolvable_pairs([(m, m) for m in TRILLIUM_8B], 0.0) == [15, 15]  # no floor: every pair is judged


def test_the_noise_floor_is_the_median_repeat_spread() -> None:
    acc = load_script("accuracy", "benchmarks")
    assert acc.noise_floor([{"spread": 0.005}, {"spread": 0.026}, {"spread": 0.178}]) == 0.026
    assert acc.noise_floor([]) == 0.0


def test_the_noise_ceiling_separates_rows_closer_than_the_noise_from_a_spread_table() -> None:
    """A perfect model cannot rank Trillium's 8B rows (3.1% apart) against measurements re-taken with 2.7% noise, but
    can rank rows spread as the MaxText v5p README's (232-328 TFLOP/s/chip)."""
    acc = load_script("accuracy", "benchmarks")
    close = acc.noise_ceiling(TRILLIUM_8B, 0.027)
    spread = acc.noise_ceiling([237.0, 254.0, 274.0, 279.0, 282.0, 289.0, 294.0, 297.0, 305.0, 308.0, 309.0, 315.0,
                                316.0, 319.0, 323.0, 328.0], 0.027)
    assert close is not None and spread is not None
    assert close < 0.6 < 0.9 < spread
    assert acc.noise_ceiling(TRILLIUM_8B, 0.027) == close  # seeded: the benchmark prints the same figure every run
    assert acc.noise_ceiling(TRILLIUM_8B, 0.0) is None and acc.noise_ceiling([1.0, 2.0], 0.027) is None
