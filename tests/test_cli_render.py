"""Terminal output reads well at 80 and 160 columns and when piped: no line past the width, numbers never
split across lines, the right unit labels, and a readable eval summary."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import bot.cli.analyze  # noqa: F401  (registers the commands)
import bot.cli.proposals as proposals_cli
from bot.cli import cli
from bot.cli.term import SafeConsole

REPO = Path(__file__).resolve().parents[1]


def _run(args: list[str], width: int, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(proposals_cli, "console", SafeConsole(highlight=False, width=width))
    result = CliRunner().invoke(cli, args, env={"COLUMNS": str(width)}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("width", [80, 160])
@pytest.mark.parametrize("run_id", ["311", "123", "jax-cpu-8dev"])
def test_why_fits_and_never_splits_a_number(width: int, run_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    out = _run(["why", run_id], width, monkeypatch)
    assert max(len(line) for line in out.splitlines()) <= width
    report = json.loads(_run(["why", run_id, "--json"], width, monkeypatch))
    for op in report["top_ops"]:  # each figure appears whole on one line
        if op["time_per_step_ms"] is not None:
            assert f"{op['time_per_step_ms']:.3f}" in out
        if op["flops"] is not None:
            assert f"{op['flops'] / 1e9:,.1f}" in out
    assert "GFLOP/step" in out and not re.search(r"GFLOP/s\b", out)


@pytest.mark.parametrize("width", [80, 160])
def test_propose_wraps_to_the_width(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    out = _run(["propose", "311", "--no-diff"], width, monkeypatch)
    assert max(len(line) for line in out.splitlines()) <= width
    assert re.search(r"step [\d,]+\.\d ms", out)  # the figures survive the wrapping


def test_piped_output_is_plain_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(proposals_cli, "console", SafeConsole(highlight=False))
    result = CliRunner().invoke(cli, ["propose", "311", "--no-diff"], catch_exceptions=False)
    assert "\x1b" not in result.output  # no colour codes into a pipe
    assert max(len(line) for line in result.output.splitlines()) <= 80


@pytest.mark.timeout(120)
def test_eval_is_a_list_at_80_columns_and_a_table_at_160(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import shutil

    # the longest case name, and two rows of the published table with the longest name
    for case in ("sample-311", "megatron-llama3-70b-h100-32gpu-16k", "torchtitan-asynctp-h100-llama3-70b-bf16-async",
                 "torchtitan-asynctp-h100-llama3-70b-bf16-vanilla"):
        shutil.copytree(REPO / "examples" / "eval" / case, tmp_path / case)
    narrow = _run(["eval", str(tmp_path)], 80, monkeypatch)
    assert max(len(line) for line in narrow.splitlines()) <= 80
    assert "sample-311" in narrow and "top-1 yes" in narrow
    # the per-table summary keeps each table's name whole on a piped 80-column console (a folded table once
    # printed it one character per line)
    assert any(line.strip().startswith("torchtitan-asynctp-2025-06-llama3-70b: 2,") for line in narrow.splitlines())
    wide = _run(["eval", str(tmp_path)], 160, monkeypatch)
    assert max(len(line) for line in wide.splitlines()) <= 160
    assert "megatron-llama3-70b-h100-32gpu-16k" in wide  # case names whole at 160
    assert any(line.lstrip().startswith("torchtitan-asynctp-2025-06-llama3-70b ") for line in wide.splitlines())
    header = next(line for line in wide.splitlines() if "case" in line and "top-1" in line)
    for col in ("kind", "top-3", "verdict", "failing", "step err", "notes"):
        assert col in header
