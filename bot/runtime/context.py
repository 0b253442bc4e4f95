"""What a front end and a worker share: settings, memory store, queue, metrics, limits, conversations.

``RuntimeContext.from_env()`` builds everything from the environment (``REDIS_URL`` selects Redis for the
store, the queue and the rate limits together). Front ends call ``await ctx.submit(job)`` which applies,
in order: dedupe (a redelivered request is a no-op), the per-user and per-channel rate limits, the global
cap on jobs queued or running, then enqueues. Each refusal carries the sentence to show the person; a
refused id is not remembered, so the same request sent again later runs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from bot.errors import AsapError
from bot.runtime.jobs import Job
from bot.runtime.limits import Decision, MemoryRateLimiter, Rate, RateLimiter, RedisRateLimiter, limit_message
from bot.runtime.metrics import RuntimeMetrics
from bot.runtime.queue import JobQueue, QueueSettings, open_queue, queue_settings_from_env

if TYPE_CHECKING:
    from agents.conversation import Conversation
    from bot.store.base import MemoryStore

log = logging.getLogger("asap.runtime")


class RuntimeSettings(BaseModel):
    """Runtime settings read from the environment (names in ``ENV``); bad values name the variable."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    redis_url: SecretStr | None = None
    user_rate: Rate = Rate(5, 60.0)
    followup_rate: Rate = Rate(30, 60.0)  # jobs a front marks payload["limit"] = "followup" (thread replies, clicks)
    channel_rate: Rate = Rate(30, 60.0)
    max_pending: int = Field(default=200, ge=1)  # global cap: jobs queued or running at once
    deadline_s: float = Field(default=300.0, gt=0, le=3600)
    api_token: SecretStr | None = None  # enables POST /v1/jobs (Bearer auth)
    handler_modules: list[str] = []
    log_level: str = "INFO"
    queue: QueueSettings = QueueSettings()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RuntimeSettings:
        env = os.environ if env is None else env
        values: dict[str, Any] = {"queue": queue_settings_from_env(env)}
        if env.get("REDIS_URL"):
            values["redis_url"] = env["REDIS_URL"]
        for name, key in (("ASAP_USER_RATE", "user_rate"), ("ASAP_CHANNEL_RATE", "channel_rate"),
                          ("ASAP_FOLLOWUP_RATE", "followup_rate")):
            if env.get(name):
                values[key] = Rate.parse(env[name], field=name)
        simple = {"ASAP_MAX_PENDING": "max_pending", "ASAP_JOB_DEADLINE_S": "deadline_s",
                  "ASAP_API_TOKEN": "api_token", "ASAP_LOG_LEVEL": "log_level"}
        for name, key in simple.items():
            if env.get(name):
                values[key] = env[name]
        if env.get("ASAP_HANDLER_MODULES"):
            values["handler_modules"] = [m.strip() for m in env["ASAP_HANDLER_MODULES"].split(",") if m.strip()]
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            err = exc.errors()[0]
            key = str(err["loc"][0]) if err.get("loc") else "?"
            name = next((n for n, k in simple.items() if k == key), key)
            raise AsapError(f"bad runtime setting {name}={env.get(name)!r}: {err['msg']}", field=name) from None


@dataclass(frozen=True)
class Submission:
    """What the front did with a request; ``message`` is the sentence to show when it was not queued."""

    status: Literal["queued", "duplicate", "limited", "busy"]
    message: str = ""

    @property
    def accepted(self) -> bool:
        return self.status == "queued"


