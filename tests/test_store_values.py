"""Key/value records and the SQLite durability settings, against a real SQLite file and a real Redis."""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.errors import AsapError
from bot.store import open_store
from bot.store.redis_store import RedisStore
from bot.store.sqlite_store import PURGE_EVERY, SQLiteStore
from tests.test_store_memory import redis_url  # noqa: F401  (session fixture: a real Redis or a skip)


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    if request.param == "sqlite":
        s = SQLiteStore(tmp_path / "state" / "state.db")
    else:
        url = request.getfixturevalue("redis_url")
        s = RedisStore.from_url(url, prefix=f"asap-test-{uuid.uuid4().hex[:8]}:")
    yield s
    if request.param == "redis":
        for key in s._r.scan_iter(match=f"{s.prefix}*"):  # type: ignore[attr-defined]
            s._r.delete(key)  # type: ignore[attr-defined]
    s.close()  # type: ignore[attr-defined]


def test_value_roundtrip_replace_and_absent(store) -> None:
    assert store.get_value("slack:progress:slack:Ev1") is None
    store.put_value("slack:progress:slack:Ev1", {"channel": "C1", "ts": "1.2"})
    assert store.get_value("slack:progress:slack:Ev1") == {"channel": "C1", "ts": "1.2"}
    store.put_value("slack:progress:slack:Ev1", {"channel": "C1", "ts": "1.2", "extra": ["1.3"]})
    assert store.get_value("slack:progress:slack:Ev1")["extra"] == ["1.3"]


def test_values_are_not_threads(store) -> None:
    """Per-job reply records must not show up as conversations (``asap log``, thread listings)."""
    store.put_thread("slack:C1:1.0", {"run": "123"})
    store.put_value("slack:progress:slack:Ev1", {"ts": "1.1"})
    assert store.list_threads() == ["slack:C1:1.0"]
    assert store.get_thread("slack:progress:slack:Ev1") is None
    assert store.get_value("slack:C1:1.0") is None


def test_value_expires_after_ttl(store) -> None:
    store.put_value("short", {"n": 1}, ttl=0.2)
    store.put_value("long", {"n": 2})
    assert store.get_value("short") == {"n": 1}
    time.sleep(0.35)
    assert store.get_value("short") is None
    assert store.get_value("long") == {"n": 2}
    store.put_value("short", {"n": 3})  # written again without a ttl: it stays
    time.sleep(0.25)
    assert store.get_value("short") == {"n": 3}


def test_bad_value_key_and_ttl_are_refused(store) -> None:
    with pytest.raises(AsapError, match="printable"):
        store.put_value("bad\nkey", {})
    with pytest.raises(AsapError, match="ttl"):
        store.put_value("k", {}, ttl=0)


def test_slack_reply_records_use_values_not_threads(store) -> None:
    from integrations.slack.replies import ReplyRecord

    rec = ReplyRecord(store, "slack:Ev9")
    rec.save(channel="C1", ts="9.1")
    rec.add_extra("9.2")
    again = ReplyRecord(store, "slack:Ev9")  # a redelivered job finds where its reply lives
    assert again.ts == "9.1" and again.extra(0) == "9.2"
    assert not [t for t in store.list_threads() if t.startswith("slack:progress:")]


def test_sqlite_is_wal_with_normal_sync_by_default(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "s.db")
    assert s._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert s._db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    s.close()
    full = open_store({"ASAP_STATE_DIR": str(tmp_path / "f"), "ASAP_SQLITE_SYNC": "full"})
    assert full._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # type: ignore[attr-defined]
    full.close()
    with pytest.raises(AsapError, match="ASAP_SQLITE_SYNC"):
        open_store({"ASAP_STATE_DIR": str(tmp_path / "b"), "ASAP_SQLITE_SYNC": "sometimes"})


def test_sqlite_claims_are_shared_between_connections(tmp_path: Path) -> None:
    """Two fronts on one state file (two processes in production): one claim wins."""
    a, b = SQLiteStore(tmp_path / "s.db"), SQLiteStore(tmp_path / "s.db")
    assert a.claim("asap:job:slack:Ev1") is True
    assert b.claim("asap:job:slack:Ev1") is False
    assert b.claim("asap:job:slack:Ev2", ttl_s=0.1) is True
    time.sleep(0.15)
    assert a.claim("asap:job:slack:Ev2") is True  # expired: taken over
    a.close()
    b.close()


def test_sqlite_sweeps_expired_claims_and_values(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "s.db")
    s.claim("old", ttl_s=0.01)
    s.put_value("old-v", {"x": 1}, ttl=0.01)
    s.put_value("keep", {"x": 2})
    time.sleep(0.05)
    for i in range(PURGE_EVERY):
        s.claim(f"k{i}")
    db = sqlite3.connect(tmp_path / "s.db")
    assert db.execute("SELECT count(*) FROM claims WHERE key = 'old'").fetchone()[0] == 0
    assert db.execute("SELECT key FROM kv").fetchall() == [("keep",)]
    db.close()
    s.close()
