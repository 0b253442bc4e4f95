"""The acknowledgement path under load: post-ack calls wait for a quiet front, Redis submits are
auto-pipelined, the Slack fast path answers exactly like Bolt, and `asap serve` listens with a deep backlog."""

from __future__ import annotations

import asyncio
import gc
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from redis_fixture import free_port, make_job, own_redis, redis_env, redis_server_url  # noqa: F401

from bot.errors import AsapError
from bot.runtime.afterack import AfterAck
from bot.runtime.context import RuntimeContext
from bot.runtime.queue import QueueUnavailable

pytestmark = pytest.mark.timeout(90)


# ------------------------------------------------------------------------------------------ AfterAck
def test_after_ack_waits_for_a_quiet_front_then_sends_everything() -> None:
    async def main() -> None:
        later = AfterAck(quiet_s=0.05, max_delay_s=5.0)
        sent: list[int] = []

        async def call(i: int) -> None:
            sent.append(i)

        for i in range(10):  # a burst: a request every 10 ms keeps the front busy
            later.request_started()
            later.add(call(i))
            await asyncio.sleep(0.01)
        assert sent == []  # nothing competed with the acks
        await asyncio.sleep(0.12)
        assert sorted(sent) == list(range(10)) and later.outstanding == 0

    asyncio.run(main())


def test_after_ack_sends_after_max_delay_under_sustained_load_and_bounds_concurrency() -> None:
    async def main() -> None:
        later = AfterAck(quiet_s=0.05, max_delay_s=0.1, concurrency=2)
        running = peak = 0
        done: list[int] = []

        async def call(i: int) -> None:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.02)
            running -= 1
            done.append(i)

        t0 = time.monotonic()
        for i in range(6):
            later.add(call(i))
        while len(done) < 6 and time.monotonic() - t0 < 2:
            later.request_started()  # never quiet
            await asyncio.sleep(0.005)
        assert sorted(done) == list(range(6))
        assert peak == 2
        assert time.monotonic() - t0 < 1.0  # held at most max_delay_s, not until the load stops

    asyncio.run(main())


def test_after_ack_close_sends_what_waits_and_failures_are_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        later = AfterAck(quiet_s=10.0, max_delay_s=10.0)
        sent: list[str] = []

        async def ok() -> None:
            sent.append("ok")

        async def boom() -> None:
            raise RuntimeError("slack said no")

        later.request_started()
        later.add(boom())
        later.add(ok())
        await asyncio.sleep(0.02)
        assert sent == []
        await later.close(timeout=2)  # shutdown: no quiet period, sent now
        assert sent == ["ok"] and later.outstanding == 0

    asyncio.run(main())
    assert "slack said no" in caplog.text


# ------------------------------------------------------------------------------------------ Redis submits
def test_concurrent_redis_submits_travel_in_one_pipeline(redis_env: dict[str, str]) -> None:  # noqa: F811
    async def main() -> None:
        ctx = RuntimeContext.from_env({**redis_env, "ASAP_USER_RATE": "3/60", "ASAP_CHANNEL_RATE": "off"})
        await ctx.submit(make_job("warm"))
        client = ctx.queue.client  # type: ignore[attr-defined]
        trips: list[str] = []
        real_pipeline, real_exec = client.pipeline, client.execute_command

        def pipeline(*a, **kw):  # type: ignore[no-untyped-def]
            trips.append("pipeline")
            return real_pipeline(*a, **kw)

        async def execute_command(*a, **kw):  # type: ignore[no-untyped-def]
            trips.append(str(a[0]))
            return await real_exec(*a, **kw)

        client.pipeline, client.execute_command = pipeline, execute_command
        jobs = [make_job(i) for i in range(100)]  # 100 people
        subs = await asyncio.gather(*(ctx.submit(j) for j in jobs), ctx.submit(jobs[0]))
        client.pipeline, client.execute_command = real_pipeline, real_exec
        assert trips == ["pipeline"]  # 101 submits, one round trip
        assert [s.status for s in subs[:100]] == ["queued"] * 100
        assert subs[100].status == "duplicate"  # the same id twice in one batch: still once
        assert await ctx.queue.depth() == 101
        # each script stays atomic and per-user windows still apply inside a batch
        more = await asyncio.gather(*(ctx.submit(make_job(f"m{i}", user="zed")) for i in range(4)))
        assert [s.status for s in more] == ["queued", "queued", "queued", "limited"]
        assert more[3].message.startswith("You have asked 3 times in the last minute (limit 3)")
        await ctx.close()

    asyncio.run(main())


