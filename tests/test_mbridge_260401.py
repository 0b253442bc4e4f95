"""Megatron-Bridge's 26.04.01 rows that needed LatentMoE, hybrid MTP modules or Muon priced: Nemotron 3 Super's four
MXFP8 rows and Kimi K2's (docs/performance-summary-archive.md @ 067f987df03b, lines 282-288 and 264; recipe settings
from scripts/performance @ 21d102f5e; scripts/eval_cases_mbridge_260401.py writes them). Nemotron 3 Super:

=========  ====  ==  ==  ==================  =================
system     GPUs  TP  EP  tokens/s/GPU        model TFLOP/s/GPU
=========  ====  ==  ==  ==================  =================
DGX-GB300    64   1  64  9,344               795
DGX-GB200    64   2  64  6,656               564
DGX-B300     64   1   8  7,296               623
DGX-B200     64   1  64  6,400               542
=========  ====  ==  ==  ==================  =================

Three expert layouts of one LatentMoE model: EP 64 inside an NVLink domain, EP 8 inside eight-GPU nodes, and EP 64
across eight nodes over InfiniBand. Kimi K2: 256 DGX-GB300, PP 4 x VP 4, EP 64, distributed Muon, 5,328 tokens/s/GPU.
Every row ran, so each must fit; none was used to fit anything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.published_cases import assert_script_writes, predict_case

ROWS = [("gb300", 9344), ("gb200", 6656), ("b300", 7296), ("b200", 6400)]
KIMI = "mbridge-26.04.01-gb300-kimi-k2-256gpu-mxfp8"
CASES = [KIMI] + [f"mbridge-26.04.01-{chip}-nemotron-3-super-64gpu-mxfp8" for chip, _ in ROWS]


def test_the_committed_cases_are_what_the_script_writes(tmp_path: Path) -> None:
    assert_script_writes("eval_cases_mbridge_260401", CASES, tmp_path)


@pytest.mark.parametrize("chip, tokens", ROWS)
def test_each_row_fits_and_is_priced_within_twenty_percent_of_its_throughput(chip: str, tokens: int) -> None:
    pred = predict_case(f"mbridge-26.04.01-{chip}-nemotron-3-super-64gpu-mxfp8")
    assert pred.fits_memory
    measured_ms = 512 * 8192 / (tokens * 64) * 1000.0
    assert 0.85 < measured_ms / pred.step_time_ms < 1.2


def test_the_three_expert_layouts_are_read_as_the_recipes_lay_them_out() -> None:
    """GB300: EP 64 in one NVLink domain; B300: EP 8 per node, data parallel over InfiniBand; B200: EP 64 across the
    eight nodes, its all-to-all crossing InfiniBand (the flex dispatcher sends a token once per destination node)."""
    gb300 = predict_case(CASES[1]).mesh
    b300 = predict_case(CASES[3]).mesh
    b200 = predict_case(CASES[4])
    assert gb300.size("expert") == 64 and not gb300.dcn
    assert b300.ici.get("expert") == 8 and b300.dcn.get("data") == 8
    assert b200.mesh.ici.get("expert") == 8 and b200.mesh.dcn.get("expert") == 8
    assert b200.breakdown_ms["comm.expert"] > 0
    assert any("once per destination node" in a for a in b200.assumptions)


def test_kimi_k2_runs_its_26_06_recipe_with_distributed_muon() -> None:
    """The same presets and helpers at 21d102f5e as at 8f341b04 (scripts/eval_cases_mbridge_2606.py): dist_muon
    without the distributed optimizer or fp8 gathers; within 20% of the published 5,328 tokens/s/GPU, untuned."""
    pred = predict_case(KIMI)
    assert pred.fits_memory and pred.breakdown_ms["optimizer_step"] > 0
    assert 0.85 < 4096 * 4096 / (5328 * 256) * 1000.0 / pred.step_time_ms < 1.2
