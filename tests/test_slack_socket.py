"""Socket Mode uses the same Bolt app: an events_api envelope through Bolt's Socket Mode adapter queues the same
job and gets answered once; with only SLACK_APP_TOKEN set no HTTP route is mounted."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from slack_bolt.adapter.socket_mode.async_internals import run_async_bolt_app
from slack_sdk.socket_mode.request import SocketModeRequest

from integrations.slack.app import BOLT_KEY, EVENTS_PATH
from tests.doubles.slack_double import SlackRig, mention_body


def test_socket_mode_envelope_is_answered_like_http(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> None:
        async with SlackRig(tmp_path, monkeypatch) as rig:
            bolt = rig._runner.app[BOLT_KEY]  # type: ignore[union-attr]
            body = mention_body("<@UASAPBOT> why is job 618 slow?", event_id="EvSocket")
            for attempt in (0, 1):  # a redelivered envelope carries retry_attempt
                req = SocketModeRequest(type="events_api", envelope_id=f"env-{attempt}", payload=body,
                                        retry_attempt=attempt, retry_reason="timeout" if attempt else None)
                resp = await run_async_bolt_app(bolt, req)
                assert resp.status == 200
            await rig.idle()
            assert len(rig.double.called("chat.postMessage")) == 1
            assert "Run 618" in str(rig.double.messages[0].blocks)

    asyncio.run(go())


def test_app_token_only_mounts_no_http_route_and_connects_on_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aiohttp import web

    from bot.runtime.context import RuntimeContext
    from integrations.slack.app import setup_routes

    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1")
    monkeypatch.delenv("SLACK_SIGNING_SECRET", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    app = web.Application()
    ctx = RuntimeContext.from_env({"ASAP_STATE_DIR": str(tmp_path)})
    setup_routes(app, ctx)
    assert not any(r.resource.canonical == EVENTS_PATH for r in app.router.routes() if r.resource)
    assert any(getattr(h, "__name__", "") == "start_socket" for h in app.on_startup)
    assert app[BOLT_KEY] is not None
