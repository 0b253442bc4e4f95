"""`asap chat`, `asap ask` and `asap log` on the bundled sample runs, in analyst mode, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import bot.cli.agents  # noqa: F401  (registers chat/ask/log until bot/cli/__init__.py does)
from bot.cli import cli
from bot.runs.store import LocalRunStore

SAMPLES = LocalRunStore().list_ids()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for key in ("OPENAI_API_KEY", "ASAP_MODEL_BASE_URL", "REDIS_URL", "ASAP_MODEL", "ASAP_RUNS_DIR"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ASAP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ASAP_MODEL_CONFIG", str(tmp_path / "none.yaml"))
    (tmp_path / "none.yaml").write_text("{}\n")
    return {}


@pytest.mark.parametrize("run_id", SAMPLES)
def test_chat_answers_first_question_and_every_followup(env: dict[str, str], run_id: str) -> None:
    questions = ["which one would you start with?", "are you sure?", "I think proposal 2 looks better",
                 "compare 1 and 3", "explain HBM-bound", "what if we had 512 chips"]
    res = CliRunner().invoke(cli, ["chat", run_id, "--thread", f"t-{run_id}", "--quiet"], input="\n".join(questions) + "\n")
    assert res.exit_code == 0, res.output
    out = res.output
    assert f"Run {run_id}" in out and "Diagnosis:" in out and "Evidence:" in out and "Proposals" in out
    assert "Confidence:" in out
    assert "hbm: HBM-bound means" in out
    assert "With 512 chips" in out or "no valid mesh for 512 chips" in out or "could not answer" in out
    # the thread survives the process: a new invocation continues it
    again = CliRunner().invoke(cli, ["chat", run_id, "--thread", f"t-{run_id}", "--quiet"], input="are you sure?\n")
    assert again.exit_code == 0 and "continuing thread" in again.output and "Confidence:" in again.output
    log = CliRunner().invoke(cli, ["log", f"t-{run_id}"])
    assert log.exit_code == 0
    assert "tool analyze_run" in log.output and "< answer (analyst" in log.output


def test_ask_finds_the_run_in_free_text_and_prints_json(env: dict[str, str]) -> None:
    run_id = SAMPLES[0]
    res = CliRunner().invoke(cli, ["ask", f"why is run {run_id} slow?", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["run_id"] == run_id and data["mode"] == "analyst" and data["intent"] == "first"
    assert data["results"]["analyze_run"]["diagnosis"]["bottleneck"] in ("compute", "hbm", "communication", "host")
    assert data["usage"]["total_tokens"] == 0


def test_ask_unknown_run_and_unknown_thread_are_clear_errors(env: dict[str, str]) -> None:
    from bot.cli import main

    with pytest.raises(SystemExit) as e:
        main(["ask", "why is job 99999 slow?"])
    assert e.value.code == 2
    res = CliRunner().invoke(cli, ["log", "no-such-thread"])
    assert res.exit_code != 0 and "no worklog for thread" in str(res.exception)
