"""The memory-store interface and the factory that picks SQLite or Redis from the environment."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from bot.errors import AsapError, brief

DEFAULT_STATE_DIR = ".asap"
STATE_FILE = "state.db"


@runtime_checkable
class MemoryStore(Protocol):
    """Threads (one JSON document each), an append-only worklog per thread, claims, and key/value records.

    Values are JSON-compatible dicts. ``claim`` is an atomic set-if-absent with a lifetime, used to
    answer a redelivered Slack event or webhook once.
    """

    def get_thread(self, thread_id: str) -> dict[str, Any] | None:
        """The saved thread document, or None when the thread is new."""
        ...

    def put_thread(self, thread_id: str, data: dict[str, Any]) -> None:
        """Replace the thread document."""
        ...

    def list_threads(self, limit: int = 50) -> list[str]:
        """Most recently updated thread IDs first."""
        ...

    def append_log(self, thread_id: str, entry: dict[str, Any]) -> None:
        """Append one worklog entry (kept in insertion order)."""
        ...

    def read_log(self, thread_id: str) -> list[dict[str, Any]]:
        """Every worklog entry of the thread, oldest first."""
        ...

    def claim(self, key: str, ttl_s: float = 86400.0) -> bool:
        """True the first time ``key`` is claimed within ``ttl_s`` seconds, False afterwards."""
        ...

    def get_value(self, key: str) -> dict[str, Any] | None:
        """The record stored under ``key`` by :meth:`put_value`, or None (never stored, or its ttl passed)."""
        ...

    def put_value(self, key: str, value: dict[str, Any], ttl: float | None = None) -> None:
        """Replace a small non-thread record (e.g. where a job's Slack reply lives); ``ttl`` in seconds.

        Unlike threads these are not conversations: :meth:`list_threads` never shows them.
        """
        ...

    def close(self) -> None: ...


def state_path(env: dict[str, str] | None = None) -> Path:
    """Where the SQLite store lives: ``$ASAP_STATE_DIR/state.db`` (default ``.asap/state.db``)."""
    env = os.environ if env is None else env
    return Path(env.get("ASAP_STATE_DIR") or DEFAULT_STATE_DIR) / STATE_FILE


def open_store(env: dict[str, str] | None = None) -> MemoryStore:
    """Redis when ``REDIS_URL`` is set (checked with a PING now), else the SQLite file.

    A bad ``REDIS_URL`` fails here with a clear :class:`AsapError` instead of silently falling back.
    """
    env = os.environ if env is None else env
    url = env.get("REDIS_URL")
    if url:
        from bot.store.redis_store import RedisStore

        return RedisStore.from_url(url)
    from bot.store.sqlite_store import SQLiteStore

    return SQLiteStore(state_path(env), env=dict(env))


def unavailable(exc: BaseException) -> bool:
    """True when ``exc`` means the store or queue service is unreachable (Redis down, a dropped connection).

    Such an error is the infrastructure's, not the request's: the runtime retries the job with backoff
    instead of answering it with an error or giving up on it.
    """
    if getattr(exc, "infrastructure", False):
        return True
    try:
        import redis.exceptions as rex
    except ImportError:  # pragma: no cover - redis is a core dependency
        return isinstance(exc, ConnectionError)
    return isinstance(exc, (rex.ConnectionError, rex.TimeoutError, ConnectionError))


def require_id(value: str, field: str) -> str:
    """Thread IDs and claim keys are short printable strings; anything else is refused."""
    if not isinstance(value, str) or not value or len(value) > 512 or not value.isprintable():
        raise AsapError(f"expected a printable string of 1..512 characters, got {brief(value)}", field=field)
    return value
