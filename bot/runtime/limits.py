"""Sliding-window rate limits per user and per channel, in Redis (shared by every front) or in memory.

A limit ``5/60`` allows 5 requests in any 60 s window. Each hit is recorded with its time; the oldest hit
in the window says when the next request will be accepted, which the reply tells the person:
"you have asked 5 times in the last minute; try again in 40 s".
"""

from __future__ import annotations

import asyncio
import math
import re
import time
import uuid
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any, Protocol

from bot.errors import AsapError

_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)?\s*(s|sec|m|min|h|hour)?\s*$")
_UNITS = {None: 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hour": 3600.0}


@dataclass(frozen=True)
class Rate:
    """``count`` requests per ``window_s`` seconds; count 0 turns the limit off."""

    count: int
    window_s: float

    @classmethod
    def parse(cls, text: str, *, field: str) -> Rate:
        """``"5/60"``, ``"5/min"``, ``"100/1h"``, or ``"0"`` (off); anything else names ``field``."""
        if text.strip() in {"0", "off", "none"}:
            return cls(0, 60.0)
        m = _RATE.match(text)
        if not m or (m.group(2) is None and m.group(3) is None):
            raise AsapError(f"expected a rate like '5/60' (5 per 60 s), '5/min' or 'off', got {text!r}", field=field)
        window = float(m.group(2) or 1) * _UNITS[m.group(3)]
        if window <= 0:
            raise AsapError(f"the window of a rate must be positive, got {text!r}", field=field)
        return cls(int(m.group(1)), window)

    def describe_window(self) -> str:
        if self.window_s == 60:
            return "the last minute"
        if self.window_s == 3600:
            return "the last hour"
        return f"the last {self.window_s:g} s"


@dataclass(frozen=True)
class Decision:
    allowed: bool
    count: int  # hits in the window, including this one when allowed
    retry_after_s: float = 0.0


class RateLimiter(Protocol):
    async def hit(self, key: str, rate: Rate) -> Decision:
        """Record a request under ``key`` if the window has room; say whether it was allowed."""
        ...


class MemoryRateLimiter:
    """In-process sliding windows (the embedded runtime: front and workers share one process)."""

    def __init__(self) -> None:
        self._hits: dict[str, deque[float]] = defaultdict(deque)
        self._lock = asyncio.Lock()

    async def hit(self, key: str, rate: Rate) -> Decision:
        if rate.count <= 0:
            return Decision(True, 0)
        async with self._lock:
            now = time.monotonic()
            q = self._hits[key]
            while q and q[0] <= now - rate.window_s:
                q.popleft()
            if len(q) >= rate.count:
                return Decision(False, len(q), max(0.0, q[0] + rate.window_s - now))
            q.append(now)
            return Decision(True, len(q))


_SLIDING = """
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local n = redis.call('ZCARD', KEYS[1])
if n >= limit then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, n, tostring(tonumber(oldest[2]) + window - now)}
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], math.ceil(window * 1000))
return {1, n + 1, '0'}
"""


class RedisRateLimiter:
    """Sliding windows as sorted sets (one Lua script per hit, so concurrent fronts agree)."""

    def __init__(self, client: Any, *, prefix: str = "asap:") -> None:
        self._r = client
        self.prefix = prefix
        self._script = client.register_script(_SLIDING)

    def shares(self, queue: object) -> bool:
        """True when ``queue`` uses this limiter's Redis client and key prefix (so one script can do both)."""
        settings = getattr(queue, "settings", None)
        return getattr(queue, "client", None) is self._r and getattr(settings, "prefix", None) == self.prefix

    async def hit(self, key: str, rate: Rate) -> Decision:
        if rate.count <= 0:
            return Decision(True, 0)
        from bot.runtime.queue import redis_errors

        async with redis_errors(self._r):
            allowed, n, retry = await self._script(
                keys=[f"{self.prefix}rate:{key}"], args=[time.time(), rate.window_s, rate.count, uuid.uuid4().hex])
        retry_s = float(retry.decode() if isinstance(retry, bytes) else retry)
        return Decision(bool(allowed), int(n), max(0.0, retry_s))


def limit_message(who: str, decision: Decision, rate: Rate) -> str:
    """The reply when a limit is hit: who, how many times, in which window, and when to retry."""
    wait = max(1, math.ceil(decision.retry_after_s))
    times = "once" if decision.count == 1 else f"{decision.count} times"
    return f"{who} asked {times} in {rate.describe_window()} (limit {rate.count}); try again in {wait} s."
