"""Exactly one message per request even when something fails in between: Slack's retries of a refused event,
and a progress message whose record could not be written (Redis down between the post and the record).
Scenario tests over the real HTTP path against the Slack Web API double."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.doubles.slack_double import SlackDouble, SlackRig, action_body, mention_body
from tests.redis_fixture import RedisServer
from tests.test_slack_robust import ROOT, bot_replies, published, texts

CH = "C0DATA"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# ------------------------------------------------------------------ 1: one refusal notice per refused event
@pytest.mark.parametrize("refusal", ["limited", "busy"])
def test_retries_of_a_refused_event_get_one_notice_and_a_later_delivery_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refusal: str) -> None:
    window = 4.0
    env = {"ASAP_USER_RATE": f"1/{window:g}"} if refusal == "limited" else {"ASAP_MAX_PENDING": "1"}

    async def go() -> None:
        async with SlackRig(tmp_path, monkeypatch, extra_env=env, worker=refusal == "limited") as rig:
            started = time.monotonic()
            await rig.post_event(mention_body("<@UASAPBOT> why is job 123 slow?", event_id="EvR1"))
            second = mention_body("<@UASAPBOT> why is job 311 slow?", event_id="EvR2", ts="1710000001.000100")
            for retry in (0, 1, 2):  # the delivery and Slack's retries (X-Slack-Retry-Num) are all refused
                status, _ = await rig.post_event(second, retry=retry)
                assert status == 200
            await asyncio.sleep(1.2)  # refusal notices go out after the acknowledgement, when the front is quiet
            eph = rig.double.ephemerals
            assert len(eph) == 1, [e["text"] for e in eph]
            assert eph[0]["user"] == "UALICE"
            assert ("try again in" in eph[0]["text"]) if refusal == "limited" else ("ASAP is busy" in eph[0]["text"])
            # once there is room, a later delivery of the same event is not a "duplicate": it runs
            if refusal == "limited":
                await rig.idle()
                await asyncio.sleep(max(0.0, started + window + 0.3 - time.monotonic()))
            else:
                rig.start_worker()
                await rig.idle()
            status, _ = await rig.post_event(second, retry=3)
            assert status == 200
            await rig.idle()
            replies = bot_replies(rig, CH, "1710000001.000100")
            assert len(replies) == 1 and "Run 311 is" in texts(replies[0])
            assert len(rig.double.ephemerals) == 1

    run(go())


def test_refusal_notice_is_sent_once_across_two_fronts_sharing_redis(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Slack may deliver the retry to another front process: the notice claim lives in the shared Redis."""
    folder = tmp_path / "redis"
    folder.mkdir()
    server = RedisServer(folder, persist=False)
    server.start()
    (tmp_path / "b").mkdir()
    env = {"ASAP_USER_RATE": "1/60"}

    async def go() -> None:
        async with SlackRig(tmp_path, monkeypatch, redis_url=server.url, extra_env=env) as a, \
                SlackRig(tmp_path / "b", monkeypatch, redis_url=server.url, extra_env=env, worker=False) as b:
            await a.post_event(mention_body("<@UASAPBOT> why is job 123 slow?", event_id="EvS1"))
            await a.idle()
            second = mention_body("<@UASAPBOT> why is job 311 slow?", event_id="EvS2", ts="1710000001.000100")
            await a.post_event(second)
            await b.post_event(second, retry=1)
            await b.post_event(second, retry=2)
            await asyncio.sleep(1.2)
            notices = a.double.ephemerals + b.double.ephemerals
            assert len(notices) == 1 and "try again in" in notices[0]["text"], notices

    try:
        run(go())
    finally:
        server.stop()


# ------------------------------------------------------------------ 2: the record write fails after the post
class FlakyStore:
    """The rig's store, except that the first write of a reply record carrying a ts fails like Redis down
    (for records whose key contains ``only``)."""

    def __init__(self, inner: Any, only: str = "") -> None:
        self.inner = inner
        self.only = only
        self.failed = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def put_value(self, key: str, value: dict[str, Any], ttl: float | None = None) -> None:
        if key.startswith("slack:progress:") and self.only in key and "ts" in value and not self.failed:
            self.failed += 1
            raise redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
        self.inner.put_value(key, value, ttl)


