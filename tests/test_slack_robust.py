"""No message a person sends is dropped, and no failure leaks: scenario tests over the real HTTP path against the
Slack Web API double, with Slack's published event payloads (tests/data/slack_events/README.md)."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.doubles.slack_double import SlackDouble, SlackRig, action_body, mention_body

CH = "C0DATA"
ROOT = "1710000000.000100"
EVENTS = Path(__file__).parent / "data" / "slack_events"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def published(name: str, **event: Any) -> dict[str, Any]:
    """A published payload with only the workspace-specific fields rewritten (subtype, files, root kept)."""
    body = copy.deepcopy(json.loads((EVENTS / name).read_text()))
    body["event"].update(event)
    body["event_id"] = f"Ev{name[:12]}{event.get('ts', '')}"
    return body


def bot_replies(rig: SlackRig, channel: str = CH, root: str = ROOT) -> list[Any]:
    return [m for m in rig.double.thread(channel, root) if m.ts != root]


def texts(msg: Any) -> str:
    return json.dumps(msg.blocks)


def follow(text: str, ts: str, event_id: str) -> dict[str, Any]:
    return mention_body(text, event_id=event_id, kind="message", ts=ts, thread_ts=ROOT, channel_type="channel")


# ------------------------------------------------------------------ item 3: subtypes a person sends
def test_thread_broadcast_reply_is_answered_in_the_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> None:
        async with SlackRig(tmp_path, monkeypatch) as rig:
            await rig.post_event(mention_body("<@UASAPBOT> why is job 123 slow?", event_id="EvFirst"))
            await rig.idle()
            # "Also send to #channel": Slack's own thread_broadcast example, in ASAP's thread
            body = published("message_thread_broadcast.json", channel=CH, user="UALICE", text="which one first?",
                             ts="1710000000.000300", thread_ts=ROOT)
            body["event"]["root"].update(ts=ROOT, thread_ts=ROOT)
            status, _ = await rig.post_event(body)
            assert status == 200
            await rig.idle()
            replies = bot_replies(rig)
            assert len(replies) == 2 and "Start with proposal" in texts(replies[1])
            # an edit (message_changed) is still not a question
            await rig.post_event(published("message_thread_broadcast.json", channel=CH, user="UALICE", text="x",
                                           ts="1710000000.000400", thread_ts=ROOT, subtype="message_changed"))
            await rig.idle()
            assert len(bot_replies(rig)) == 2

    run(go())


def test_file_share_dm_is_answered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> None:
        async with SlackRig(tmp_path, monkeypatch) as rig:
            body = published("message_file_share.json", channel="D0ALICE", user="UALICE",
                             text="why is run 311 slow? profile attached", ts=ROOT)
            assert body["event"]["subtype"] == "file_share" and body["event"]["files"]
            status, _ = await rig.post_event(body)
            assert status == 200
            await rig.idle()
            replies = bot_replies(rig, "D0ALICE", ROOT)
            assert len(replies) == 1 and "Run 311 is" in texts(replies[0])

    run(go())


# ------------------------------------------------------------------ item 2: replies before the first answer
def test_reply_sent_before_the_first_answer_is_answered_after_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> None:
        async with SlackRig(tmp_path, monkeypatch, worker=False) as rig:
            await rig.post_event(mention_body("<@UASAPBOT> why is job 123 slow?", event_id="EvQ1"))
            await rig.post_event(follow("compare 1 and 3", "1710000000.000200", "EvQ2"))  # no answer exists yet
            rig.start_worker()  # both jobs run side by side: the follow-up waits behind the first answer
            await rig.idle()
            replies = bot_replies(rig)
            assert len(replies) == 2, [m.text for m in replies]
            assert "Run 123 is" in texts(replies[0])
            assert "Predicted step" in texts(replies[1]) and "still working" not in texts(replies[1])
            log = rig.ctx.store.read_log(f"slack:{CH}:{ROOT}")
            assert [e["intent"] for e in log if e.get("kind") == "request"] == ["first", "compare"]

    run(go())


def test_reply_that_cannot_wait_gets_still_working(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> None:
        async with SlackRig(tmp_path, monkeypatch, worker=False) as rig:
            rig.ctx.extras["slack.wait_first_s"] = 0.0
            await rig.post_event(mention_body("<@UASAPBOT> why is job 123 slow?", event_id="EvW1"))
            await rig.post_event(follow("compare 1 and 3", "1710000000.000200", "EvW2"))
            rig.start_worker()
            await rig.idle()
            replies = bot_replies(rig)
            assert len(replies) == 2
            assert any("still working on the first question" in m.text for m in replies)
            assert any("Run 123 is" in texts(m) for m in replies)

    run(go())


# ------------------------------------------------------------------ item 4: limit analyses, not follow-ups
def test_follow_ups_and_clicks_do_not_spend_the_analysis_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> None:
        async with SlackRig(tmp_path, monkeypatch, extra_env={"ASAP_USER_RATE": "2/60"}) as rig:
            await rig.post_event(mention_body("<@UASAPBOT> why is job 123 slow?", event_id="EvL1"))
            await rig.idle()
            answer = bot_replies(rig)[0]
            questions = ["which one first?", "compare 1 and 3", "are you sure?", "why not 2?", "compare 2 and 3"]
            for n, q in enumerate(questions):
                await rig.post_event(follow(q, f"1710000000.00020{n}", f"EvLF{n}"))
                await rig.idle()
            await rig.click(action_body("asap_explain:1", json.dumps({"run": "123", "i": 1}), user="UALICE",
                                        channel=CH, message_ts=answer.ts, thread_ts=ROOT, action_ts="1710000009.1"))
            await rig.idle()
            assert len(bot_replies(rig)) == 1 + len(questions) + 1  # every follow-up and the explanation
            assert rig.double.ephemerals == []
            # the analysis limit still holds: a second new thread is fine, a third is refused, privately
            for n, run_id in enumerate(("204", "311")):
                await rig.post_event(mention_body(f"<@UASAPBOT> why is job {run_id} slow?", event_id=f"EvL{run_id}",
                                                  ts=f"1710000100.00000{n}"))
            await rig.idle()
            assert len(rig.double.ephemerals) == 1 and "try again in" in rig.double.ephemerals[0]["text"]

    run(go())


# ------------------------------------------------------------------ item 5: group lookup fails -> private refusal
@pytest.mark.parametrize("error", ["missing_scope", "paid_teams_only"])
def test_apply_when_groups_cannot_be_read_is_refused_privately(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               error: str) -> None:
    class NoHost:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError("nothing may be applied")

    async def go() -> None:
        double = SlackDouble(usergroups_error=error)
        async with SlackRig(tmp_path, monkeypatch, appliers="UCAROL", group="S0INFRA", double=double,
                            codehost=NoHost()) as rig:
            await rig.post_event(mention_body("<@UASAPBOT> why is job 123 slow?", event_id="EvG1"))
            await rig.idle()
            answer = bot_replies(rig)[0]
            before = len(rig.double.messages)
            await rig.click(action_body("asap_apply:1", json.dumps({"run": "123", "i": 1}), user="UMALLORY",
                                        channel=CH, message_ts=answer.ts, thread_ts=ROOT, action_ts="1710000003.1"))
            await rig.idle()
            assert len(rig.double.messages) == before  # nothing public
            assert all(m.text == answer.text for m in bot_replies(rig))
            eph = rig.double.ephemerals
            assert len(eph) == 1 and eph[0]["user"] == "UMALLORY"
            assert "Not applied" in eph[0]["text"] and error in eph[0]["text"] and "usergroups:read" in eph[0]["text"]

    run(go())


# ------------------------------------------------------------------ item 6: malformed timestamp
@pytest.mark.parametrize("stamp", ["not-a-number", "1.7e9", "", "12 34"])
def test_malformed_timestamp_is_401_with_one_log_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture, stamp: str) -> None:
    async def go() -> None:
        async with SlackRig(tmp_path, monkeypatch) as rig:
            raw = json.dumps(mention_body("<@UASAPBOT> why is job 123 slow?", event_id="EvTs"))
            caplog.clear()
            with caplog.at_level(logging.DEBUG):
                status, _ = await rig.post(raw, {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": "v0=" + "0" * 64},
                                           "application/json")
            assert status == 401
            assert not any(r.exc_info for r in caplog.records), "no traceback"
            assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1
            assert await rig.ctx.queue.depth() == 0

    run(go())


# ------------------------------------------------------------------ item 7: idempotent first post
def test_worker_dying_mid_post_leaves_one_message_with_the_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> None:
        double = SlackDouble(lose_response={"chat.postMessage": 1})  # posted, but the worker never learns the ts
        async with SlackRig(tmp_path, monkeypatch, double=double) as rig:
            await rig.post_event(mention_body("<@UASAPBOT> why is job 123 slow?", event_id="EvKill"))
            await rig.idle()
            replies = bot_replies(rig)
            assert len(replies) == 1, [m.text for m in replies]
            assert "Run 123 is" in texts(replies[0]) and "Looking at run" not in replies[0].text
            assert len(rig.double.called("chat.postMessage")) == 1  # found again, not re-posted
            assert rig.double.called("conversations.replies")

    run(go())
