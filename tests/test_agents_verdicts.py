"""'Which one first?' follows the engine's ranking and verdict, on the real engine in analyst mode."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agents.backend import RealBackend
from agents.conversation import Conversation
from agents.models import build_model
from bot.analysis.analyze import analyze_run
from bot.proposals.engine import propose
from bot.runs.store import LocalRunStore
from bot.store.sqlite_store import SQLiteStore

RUNS = Path(__file__).resolve().parents[1] / "examples" / "runs"


def _conv(tmp_path: Path) -> Conversation:
    return Conversation(store=SQLiteStore(tmp_path / "s.db"), model=build_model({}), backend=RealBackend(str(RUNS)))


def ask(conv: Conversation, text: str) -> object:
    return asyncio.run(conv.ask(text, thread_id="t"))


@pytest.mark.parametrize("rid", ["618", "123", "jax-cpu-8dev"])
def test_which_first_follows_the_ranking_and_the_verdict(tmp_path: Path, rid: str) -> None:
    run = LocalRunStore(RUNS).get(rid)
    ps = propose(run, analyze_run(run), knowledge=False)
    conv = _conv(tmp_path)
    ask(conv, f"why is run {rid} slow?")
    a = ask(conv, "which one would you start with?")
    text = a.text  # type: ignore[attr-defined]
    first = ps.proposals[0].mesh_short
    if ps.verdict == "near_optimal":  # never "start with" a change while the verdict says no change
        assert text.startswith("No change recommended: the run looks near-optimal.")
        assert f"proposal 1 ({first}) is the nearest alternative" in text
    else:
        assert text.startswith(f"Start with proposal 1: {first}")
    if ps.verdict == "uncertain":
        assert "improvement likely, size uncertain" in text or "too wide to rank on time alone" in text
