"""Against a real Redis with real worker processes: a worker killed mid-job (SIGKILL), a worker stopped
with SIGTERM, and Redis itself stopped and started again. Each job must end with exactly one reply."""

from __future__ import annotations

import asyncio
import logging
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from redis_fixture import (  # noqa: F401
    HANDLERS_DIR,
    RedisServer,
    make_job,
    own_redis,
    redis_env,
    redis_server_url,
    wait_until,
    worker_command,
    worker_env,
)

from bot.errors import AsapError
from bot.runtime.context import RuntimeContext
from bot.runtime.handlers import Dispatcher
from bot.runtime.queue import QueueUnavailable

pytestmark = pytest.mark.timeout(90)

if str(HANDLERS_DIR) not in sys.path:
    sys.path.insert(0, str(HANDLERS_DIR))


def _spawn(env: dict[str, str], name: str, *args: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as fh:
        return subprocess.Popen(worker_command("worker", "--consumer", name, *args), env=worker_env(env, name),
                                stdout=fh, stderr=subprocess.STDOUT)


async def _hget(ctx: RuntimeContext, key: str, field: str) -> str | None:
    raw = await ctx.queue.client.hget(f"{ctx.settings.queue.prefix}{key}", field)  # type: ignore[attr-defined]
    return raw.decode() if raw is not None else None


def test_worker_killed_mid_job_the_job_finishes_once_elsewhere(redis_env: dict[str, str], tmp_path: Path) -> None:  # noqa: F811
    env = {**redis_env, "ASAP_VISIBILITY_S": "1.5", "ASAP_QUEUE_BLOCK_MS": "100"}

    async def main() -> None:
        import runtime_handlers  # noqa: F401  (registers the scripted handler in this process too)

        ctx = RuntimeContext.from_env(env)
        a = _spawn(env, "doomed", "--concurrency", "1", log=tmp_path / "a.log")
        try:
            job = make_job("kill", sleep_first=60)
            assert await ctx.queue.submit(job)
            assert await wait_until(lambda: _hget(ctx, "test:starts", job.id), timeout=30), \
                (tmp_path / "a.log").read_text()
            a.send_signal(signal.SIGKILL)  # mid-handler: no ack, no cleanup
            a.wait(timeout=10)
        finally:
            if a.poll() is None:
                a.kill()
        # a survivor takes the job over once it has been idle for the visibility timeout
        stop = asyncio.Event()
        t0 = time.monotonic()
        b = asyncio.create_task(ctx.queue.run_worker(Dispatcher(ctx), consumer="survivor", stop=stop))
        assert await wait_until(lambda: _hget(ctx, "test:replies", job.id), timeout=20)
        took = time.monotonic() - t0
        await asyncio.sleep(2.0)  # longer than the visibility timeout: nothing runs it again
        stop.set()
        await b
        assert await _hget(ctx, "test:replies", job.id) == "1"
        assert await _hget(ctx, "test:starts", job.id) == "2"
        assert await _hget(ctx, "test:finished_by", job.id) != "doomed"
        assert took < 10
        assert await ctx.queue.depth() == 0
        assert await ctx.queue.dead_letters() == []
        await ctx.close()

    asyncio.run(main())


def test_sigterm_returns_the_in_flight_job_and_exits_cleanly(redis_env: dict[str, str], tmp_path: Path) -> None:  # noqa: F811
    env = {**redis_env, "ASAP_VISIBILITY_S": "60", "ASAP_GRACE_S": "0.5", "ASAP_QUEUE_BLOCK_MS": "100"}

    async def main() -> None:
        import runtime_handlers  # noqa: F401

        ctx = RuntimeContext.from_env(env)
        log = tmp_path / "w.log"
        w = _spawn(env, "leaving", "--concurrency", "2", log=log)
        try:
            job = make_job("term", sleep_first=60)
            assert await ctx.queue.submit(job)
            assert await wait_until(lambda: _hget(ctx, "test:starts", job.id), timeout=30), log.read_text()
            w.send_signal(signal.SIGTERM)
            assert w.wait(timeout=15) == 0, log.read_text()
        finally:
            if w.poll() is None:
                w.kill()
        text = log.read_text()
        assert "SIGTERM received" in text and "returning the job to the queue" in text
        assert '"job_id":"' + job.id + '"' in text  # structured logs carry the job id
        stop = asyncio.Event()
        t0 = time.monotonic()
        b = asyncio.create_task(ctx.queue.run_worker(Dispatcher(ctx), consumer="next", stop=stop))
        assert await wait_until(lambda: _hget(ctx, "test:replies", job.id), timeout=10)
        assert time.monotonic() - t0 < 5  # returned at once, not reclaimed after the 60 s visibility timeout
        stop.set()
        await b
        assert await _hget(ctx, "test:replies", job.id) == "1"
        await ctx.close()

    asyncio.run(main())


def test_redis_stopped_gives_a_clear_error_and_work_resumes_when_it_returns(
        own_redis: RedisServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:  # noqa: F811
    env = {"REDIS_URL": own_redis.url, "ASAP_QUEUE_PREFIX": "outage:", "ASAP_STATE_DIR": str(tmp_path / "s"),
           "ASAP_VISIBILITY_S": "10", "ASAP_QUEUE_BLOCK_MS": "100"}
    caplog.set_level(logging.INFO, logger="asap.runtime")

    async def main() -> None:
        import runtime_handlers  # noqa: F401

        from bot.runtime.server import build_app

        ctx = RuntimeContext.from_env(env)
        stop = asyncio.Event()
        w = asyncio.create_task(ctx.queue.run_worker(Dispatcher(ctx), consumer="steady", stop=stop, concurrency=2))
        first = make_job("before")
        assert await ctx.queue.submit(first)
        assert await wait_until(lambda: _hget(ctx, "test:replies", first.id), timeout=10)

        # a job is running when Redis goes away; its reply and ack must land once Redis is back
        inflight = make_job("during", sleep=1.0)
        assert await ctx.queue.submit(inflight)
        assert await wait_until(lambda: _hget(ctx, "test:starts", inflight.id), timeout=10)
        own_redis.stop()

        with pytest.raises(QueueUnavailable) as err:
            await ctx.submit(make_job("refused"))
        assert f"cannot reach Redis at 127.0.0.1:{own_redis.port}" in err.value.message
        assert isinstance(err.value, AsapError) and err.value.hint

        from aiohttp.test_utils import TestClient, TestServer

        async with TestClient(TestServer(build_app(ctx, env={}))) as client:
            resp = await client.get("/readyz")
            body = await resp.json()
            assert resp.status == 503 and body["checks"]["queue"].startswith("failed: cannot reach Redis")
            assert (await client.get("/healthz")).status == 200  # alive, just not ready

        await asyncio.sleep(2.5)  # the worker keeps retrying (with backoff) and logs the outage once
        assert not w.done()
        outage_logs = [r for r in caplog.records if "queue unavailable" in r.getMessage()]
        assert len(outage_logs) == 1 and outage_logs[0].levelno == logging.ERROR

        own_redis.start()  # same port, same AOF: the queue is still there
        after = make_job("after")
        assert await wait_until(lambda: _submit_ok(ctx, after), timeout=10)
        assert await wait_until(lambda: _hget(ctx, "test:replies", after.id), timeout=15)
        assert await wait_until(lambda: _hget(ctx, "test:replies", inflight.id), timeout=15)
        assert any("queue reachable again" in r.getMessage() for r in caplog.records)
        stop.set()
        await w
        for job in (first, inflight, after):
            assert await _hget(ctx, "test:replies", job.id) == "1", job.id
        assert await ctx.queue.depth() == 0
        await ctx.close()

    asyncio.run(main())


async def _submit_ok(ctx: RuntimeContext, job) -> bool:  # type: ignore[no-untyped-def]
    try:
        return (await ctx.submit(job)).status in ("queued", "duplicate")
    except QueueUnavailable:
        return False
