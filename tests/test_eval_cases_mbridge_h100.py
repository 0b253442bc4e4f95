"""The Megatron-Bridge DGX-H100 rows of the 25.09 and 25.11 NeMo containers (docs/performance-summary-archive.md
@ 067f987df03b), written by scripts/eval_cases_mbridge_h100.py.

25.09 and 25.11 published the same three Llama configurations on H100 (8B on 8 GPUs with Megatron-FSDP, 70B at TP 4
PP 8 VP 5 on 64, 405B at TP 8 PP 8 CP 2 VP 8 on 1024): 725 / 727 / 763 model TFLOP/s per GPU in 25.09, 744 / 719 /
737 in 25.11. The benchmark reports how far one configuration moves between releases.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml

from tests.published_cases import assert_script_writes, load_script

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "examples" / "eval"
WRITTEN = [
    "mbridge-25.11-h100-gpt-oss-120b-64gpu", "mbridge-25.11-h100-qwen3-30b-a3b-16gpu",
    "mbridge-25.11-h100-qwen3-235b-a22b-256gpu", "mbridge-25.09-h100-llama3-8b-8gpu",
    "mbridge-25.09-h100-llama3-70b-64gpu", "mbridge-25.09-h100-llama31-405b-1024gpu",
]


def test_the_committed_cases_are_what_the_script_writes(tmp_path: Path) -> None:
    assert_script_writes("eval_cases_mbridge_h100", WRITTEN, tmp_path)


def test_a_row_whose_columns_contradict_each_other_says_what_it_took() -> None:
    # 25.11 GPT-OSS 120B: MBS 4 and GA 2 with PP 4 on 64 GPUs give 128 sequences, not the row's GBS 512
    case = EVAL / "mbridge-25.11-h100-gpt-oss-120b-64gpu"
    cfg = yaml.safe_load((case / "megatron.yaml").read_text())["model"]
    assert (cfg["micro_batch_size"], cfg["global_batch_size"]) == (1, 512)
    assert cfg["recompute_modules"] == ["layernorm", "moe_act"]
    assumed = " ".join(yaml.safe_load((case / "expected.yaml").read_text())["assumed"])
    assert "cannot both hold" in assumed and "micro_batch_size 1" in assumed


def test_the_benchmark_reports_how_far_a_repeated_configuration_moved(tmp_path: Path) -> None:
    for case in ("mbridge-25.09-h100-llama3-8b-8gpu", "mbridge-25.11-h100-llama3-8b-8gpu",
                 "mbridge-25.09-h100-llama31-405b-1024gpu", "mbridge-25.11-h100-llama31-405b-1024gpu",
                 "mbridge-25.11-h100-qwen3-30b-a3b-16gpu"):
        shutil.copytree(EVAL / case, tmp_path / case)
    sys.path.insert(0, str(ROOT))
    acc = load_script("accuracy", "benchmarks")
    reps = {r["mesh"]: r for r in acc.accuracy(tmp_path)["repeats"]}
    assert set(reps) == {"fsdp=8", "tensor=8 | dcn data=8 sequence=2 pipeline=8"}  # the Qwen3 row has no twin
    # 8B: 14079 -> 14451 tokens/s per GPU; 405B: 302 -> 292
    assert reps["fsdp=8"]["spread"] == pytest.approx(14451 / 14079 - 1, rel=1e-3)
    assert reps["tensor=8 | dcn data=8 sequence=2 pipeline=8"]["spread"] == pytest.approx(302 / 292 - 1, rel=1e-3)
    assert reps["fsdp=8"]["tables"] == ["mbridge-25.09-dgx-h100", "mbridge-25.11-dgx-h100"]
