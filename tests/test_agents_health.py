"""`asap serve` with the model endpoint down: /readyz says so, jobs get the analyst answer with a note, and
once the endpoint is back (re-checked every ``recheck_s``) the model answers again."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from doubles.agents_backend import FakeBackend
from doubles.openai_double import OpenAIDouble
from test_agents_openai import INFO, tool_policy

from agents.conversation import Conversation
from agents.health import ModelHealth
from agents.models import build_model
from bot.errors import AsapError
from bot.runtime.context import RuntimeContext
from bot.runtime.process import serve

TOKEN = "health-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _job(http: aiohttp.ClientSession, base: str, text: str, thread: str) -> dict[str, Any]:
    async with http.post(f"{base}/v1/jobs", json={"text": text, "run": "123", "thread": thread}, headers=AUTH) as r:
        assert r.status == 202, await r.text()
        job_id = (await r.json())["id"]
    for _ in range(300):
        async with http.get(f"{base}/v1/jobs/{job_id}", headers=AUTH) as r:
            body = await r.json()
        if body.get("status") != "pending":
            return body
        await asyncio.sleep(0.05)
    raise AssertionError("the job was not answered")


async def _ready(http: aiohttp.ClientSession, base: str) -> tuple[int, dict[str, Any]]:
    async with http.get(f"{base}/readyz") as r:
        return r.status, await r.json()


def test_model_down_at_start_then_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model_port, port = _free_port(), _free_port()
    settings = tmp_path / "model.yaml"
    settings.write_text("timeout_s: 2\nmax_retries: 0\nrecheck_s: 0.3\n")
    env = {"ASAP_MODEL_BASE_URL": f"http://127.0.0.1:{model_port}/v1", "ASAP_MODEL": "test-model",
           "ASAP_MODEL_INFO": INFO, "ASAP_MODEL_CONFIG": str(settings), "ASAP_STATE_DIR": str(tmp_path / "state"),
           "ASAP_API_TOKEN": TOKEN}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    base = f"http://127.0.0.1:{port}"

    async def main() -> None:
        ctx = RuntimeContext.from_env(env)
        ctx.conversation_factory = lambda: Conversation(store=ctx.store, model=build_model(env, check=False),
                                                        backend=FakeBackend(tmp_path))
        stop = asyncio.Event()
        server = asyncio.create_task(serve(ctx, host="127.0.0.1", port=port, workers=2, stop=stop))
        async with aiohttp.ClientSession() as http:
            for _ in range(200):
                try:
                    status, ready = await _ready(http, base)
                    break
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.05)
            assert status == 200 and ready["ready"] is True  # the analyst answer is still served
            assert ready["checks"]["model"].startswith(f"down: model endpoint http://127.0.0.1:{model_port}/v1 is unreachable")

            down = await _job(http, base, "why is job 123 slow?", "cli:down")
            assert down["status"] == "ok"
            answer = down["answer"]
            assert answer["mode"] == "analyst" and "the model endpoint is down" in answer["fallback"]
            assert "1. fsdp=32 tensor=2" in answer["text"] and "this is the analyst answer" in answer["text"]
            assert str(model_port) not in answer["text"]  # the endpoint's address stays out of the chat

            with OpenAIDouble(tool_policy, port=model_port) as d:
                t0 = time.monotonic()
                while (await _ready(http, base))[1]["checks"]["model"] != "ok":
                    assert time.monotonic() - t0 < 5, "the model endpoint was not re-checked"
                    await asyncio.sleep(0.1)
                up = await _job(http, base, "why is job 123 slow?", "cli:up")
                assert up["answer"]["mode"] == "compatible" and up["answer"]["fallback"] is None
                assert "The collectives dominate" in up["answer"]["text"] and d.requests
        stop.set()
        await server

    asyncio.run(main())


def test_a_connection_failure_mid_request_marks_the_model_down(tmp_path: Path) -> None:
    """Without waiting for the next probe: the first job that cannot connect marks it down for the next ones."""
    port = _free_port()
    with OpenAIDouble(tool_policy, port=port) as d:
        cfg = tmp_path / "m.yaml"
        cfg.write_text("timeout_s: 2\nmax_retries: 0\nrecheck_s: 60\n")
        model = build_model({"ASAP_MODEL_BASE_URL": d.base_url, "ASAP_MODEL": "test-model", "ASAP_MODEL_INFO": INFO,
                             "ASAP_MODEL_CONFIG": str(cfg)})
    assert model.health is not None and model.health.state == "ok"
    from bot.store.sqlite_store import SQLiteStore

    conv = Conversation(store=SQLiteStore(tmp_path / "s.db"), model=model, backend=FakeBackend(tmp_path))
    first = asyncio.run(conv.ask("why is job 123 slow?", thread_id="a"))
    assert first.mode == "analyst" and "Connection" in (first.fallback or "")
    assert model.health.state == "down"
    second = asyncio.run(conv.ask("why is job 123 slow?", thread_id="b"))
    assert second.fallback and second.fallback.startswith("the model endpoint is down")
    assert second.usage["model_calls"] == 0


def test_health_states_and_their_readyz_line() -> None:
    calls: list[int] = []

    def probe() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise AsapError("model endpoint http://m/v1 is unreachable: refused", field="ASAP_MODEL_BASE_URL")

    h = ModelHealth(probe, recheck_s=0.05)
    assert h.status() == "unknown"
    assert h.check() == "down" and h.status() == "down: model endpoint http://m/v1 is unreachable: refused"
    assert h.down_reason(refresh=False) is not None
    time.sleep(0.06)
    assert h.down_reason() is None and h.status() == "ok" and len(calls) == 2  # stale: re-probed, back up
    json.dumps({"model": h.status()})
