"""Rate limits (sliding windows in memory and in Redis), the global cap, and the replies people see."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from redis_fixture import make_job, redis_env, redis_server_url  # noqa: F401

from bot.errors import AsapError
from bot.runtime.context import RuntimeContext
from bot.runtime.limits import MemoryRateLimiter, Rate, RedisRateLimiter, limit_message

pytestmark = pytest.mark.timeout(60)


def test_rate_parse_forms_and_bad_values() -> None:
    assert Rate.parse("5/60", field="X") == Rate(5, 60.0)
    assert Rate.parse("5/min", field="X") == Rate(5, 60.0)
    assert Rate.parse("100/2h", field="X") == Rate(100, 7200.0)
    assert Rate.parse("off", field="X").count == 0
    for bad in ("five per minute", "5", "5/0", "-1/60"):
        with pytest.raises(AsapError) as err:
            Rate.parse(bad, field="ASAP_USER_RATE")
        assert err.value.field == "ASAP_USER_RATE" and repr(bad) in err.value.message


@pytest.fixture(params=["memory", "redis"])
def limiter_factory(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    if request.param == "memory":
        return lambda: MemoryRateLimiter()
    url = request.getfixturevalue("redis_server_url")

    def make():  # type: ignore[no-untyped-def]
        import redis.asyncio as aioredis

        return RedisRateLimiter(aioredis.Redis.from_url(url), prefix=f"asaptest:{uuid.uuid4().hex[:8]}:")
    return make


def test_sliding_window_refuses_then_admits_again(limiter_factory) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        lim = limiter_factory()
        rate = Rate(3, 0.6)
        got = [await lim.hit("user:slack:U1", rate) for _ in range(3)]
        assert all(d.allowed for d in got) and [d.count for d in got] == [1, 2, 3]
        refused = await lim.hit("user:slack:U1", rate)
        assert not refused.allowed and refused.count == 3 and 0 < refused.retry_after_s <= 0.6
        other = await lim.hit("user:slack:U2", rate)  # another person is not affected
        assert other.allowed
        await asyncio.sleep(0.65)
        assert (await lim.hit("user:slack:U1", rate)).allowed  # the window slid past the old hits

    asyncio.run(main())


def test_limit_message_says_who_how_often_and_when() -> None:
    from bot.runtime.limits import Decision

    msg = limit_message("You have", Decision(False, 5, 39.2), Rate(5, 60))
    assert msg == "You have asked 5 times in the last minute (limit 5); try again in 40 s."


@pytest.fixture(params=["memory", "redis"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    base = {"ASAP_STATE_DIR": str(tmp_path / "state"), "ASAP_QUEUE_PREFIX": f"lim{uuid.uuid4().hex[:6]}:"}
    if request.param == "redis":
        base.update(request.getfixturevalue("redis_env"))
    return base


def test_user_limit_reply_and_a_refused_id_is_checked_again(env: dict[str, str]) -> None:
    async def main() -> None:
        ctx = RuntimeContext.from_env({**env, "ASAP_USER_RATE": "2/60", "ASAP_CHANNEL_RATE": "off"})
        subs = [await ctx.submit(make_job(i, user="ann", thread=f"slack:C1:{i}")) for i in range(2)]
        assert [s.status for s in subs] == ["queued", "queued"]
        third = make_job(3, user="ann", thread="slack:C1:3")
        sub = await ctx.submit(third)
        assert sub.status == "limited" and not sub.accepted
        assert sub.message.startswith("You have asked 2 times in the last minute (limit 2); try again in ")
        # a refused id is not remembered: sent again it is checked again (still over the limit here) ...
        assert (await ctx.submit(third)).status == "limited"
        assert (await ctx.submit(make_job(4, user="bob", thread="slack:C1:4"))).status == "queued"
        assert await ctx.queue.depth() == 3
        text = ctx.metrics.render().decode()
        assert 'asap_submissions_total{source="cli",status="limited"} 2.0' in text
        await ctx.close()

    asyncio.run(main())


def test_channel_limit_counts_everyone_in_the_channel(env: dict[str, str]) -> None:
    async def main() -> None:
        ctx = RuntimeContext.from_env({**env, "ASAP_USER_RATE": "off", "ASAP_CHANNEL_RATE": "3/60"})
        from bot.runtime.jobs import Job, Requester

        def slack(i: int, channel: str) -> Job:
            return Job(id=f"slack:Ev{uuid.uuid4().hex}", source="slack", kind="ask", thread=f"slack:{channel}:17.{i}",
                       requester=Requester(source="slack", user_id=f"U{i}"))

        assert [(await ctx.submit(slack(i, "C9"))).status for i in range(3)] == ["queued"] * 3
        sub = await ctx.submit(slack(4, "C9"))
        assert sub.status == "limited" and sub.message.startswith("This channel has asked 3 times")
        assert (await ctx.submit(slack(5, "C7"))).status == "queued"
        await ctx.close()

    asyncio.run(main())


def test_global_cap_on_jobs_queued_or_running(env: dict[str, str]) -> None:
    async def main() -> None:
        ctx = RuntimeContext.from_env({**env, "ASAP_USER_RATE": "off", "ASAP_CHANNEL_RATE": "off",
                                       "ASAP_MAX_PENDING": "3"})
        assert [(await ctx.submit(make_job(i))).status for i in range(3)] == ["queued"] * 3
        sub = await ctx.submit(make_job(9))
        assert sub.status == "busy"
        assert sub.message == "ASAP is busy: 3 requests are queued or running (the limit is 3); try again in a minute."
        await ctx.close()

    asyncio.run(main())


def test_bad_limit_settings_name_the_variable(tmp_path: Path) -> None:
    for name, value in (("ASAP_USER_RATE", "lots"), ("ASAP_MAX_PENDING", "0"), ("ASAP_JOB_DEADLINE_S", "-5")):
        with pytest.raises(AsapError) as err:
            RuntimeContext.from_env({"ASAP_STATE_DIR": str(tmp_path), name: value})
        assert err.value.field == name and repr(value) in err.value.message


def test_both_limits_and_cap_agree_between_memory_and_redis(env: dict[str, str]) -> None:
    """The Redis front decides in one atomic script; it must refuse exactly what the step-by-step path does."""
    async def main() -> None:
        ctx = RuntimeContext.from_env({**env, "ASAP_USER_RATE": "2/60", "ASAP_CHANNEL_RATE": "3/60",
                                       "ASAP_MAX_PENDING": "5"})
        seq = [("ann", "C1"), ("ann", "C1"), ("ann", "C1"), ("bob", "C1"), ("cat", "C1"), ("cat", "C2"),
               ("dan", "C3"), ("eve", "C4")]
        from bot.runtime.jobs import Job, Requester

        got = [(await ctx.submit(Job(id=f"slack:Ev{uuid.uuid4().hex}", source="slack", kind="ask",
                                     thread=f"slack:{c}:17.{i}", requester=Requester(source="slack", user_id=u)))).status
               for i, (u, c) in enumerate(seq)]
        # ann's third: user limit; cat in C1: channel limit (ann x2 + bob); eve: the cap of 5 queued jobs
        assert got == ["queued", "queued", "limited", "queued", "limited", "queued", "queued", "busy"]
        await ctx.close()

    asyncio.run(main())


def test_redis_submit_is_one_round_trip(redis_env: dict[str, str]) -> None:  # noqa: F811
    """Under a burst every round trip is paid on the front's event loop: dedupe + limits + cap + XADD is one."""
    async def main() -> None:
        ctx = RuntimeContext.from_env({**redis_env, "ASAP_USER_RATE": "5/60", "ASAP_CHANNEL_RATE": "30/60"})
        await ctx.submit(make_job(0))  # loads the script (EVALSHA, then SCRIPT LOAD once)
        client = ctx.queue.client  # type: ignore[attr-defined]
        calls: list[str] = []
        real = client.execute_command

        async def counting(*args, **kw):  # type: ignore[no-untyped-def]
            calls.append(str(args[0]))
            return await real(*args, **kw)

        client.execute_command = counting
        assert (await ctx.submit(make_job(1))).status == "queued"
        job = make_job(2)
        assert (await ctx.submit(job)).status == "queued"
        assert (await ctx.submit(job)).status == "duplicate"
        assert calls == ["EVALSHA"] * 3
        assert await ctx.queue.depth() == 3
        await ctx.close()

    asyncio.run(main())
