"""Untrusted strings (op names from a profile, the run name) reach the terminal without escape sequences."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import bot.cli.analyze  # noqa: F401  (registers the commands)
import bot.cli.proposals  # noqa: F401
from bot.cli import cli
from bot.textsafe import strip_controls

REPO = Path(__file__).resolve().parents[1]
HOSTILE_OP = "all-gather\x1b[2J\x1b]8;;https://evil.example/\x1b\\.3490\x1b]8;;\x1b\\\x9b31m\x07\u202e"
HOSTILE_NAME = "Llama\x1b]0;pwned title\x07 run\x1b[31m red\r\x1b[1A"
FORBIDDEN = ("\x1b[2J", "\x1b]8;", "\x1b]0;", "\x9b", "\x07", "\r", "\u202e", "\x1b[1A", "evil.example")


@pytest.fixture
def hostile_runs(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "examples" / "runs" / "311", tmp_path / "311")
    folder = tmp_path / "311"
    for name in ("hlo_stats.json", "overview_page.json", "roofline_model.json"):
        path = folder / name
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace('"all-gather.3490"', json.dumps(HOSTILE_OP)), encoding="utf-8")
    record = (folder / "run.yaml").read_text(encoding="utf-8")
    lines = [f"name: {json.dumps(HOSTILE_NAME)}" if ln.startswith("name:") else ln for ln in record.splitlines()]
    (folder / "run.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("command", [["why", "311"], ["runs"], ["show", "311"], ["propose", "311"]])
@pytest.mark.parametrize("colour", [False, True])
def test_escape_sequences_never_reach_the_terminal(hostile_runs: Path, command: list[str], colour: bool) -> None:
    env = {"FORCE_COLOR": "1", "COLUMNS": "160"} if colour else {"NO_COLOR": "1", "COLUMNS": "160"}
    result = CliRunner().invoke(cli, ["--runs-dir", str(hostile_runs), *command], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    for seq in FORBIDDEN:
        assert seq not in result.output, (command, repr(seq))
    if not colour:
        assert "\x1b" not in result.output
    if command[0] == "why":
        assert "all-gather.3490" in result.output  # the readable part of the name is kept


def test_strip_controls_keeps_text_newlines_and_unicode() -> None:
    assert strip_controls(HOSTILE_OP) == "all-gather.3490"
    assert strip_controls("a\tb\nc — µs ✓") == "a\tb\nc — µs ✓"
    assert strip_controls("\x1bc\x1b(B\x1bP1$r\x1b\\ok\x00\x7f") == "ok"
