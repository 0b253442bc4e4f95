"""The agents' answer shows what each proposal rests on: playbook sections and past outcomes, with why."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.render import render_first, render_proposals
from agents.workspace import Workspace
from bot.analysis.analyze import analyze_run
from bot.proposals.engine import propose
from bot.runs.store import LocalRunStore

RUNS = Path(__file__).resolve().parents[1] / "examples" / "runs"


def test_answer_lists_each_proposals_citations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASAP_STATE_DIR", str(tmp_path))
    run = LocalRunStore(RUNS).get("311")
    report = analyze_run(run)
    ps = propose(run, report)
    ws = Workspace(run_id="311", report=report.model_dump(mode="json"), proposals=ps.model_dump(mode="json"))
    text = render_proposals(ws)
    for p in ps.proposals[:3]:
        for c in p.citations:
            assert f"playbook {c.ref}: {c.why}" in text
    assert text.count("rests on:") == min(3, len(ps.proposals))
    assert "playbooks/bottlenecks.md#communication-bound" in render_first(ws)


def test_past_outcomes_are_labelled_and_old_answers_without_citations_still_render() -> None:
    p = {"mesh_short": "fsdp=256", "predicted": {"step_time_ms": 4900.0}, "change": {"step_time_percent": -44.7},
         "confidence": 0.84, "labels": [], "rationale": "r", "tradeoffs": [],
         "citations": [{"ref": "https://github.example/acme/llm/pull/312", "title": "t", "kind": "history",
                        "why": "similar past change: predicted 4898.8 ms, measured 5100 ms; confidence +0.05"}]}
    ws = Workspace(run_id="311", proposals={"verdict": "improve", "summary": "s", "proposals": [p]})
    assert ("past outcome https://github.example/acme/llm/pull/312: similar past change: predicted 4898.8 ms, "
            "measured 5100 ms; confidence +0.05") in render_proposals(ws)
    del p["citations"]  # a thread stored before citations existed
    assert "rests on" not in render_proposals(ws)