def test_batched_submits_survive_a_script_flush_and_report_an_outage(own_redis, tmp_path: Path) -> None:  # noqa: F811
    """Redis restarted empty (scripts gone): the batch reloads its script; Redis down: every caller is told."""
    async def main() -> None:
        env = {"REDIS_URL": own_redis.url, "ASAP_STATE_DIR": str(tmp_path / "s"), "ASAP_USER_RATE": "off",
               "ASAP_CHANNEL_RATE": "off"}
        ctx = RuntimeContext.from_env(env)
        assert (await ctx.submit(make_job(0))).status == "queued"
        await ctx.queue.client.script_flush()  # type: ignore[attr-defined]
        subs = await asyncio.gather(*(ctx.submit(make_job(i)) for i in range(1, 20)))
        assert [s.status for s in subs] == ["queued"] * 19
        single = await ctx.queue.submit(make_job(99))  # the plain dedupe+XADD script too, batch of one
        assert single is True
        await ctx.queue.client.script_flush()  # type: ignore[attr-defined]
        assert await ctx.queue.submit(make_job(100)) is True
        own_redis.stop()
        results = await asyncio.gather(*(ctx.submit(make_job(f"x{i}")) for i in range(5)), return_exceptions=True)
        assert all(isinstance(r, QueueUnavailable) for r in results)
        assert "cannot reach Redis" in results[0].message  # type: ignore[union-attr]
        own_redis.start()
        assert (await ctx.submit(make_job("after"))).status == "queued"
        await ctx.close()

    asyncio.run(main())


# ------------------------------------------------------------------------------------------ asap serve
def test_serve_listens_with_a_deep_backlog_and_a_frozen_heap(tmp_path: Path) -> None:
    """A 200-connection burst must fit the accept queue (a dropped SYN costs the client a 1 s retry)."""
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) is not installed")
    from bot.runtime.process import BACKLOG, run_front

    async def main() -> None:
        ctx = RuntimeContext.from_env({"ASAP_STATE_DIR": str(tmp_path / "s")})
        port = free_port()
        stop, started = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(run_front(ctx, host="127.0.0.1", port=port, stop=stop, started=started))
        await asyncio.wait_for(started.wait(), 10)
        out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True).stdout
        stop.set()
        await task
        await ctx.close()
        somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
        assert int(out.split()[2]) == min(BACKLOG, somaxconn) and BACKLOG >= 1024  # Send-Q = backlog
        assert gc.get_freeze_count() > 0

    asyncio.run(main())


# ------------------------------------------------------------------------------------------ Slack fast path
def test_slack_fast_path_answers_like_bolt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Mentions skip Bolt's dispatch once it has learned the bot's identity; the answers stay Bolt's."""
    from slack_bolt.async_app import AsyncApp

    from integrations.slack.app import FAST_KEY
    from tests.doubles.slack_double import SlackRig, mention_body

    bolt_calls: list[int] = []
    real = AsyncApp.async_dispatch

    async def counting(self, req):  # type: ignore[no-untyped-def]
        bolt_calls.append(1)
        return await real(self, req)

    monkeypatch.setattr(AsyncApp, "async_dispatch", counting)

    async def main() -> None:
        async with SlackRig(tmp_path, monkeypatch, worker=False) as rig:
            fast = rig.ctx.extras[FAST_KEY]
            assert not fast.ready
            first = mention_body("<@UASAPBOT> why is job 123 slow?", event_id="Ev1", ts="1.1")
            assert (await rig.post_event(first))[0] == 200
            assert fast.ready and fast.bot_user_id == "UASAPBOT" and len(bolt_calls) == 1
            second = mention_body("<@UASAPBOT> why is job 204 slow?", event_id="Ev2", ts="2.1")
            assert (await rig.post_event(second))[0] == 200
            assert (await rig.post_event(second, retry=1))[0] == 200  # Slack's retry: acknowledged, not queued
            assert len(bolt_calls) == 1 and await rig.ctx.queue.depth() == 2
            # forged or stale: Bolt refuses them as always, nothing queued
            forged = mention_body("<@UASAPBOT> apply 3", event_id="Ev3", ts="3.1")
            assert (await rig.post_event(forged, secret="not-the-secret"))[0] == 401
            assert (await rig.post_event(forged, timestamp=int(time.time()) - 600))[0] == 401
            # the bot's own message in a thread: ignored like Bolt's IgnoringSelfEvents
            own = mention_body("I answered", event_id="Ev4", ts="4.1", user="UASAPBOT", kind="message",
                               thread_ts="1.1")
            assert (await rig.post_event(own))[0] == 200
            assert await rig.ctx.queue.depth() == 2
            # the queue is down: 500, so Slack delivers the event again
            async def down(job):  # type: ignore[no-untyped-def]
                raise AsapError("cannot reach Redis at 127.0.0.1:6379/0", field="REDIS_URL")

            monkeypatch.setattr(rig.ctx, "submit", down)
            assert (await rig.post_event(mention_body("<@UASAPBOT> why 311", event_id="Ev5", ts="5.1")))[0] == 500

    asyncio.run(main())
