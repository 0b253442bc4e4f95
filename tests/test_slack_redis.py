"""A mention through the real HTTP path with the Redis Streams queue and store (``REDIS_URL``): one reply,
and Slack's retries -- even to a second front process sharing the Redis -- answered once."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.doubles.slack_double import SlackRig, mention_body

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(tmp_path)], stdout=subprocess.DEVNULL)
    end = time.time() + 10
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(timeout=10)


def test_mention_over_redis_is_answered_once_across_two_fronts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               redis_url: str) -> None:
    body = mention_body("<@UASAPBOT> why is job 520 slow?", event_id="EvRedis")

    async def go() -> None:
        async with SlackRig(tmp_path, monkeypatch, redis_url=redis_url) as rig, \
                SlackRig(tmp_path / "second", monkeypatch, redis_url=redis_url, worker=False) as other:
            statuses = await asyncio.gather(rig.post_event(body), other.post_event(body, retry=1),
                                            other.post_event(body, retry=2))
            assert [s for s, _ in statuses] == [200, 200, 200]
            await rig.idle()
            posts = rig.double.called("chat.postMessage") + other.double.called("chat.postMessage")
            assert len(posts) == 1
            answer = rig.double.messages[0]
            assert "Run 520" in str(answer.blocks) and answer.updates >= 1
            # the conversation thread lives in Redis too: a follow-up continues it
            follow = mention_body("which one would you start with?", event_id="EvRedis2", kind="message",
                                  ts="1710000000.000200", thread_ts="1710000000.000100", channel_type="channel")
            await other.post_event(follow)
            await rig.idle()
            log = rig.ctx.store.read_log("slack:C0DATA:1710000000.000100")
            assert [e["intent"] for e in log if e.get("kind") == "request"] == ["first", "which_first"]

    (tmp_path / "second").mkdir()
    asyncio.run(go())
