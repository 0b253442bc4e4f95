"""The answer reads well: verdict and best proposal first, three evidence bullets, three cards with a one-line
"why" on the first screen, follow-ups as Block Kit text, no internal keys. docs/slack-answer.json is the
reference rendering (run 123); ``ASAP_UPDATE_REFERENCE=1`` rewrites it from the live rendering."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

from agents.conversation import Conversation
from agents.models import build_model
from bot.store.sqlite_store import SQLiteStore
from integrations.slack import blocks as bk
from tests.doubles.slack_double import block_kit_errors

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "slack-answer.json"


def _answers(tmp: Path, *questions: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    store = SQLiteStore(tmp / "state.db")
    conv = Conversation(store=store, model=build_model({}))
    out = []
    for q in questions:
        answer = asyncio.run(conv.ask(q, thread_id="slack:C0DATA:1710000000.000100"))
        out.append((answer.to_dict(), store.get_thread("slack:C0DATA:1710000000.000100")["workspace"]))
    store.close()
    return out


def _text(blocks: list[dict[str, Any]]) -> str:
    return json.dumps(blocks, ensure_ascii=False)


def _check_first_screen(blocks: list[dict[str, Any]]) -> None:
    screen = bk.first_screen(blocks)
    head = screen[0]["text"]["text"]
    assert re.match(r"^\*Run 123 is compute-bound\*", head)  # the verdict leads
    assert "*Best:* proposal 1" in head and "→" in head and "%" in head  # best proposal and its predicted change
    cards = [b for b in screen if b.get("block_id", "").startswith("proposal:")]
    assert [c["block_id"] for c in cards] == ["proposal:1", "proposal:2", "proposal:3"]
    buttons = [e["action_id"] for b in screen if b["type"] == "actions" for e in b["elements"]]
    assert "asap_apply:3" in buttons and "asap_explain:3" in buttons
    evidence = next(b["text"]["text"] for b in screen
                    if b["type"] == "section" and "text" in b and b["text"]["text"].startswith("*Evidence*"))
    assert evidence.count("\n• ") == 3


def test_reference_rendering_puts_verdict_and_three_proposals_on_the_first_screen(tmp_path: Path) -> None:
    if os.environ.get("ASAP_UPDATE_REFERENCE"):
        (answer, ws), = _answers(tmp_path, "why is job 123 slow?")
        data = {"text": bk.fallback_text(answer, ws), "blocks": bk.answer_blocks(answer, ws)}
        REFERENCE.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    ref = json.loads(REFERENCE.read_text())
    assert block_kit_errors(ref["blocks"]) == []
    _check_first_screen(ref["blocks"])


def test_live_rendering_matches_the_reference_layout(tmp_path: Path) -> None:
    (answer, ws), = _answers(tmp_path, "why is job 123 slow?")
    blocks = bk.answer_blocks(answer, ws)
    ref = json.loads(REFERENCE.read_text())["blocks"]
    assert [(b["type"], b.get("block_id")) for b in blocks] == [(b["type"], b.get("block_id")) for b in ref]
    _check_first_screen(blocks)
    text = _text(blocks)
    assert text.count("is compute-bound") == 1 and "Diagnosis:" not in text  # the verdict is said once
    assert not any(b["type"] == "header" for b in blocks)
    assert "0 tokens" not in text and "slack:C0DATA" not in text  # no empty usage, no internal thread key
    for card in (b for b in blocks if b.get("block_id", "").startswith("proposal:")):
        title, why = card["text"]["text"].split("\n", 1)
        assert "…" not in why and "\n" not in why and len(why) <= bk.WHY_CHARS + 200  # one line, never cut
        assert why.rstrip().endswith((".", ")", "%")), why  # whole sentences


def test_follow_ups_are_block_kit_text_without_raw_keys(tmp_path: Path) -> None:
    _, (compare, _), (first, _) = _answers(tmp_path, "why is job 123 slow?", "compare 1 and 3", "which one first?")
    for answer in (compare, first):
        blocks = bk.answer_blocks(answer, None)
        text = _text(blocks)
        assert "```" not in text and "step_time_ms" not in text and "memory_per_chip_gb" not in text
        assert "tokens" not in text and "thread" not in text.lower().split("context")[-1]
        assert all(block_kit_errors([b]) == [] for b in blocks)
    body = bk.answer_blocks(compare, None)[0]["text"]["text"]
    assert body.startswith("*Proposal 1") and "• *Predicted step:*" in body and " ms vs " in body
