"""The job queue, in-process and on a real Redis: dedupe, ack after the handler, retries, dead letters,
deadlines, failure replies and graceful shutdown — the same behaviour from both implementations."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest
from redis_fixture import make_job, redis_env, redis_server_url, wait_until  # noqa: F401

from bot.errors import AsapError
from bot.runtime.context import RuntimeContext
from bot.runtime.handlers import Dispatcher
from bot.runtime.jobs import Job

pytestmark = pytest.mark.timeout(60)


class Script:
    """An in-test handler steered by ``job.payload``; counts starts, replies and failure replies."""

    def __init__(self) -> None:
        self.starts: Counter[str] = Counter()
        self.replies: Counter[str] = Counter()
        self.failures: dict[str, str] = {}
        self.gate = asyncio.Event()
        self.running = asyncio.Event()

    async def handler(self, job: Job, ctx: RuntimeContext) -> None:
        self.starts[job.id] += 1
        n = self.starts[job.id]
        pay = job.payload
        if pay.get("refuse"):
            raise AsapError(str(pay["refuse"]), field="run")
        if n <= int(pay.get("fail_times", 0)):
            raise RuntimeError(f"scripted failure {n}")
        self.running.set()
        if pay.get("block") and (n == 1 or pay.get("block") == "always"):
            await self.gate.wait()
        await asyncio.sleep(float(pay.get("sleep", 0)))
        self.replies[job.id] += 1

    async def failure(self, job: Job, reason: str, ctx: RuntimeContext) -> None:
        self.failures[job.id] = reason

    def dispatcher(self, ctx: RuntimeContext) -> Dispatcher:
        return Dispatcher(ctx, {("cli", "review"): self.handler}, {"cli": self.failure})


@pytest.fixture(params=["memory", "redis"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    base = {"ASAP_STATE_DIR": str(tmp_path / "state"), "ASAP_QUEUE_BLOCK_MS": "50", "ASAP_MAX_ATTEMPTS": "3",
            "ASAP_GRACE_S": "0.2", "ASAP_VISIBILITY_S": "30"}
    if request.param == "redis":
        base.update(request.getfixturevalue("redis_env"))
    else:
        base["ASAP_QUEUE_PREFIX"] = f"mem{id(request)}:"
    return base


async def _with_worker(env: dict[str, str], body, *, concurrency: int = 2):  # type: ignore[no-untyped-def]
    ctx = RuntimeContext.from_env(env)
    script = Script()
    stop = asyncio.Event()
    worker = asyncio.create_task(ctx.queue.run_worker(script.dispatcher(ctx), consumer="w1", stop=stop,
                                                      concurrency=concurrency))
    try:
        return await body(ctx, script)
    finally:
        stop.set()
        await worker
        await ctx.close()


def test_same_job_id_is_queued_once_and_answered_once(env: dict[str, str]) -> None:
    async def body(ctx, script):  # type: ignore[no-untyped-def]
        job = make_job(1)
        assert await ctx.queue.submit(job) is True
        assert await ctx.queue.submit(job) is False  # a redelivered Slack event / webhook
        assert (await ctx.submit(job)).status == "duplicate"
        assert await wait_until(lambda: script.replies[job.id] == 1)
        await asyncio.sleep(0.2)
        assert script.starts[job.id] == 1 and script.replies[job.id] == 1
        assert await ctx.queue.depth() == 0

    asyncio.run(_with_worker(env, body))


def test_job_is_acknowledged_only_after_the_handler_returns(env: dict[str, str]) -> None:
    async def body(ctx, script):  # type: ignore[no-untyped-def]
        job = make_job(2, block="always")
        await ctx.queue.submit(job)
        assert await wait_until(script.running.is_set)
        await asyncio.sleep(0.2)
        assert await ctx.queue.depth() == 1  # running, not acknowledged
        script.gate.set()
        assert await wait_until(lambda: script.replies[job.id] == 1)
        assert await wait_until(lambda: _zero(ctx))

    asyncio.run(_with_worker(env, body))


async def _zero(ctx: RuntimeContext) -> bool:
    return await ctx.queue.depth() == 0


def test_a_failing_handler_is_retried_then_answers_once(env: dict[str, str]) -> None:
    async def body(ctx, script):  # type: ignore[no-untyped-def]
        job = make_job(3, fail_times=2)
        await ctx.queue.submit(job)
        assert await wait_until(lambda: script.replies[job.id] == 1)
        assert script.starts[job.id] == 3
        assert job.id not in script.failures
        assert await ctx.queue.dead_letters() == []

    asyncio.run(_with_worker(env, body))


def test_retries_exhausted_go_to_dead_letters_with_one_failure_reply(env: dict[str, str]) -> None:
    async def body(ctx, script):  # type: ignore[no-untyped-def]
        job = make_job(4, fail_times=99)
        await ctx.queue.submit(job)
        assert await wait_until(lambda: job.id in script.failures)
        assert "failed 3 time(s)" in script.failures[job.id] and "scripted failure 3" in script.failures[job.id]
        assert script.starts[job.id] == 3 and script.replies[job.id] == 0
        assert await wait_until(lambda: _zero(ctx))
        dead = await ctx.queue.dead_letters()
        assert [d["id"] for d in dead] == [job.id]
        assert Job.model_validate_json(dead[0]["job"]).id == job.id
        text = ctx.metrics.render().decode()
        assert 'asap_jobs_total{kind="review",outcome="retry",source="cli"} 2.0' in text
        assert 'asap_jobs_total{kind="review",outcome="dead",source="cli"} 1.0' in text

    asyncio.run(_with_worker(env, body))


def test_a_refused_request_is_answered_with_its_message_and_not_retried(env: dict[str, str]) -> None:
    async def body(ctx, script):  # type: ignore[no-untyped-def]
        job = make_job(5, refuse="no run 'job 999' in the runs folder")
        await ctx.queue.submit(job)
        assert await wait_until(lambda: job.id in script.failures)
        assert "no run 'job 999'" in script.failures[job.id]
        await asyncio.sleep(0.2)
        assert script.starts[job.id] == 1
        assert await ctx.queue.dead_letters() == []

    asyncio.run(_with_worker(env, body))


def test_deadline_stops_the_handler_and_replies(env: dict[str, str]) -> None:
    async def body(ctx, script):  # type: ignore[no-untyped-def]
        job = make_job(6, sleep=30).model_copy(update={"deadline_s": 0.3})
        await ctx.queue.submit(job)
        assert await wait_until(lambda: job.id in script.failures, timeout=5)
        assert script.failures[job.id] == "the request took longer than its 0.3 s limit and was stopped"
        assert script.replies[job.id] == 0 and script.starts[job.id] == 1
        assert await wait_until(lambda: _zero(ctx))
        assert 'outcome="deadline"' in ctx.metrics.render().decode()

    asyncio.run(_with_worker(env, body))


def test_unknown_kind_gets_a_clear_failure_reply(env: dict[str, str]) -> None:
    async def body(ctx, script):  # type: ignore[no-untyped-def]
        job = make_job(7, kind="apply")
        await ctx.queue.submit(job)
        assert await wait_until(lambda: job.id in script.failures)
        assert script.failures[job.id] == "this bot cannot handle 'apply' requests from cli"
        assert await wait_until(lambda: _zero(ctx))

    asyncio.run(_with_worker(env, body))


def test_shutdown_returns_in_flight_jobs_for_another_worker(env: dict[str, str]) -> None:
    async def main() -> None:
        ctx = RuntimeContext.from_env(env)
        script = Script()
        stop_a, stop_b = asyncio.Event(), asyncio.Event()
        a = asyncio.create_task(ctx.queue.run_worker(script.dispatcher(ctx), consumer="a", stop=stop_a))
        job = make_job(8, block=True)
        await ctx.queue.submit(job)
        assert await wait_until(script.running.is_set)
        stop_a.set()  # SIGTERM: grace 0.2 s, the handler is still blocked -> the job goes back
        await asyncio.wait_for(a, timeout=5)
        assert script.replies[job.id] == 0
        assert await ctx.queue.depth() == 1
        t0 = asyncio.get_running_loop().time()
        b = asyncio.create_task(ctx.queue.run_worker(script.dispatcher(ctx), consumer="b", stop=stop_b))
        assert await wait_until(lambda: script.replies[job.id] == 1, timeout=5)
        # taken at once (not after the 30 s visibility timeout), and not counted as a failed attempt
        assert asyncio.get_running_loop().time() - t0 < 3
        assert script.starts[job.id] == 2 and job.id not in script.failures
        assert 'outcome="returned"' in ctx.metrics.render().decode()
        stop_b.set()
        await b
        await ctx.close()

    asyncio.run(main())


def test_shutdown_lets_a_short_in_flight_job_finish(env: dict[str, str]) -> None:
    async def main() -> None:
        ctx = RuntimeContext.from_env({**env, "ASAP_GRACE_S": "5"})
        script = Script()
        stop = asyncio.Event()
        w = asyncio.create_task(ctx.queue.run_worker(script.dispatcher(ctx), consumer="a", stop=stop))
        job = make_job(9, sleep=0.5)
        await ctx.queue.submit(job)
        assert await wait_until(script.running.is_set)
        stop.set()
        await asyncio.wait_for(w, timeout=5)
        assert script.replies[job.id] == 1 and script.starts[job.id] == 1
        assert await ctx.queue.depth() == 0
        await ctx.close()

    asyncio.run(main())


def test_malformed_queue_entry_goes_to_dead_letters(redis_env: dict[str, str]) -> None:  # noqa: F811
    async def body(ctx, script):  # type: ignore[no-untyped-def]
        await ctx.queue.client.xadd(ctx.queue.stream, {"job": b'{"id": "x"}'})
        assert await wait_until(lambda: _zero(ctx))
        dead = await ctx.queue.dead_letters()
        assert len(dead) == 1 and dead[0]["reason"].startswith("malformed job in the queue")

    asyncio.run(_with_worker({**redis_env, "ASAP_QUEUE_BLOCK_MS": "50"}, body))


def test_bad_queue_settings_name_the_variable(tmp_path: Path) -> None:
    with pytest.raises(AsapError) as err:
        RuntimeContext.from_env({"ASAP_STATE_DIR": str(tmp_path), "ASAP_MAX_ATTEMPTS": "zero"})
    assert err.value.field == "ASAP_MAX_ATTEMPTS" and "'zero'" in err.value.message
    with pytest.raises(AsapError) as err:
        RuntimeContext.from_env({"ASAP_STATE_DIR": str(tmp_path), "REDIS_URL": "http://nope"})
    assert err.value.field == "REDIS_URL"
