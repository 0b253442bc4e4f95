"""Dedupe holds only ids that were accepted and are pending or done.

A request refused as busy (503) or rate-limited (429), or accepted by a process that crashed before running
it, must run when the same id is sent again; an id that is pending or done stays a duplicate.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from redis_fixture import REPO, redis_env, redis_server_url, wait_until  # noqa: F401

from bot.runtime.context import RuntimeContext
from bot.runtime.handlers import Dispatcher
from bot.runtime.jobs import Job
from bot.runtime.server import build_app

pytestmark = pytest.mark.timeout(60)

TOKEN = "dedupe-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(params=["memory", "redis"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    base = {"ASAP_STATE_DIR": str(tmp_path / "state"), "ASAP_QUEUE_PREFIX": f"dd{uuid.uuid4().hex[:6]}:",
            "ASAP_API_TOKEN": TOKEN, "ASAP_QUEUE_BLOCK_MS": "50"}
    if request.param == "redis":
        base.update(request.getfixturevalue("redis_env"))
    return base


def _dispatcher(ctx: RuntimeContext, ran: list[str]) -> Dispatcher:
    async def answer(job: Job, c: RuntimeContext) -> None:
        ran.append(job.id)
        await c.queue.set_result(job.id, {"status": "ok", "text": f"answer to {job.text}"})

    return Dispatcher(ctx, handlers={("cli", "ask"): answer})


async def _post(client: TestClient, job_id: str, text: str = "why is job 123 slow", user: str = "ann") -> tuple[int, Any]:
    resp = await client.post("/v1/jobs", json={"id": job_id, "text": text, "user": user}, headers=AUTH)
    return resp.status, await resp.json()


async def _drain(ctx: RuntimeContext, ran: list[str], want: int) -> None:
    stop = asyncio.Event()
    w = asyncio.create_task(ctx.queue.run_worker(_dispatcher(ctx, ran), consumer="dd", stop=stop))
    assert await wait_until(lambda: len(ran) >= want, timeout=15)
    stop.set()
    await w


def test_a_request_refused_as_busy_runs_when_sent_again(env: dict[str, str]) -> None:
    async def main() -> None:
        ctx = RuntimeContext.from_env({**env, "ASAP_MAX_PENDING": "1", "ASAP_USER_RATE": "off",
                                       "ASAP_CHANNEL_RATE": "off"})
        ran: list[str] = []
        async with TestClient(TestServer(build_app(ctx, env={}))) as client:
            assert (await _post(client, "first"))[0] == 202
            status, body = await _post(client, "second")
            assert status == 503 and body["status"] == "busy"
            await _drain(ctx, ran, 1)  # room again
            status, body = await _post(client, "second")  # the person (or Slack) sends it again
            assert status == 202 and body["status"] == "queued"
            await _drain(ctx, ran, 2)
            assert ran == ["cli:first", "cli:second"]
            assert (await ctx.queue.get_result("cli:second"))["text"] == "answer to why is job 123 slow"
            status, body = await _post(client, "second")  # done: now it is a duplicate
            assert status == 200 and body["status"] == "duplicate"
        await ctx.close()

    asyncio.run(main())


def test_a_rate_limited_request_runs_when_sent_again_after_the_window(env: dict[str, str]) -> None:
    async def main() -> None:
        ctx = RuntimeContext.from_env({**env, "ASAP_USER_RATE": "1/1", "ASAP_CHANNEL_RATE": "off"})
        ran: list[str] = []
        async with TestClient(TestServer(build_app(ctx, env={}))) as client:
            assert (await _post(client, "a"))[0] == 202
            status, body = await _post(client, "b")
            assert status == 429 and body["status"] == "limited"
            await asyncio.sleep(1.1)
            status, body = await _post(client, "b")
            assert status == 202 and body["status"] == "queued"
            status, body = await _post(client, "b")  # pending: a duplicate, never a second job
            assert status == 200 and body["status"] == "duplicate"
            await _drain(ctx, ran, 2)
            assert sorted(ran) == ["cli:a", "cli:b"]
        await ctx.close()

    asyncio.run(main())


CRASH = textwrap.dedent("""
    import asyncio, os, sys
    from bot.runtime.context import RuntimeContext
    from bot.runtime.jobs import Job, Requester

    async def main():
        ctx = RuntimeContext.from_env({"ASAP_STATE_DIR": sys.argv[1]})
        job = Job(id=sys.argv[2], source="cli", kind="ask", thread="cli:crash", text="why is job 123 slow",
                  requester=Requester(source="cli", user_id="ann"))
        sub = await ctx.submit(job)
        print(sub.status, flush=True)
        os._exit(9)  # the process dies with the job still in its in-process queue

    asyncio.run(main())
""")


def test_an_id_accepted_by_a_process_that_crashed_runs_when_sent_again(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    job_id = f"cli:crash-{uuid.uuid4().hex[:8]}"
    out = subprocess.run([sys.executable, "-c", CRASH, state, job_id], capture_output=True, text=True, timeout=60,
                         cwd=REPO, env={**_child_env(), "PYTHONPATH": str(REPO)})
    assert out.returncode == 9 and out.stdout.strip() == "queued", out.stderr

    async def main() -> None:
        from bot.runtime.jobs import Requester

        ctx = RuntimeContext.from_env({"ASAP_STATE_DIR": state, "ASAP_QUEUE_BLOCK_MS": "50"})
        job = Job(id=job_id, source="cli", kind="ask", thread="cli:crash", text="why is job 123 slow",
                  requester=Requester(source="cli", user_id="ann"))
        assert (await ctx.submit(job)).status == "queued"  # the crashed process's claim does not hold it
        assert (await ctx.submit(job)).status == "duplicate"  # pending here now
        ran: list[str] = []
        t0 = time.monotonic()
        await _drain(ctx, ran, 1)
        assert ran == [job_id] and time.monotonic() - t0 < 10
        assert (await ctx.submit(job)).status == "duplicate"  # done
        await ctx.close()

    asyncio.run(main())


def _child_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
