"""The production memory store: Redis (threads as strings, the worklog as a list, claims via SET NX,
key/value records as strings with an optional TTL)."""

from __future__ import annotations

import time
from typing import Any

import orjson

from bot.errors import AsapError
from bot.store.base import require_id

PREFIX = "asap:"


class RedisStore:
    """Threads, worklog and claims in Redis under the ``asap:`` prefix."""

    def __init__(self, client: Any, *, prefix: str = PREFIX) -> None:
        self._r = client
        self.prefix = prefix

    @classmethod
    def from_url(cls, url: str, *, prefix: str = PREFIX) -> RedisStore:
        """Connect and PING now, so a wrong ``REDIS_URL`` fails at start-up with a clear message."""
        import redis

        try:
            from bot.runtime.queue import driver_info

            client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=10, driver_info=driver_info())
            client.ping()
        except ValueError as exc:
            raise AsapError(f"malformed REDIS_URL: {exc}", field="REDIS_URL", hint="e.g. redis://localhost:6379/0") from None
        except redis.RedisError as exc:
            safe = url.split("@")[-1]
            raise AsapError(f"cannot reach Redis at {safe}: {exc}", field="REDIS_URL",
                            hint="start Redis or unset REDIS_URL to use the SQLite file") from None
        return cls(client, prefix=prefix)

    def _k(self, kind: str, key: str) -> str:
        return f"{self.prefix}{kind}:{key}"

    def get_thread(self, thread_id: str) -> dict[str, Any] | None:
        raw = self._r.get(self._k("thread", require_id(thread_id, "thread")))
        return orjson.loads(raw) if raw else None

    def put_thread(self, thread_id: str, data: dict[str, Any]) -> None:
        require_id(thread_id, "thread")
        pipe = self._r.pipeline()
        pipe.set(self._k("thread", thread_id), orjson.dumps(data))
        pipe.zadd(self._k("threads", "index"), {thread_id: time.time()})
        pipe.execute()

    def list_threads(self, limit: int = 50) -> list[str]:
        ids = self._r.zrevrange(self._k("threads", "index"), 0, max(limit - 1, 0))
        return [i.decode() if isinstance(i, bytes) else i for i in ids]

    def append_log(self, thread_id: str, entry: dict[str, Any]) -> None:
        self._r.rpush(self._k("log", require_id(thread_id, "thread")), orjson.dumps(entry, default=str))

    def read_log(self, thread_id: str) -> list[dict[str, Any]]:
        return [orjson.loads(x) for x in self._r.lrange(self._k("log", require_id(thread_id, "thread")), 0, -1)]

    def claim(self, key: str, ttl_s: float = 86400.0) -> bool:
        require_id(key, "key")
        return bool(self._r.set(self._k("claim", key), b"1", nx=True, px=max(1, int(ttl_s * 1000))))

    def get_value(self, key: str) -> dict[str, Any] | None:
        """A key/value record (not a thread: never listed by :meth:`list_threads`), or None if absent or expired."""
        raw = self._r.get(self._k("kv", require_id(key, "key")))
        return orjson.loads(raw) if raw else None

    def put_value(self, key: str, value: dict[str, Any], ttl: float | None = None) -> None:
        """Replace the record under ``key``; with ``ttl`` (seconds) Redis drops it after that long."""
        require_id(key, "key")
        if ttl is not None and ttl <= 0:
            raise AsapError(f"expected a positive ttl in seconds (or None), got {ttl!r}", field="ttl")
        self._r.set(self._k("kv", key), orjson.dumps(value, default=str),
                    px=None if ttl is None else max(1, int(ttl * 1000)))

    def close(self) -> None:
        self._r.close()
