"""'What if we had N chips' predicts with the run's own config settings and the baseline `asap propose` has.

Real published configs (examples/eval): NeMo 24.07's GPT3-5B launcher config on 64 H100s (no recompute,
distributed optimizer, micro-batch 4) and MaxText's v5e 16B config (per_device_batch_size).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import bot.cli.agents  # noqa: F401  (registers chat)
from bot.analysis.analyze import analyze_run
from bot.cli import cli
from bot.proposals.engine import propose
from bot.runs.store import LocalRunStore

EVAL = Path(__file__).resolve().parent.parent / "examples" / "eval"
NEMO = "nemo-24.07-h100-gpt3-5b-64gpu"
MAXTEXT = "maxtext-v5e-16b-1x256"


def _runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> Path:
    for key in ("OPENAI_API_KEY", "ASAP_MODEL_BASE_URL", "REDIS_URL", "ASAP_MODEL", "ASAP_RUNS_DIR"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ASAP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ASAP_MODEL_CONFIG", str(tmp_path / "none.yaml"))
    (tmp_path / "none.yaml").write_text("{}\n")
    root = tmp_path / "runs"
    shutil.copytree(EVAL / case, root / case)
    return root


def _chat(root: Path, case: str, question: str) -> str:
    res = CliRunner().invoke(cli, ["--runs-dir", str(root), "chat", case, "--quiet"], input=question + "\n")
    assert res.exit_code == 0, res.output
    return res.output


def test_what_if_at_the_same_chip_count_equals_the_propose_baseline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the what-if ignored the config's distributed optimizer and showed the current mesh at 122.6 GB
    per chip where `asap propose` has 60.7 GB; now both predict the same step and memory."""
    root = _runs(tmp_path, monkeypatch, NEMO)
    run = LocalRunStore(root).get(NEMO)
    base = propose(run, analyze_run(run), knowledge=False).baseline
    pred = base.predicted
    assert pred is not None
    out = _chat(root, NEMO, "what if we had 64 chips")
    line = next(ln for ln in out.splitlines() if re.match(rf"\s+\d\. {re.escape(base.mesh_short)}:", ln))
    assert f"predicted step {pred.step_time_ms:.1f} ms" in line, line
    assert f"{pred.memory_per_chip_bytes / 1e9:.1f} GB/chip" in line, line
    assert f"baseline (as `asap propose` has it): {base.mesh_short} on 64 chips, predicted step " \
           f"{pred.step_time_ms:.1f} ms, {pred.memory_per_chip_bytes / 1e9:.1f} GB/chip" in out
    kept = next(ln for ln in out.splitlines() if "kept from the config:" in ln)
    for setting in ("recompute none", "micro-batch 4", "distributed optimizer on", "sequence parallel off"):
        assert setting in kept, kept
    assert "the global batch stays 2048 sequences of 2048 tokens" in out
    assert "the data-parallel degree grows with the chips (64 -> 64)" in out


def test_what_if_more_chips_keeps_the_global_batch_of_a_per_device_config(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """MaxText states the batch per device: twice the chips keep the global batch, so the per-device batch halves
    (not a global batch that doubles with the chips)."""
    root = _runs(tmp_path, monkeypatch, MAXTEXT)
    run = LocalRunStore(root).get(MAXTEXT)
    from knowledge.cost_settings import settings_for_run

    s = settings_for_run(run)
    assert s is not None and s.per_device_batch and not s.global_batch
    batch = int(s.per_device_batch * 256 * (s.grad_accum or 1))
    out = _chat(root, MAXTEXT, "what if we had 512 chips")
    assert "With 512 chips" in out
    assert f"the global batch stays {batch} sequences" in out
    assert f"per_device_batch_size {s.per_device_batch:g} -> {s.per_device_batch / 2:g}" in out
