"""Megatron-Bridge's 26.04.01 Nemotron 3 Super MXFP8 rows (docs/performance-summary-archive.md @ 067f987df03b, lines
282-288; recipe settings from scripts/performance @ 21d102f5e; scripts/eval_cases_mbridge_super.py writes them):

=========  ====  ==  ==  ==================  =================
system     GPUs  TP  EP  tokens/s/GPU        model TFLOP/s/GPU
=========  ====  ==  ==  ==================  =================
DGX-GB300    64   1  64  9,344               795
DGX-GB200    64   2  64  6,656               564
DGX-B300     64   1   8  7,296               623
DGX-B200     64   1  64  6,400               542
=========  ====  ==  ==  ==================  =================

Three expert layouts of one LatentMoE model: EP 64 inside an NVLink domain, EP 8 inside eight-GPU nodes, and EP 64
across eight nodes over InfiniBand. Every row ran, so each must fit; none was used to fit anything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.published_cases import assert_script_writes, predict_case

ROWS = [("gb300", 9344), ("gb200", 6656), ("b300", 7296), ("b200", 6400)]
CASES = [f"mbridge-26.04.01-{chip}-nemotron-3-super-64gpu-mxfp8" for chip, _ in ROWS]


def test_the_committed_cases_are_what_the_script_writes(tmp_path: Path) -> None:
    assert_script_writes("eval_cases_mbridge_super", CASES, tmp_path)


@pytest.mark.parametrize("chip, tokens", ROWS)
def test_each_row_fits_and_is_priced_within_twenty_percent_of_its_throughput(chip: str, tokens: int) -> None:
    pred = predict_case(f"mbridge-26.04.01-{chip}-nemotron-3-super-64gpu-mxfp8")
    assert pred.fits_memory
    measured_ms = 512 * 8192 / (tokens * 64) * 1000.0
    assert 0.85 < measured_ms / pred.step_time_ms < 1.2


def test_the_three_expert_layouts_are_read_as_the_recipes_lay_them_out() -> None:
    """GB300: EP 64 in one NVLink domain; B300: EP 8 per node, data parallel over InfiniBand; B200: EP 64 across the
    eight nodes, its all-to-all crossing InfiniBand (the flex dispatcher sends a token once per destination node)."""
    gb300 = predict_case(CASES[0]).mesh
    b300 = predict_case(CASES[2]).mesh
    b200 = predict_case(CASES[3])
    assert gb300.size("expert") == 64 and not gb300.dcn
    assert b300.ici.get("expert") == 8 and b300.dcn.get("data") == 8
    assert b200.mesh.ici.get("expert") == 8 and b200.mesh.dcn.get("expert") == 8
    assert b200.breakdown_ms["comm.expert"] > 0
    assert any("once per destination node" in a for a in b200.assumptions)