def test_progress_record_lost_after_the_post_and_no_history_scope_one_message(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The intent is stored, but the thread cannot be searched (no *:history scope): the rerun must still
    update the message it posted, not post a second one."""
    async def go() -> None:
        double = SlackDouble()
        double._m_conversations_replies = lambda args: {"ok": False, "error": "missing_scope"}  # type: ignore[method-assign]
        async with SlackRig(tmp_path, monkeypatch, double=double) as rig:
            rig.ctx.store = flaky = FlakyStore(rig.ctx.store)
            await rig.post_event(mention_body("<@UASAPBOT> why is job 123 slow?", event_id="EvFlaky"))
            await rig.idle()
            assert flaky.failed == 1
            replies = bot_replies(rig)
            assert len(replies) == 1, [m.text for m in replies]
            assert "Run 123 is" in texts(replies[0]) and "Looking at run" not in replies[0].text
            record = flaky.inner.get_value("slack:progress:slack:EvFlaky")
            assert record["ts"] == replies[0].ts and record["done"]  # the store has it once it answered again

    run(go())


def test_explanation_whose_record_write_failed_is_posted_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Explain, Apply and failure notices post through the same record: a failed write after the post must
    not make the rerun post the explanation again."""
    async def go() -> None:
        async with SlackRig(tmp_path, monkeypatch) as rig:
            await rig.post_event(mention_body("<@UASAPBOT> why is job 123 slow?", event_id="EvX1"))
            await rig.idle()
            answer = bot_replies(rig)[0]
            rig.ctx.store = flaky = FlakyStore(rig.ctx.store, only=":explain:")
            await rig.click(action_body("asap_explain:1", json.dumps({"run": "123", "i": 1}), user="UALICE",
                                        channel=CH, message_ts=answer.ts, thread_ts=ROOT, action_ts="1710000002.1"))
            await rig.idle()
            assert flaky.failed == 1
            replies = bot_replies(rig)
            assert len(replies) == 2, [m.text for m in replies]
            assert replies[1].text.startswith("Proposal 1 of run 123")

    run(go())


def test_redis_stopped_between_the_post_and_its_record_one_message(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A private redis-server (no persistence, as a cache-style Redis) is stopped the moment the progress
    message is posted and comes back a second later, empty: the intent went with it. The worker keeps the
    job through the outage; its rerun must update the message it posted."""
    folder = tmp_path / "redis"
    folder.mkdir()
    server = RedisServer(folder, persist=False)
    server.start()

    async def go() -> None:
        double = SlackDouble()
        post = double._m_chat_postMessage

        def post_then_stop(args: dict[str, Any]) -> dict[str, Any]:
            out = post(args)
            if len(double.messages) == 1:
                server.stop()
                asyncio.get_running_loop().call_later(1.0, server.start)
            return out

        double._m_chat_postMessage = post_then_stop  # type: ignore[method-assign]
        async with SlackRig(tmp_path, monkeypatch, redis_url=server.url, double=double) as rig:
            await rig.post_event(mention_body("<@UASAPBOT> why is job 123 slow?", event_id="EvBlip"))
            for _ in range(150):
                if bot_replies(rig) and "Run 123 is" in texts(bot_replies(rig)[0]):
                    break
                await asyncio.sleep(0.1)
            await rig.idle(60)
            replies = bot_replies(rig)
            assert len(replies) == 1, [m.text for m in replies]
            assert "Run 123 is" in texts(replies[0]) and "Looking at run" not in replies[0].text
            assert len(double.called("chat.postMessage")) == 1

    try:
        run(go())
    finally:
        server.stop()


# ------------------------------------------------------------------ 3: a file shared without a question
def test_file_shared_without_text_gets_a_question_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> None:
        async with SlackRig(tmp_path, monkeypatch) as rig:
            body = published("message_file_share.json", channel="D0ALICE", user="UALICE", text="", ts=ROOT)
            await rig.post_event(body)
            await rig.idle()
            replies = bot_replies(rig, "D0ALICE", ROOT)
            assert len(replies) == 1
            text = replies[0].text
            assert "namenamename.txt" in text and "don't read attachments" in text and "Name a run" in text
            assert "no run ID" not in texts(replies[0])
            # in a thread about run 123, the question back names that run
            await rig.post_event(mention_body("<@UASAPBOT> why is job 123 slow?", event_id="EvF1"))
            await rig.idle()
            follow = published("message_file_share.json", channel=CH, user="UALICE", text="", ts="1710000000.000300",
                               thread_ts=ROOT, channel_type="channel")
            await rig.post_event(follow)
            await rig.idle()
            replies = bot_replies(rig, CH, ROOT)
            assert len(replies) == 2 and "Run 123 is" in texts(replies[0])
            assert "What would you like to know about run 123?" in replies[1].text
            assert json.dumps(replies[1].blocks).count("namenamename.txt") == 1

    run(go())


def test_shared_file_names_are_escaped_and_bounded() -> None:
    from integrations.slack.blocks import empty_question_message
    from integrations.slack.intake import event_job

    files = [{"name": "<!channel> ping.json"}] + [{"name": f"trace-{n}.json.gz" + "x" * 300} for n in range(20)]
    body = mention_body("", event_id="EvFiles", kind="message", channel="D0ALICE", channel_type="im")
    body["event"].update(subtype="file_share", files=files)
    job = event_job(body, bot_user_id="UASAPBOT")
    assert job is not None and job.text == "" and len(job.payload["files"]) == 10
    msg = empty_question_message(None, job.payload["files"])
    for where in (msg.text, json.dumps(msg.blocks)):
        assert "<!channel>" not in where and "&lt;!channel&gt;" in where
    assert "and 7 more" in msg.text and len(msg.text) < 600
