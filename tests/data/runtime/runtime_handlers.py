"""A scripted handler for the runtime tests (imported by test workers via ``--handlers runtime_handlers``).

``cli``/``review`` jobs: count the start, optionally sleep or fail as ``job.payload`` says, then record ONE
reply by incrementing ``<prefix>test:replies[job.id]`` in Redis (an increment, not an upsert, so a job that
ran to completion twice shows up as 2) and which worker finished it.

payload: ``sleep`` (s, every attempt), ``sleep_first`` (s, only the first start), ``fail_times`` (raise on
the first N starts), ``refuse`` (raise an AsapError).
"""

from __future__ import annotations

import asyncio
import os

from bot.errors import AsapError
from bot.runtime.handlers import register_failure_reply, register_handler


def _client(ctx):  # type: ignore[no-untyped-def]
    return ctx.queue.client


async def scripted(job, ctx) -> None:  # type: ignore[no-untyped-def]
    r = _client(ctx)
    p = ctx.settings.queue.prefix
    starts = await r.hincrby(f"{p}test:starts", job.id, 1)
    pay = job.payload
    if pay.get("refuse"):
        raise AsapError(str(pay["refuse"]), field="run")
    if starts <= int(pay.get("fail_times", 0)):
        raise RuntimeError(f"scripted failure {starts}")
    delay = float(pay.get("sleep", 0)) + (float(pay.get("sleep_first", 0)) if starts == 1 else 0.0)
    if delay:
        await asyncio.sleep(delay)
    pipe = r.pipeline(transaction=True)
    pipe.hincrby(f"{p}test:replies", job.id, 1)
    pipe.hset(f"{p}test:finished_by", job.id, os.environ.get("ASAP_TEST_WORKER", f"pid-{os.getpid()}"))
    await pipe.execute()


async def failure(job, reason: str, ctx) -> None:  # type: ignore[no-untyped-def]
    if job.kind != "review":  # leave the built-in CLI failure reply in charge of real jobs
        from bot.runtime.defaults import cli_failure

        await cli_failure(job, reason, ctx)
        return
    await _client(ctx).hset(f"{ctx.settings.queue.prefix}test:failures", job.id, reason)


register_handler("cli", "review", scripted)
register_failure_reply("cli", failure)
