"""A corrupt SQLite state file is named as corrupt (not as a permissions problem), never a traceback, and
/readyz reports the store as failing."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from bot.cli import main
from bot.errors import AsapError
from bot.runtime.context import RuntimeContext
from bot.runtime.server import build_app
from bot.store.sqlite_store import SQLiteStore

pytestmark = pytest.mark.timeout(60)


def _corrupt_state(state: Path) -> Path:
    """A state.db with 300 threads and worklog lines, then garbage written over its data pages."""
    db = state / "state.db"
    store = SQLiteStore(db)
    for i in range(300):
        store.put_thread(f"t{i}", {"text": "x" * 200, "i": i})
        store.append_log(f"t{i}", {"event": "request", "text": "y" * 100})
    store.close()
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    data = bytearray(db.read_bytes())
    page = 4096
    assert len(data) > 10 * page
    for start in range(2 * page, len(data) - page, 3 * page):
        data[start:start + page] = bytes([0xA5]) * page
    db.write_bytes(bytes(data))
    return db


def test_corrupt_file_is_a_clear_error(tmp_path: Path) -> None:
    db = _corrupt_state(tmp_path)
    with pytest.raises(AsapError) as info:
        store = SQLiteStore(db)
        for i in range(300):
            store.get_thread(f"t{i}")
        store.read_log("t150")
        store.check()
    text = info.value.render()
    assert "corrupt" in text and str(db) in text
    assert "writable" not in text and ".recover" in text


def test_cli_log_on_a_corrupt_store_exits_2_without_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    _corrupt_state(tmp_path)
    monkeypatch.setenv("ASAP_STATE_DIR", str(tmp_path))
    with pytest.raises(SystemExit) as exited:
        main(["log", "t150"])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert "corrupt" in err and "state.db" in err and "Traceback" not in err and "writable" not in err


def test_readyz_reports_a_corrupt_store(tmp_path: Path) -> None:
    _corrupt_state(tmp_path / "state")

    async def run() -> None:
        ctx = RuntimeContext.from_env({"ASAP_STATE_DIR": str(tmp_path / "state"), "ASAP_QUEUE_PREFIX": "corrupt:"})
        client = TestClient(TestServer(build_app(ctx, env={})))
        await client.start_server()
        try:
            resp = await client.get("/readyz")
            body = await resp.json()
            assert resp.status == 503 and body["ready"] is False
            assert "corrupt" in body["checks"]["store"] and str(tmp_path) not in body["checks"]["store"]
        finally:
            await client.close()
            await ctx.close()

    asyncio.run(run())


def test_bad_job_ids_are_400_and_errors_hide_server_paths(tmp_path: Path) -> None:
    token = "t0ken-for-tests-only"
    auth = {"Authorization": f"Bearer {token}"}

    async def run() -> None:
        env = {"ASAP_STATE_DIR": str(tmp_path / "state"), "ASAP_API_TOKEN": token, "ASAP_QUEUE_PREFIX": "ids:"}
        ctx = RuntimeContext.from_env(env)
        client = TestClient(TestServer(build_app(ctx, env={})))
        await client.start_server()
        try:
            resp = await client.get("/v1/jobs/cli:abc%00def", headers=auth)
            assert resp.status == 400 and "NUL" in (await resp.json())["error"]
            resp = await client.post("/v1/jobs", json={"text": "why is 311 slow", "id": "a\x00b"}, headers=auth)
            body = await resp.json()
            assert resp.status == 400 and "id" in body["error"] and "control characters" in body["error"]
        finally:
            await client.close()
            await ctx.close()

    asyncio.run(run())


def test_replies_name_files_not_server_folders(tmp_path: Path) -> None:
    from bot.runs.store import LocalRunStore
    from integrations.slack.blocks import error_message

    runs = tmp_path / "srv" / "asap" / "runs"
    (runs / "123").mkdir(parents=True)
    (runs / "123" / "run.yaml").write_text("id: '123'\nname: x\nchip: tpu-v5p\nnum_chips: 8\n", encoding="utf-8")
    with pytest.raises(AsapError) as missing:
        LocalRunStore(runs).get("999")
    assert str(runs) in missing.value.render()  # the CLI, on the server, names the folder
    for text in (missing.value.public(), error_message(missing.value).text):
        assert str(tmp_path) not in text and "no run '999'" in text
    with pytest.raises(AsapError) as corrupt:
        SQLiteStore(_corrupt_state(tmp_path / "state")).check()
    assert "…/state/state.db" in corrupt.value.public() and str(tmp_path) not in corrupt.value.public()
