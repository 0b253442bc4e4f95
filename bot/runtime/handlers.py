"""Job handlers, dispatched by ``(job.source, job.kind)``, and the rules every job runs under.

Front ends register what a job means for them::

    register_handler("slack", "ask", slack_ask)            # async def slack_ask(job, ctx) -> None
    register_failure_reply("slack", slack_failure)         # async def slack_failure(job, reason, ctx) -> None

A handler posts its own reply (an upsert keyed by ``job.id``, so a redelivered job never posts twice) and
returns; the queue acknowledges the job only after that. :class:`Dispatcher` runs a handler under the
job's deadline (``asyncio.timeout``), records metrics and logs with the job id, and decides the outcome:

- returned -> ``ok`` (acknowledged)
- ``AsapError`` (bad input, unknown run) -> ``error``: failure reply with the message, no retry
- deadline passed -> ``deadline``: failure reply "took longer than N s", no retry
- Redis/store unreachable (:func:`bot.store.base.unavailable`) -> ``unavailable``: not the job's fault; the
  worker runs it again after a backoff (not counted as an attempt, no failure reply)
- any other exception -> ``retry`` while attempts remain, then ``dead`` (dead-letter + failure reply)

Inside the handler, :func:`agents.deadline.reply_by` is the instant the answer is due (the deadline less a
small reserve for posting it), so the conversation gives a slow model only the time that is left.
"""

from __future__ import annotations

import asyncio
import enum
import importlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agents.deadline import answer_within
from bot.errors import AsapError
from bot.runtime.jobs import Job
from bot.store.base import unavailable

if TYPE_CHECKING:
    from bot.runtime.context import RuntimeContext

log = logging.getLogger("asap.runtime.jobs")

Handler = Callable[[Job, "RuntimeContext"], Awaitable[None]]
FailureReply = Callable[[Job, str, "RuntimeContext"], Awaitable[None]]

_HANDLERS: dict[tuple[str, str], Handler] = {}
_FAILURE_REPLIES: dict[str, FailureReply] = {}


class Outcome(enum.StrEnum):
    OK = "ok"
    ERROR = "error"  # the handler refused the request with a clear AsapError
    DEADLINE = "deadline"
    RETRY = "retry"
    DEAD = "dead"
    RETURNED = "returned"  # shutdown: handed back to the queue for another worker
    UNAVAILABLE = "unavailable"  # Redis / the store could not be reached: run again once it is back


def reply_reserve(deadline_s: float) -> float:
    """Time kept back from a job's deadline for rendering and posting its reply: 10%, at least 1 s (a busy host
    needs that long to render the analyst answer after the model is cut off) but never more than half the
    deadline, and at most 5 s."""
    return min(5.0, max(min(1.0, 0.5 * deadline_s), 0.1 * deadline_s))


@dataclass(frozen=True)
class Result:
    outcome: Outcome
    reason: str | None = None


def register_handler(source: str, kind: str, handler: Handler) -> None:
    """Run ``handler`` for jobs with this source and kind (a later registration replaces an earlier one)."""
    _HANDLERS[(source, kind)] = handler


def register_failure_reply(source: str, hook: FailureReply) -> None:
    """Tell the requester that their job failed (deadline, error, gave up): called once per failed job."""
    _FAILURE_REPLIES[source] = hook


def get_handler(source: str, kind: str) -> Handler | None:
    return _HANDLERS.get((source, kind))


def registered() -> list[tuple[str, str]]:
    """The (source, kind) pairs that have a handler."""
    return sorted(_HANDLERS)


def load_handler_modules(names: Iterable[str]) -> None:
    """Import modules that register handlers (``ASAP_HANDLER_MODULES`` / ``--handlers``), clear error if missing."""
    for name in names:
        name = name.strip()
        if not name:
            continue
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise AsapError(f"cannot import handler module {name!r}: {exc}", field="ASAP_HANDLER_MODULES",
                            hint="a comma-separated list of importable module names") from None


