"""Tool results reach models as JSON, so the analyst client (and a real model) read them correctly."""

from __future__ import annotations

import json

from agents.tools import JsonTool


def _tool() -> JsonTool:
    def analyze_run(run_id: str) -> dict:
        """Analyze a run."""
        return {"status": "ok", "result": {"run": run_id, "near_optimal": False, "mfu": None}}

    return JsonTool(analyze_run, description="Analyze a run.", name="analyze_run")


def test_dict_results_are_json_not_python_repr() -> None:
    text = _tool().return_value_as_string({"status": "ok", "result": {"near_optimal": False, "mfu": None}})
    assert json.loads(text) == {"status": "ok", "result": {"near_optimal": False, "mfu": None}}
    assert "None" not in text and "False" not in text


def test_analyst_progress_reports_success_as_success(tmp_path, monkeypatch) -> None:
    import asyncio

    from agents.conversation import Conversation

    monkeypatch.setenv("ASAP_STATE_DIR", str(tmp_path))
    for var in ("OPENAI_API_KEY", "ASAP_MODEL_BASE_URL", "REDIS_URL"):
        monkeypatch.delenv(var, raising=False)
    lines: list[str] = []
    conv = Conversation.from_env(check=False)
    answer = asyncio.run(conv.ask("why is job 311 slow?", progress=lines.append))
    assert answer.fallback in (None, False, "")
    assert any("Run 311: communication-bound" in line for line in lines), lines
    assert not any("failed" in line for line in lines), lines
