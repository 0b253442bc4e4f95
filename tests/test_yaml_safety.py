"""YAML alias bombs are refused by every YAML reader, at once, with a clear error; `asap runs` keeps listing.

The bomb is the classic "billion laughs": 342 bytes standing for 9**9 (387 million) strings. Before the
bounded loader, validating or formatting it took minutes and gigabytes and ended in a MemoryError.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import bot.cli.analyze  # noqa: F401  (registers the commands)
from bot import yamlsafe
from bot.cli import cli, main
from bot.errors import AsapError, brief

REPO = Path(__file__).resolve().parents[1]
BOMB_BODY = 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]\n" for i in range(1, 9)
)
"""Nine levels of nine aliases: 9**9 values once expanded."""


def _bomb_run_yaml(run_id: str) -> str:
    return f"{BOMB_BODY}id: '{run_id}'\nname: bomb\nchip: tpu-v5p\nnum_chips: 8\ntags: *a8\n"


@pytest.mark.timeout(30)
def test_runs_lists_the_good_runs_and_names_the_bomb(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(REPO / "examples" / "runs" / "311", tmp_path / "311")
    (tmp_path / "bomb").mkdir()
    (tmp_path / "bomb" / "run.yaml").write_text(_bomb_run_yaml("bomb"), encoding="utf-8")
    result = CliRunner().invoke(cli, ["--runs-dir", str(tmp_path), "runs"], catch_exceptions=False, terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "311" in result.output and "Llama-2-13B" in result.output
    assert "bomb" in result.output and "unreadable" in result.output and "alias" in result.output
    assert "lol" not in result.output  # the value itself is never printed

    with pytest.raises(SystemExit) as exited:
        main(["--runs-dir", str(tmp_path), "why", "bomb"])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert "run.yaml" in err and "alias" in err and len(err) < 1000 and "Traceback" not in err


@pytest.mark.timeout(30)
def test_every_yaml_reader_refuses_the_bomb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agents.models import load_settings
    from bot.configs.detect import parse_config
    from bot.proposals.evaluate import load_expected
    from bot.proposals.failures import load_failures
    from integrations.github.settings import parse_settings
    from knowledge.hardware import load_catalog
    from knowledge.playbooks import load_playbooks

    bomb_file = tmp_path / "bomb.yaml"
    bomb_file.write_text(BOMB_BODY + "x: *a8\n", encoding="utf-8")
    (tmp_path / "failures.yaml").write_text(BOMB_BODY, encoding="utf-8")
    books = tmp_path / "books"
    books.mkdir()
    (books / "b.md").write_text("# B\n\n```yaml asap-move\nid: x\n" + BOMB_BODY + "```\n", encoding="utf-8")
    readers = {
        "sharding config": lambda: parse_config("ici_fsdp_parallelism: 8\n" + BOMB_BODY, "maxtext.yml"),
        ".asap.yml": lambda: parse_settings(BOMB_BODY),
        "eval case": lambda: load_expected(bomb_file),
        "failures.yaml": lambda: load_failures(tmp_path),
        "hardware catalog": lambda: load_catalog(bomb_file),
        "playbook move": lambda: load_playbooks(books),
        "model settings": lambda: load_settings({"ASAP_MODEL_CONFIG": str(bomb_file)}),
    }
    for what, read in readers.items():
        with pytest.raises(AsapError) as info:
            read()
        assert "alias" in info.value.render(), what
        assert len(info.value.render()) < 600, what


def test_bounded_loader_keeps_ordinary_anchors_and_refuses_recursion() -> None:
    assert yamlsafe.load("base: &b {fsdp: 8}\nrun:\n  <<: *b\n  tensor: 2\n") == {
        "base": {"fsdp": 8}, "run": {"fsdp": 8, "tensor": 2}}
    with pytest.raises(yamlsafe.YamlBombError, match="refers to itself"):
        yamlsafe.load("a: &a [1, *a]\n")
    many = "a: &a 1\nb: [" + ", ".join(["*a"] * (yamlsafe.MAX_ALIASES + 1)) + "]\n"
    with pytest.raises(yamlsafe.YamlBombError, match="aliases"):
        yamlsafe.load(many)


def test_brief_bounds_huge_values() -> None:
    huge = ["x" * 10_000] * 10_000
    text = brief(huge)
    assert len(text) < 200 and "..." in text
    assert len(brief("y" * 1_000_000)) < 100
