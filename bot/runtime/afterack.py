"""Work that follows an acknowledgement (a reaction, a rate-limit notice), sent when the front is quiet.

A front answers Slack or GitHub first and only then makes its own API calls (the eyes reaction, "you have
asked 5 times..."). Started as plain tasks, those calls share the event loop with the requests still
waiting for their acknowledgement: under a burst of 200 events, 200 reactions.add calls (an HTTP client
round trip each, ~0.4 ms of CPU) interleave with the acks and push the last ack out by ~80 ms.

:class:`AfterAck` holds them until the front has been quiet for ``quiet_s`` (no request started in that
time) or an item has waited ``max_delay_s``, then runs them ``concurrency`` at a time. On an idle server a
reaction goes out ``quiet_s`` after the ack; under a burst, after the burst (at most ``max_delay_s`` late).
They are cosmetic, so they come second; a request's job is already durably queued before its ack.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger("asap.runtime.afterack")


class AfterAck:
    """A per-process (per event loop) scheduler for post-acknowledgement calls."""

    def __init__(self, *, quiet_s: float = 0.02, max_delay_s: float = 1.0, concurrency: int = 8) -> None:
        self.quiet_s = quiet_s
        self.max_delay_s = max_delay_s
        self.concurrency = max(1, concurrency)
        self._pending: deque[tuple[float, Coroutine[Any, Any, Any]]] = deque()
        self._running: set[asyncio.Task[Any]] = set()
        self._last_request = 0.0
        self._wake: asyncio.Event | None = None
        self._drainer: asyncio.Task[None] | None = None
        self._closing = False

    def request_started(self) -> None:
        """The front calls this for each request it receives: holds post-ack work back a little longer."""
        self._last_request = time.monotonic()

    def add(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` after the acknowledgement (its exceptions are logged, never raised)."""
        if self._closing:
            self._spawn(coro)
            return
        self._pending.append((time.monotonic(), coro))
        if self._drainer is None or self._drainer.done():
            self._wake = asyncio.Event()
            self._drainer = asyncio.get_running_loop().create_task(self._drain())
        elif self._wake is not None:
            self._wake.set()

    @property
    def outstanding(self) -> int:
        """Calls waiting or running."""
        return len(self._pending) + len(self._running)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(self._guard(coro))
        self._running.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._running.discard(task)
        if self._wake is not None:
            self._wake.set()

    @staticmethod
    async def _guard(coro: Coroutine[Any, Any, Any]) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a reaction failing must not become "Task exception was never retrieved"
            log.warning("a call after the acknowledgement failed: %s: %s", type(exc).__name__, exc)

    async def _drain(self) -> None:
        assert self._wake is not None
        while self._pending:
            now = time.monotonic()
            enqueued = self._pending[0][0]
            quiet_for = now - self._last_request
            if not self._closing and quiet_for < self.quiet_s and now - enqueued < self.max_delay_s:
                await asyncio.sleep(min(self.quiet_s - quiet_for, enqueued + self.max_delay_s - now) + 0.001)
                continue
            if len(self._running) >= self.concurrency:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=self.quiet_s)
                continue
            _, coro = self._pending.popleft()
            self._spawn(coro)
            await asyncio.sleep(0)  # let the call start; a request that arrived meanwhile runs first

    async def close(self, timeout: float = 5.0) -> None:
        """Send everything still waiting now (no quiet period) and wait up to ``timeout`` for it."""
        self._closing = True
        while self._pending:
            self._spawn(self._pending.popleft()[1])
        if self._drainer is not None:
            self._drainer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._drainer
        if self._running:
            _, late = await asyncio.wait(list(self._running), timeout=timeout)
            for t in late:
                t.cancel()
