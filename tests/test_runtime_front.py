"""The HTTP front (`asap serve`): health, readiness, metrics, the jobs route, integration route hooks, and
`asap serve --all` answering a real question end to end through the queue."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from redis_fixture import HANDLERS_DIR, free_port, worker_command

from bot.errors import AsapError
from bot.runtime import server
from bot.runtime.context import RuntimeContext
from bot.runtime.server import build_app, register_route_setup

pytestmark = pytest.mark.timeout(90)
TOKEN = "t0ken-for-tests-only"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"ASAP_STATE_DIR": str(tmp_path / "state"), "ASAP_API_TOKEN": TOKEN, "ASAP_QUEUE_PREFIX": "front:", **extra}


async def _client(ctx: RuntimeContext, env: dict[str, str] | None = None) -> TestClient:
    client = TestClient(TestServer(build_app(ctx, env=env or {})))
    await client.start_server()
    return client


def test_health_ready_and_metrics(tmp_path: Path) -> None:
    async def main() -> None:
        ctx = RuntimeContext.from_env(_env(tmp_path))
        client = await _client(ctx)
        try:
            assert (await client.get("/healthz")).status == 200
            resp = await client.get("/readyz")
            assert resp.status == 200 and await resp.json() == {"ready": True, "checks": {"store": "ok", "queue": "ok",
                                                                               "model": "not configured (analyst mode)"}}
            await client.post("/v1/jobs", json={"text": "why is job 123 slow"}, headers=AUTH)
            ctx.metrics.record_usage("slack", "ask", {"prompt_tokens": 1200, "completion_tokens": 300}, 0.0042)
            text = await (await client.get("/metrics")).text()
            assert "asap_queue_depth 1.0" in text
            assert 'asap_tokens_total{kind="ask",source="slack",type="prompt"} 1200.0' in text
            assert 'asap_tokens_total{kind="ask",source="slack",type="completion"} 300.0' in text
            assert 'asap_submissions_total{source="cli",status="queued"} 1.0' in text
            assert "asap_enqueue_seconds_bucket" in text and "asap_job_seconds" in text
        finally:
            await client.close()
            await ctx.close()

    asyncio.run(main())


def test_readyz_names_a_broken_store(tmp_path: Path) -> None:
    async def main() -> None:
        ctx = RuntimeContext.from_env(_env(tmp_path))
        ctx.store.close()  # the SQLite file handle is gone
        client = await _client(ctx)
        try:
            resp = await client.get("/readyz")
            body = await resp.json()
            assert resp.status == 503 and body["ready"] is False
            assert body["checks"]["store"].startswith("failed: cannot check the state database")
            assert "closed database" in body["checks"]["store"] and body["checks"]["queue"] == "ok"
        finally:
            await client.close()

    asyncio.run(main())


def test_jobs_route_auth_validation_dedupe_and_limits(tmp_path: Path) -> None:
    async def main() -> None:
        ctx = RuntimeContext.from_env(_env(tmp_path, ASAP_USER_RATE="2/60"))
        client = await _client(ctx)
        try:
            assert (await client.post("/v1/jobs", json={"text": "hi"})).status == 401
            wrong = await client.post("/v1/jobs", json={"text": "hi"}, headers={"Authorization": "Bearer nope"})
            assert wrong.status == 401
            bad = await client.post("/v1/jobs", json={"text": "hi", "colour": "red"}, headers=AUTH)
            assert bad.status == 400 and "colour" in (await bad.json())["error"]
            kind = await client.post("/v1/jobs", json={"text": "hi", "kind": "apply"}, headers=AUTH)
            assert kind.status == 400 and "'apply'" in (await kind.json())["error"]
            first = await client.post("/v1/jobs", json={"text": "why is job 123 slow", "id": "req-1"}, headers=AUTH)
            assert first.status == 202 and (await first.json())["id"] == "cli:req-1"
            again = await client.post("/v1/jobs", json={"text": "why is job 123 slow", "id": "req-1"}, headers=AUTH)
            assert again.status == 200 and (await again.json())["status"] == "duplicate"
            await client.post("/v1/jobs", json={"text": "and 204?"}, headers=AUTH)
            limited = await client.post("/v1/jobs", json={"text": "and 311?"}, headers=AUTH)
            body = await limited.json()
            assert limited.status == 429 and body["message"].startswith("You have asked 2 times in the last minute")
            pending = await client.get("/v1/jobs/cli:req-1", headers=AUTH)
            assert pending.status == 202 and (await pending.json())["status"] == "pending"
        finally:
            await client.close()
            await ctx.close()

    asyncio.run(main())


def test_jobs_route_is_off_without_a_token(tmp_path: Path) -> None:
    async def main() -> None:
        env = _env(tmp_path)
        env.pop("ASAP_API_TOKEN")
        ctx = RuntimeContext.from_env(env)
        client = await _client(ctx)
        try:
            assert (await client.post("/v1/jobs", json={"text": "hi"})).status in (404, 405)
        finally:
            await client.close()
            await ctx.close()

    asyncio.run(main())


def test_integration_routes_are_added_only_when_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HANDLERS_DIR))
    monkeypatch.setattr(server, "ROUTE_SETUPS", list(server.ROUTE_SETUPS))
    register_route_setup("testhook", "runtime_routes:setup_routes", ("TESTHOOK_SECRET",))

    async def main() -> None:
        ctx = RuntimeContext.from_env(_env(tmp_path))
        on = await _client(ctx, {"TESTHOOK_SECRET": "x"})
        off = await _client(ctx, {})
        try:
            resp = await on.get("/hook/ping")
            assert resp.status == 200 and (await resp.json())["prefix"] == "front:"
            assert (await off.get("/hook/ping")).status == 404
        finally:
            await on.close()
            await off.close()
            await ctx.close()

    asyncio.run(main())


def test_configured_integration_that_cannot_load_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "ROUTE_SETUPS", list(server.ROUTE_SETUPS))
    register_route_setup("ghost", "integrations.no_such_module:setup_routes", ("GHOST_WEBHOOK_SECRET",))
    ctx = RuntimeContext.from_env(_env(tmp_path))
    with pytest.raises(AsapError) as err:
        build_app(ctx, env={"GHOST_WEBHOOK_SECRET": "s"})
    assert err.value.field == "GHOST_WEBHOOK_SECRET" and "integrations.no_such_module" in err.value.message
    asyncio.run(ctx.close())


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={**AUTH, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_serve_all_answers_a_question_through_the_queue_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "OPENAI_API_KEY", "ASAP_MODEL_BASE_URL")}
    env.update(_env(tmp_path))
    log = tmp_path / "serve.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(worker_command("serve", "--all", "--host", "127.0.0.1", "--port", str(port)),
                                env=env, stdout=fh, stderr=subprocess.STDOUT, cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if _get(f"{base}/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.05)
        else:
            pytest.fail("asap serve did not come up: " + log.read_text())
        status, body = _post(f"{base}/v1/jobs", {"text": "why is job 123 slow?", "user": "ann"})
        assert status == 202, body
        job_id = body["id"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status, result = _get(f"{base}/v1/jobs/{job_id}", AUTH)
            if status == 200:
                break
            time.sleep(0.2)
        assert status == 200, log.read_text()
        assert result["status"] == "ok", result
        answer = result["answer"]
        assert answer["run_id"] == "123" and answer["intent"] == "first" and answer["mode"] == "analyst"
        assert "analyze_run" in answer["results"] and answer["thread_id"] == body["thread"]
        # a question about a run that does not exist gets the clear error as its reply, not a retry loop
        status, body = _post(f"{base}/v1/jobs", {"text": "why is job 99999 slow?", "user": "bob"})
        for _ in range(100):
            status, result = _get(f"{base}/v1/jobs/{body['id']}", AUTH)
            if status == 200:
                break
            time.sleep(0.1)
        assert result["status"] == "failed" and "99999" in result["error"], result
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as resp:
            metrics = resp.read().decode()
        assert 'asap_jobs_total{kind="ask",outcome="ok",source="cli"} 1.0' in metrics
        assert 'asap_jobs_total{kind="ask",outcome="error",source="cli"} 1.0' in metrics
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")]
    assert any(x.get("job_id") == job_id and x["msg"] == "job done" for x in lines)
    assert TOKEN not in log.read_text()


def test_worker_and_serve_need_a_shared_queue_to_split(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(_env(tmp_path))
    for args, phrase in ((["worker"], "needs a shared queue"), (["serve"], "nothing would run the jobs")):
        proc = subprocess.run(worker_command(*args), env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and phrase in proc.stderr and "Traceback" not in proc.stderr


def test_a_worker_loads_the_handlers_of_configured_integrations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.runtime import handlers as registry

    monkeypatch.syspath_prepend(str(HANDLERS_DIR))
    monkeypatch.setattr(server, "ROUTE_SETUPS", list(server.ROUTE_SETUPS))
    monkeypatch.setattr(registry, "_HANDLERS", dict(registry._HANDLERS))
    monkeypatch.setattr(registry, "_FAILURE_REPLIES", dict(registry._FAILURE_REPLIES))
    monkeypatch.delitem(sys.modules, "runtime_handlers", raising=False)
    register_route_setup("testhook", "runtime_routes:setup_routes", ("TESTHOOK_SECRET",), "runtime_handlers")
    registry._HANDLERS.pop(("cli", "review"), None)
    asyncio.run(RuntimeContext.from_env(_env(tmp_path)).close())
    assert registry.get_handler("cli", "review") is None  # not configured: not loaded
    asyncio.run(RuntimeContext.from_env(_env(tmp_path, TESTHOOK_SECRET="s")).close())
    assert registry.get_handler("cli", "review") is not None
    register_route_setup("ghost", "x:setup_routes", ("GHOST_SECRET",), "integrations.no_such_handlers")
    with pytest.raises(AsapError) as err:
        RuntimeContext.from_env(_env(tmp_path, GHOST_SECRET="s"))
    assert err.value.field == "GHOST_SECRET" and "integrations.no_such_handlers" in err.value.message
