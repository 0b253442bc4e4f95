"""The embedded memory store: one SQLite file, safe for several processes (WAL, busy timeout).

Durability: the file runs in WAL mode with ``synchronous=NORMAL``. A commit is then a write to the WAL
(no fsync); the WAL is fsynced at checkpoints. The database can never be corrupted this way, and a crash
of the *process* loses nothing; only a power loss or kernel crash can drop the last commits before the
next checkpoint. For ASAP that means at worst a forgotten dedupe claim (a redelivered Slack event or
webhook answered a second time) or the last worklog lines. We take that: it makes a claim ~0.05 ms
instead of ~0.35 ms of fsync on the front's event loop, and replies are upserts keyed by the job id
anyway. ``ASAP_SQLITE_SYNC=FULL`` restores an fsync per commit (see docs/runtime.md).
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from bot.errors import AsapError
from bot.store.base import require_id

_SCHEMA = """
CREATE TABLE IF NOT EXISTS threads (
  id TEXT PRIMARY KEY, data BLOB NOT NULL, updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS worklog (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, thread TEXT NOT NULL, entry BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS worklog_thread ON worklog(thread, seq);
CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, expires REAL NOT NULL);
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, data BLOB NOT NULL, expires REAL);
"""

SYNC_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")
CHECK_EVERY_S = 60.0  # /readyz runs PRAGMA quick_check at most this often (it reads the whole file)
_CORRUPT = re.compile(r"malformed|not a database|corrupt|disk image", re.IGNORECASE)
CORRUPT_HINT = ("stop ASAP, move the file aside (a new one is created on start; threads and the worklog start "
                "empty) or restore it from a backup; `sqlite3 FILE .recover` salvages what is still readable")
PURGE_EVERY = 1000  # claims/values written between two sweeps of expired rows


def _sync_mode(env: dict[str, str] | None) -> str:
    env = os.environ if env is None else env
    mode = (env.get("ASAP_SQLITE_SYNC") or "NORMAL").strip().upper()
    if mode not in SYNC_MODES:
        raise AsapError(f"expected one of {', '.join(SYNC_MODES)}, got {mode!r}", field="ASAP_SQLITE_SYNC",
                        hint="NORMAL (default): no fsync per commit; FULL: fsync every commit")
    return mode


class SQLiteStore:
    """Threads, worklog, claims and key/value records in one SQLite file (created with its folder on first use)."""

    def __init__(self, path: Path | str, *, synchronous: str | None = None, env: dict[str, str] | None = None) -> None:
        self.path = Path(path)
        self.synchronous = (synchronous or _sync_mode(env)).upper()
        if self.synchronous not in SYNC_MODES:
            raise AsapError(f"expected one of {', '.join(SYNC_MODES)}, got {synchronous!r}", field="synchronous")
        self._broken: str | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), timeout=10.0, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={self.synchronous}")
            self._db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise self._error(exc, "open") from None
        self._lock = threading.Lock()
        self._writes = 0
        self._checked_at = 0.0

    def _error(self, exc: BaseException, doing: str) -> AsapError:
        """The user's words for an SQLite failure: a corrupt file is named as such, not as a permissions problem."""
        text = str(exc)
        if isinstance(exc, sqlite3.DatabaseError) and _CORRUPT.search(text):
            self._broken = f"the state database is corrupt ({text})"
            return AsapError(self._broken, source=str(self.path), hint=CORRUPT_HINT)
        if isinstance(exc, sqlite3.OperationalError) and "locked" in text:
            return AsapError(f"the state database is busy ({text}) while trying to {doing}", source=str(self.path),
                             hint="another process holds a long write lock on it; try again")
        return AsapError(f"cannot {doing} the state database: {text}", source=str(self.path),
                         hint="set ASAP_STATE_DIR to a writable folder")

    @contextmanager
    def _op(self, doing: str) -> Iterator[sqlite3.Connection]:
        """Hold the lock for one statement group and turn SQLite errors into AsapError (named, with a hint)."""
        with self._lock:
            try:
                yield self._db
            except sqlite3.Error as exc:
                raise self._error(exc, doing) from None

    def check(self) -> None:
        """Raise AsapError when the file is corrupt: a seen corruption, or ``PRAGMA quick_check`` (at most once a minute)."""
        if self._broken:
            raise AsapError(self._broken, source=str(self.path), hint=CORRUPT_HINT)
        now = time.monotonic()
        with self._op("check") as db:
            db.execute("SELECT id FROM threads LIMIT 1").fetchall()
            if now - self._checked_at < CHECK_EVERY_S:
                return
            rows = db.execute("PRAGMA quick_check(3)").fetchall()
            self._checked_at = now
        problems = [r[0] for r in rows if r[0] != "ok"]
        if problems:
            self._broken = f"the state database is corrupt (integrity check: {'; '.join(problems)[:300]})"
            raise AsapError(self._broken, source=str(self.path), hint=CORRUPT_HINT)

    def get_thread(self, thread_id: str) -> dict[str, Any] | None:
        require_id(thread_id, "thread")
        with self._op("read a thread from"):
            row = self._db.execute("SELECT data FROM threads WHERE id = ?", (thread_id,)).fetchone()
        return orjson.loads(row[0]) if row else None

    def put_thread(self, thread_id: str, data: dict[str, Any]) -> None:
        require_id(thread_id, "thread")
        blob = orjson.dumps(data)
        with self._op("save a thread to"):
            self._db.execute(
                "INSERT INTO threads(id, data, updated) VALUES(?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET data = excluded.data, updated = excluded.updated",
                (thread_id, blob, time.time()),
            )

    def list_threads(self, limit: int = 50) -> list[str]:
        with self._op("list threads in"):
            rows = self._db.execute("SELECT id FROM threads ORDER BY updated DESC LIMIT ?", (limit,)).fetchall()
        return [r[0] for r in rows]

    def append_log(self, thread_id: str, entry: dict[str, Any]) -> None:
        require_id(thread_id, "thread")
        blob = orjson.dumps(entry, default=str)
        with self._op("append to the worklog in"):
            self._db.execute("INSERT INTO worklog(thread, entry) VALUES(?, ?)", (thread_id, blob))

    def read_log(self, thread_id: str) -> list[dict[str, Any]]:
        require_id(thread_id, "thread")
        with self._op("read the worklog from"):
            rows = self._db.execute("SELECT entry FROM worklog WHERE thread = ? ORDER BY seq", (thread_id,)).fetchall()
        return [orjson.loads(r[0]) for r in rows]

    def claim(self, key: str, ttl_s: float = 86400.0) -> bool:
        require_id(key, "key")
        now = time.time()
        # One statement, so one implicit transaction: insert the key, or take it over when it has expired.
        # rowcount is 1 when this call now holds the claim, 0 when a live claim already existed.
        with self._op("record a claim in"):
            cur = self._db.execute(
                "INSERT INTO claims(key, expires) VALUES(?, ?) "
                "ON CONFLICT(key) DO UPDATE SET expires = excluded.expires WHERE claims.expires <= ?",
                (key, now + ttl_s, now))
            self._after_write(now)
        return cur.rowcount == 1

    def get_value(self, key: str) -> dict[str, Any] | None:
        """A key/value record (not a thread: never listed by :meth:`list_threads`), or None if absent or expired."""
        require_id(key, "key")
        with self._op("read a value from"):
            row = self._db.execute("SELECT data, expires FROM kv WHERE key = ?", (key,)).fetchone()
        if row is None or (row[1] is not None and row[1] <= time.time()):
            return None
        return orjson.loads(row[0])

    def put_value(self, key: str, value: dict[str, Any], ttl: float | None = None) -> None:
        """Replace the record under ``key``; with ``ttl`` (seconds) it disappears after that long."""
        require_id(key, "key")
        if ttl is not None and ttl <= 0:
            raise AsapError(f"expected a positive ttl in seconds (or None), got {ttl!r}", field="ttl")
        blob = orjson.dumps(value, default=str)
        now = time.time()
        with self._op("save a value to"):
            self._db.execute(
                "INSERT INTO kv(key, data, expires) VALUES(?, ?, ?) "
                "ON CONFLICT(key) DO UPDATE SET data = excluded.data, expires = excluded.expires",
                (key, blob, None if ttl is None else now + ttl))
            self._after_write(now)

    def _after_write(self, now: float) -> None:
        """Every ``PURGE_EVERY`` writes, drop expired claims and values (held lock; a few ms at most)."""
        self._writes += 1
        if self._writes % PURGE_EVERY == 0:
            self._db.execute("DELETE FROM claims WHERE expires <= ?", (now,))
            self._db.execute("DELETE FROM kv WHERE expires IS NOT NULL AND expires <= ?", (now,))

    def close(self) -> None:
        with self._lock:
            self._db.close()