@dataclass
class RuntimeContext:
    """Everything handlers and routes need; one per process."""

    settings: RuntimeSettings
    store: MemoryStore
    queue: JobQueue
    metrics: RuntimeMetrics = field(default_factory=RuntimeMetrics)
    limiter: RateLimiter = field(default_factory=MemoryRateLimiter)
    conversation_factory: Callable[[], Conversation] | None = None
    _conversation: Conversation | None = field(default=None, repr=False)
    extras: dict[str, Any] = field(default_factory=dict)  # integrations keep their clients here

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RuntimeContext:
        """Store, queue and limiter from ``REDIS_URL`` (or the embedded defaults); handlers registered."""
        env = os.environ if env is None else env
        settings = RuntimeSettings.from_env(env)
        from bot.store import open_store

        store = open_store(dict(env))
        queue = open_queue(env, store=store)
        limiter: RateLimiter
        client = getattr(queue, "client", None)
        limiter = RedisRateLimiter(client, prefix=settings.queue.prefix) if client is not None else MemoryRateLimiter()
        ctx = cls(settings=settings, store=store, queue=queue, limiter=limiter)
        from bot.runtime import defaults  # noqa: F401  (registers the built-in cli handlers)
        from bot.runtime.handlers import load_handler_modules
        from bot.runtime.server import load_integration_handlers

        load_integration_handlers(env)
        load_handler_modules(settings.handler_modules)
        return ctx

    def conversation(self) -> Conversation:
        """The shared agents Conversation (built on first use; model from settings, this context's store)."""
        if self._conversation is None:
            if self.conversation_factory is not None:
                self._conversation = self.conversation_factory()
            else:
                from agents.conversation import Conversation
                from agents.models import build_model

                # check=False: an endpoint that is down now must not fail jobs; its health is probed at
                # start-up and re-checked (check_model), and while it is down jobs get the analyst answer.
                self._conversation = Conversation(store=self.store, model=build_model(check=False),
                                                  runs_root=os.environ.get("ASAP_RUNS_DIR"))
        return self._conversation

    def model_status(self) -> str:
        """For /readyz: ``ok``, ``down: <reason>``, ``unknown`` or ``not configured (analyst mode)``."""
        conv = self._conversation
        health = conv.model.health if conv is not None else None
        if health is not None:
            return health.status()
        if conv is not None or not self.extras.get("model_configured"):
            return "not configured (analyst mode)"
        return "unknown"

    async def check_model(self, stop: asyncio.Event | None = None) -> str:
        """Start-up (``asap serve``/``asap worker``): probe the model endpoint when one is configured and keep
        re-checking it every ``recheck_s`` until ``stop``. A misconfiguration (no /v1, no tool calling) raises
        :class:`AsapError` now; an endpoint that is merely down is logged and reported in /readyz."""
        from agents.models import load_settings

        settings, _ = load_settings()
        if not settings.base_url and not os.environ.get("OPENAI_API_KEY"):
            return self.model_status()
        self.extras["model_configured"] = True
        health = self.conversation().model.health
        if health is None:
            return self.model_status()
        state = await asyncio.to_thread(health.check)
        if state == "ok":
            log.info("model endpoint reachable", extra={"model": self.conversation().model.model})
        if stop is not None:
            task = asyncio.create_task(health.run_rechecks(stop))
            self.extras["model_rechecks"] = task
        return health.status()

    async def submit(self, job: Job) -> Submission:
        """Dedupe, rate-limit, cap and enqueue ``job``; the result says what to tell the requester."""
        t0 = time.perf_counter()
        try:
            sub = await self._submit(job)
        finally:
            self.metrics.enqueue_seconds.observe(time.perf_counter() - t0)
        self.metrics.submissions.labels(job.source, sub.status).inc()
        return sub

    async def _submit(self, job: Job) -> Submission:
        checked = getattr(self.queue, "submit_checked", None)
        if checked is not None and isinstance(self.limiter, RedisRateLimiter) and self.limiter.shares(self.queue):
            return await self._submit_one_trip(job, checked)
        if await self.queue.seen(job.id):
            return Submission("duplicate")
        s = self.settings
        key, rate = self._user_window(job)
        user = await self.limiter.hit(key, rate)
        if not user.allowed:
            return await self._refuse(job, "limited", limit_message("You have", user, rate))
        chan = await self.limiter.hit(f"channel:{job.channel_key()}", s.channel_rate)
        if not chan.allowed:
            return await self._refuse(job, "limited", limit_message("This channel has", chan, s.channel_rate))
        depth = await self.queue.depth()
        if depth >= s.max_pending:
            return await self._refuse(job, "busy", f"ASAP is busy: {depth} requests are queued or running "
                                                   f"(the limit is {s.max_pending}); try again in a minute.")
        if not await self.queue.submit(job):
            return Submission("duplicate")
        return Submission("queued")

    async def _submit_one_trip(self, job: Job, checked: Callable[..., Any]) -> Submission:
        """Redis: the same checks as :meth:`_submit`, in the same order, as one atomic script (one round trip
        instead of five on the front's event loop under a burst)."""
        s = self.settings
        key, rate = self._user_window(job)
        windows = [("You have", key, rate),
                   ("This channel has", f"channel:{job.channel_key()}", s.channel_rate)]
        windows = [w for w in windows if w[2].count > 0]
        status, which, n, retry = await checked(job, [(k, r.window_s, r.count) for _, k, r in windows], s.max_pending)
        if status == "limited":
            who, _, rate = windows[which - 1]
            return Submission("limited", limit_message(who, Decision(False, n, retry), rate))
        if status == "busy":
            return Submission("busy", f"ASAP is busy: {n} requests are queued or running "
                                      f"(the limit is {s.max_pending}); try again in a minute.")
        return Submission(status)  # type: ignore[arg-type]

    def _user_window(self, job: Job) -> tuple[str, Rate]:
        """The per-user window a job counts against: a new analysis spends ``user_rate``; a follow-up in a
        thread or a button click (``payload["limit"] == "followup"``, set by the front) spends the
        separate, larger ``followup_rate``, so a conversation is not cut short by the analysis limit."""
        if job.payload.get("limit") == "followup":
            return f"followup:{job.user_key()}", self.settings.followup_rate
        return f"user:{job.user_key()}", self.settings.user_rate

    async def _refuse(self, job: Job, status: Literal["limited", "busy"], message: str) -> Submission:
        # The id is NOT remembered: dedupe holds only accepted jobs (pending or done), so the same request
        # sent again after a 429/503 is checked again and runs once there is room.
        return Submission(status, message)

    async def close(self) -> None:
        task = self.extras.pop("model_rechecks", None)
        if task is not None:
            task.cancel()
        await self.queue.close()
        self.store.close()
