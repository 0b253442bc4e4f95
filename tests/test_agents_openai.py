"""The real openai client path (autogen's OpenAIChatCompletionClient) against a local HTTP double."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest
from autogen_core.models import UserMessage
from doubles.agents_backend import FakeBackend
from doubles.openai_double import OpenAIDouble, Reply

from agents.conversation import Conversation
from agents.intents import CALLS, parse_header
from agents.models import build_model
from bot.errors import AsapError
from bot.store.sqlite_store import SQLiteStore

INFO = json.dumps({"function_calling": True, "family": "unknown"})


def env_for(d: OpenAIDouble, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"ASAP_MODEL_BASE_URL": d.base_url, "ASAP_MODEL": "test-model", "ASAP_MODEL_INFO": INFO,
            "ASAP_MODEL_CONFIG": str(_settings(tmp_path)), **extra}


def _settings(tmp_path: Path) -> Path:
    p = tmp_path / "model.yaml"
    p.write_text("timeout_s: 2\nmax_retries: 0\nprice: {input_per_mtok: 0.5, output_per_mtok: 1.5}\n")
    return p


def tool_policy(body: dict[str, Any]) -> Reply:
    """A model that calls the tools the request needs, as a real tool-calling model would."""
    msgs = body["messages"]
    header = next((parse_header(m["content"]) for m in reversed(msgs)
                   if isinstance(m.get("content"), str) and "[asap]" in m["content"]), None)
    assert header, "the task header reaches the model"
    run_id, intent = header
    offered = {t["function"]["name"] for t in body.get("tools") or []}
    done = {m.get("name") for m in msgs if m["role"] == "tool"}
    called = {c["function"]["name"] for m in msgs if m["role"] == "assistant" for c in m.get("tool_calls") or []}
    for tool, argnames in CALLS[intent.kind]:
        if tool in offered and tool not in called | done:
            return Reply.call(tool, {a: run_id if a == "run_id" else intent.args[a] for a in argnames})
    return Reply.say("The collectives dominate; start with proposal 1.")


def ask(conv: Conversation, text: str, thread: str = "t1"):
    return asyncio.run(conv.ask(text, thread_id=thread))


def test_team_through_the_openai_client(tmp_path: Path) -> None:
    with OpenAIDouble(tool_policy) as d:
        model = build_model(env_for(d, tmp_path))
        assert model.mode == "compatible"
        conv = Conversation(store=SQLiteStore(tmp_path / "s.db"), model=model, backend=FakeBackend(tmp_path))
        a = ask(conv, "why is job 123 slow?")
        assert a.fallback is None and a.mode == "compatible"
        assert "communication-bound" in a.text and "1. fsdp=32 tensor=2" in a.text
        assert "The collectives dominate; start with proposal 1." in a.text
        n = len(d.requests)
        assert a.usage == {"prompt_tokens": 50 * n, "completion_tokens": 20 * n, "total_tokens": 70 * n, "model_calls": n}
        assert a.cost_usd == pytest.approx(n * (50 * 0.5 + 20 * 1.5) / 1e6)
        # tool schemas went out with the requests, and tool results came back to the model
        assert any(t["function"]["name"] == "analyze_run" for t in d.requests[0]["tools"])
        assert any(m["role"] == "tool" for r in d.requests for m in r["messages"])
        b = ask(conv, "which one would you start with?")
        assert "Start with proposal 1" in b.text and b.fallback is None


@pytest.mark.parametrize("failure", ["500", "slow"])
def test_model_failures_fall_back_to_the_analyst_answer(tmp_path: Path, failure: str) -> None:
    bad = Reply.fail(500, "upstream exploded") if failure == "500" else Reply.slow(3.0, Reply.say("too late"))
    with OpenAIDouble(lambda body: bad) as d:
        conv = Conversation(store=SQLiteStore(tmp_path / "s.db"), model=build_model(env_for(d, tmp_path)),
                            backend=FakeBackend(tmp_path))
        a = ask(conv, "why is job 123 slow?")
    assert a.mode == "analyst" and a.fallback
    assert ("500" in a.fallback or "InternalServerError" in a.fallback) if failure == "500" else ("2 s" in a.fallback or "Timeout" in a.fallback)
    assert "this is the analyst answer" in a.text and "1. fsdp=32 tensor=2" in a.text
    kinds = [e["kind"] for e in conv.log("t1")]
    assert "model_error" in kinds and "fallback" in kinds


def test_streaming_text_and_tool_calls(tmp_path: Path) -> None:
    script = [Reply.say("hello from the stream"), Reply.call("analyze_run", {"run_id": "123"})]
    with OpenAIDouble(script) as d:
        client = build_model(env_for(d, tmp_path)).client

        async def go() -> list[Any]:
            outs = []
            for _ in range(2):
                chunks = [c async for c in client.create_stream([UserMessage(content="hi", source="user")])]
                outs.append(chunks[-1])
            return outs

        text, call = asyncio.run(go())
        assert all(r["stream"] for r in d.requests)
    assert text.content == "hello from the stream"
    assert call.content[0].name == "analyze_run" and json.loads(call.content[0].arguments) == {"run_id": "123"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_misconfiguration_fails_at_start_up(tmp_path: Path) -> None:
    cfg = str(_settings(tmp_path))
    with pytest.raises(AsapError, match="does not end in /v1") as e:
        build_model({"ASAP_MODEL_BASE_URL": "http://127.0.0.1:8000", "ASAP_MODEL": "m", "ASAP_MODEL_INFO": INFO})
    assert "try http://127.0.0.1:8000/v1" in e.value.render()
    with pytest.raises(AsapError, match="unreachable"):
        build_model({"ASAP_MODEL_BASE_URL": f"http://127.0.0.1:{_free_port()}/v1", "ASAP_MODEL": "m",
                     "ASAP_MODEL_INFO": INFO, "ASAP_MODEL_CONFIG": cfg})
    with OpenAIDouble([]) as d:
        with pytest.raises(AsapError, match="without tool calling"):
            build_model({**env_for(d, tmp_path), "ASAP_MODEL_INFO": '{"function_calling": false}'})
        with pytest.raises(AsapError, match="model info"):
            build_model({"ASAP_MODEL_BASE_URL": d.base_url, "ASAP_MODEL": "test-model", "ASAP_MODEL_CONFIG": cfg})
        with pytest.raises(AsapError, match="not served") as e:
            build_model({**env_for(d, tmp_path), "ASAP_MODEL": "llama-9000"})
        assert "test-model" in e.value.render()
    with pytest.raises(AsapError, match="ASAP_MODEL_INFO"):
        build_model({"ASAP_MODEL_BASE_URL": "http://x/v1", "ASAP_MODEL": "m", "ASAP_MODEL_INFO": "{bad"})
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("base_url: http://x/v1\nunknown_key: 1\n")
    with pytest.raises(AsapError, match="unknown_key"):
        build_model({"ASAP_MODEL_CONFIG": str(bad_yaml)})


def test_nothing_configured_is_analyst_mode_and_openai_key_selects_openai(tmp_path: Path) -> None:
    m = build_model({"ASAP_MODEL_CONFIG": str(_settings(tmp_path))})
    assert m.mode == "analyst" and m.cost_usd(100, 100) == 0.0
    o = build_model({"OPENAI_API_KEY": "sk-test", "ASAP_MODEL_CONFIG": str(_settings(tmp_path))})
    assert o.mode == "openai" and o.model == "gpt-4o-mini" and o.client.model_info["function_calling"]
