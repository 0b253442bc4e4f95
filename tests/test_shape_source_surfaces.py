"""Slack and GitHub say where MFU's batch and sequence length came from when run.yaml does not state them.

Real config: NeMo 24.07's GPT3-5B launcher config on 64 H100s (examples/eval), saved under a name with an
underscore, with a run.yaml that states no training section: MFU uses the config's global batch and
sequence length, and both surfaces name the file as inert code (mrkdwn / markdown would read ``_`` as
emphasis).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

from agents.workspace import Workspace
from bot.analysis.analyze import analyze_run
from bot.runs.store import LocalRunStore
from integrations.github.render import render_first
from integrations.slack.blocks import verdict_blocks

CASE = Path(__file__).resolve().parent.parent / "examples" / "eval" / "nemo-24.07-h100-gpt3-5b-64gpu"


def _report(tmp_path: Path, *, training: bool) -> dict[str, Any]:
    folder = tmp_path / "runs" / "nemo5"
    folder.mkdir(parents=True)
    shutil.copy(CASE / "megatron.yaml", folder / "gpt3_5b_fp8.yaml")
    record = yaml.safe_load((CASE / "run.yaml").read_text())
    record.update(id="nemo5", config="gpt3_5b_fp8.yaml", measured={"tokens_per_second": 22521.0 * 64})
    if not training:
        record.pop("training")
    (folder / "run.yaml").write_text(yaml.safe_dump(record))
    return analyze_run(LocalRunStore(tmp_path / "runs").get("nemo5")).model_dump(mode="json")


def _slack_context(report: dict[str, Any]) -> str:
    blocks = verdict_blocks(report, [])
    return next(b["elements"][0]["text"] for b in blocks if b["type"] == "context")


def _github(report: dict[str, Any]) -> str:
    answer = SimpleNamespace(mode="analyst", fallback=None, model_note=None, usage={})
    return render_first(Workspace(run_id="nemo5", report=report, proposals={"proposals": []}), answer)


def test_slack_and_github_name_the_config_behind_mfu(tmp_path: Path) -> None:
    report = _report(tmp_path, training=False)
    assert report["kpis"]["shape_source"] == "config gpt3_5b_fp8.yaml" and report["kpis"]["mfu_percent"]
    slack = _slack_context(report)
    assert f"MFU {report['kpis']['mfu_percent']:.1f}% (batch × sequence length from `config gpt3_5b_fp8.yaml`)" in slack
    measured = next(ln for ln in _github(report).splitlines() if ln.startswith("**Measured**"))
    assert "MFU" in measured and "(batch × sequence length from `config gpt3_5b_fp8.yaml`)" in measured, measured


def test_no_source_note_when_run_yaml_states_the_shape(tmp_path: Path) -> None:
    report = _report(tmp_path, training=True)
    assert report["kpis"]["shape_source"] == "run.yaml"
    assert "sequence length from" not in _slack_context(report)
    assert "sequence length from" not in _github(report)
