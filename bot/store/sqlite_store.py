"""The embedded memory store: one SQLite file, safe for several processes (WAL, busy timeout)."""

from __future__ import annotations

import sqlite3
import threading
import time
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
"""


class SQLiteStore:
    """Threads, worklog and claims in one SQLite file (created with its folder on first use)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), timeout=10.0, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise AsapError(
                f"cannot open the state database: {exc}", source=str(self.path), hint="set ASAP_STATE_DIR to a writable folder"
            ) from None
        self._lock = threading.Lock()

    def get_thread(self, thread_id: str) -> dict[str, Any] | None:
        require_id(thread_id, "thread")
        with self._lock:
            row = self._db.execute("SELECT data FROM threads WHERE id = ?", (thread_id,)).fetchone()
        return orjson.loads(row[0]) if row else None

    def put_thread(self, thread_id: str, data: dict[str, Any]) -> None:
        require_id(thread_id, "thread")
        blob = orjson.dumps(data)
        with self._lock:
            self._db.execute(
                "INSERT INTO threads(id, data, updated) VALUES(?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET data = excluded.data, updated = excluded.updated",
                (thread_id, blob, time.time()),
            )

    def list_threads(self, limit: int = 50) -> list[str]:
        with self._lock:
            rows = self._db.execute("SELECT id FROM threads ORDER BY updated DESC LIMIT ?", (limit,)).fetchall()
        return [r[0] for r in rows]

    def append_log(self, thread_id: str, entry: dict[str, Any]) -> None:
        require_id(thread_id, "thread")
        blob = orjson.dumps(entry, default=str)
        with self._lock:
            self._db.execute("INSERT INTO worklog(thread, entry) VALUES(?, ?)", (thread_id, blob))

    def read_log(self, thread_id: str) -> list[dict[str, Any]]:
        require_id(thread_id, "thread")
        with self._lock:
            rows = self._db.execute("SELECT entry FROM worklog WHERE thread = ? ORDER BY seq", (thread_id,)).fetchall()
        return [orjson.loads(r[0]) for r in rows]

    def claim(self, key: str, ttl_s: float = 86400.0) -> bool:
        require_id(key, "key")
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("DELETE FROM claims WHERE key = ? AND expires <= ?", (key, now))
                cur = self._db.execute("INSERT OR IGNORE INTO claims(key, expires) VALUES(?, ?)", (key, now + ttl_s))
                self._db.execute("COMMIT")
            except sqlite3.Error:
                self._db.execute("ROLLBACK")
                raise
        return cur.rowcount == 1

    def close(self) -> None:
        with self._lock:
            self._db.close()
