"""The memory store against the real things: an SQLite file and a Redis server."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.errors import AsapError
from bot.store import open_store
from bot.store.base import state_path
from bot.store.redis_store import RedisStore
from bot.store.sqlite_store import SQLiteStore


def _reachable(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Redis: the one on 6379 when it answers, else a throwaway redis-server, else skip."""
    if _reachable(6379):
        yield "redis://127.0.0.1:6379/0"
        return
    binary = shutil.which("redis-server")
    if not binary:
        pytest.skip("no Redis on 127.0.0.1:6379 and no redis-server binary to start one")
    port = _free_port()
    folder = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", str(folder)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            if _reachable(port):
                break
            time.sleep(0.05)
        else:
            pytest.skip("redis-server did not start")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


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


def test_thread_roundtrip_and_listing(store) -> None:
    assert store.get_thread("t1") is None
    store.put_thread("t1", {"run": "123", "turns": [1, 2]})
    time.sleep(0.01)
    store.put_thread("t2", {"run": "456"})
    assert store.get_thread("t1") == {"run": "123", "turns": [1, 2]}
    store.put_thread("t1", {"run": "123", "turns": [1, 2, 3]})
    assert store.get_thread("t1")["turns"] == [1, 2, 3]
    assert store.list_threads()[:2] == ["t1", "t2"]


def test_worklog_keeps_order_per_thread(store) -> None:
    for i in range(5):
        store.append_log("a", {"kind": "tool_call", "i": i})
    store.append_log("b", {"kind": "request"})
    assert [e["i"] for e in store.read_log("a")] == [0, 1, 2, 3, 4]
    assert store.read_log("b") == [{"kind": "request"}]
    assert store.read_log("never") == []


def test_claim_is_once_until_it_expires(store) -> None:
    assert store.claim("event-1", ttl_s=0.3) is True
    assert store.claim("event-1", ttl_s=0.3) is False
    time.sleep(0.4)
    assert store.claim("event-1", ttl_s=0.3) is True


def test_bad_thread_id_is_refused(store) -> None:
    with pytest.raises(AsapError, match="printable"):
        store.put_thread("bad\nid", {})


def test_sqlite_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    s = SQLiteStore(path)
    s.put_thread("x", {"n": 1})
    s.append_log("x", {"kind": "answer"})
    s.close()
    again = SQLiteStore(path)
    assert again.get_thread("x") == {"n": 1}
    assert again.read_log("x") == [{"kind": "answer"}]


def test_open_store_picks_backend_from_env(tmp_path: Path, redis_url: str) -> None:
    sqlite = open_store({"ASAP_STATE_DIR": str(tmp_path / "st")})
    assert isinstance(sqlite, SQLiteStore) and sqlite.path == tmp_path / "st" / "state.db"
    assert state_path({}) == Path(".asap/state.db")
    red = open_store({"REDIS_URL": redis_url})
    assert isinstance(red, RedisStore)


def test_unreachable_redis_fails_clearly() -> None:
    with pytest.raises(AsapError, match="cannot reach Redis"):
        open_store({"REDIS_URL": f"redis://127.0.0.1:{_free_port()}/0"})
    with pytest.raises(AsapError, match="REDIS_URL"):
        open_store({"REDIS_URL": "nonsense://"})


def test_unwritable_state_dir_fails_clearly(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(AsapError, match="state database"):
        SQLiteStore(blocker / "state.db")
