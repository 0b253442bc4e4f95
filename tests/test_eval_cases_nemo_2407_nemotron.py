"""NeMo 24.07's DGX-H100 FP8 pre-training table, its two Nemotron-3 rows (NVIDIA/NeMo
docs/source/performance/performance_summary.md @ 070a0bb1): Nemotron-8B on 64 GPUs (TP 2, MBS 4) at 653 model TFLOP/s
per GPU and Nemotron-22B on 64 GPUs (TP 2, PP 4, VP 10, MBS 2) at 554, the table's two lowest; its ten other rows
measure 697-842. Settings from NeMo-Framework-Launcher's nemotron_8b / nemotron_22b configs at tag 24.07 (8325688d).

They joined the table untuned. A 256,000-token vocabulary on a 4,096- or 6,144-wide model puts a large share of each
step in the output layer and loss, which the table's Llama and GPT rows (32,000-128,256 tokens) do not carry.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bot.proposals.evaluate import run_eval
from knowledge.cost_settings import settings_for_run
from tests.published_cases import EVAL

TABLE = [c.name for c in sorted(EVAL.iterdir()) if c.name.startswith("nemo-24.07-h100-")]
NEMOTRON = ["nemo-24.07-h100-nemotron-8b-64gpu", "nemo-24.07-h100-nemotron-22b-64gpu"]


def test_the_launcher_settings_are_read() -> None:
    from bot.runs.store import LocalRunStore

    settings = settings_for_run(LocalRunStore(EVAL).get("nemo-24.07-h100-nemotron-22b-64gpu"))
    assert settings is not None
    # ub_tp_comm_overlap is deliberately not priced (docs/cost-model.md): only the schedule settings are asserted
    assert settings.virtual_pipeline == 10 and settings.overlap_p2p is True


def test_the_nemotron_rows_are_the_tables_slowest_as_measured(tmp_path: Path) -> None:
    assert len(TABLE) == 12 and all(n in TABLE for n in NEMOTRON)
    for case in TABLE:
        shutil.copytree(EVAL / case, tmp_path / case)
    report = run_eval(tmp_path)
    tflops = {c.case: c.points[0].metrics["tflops_per_chip"] for c in report.cases}  # [measured, predicted]
    others = [v for k, v in tflops.items() if k not in NEMOTRON]
    for name in NEMOTRON:
        assert tflops[name][0] < min(m for m, _ in others)
        assert tflops[name][1] < min(p for _, p in others), (name, tflops[name], sorted(p for _, p in others)[:3])
    assert tflops[NEMOTRON[1]][1] < tflops[NEMOTRON[0]][1]  # 22B (554 measured) under 8B (653)
    for c in report.cases:
        if c.case in NEMOTRON:
            low, high = c.points[0].predicted_band_ms
            assert low < c.points[0].measured_step_ms < high and c.top1, c.case
    assert report.published is not None
    assert report.published.tables[0].spearman is not None and report.published.tables[0].spearman > 0.9