class Dispatcher:
    """Runs jobs for one runtime context: handler lookup, deadline, outcome, failure reply, metrics, logs."""

    def __init__(self, ctx: RuntimeContext, handlers: dict[tuple[str, str], Handler] | None = None,
                 failure_replies: dict[str, FailureReply] | None = None) -> None:
        self.ctx = ctx
        self.handlers = _HANDLERS if handlers is None else handlers
        self.failure_replies = _FAILURE_REPLIES if failure_replies is None else failure_replies

    def count(self, job: Job, outcome: Outcome, seconds: float | None = None) -> None:
        self.ctx.metrics.jobs.labels(job.source, job.kind, outcome.value).inc()
        if seconds is not None:
            self.ctx.metrics.job_seconds.labels(job.source, job.kind, outcome.value).observe(seconds)

    async def execute(self, job: Job, *, attempt: int = 1, max_attempts: int = 1,
                      queued_at: float | None = None) -> Result:
        """Run the job's handler once; never raises except CancelledError (shutdown)."""
        if attempt == 1 and queued_at:
            self.ctx.metrics.wait_seconds.labels(job.source).observe(max(0.0, time.time() - queued_at))
        handler = self.handlers.get((job.source, job.kind))
        t0 = time.perf_counter()
        if handler is None:
            reason = f"this bot cannot handle '{job.kind}' requests from {job.source}"
            log.error("no handler", extra={"source": job.source, "kind": job.kind})
            await self.fail(job, reason, outcome=Outcome.ERROR)
            return Result(Outcome.ERROR, reason)
        log.info("job started", extra={"source": job.source, "kind": job.kind, "attempt": attempt,
                                       "job_thread": job.thread, "user": job.user_key()})
        try:
            async with asyncio.timeout(job.deadline_s):
                with answer_within(job.deadline_s - reply_reserve(job.deadline_s)):
                    await handler(job, self.ctx)
        except TimeoutError:
            elapsed = time.perf_counter() - t0
            reason = f"the request took longer than its {job.deadline_s:g} s limit and was stopped"
            log.warning("job deadline passed", extra={"seconds": round(elapsed, 3)})
            self.count(job, Outcome.DEADLINE, elapsed)
            await self.fail(job, reason, outcome=Outcome.DEADLINE)
            return Result(Outcome.DEADLINE, reason)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not unavailable(exc):
                return await self._failed(job, exc, t0, attempt, max_attempts)
            elapsed = time.perf_counter() - t0
            what = exc.message if isinstance(exc, AsapError) else f"{type(exc).__name__}: {exc}"[:300]
            log.warning("job interrupted: the store or queue is unreachable; it runs again once it is back: %s", what)
            self.count(job, Outcome.UNAVAILABLE, elapsed)
            return Result(Outcome.UNAVAILABLE, what)
        elapsed = time.perf_counter() - t0
        log.info("job done", extra={"seconds": round(elapsed, 3)})
        self.count(job, Outcome.OK, elapsed)
        return Result(Outcome.OK)

    async def _failed(self, job: Job, exc: Exception, t0: float, attempt: int, max_attempts: int) -> Result:
        """The handler raised: a refusal (AsapError) is answered; anything else is retried, then dead-lettered."""
        if isinstance(exc, AsapError):
            elapsed = time.perf_counter() - t0
            log.info("job refused: %s", exc.message, extra={"seconds": round(elapsed, 3)})
            self.count(job, Outcome.ERROR, elapsed)
            await self.fail(job, exc.public(), outcome=Outcome.ERROR)  # a reply: no server paths
            return Result(Outcome.ERROR, exc.public())
        elapsed = time.perf_counter() - t0
        what = f"{type(exc).__name__}: {exc}"[:500]
        if attempt < max_attempts:
            log.warning("job failed (attempt %d of %d); retrying: %s", attempt, max_attempts, what,
                        exc_info=True)
            self.count(job, Outcome.RETRY, elapsed)
            return Result(Outcome.RETRY, what)
        reason = f"the request failed {max_attempts} time(s); last error: {what}"
        log.error("job failed for good: %s", what, exc_info=True)
        self.count(job, Outcome.DEAD, elapsed)
        await self.fail(job, reason, outcome=Outcome.DEAD)
        return Result(Outcome.DEAD, reason)

    async def fail(self, job: Job, reason: str, *, outcome: Outcome = Outcome.ERROR) -> None:
        """Post the failure reply for the job's front end (its errors are logged, never raised).

        While the store or queue is unreachable the reply is retried with backoff (up to ``infra_retry_s``),
        so the job is settled only after its failure reply is stored.
        """
        hook = self.failure_replies.get(job.source)
        if hook is None:
            log.warning("no failure reply for source %s; the requester is not told (%s): %s", job.source,
                        outcome.value, reason)
            return
        give_up = time.monotonic() + self.ctx.settings.queue.infra_retry_s
        delay = 0.2
        while True:
            try:
                async with asyncio.timeout(30):
                    await hook(job, reason, self.ctx)
                return
            except Exception as exc:  # the failure reply itself failed: log it, the job is settled anyway
                if unavailable(exc) and time.monotonic() < give_up:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
                    continue
                log.error("failure reply could not be posted: %s: %s", type(exc).__name__, exc)
                return
