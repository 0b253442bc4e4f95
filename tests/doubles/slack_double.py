"""A Slack Web API double on 127.0.0.1 (aiohttp) that records calls and checks Block Kit against Slack's limits.

``slack_sdk.web.async_client.AsyncWebClient(token=..., base_url=double.base_url)`` talks to it exactly as
to https://slack.com/api/: JSON or form bodies, ``Authorization: Bearer`` tokens, ``{"ok": false, "error":
...}`` failures. Implemented methods: ``auth.test``, ``chat.postMessage``, ``chat.update``,
``chat.postEphemeral``, ``reactions.add``, ``usergroups.users.list``, ``conversations.replies``, plus a
``response_url`` endpoint (``/response/<id>``) for slash-command replies.

Every message payload goes through :func:`block_kit_errors`; a payload that breaks a limit is refused
the way Slack refuses it (``invalid_blocks`` with the reasons) and also kept in
:attr:`SlackDouble.violations`, so a test fails even when the code under test swallows the error.
"""

from __future__ import annotations

import json
import math
import time as _time
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web

# Slack's documented limits (https://docs.slack.dev/reference/block-kit/blocks, .../block-elements,
# .../composition-objects, chat.postMessage): the double refuses what Slack refuses.
MAX_BLOCKS_PER_MESSAGE = 50
MAX_MESSAGE_TEXT = 40000
MAX_BLOCK_ID = 255
MAX_SECTION_TEXT = 3000
MAX_SECTION_FIELDS = 10
MAX_FIELD_TEXT = 2000
MAX_HEADER_TEXT = 150
MAX_CONTEXT_ELEMENTS = 10
MAX_TEXT_OBJECT = 3000
MAX_ACTIONS_ELEMENTS = 25
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2000
MAX_ACTION_ID = 255
MAX_URL = 3000
MAX_CONFIRM = {"title": 100, "text": 300, "confirm": 30, "deny": 30}
BLOCK_TYPES = {"section", "divider", "header", "context", "actions", "rich_text", "image"}

# Slack's rate-limit tiers (https://docs.slack.dev/apis/web-api/rate-limits): calls per minute, per method per
# workspace per app; the double enforces the documented minimum of each ("50+ per minute" -> 50).
TIER_PER_MINUTE = {1: 1, 2: 20, 3: 50, 4: 100}
# Each method's tier as Slack's method reference lists it (cross-checked against slack-morphism-rust's
# per-method rate-control table, src/api/*.rs @ 08d264c0): ("tier", n) or ("per_channel", calls, seconds)
# for chat.postMessage's special limit of about one message per second per channel (short bursts allowed:
# the double lets a burst of 3 through), ("per_second", n) for auth.test's special limit.
METHOD_LIMITS: dict[str, tuple[Any, ...]] = {
    "chat.postMessage": ("per_channel", 1, 1.0, 3),
    "chat.update": ("tier", 3),
    "chat.postEphemeral": ("tier", 4),
    "reactions.add": ("tier", 3),
    "usergroups.users.list": ("tier", 2),
    "conversations.replies": ("tier", 3),
    "conversations.history": ("tier", 3),
    "auth.test": ("per_second", 100),
}


def _text_obj(obj: Any, where: str, limit: int, errors: list[str], *, plain_only: bool = False) -> None:
    if not isinstance(obj, dict) or obj.get("type") not in ("plain_text", "mrkdwn"):
        errors.append(f"{where}: expected a text object of type plain_text or mrkdwn")
        return
    if plain_only and obj["type"] != "plain_text":
        errors.append(f"{where}: must be plain_text")
    text = obj.get("text")
    if not isinstance(text, str) or not text:
        errors.append(f"{where}: text must be more than 0 characters")
    elif len(text) > limit:
        errors.append(f"{where}: must be less than {limit + 1} characters (got {len(text)})")
    if set(obj) - {"type", "text", "emoji", "verbatim"}:
        errors.append(f"{where}: unknown keys {sorted(set(obj) - {'type', 'text', 'emoji', 'verbatim'})}")


def _button(el: dict[str, Any], where: str, errors: list[str], action_ids: set[str]) -> None:
    _text_obj(el.get("text"), f"{where}.text", MAX_BUTTON_TEXT, errors, plain_only=True)
    aid = el.get("action_id")
    if aid is not None:
        if not isinstance(aid, str) or not aid or len(aid) > MAX_ACTION_ID:
            errors.append(f"{where}.action_id: must be 1..{MAX_ACTION_ID} characters")
        elif aid in action_ids:
            errors.append(f"{where}.action_id: {aid!r} is not unique in the message")
        else:
            action_ids.add(aid)
    value = el.get("value")
    if value is not None and (not isinstance(value, str) or len(value) > MAX_BUTTON_VALUE):
        errors.append(f"{where}.value: must be a string of at most {MAX_BUTTON_VALUE} characters")
    if "url" in el and (not isinstance(el["url"], str) or len(el["url"]) > MAX_URL):
        errors.append(f"{where}.url: must be at most {MAX_URL} characters")
    if el.get("style") not in (None, "primary", "danger"):
        errors.append(f"{where}.style: must be primary or danger")
    confirm = el.get("confirm")
    if confirm is not None:
        for key, limit in MAX_CONFIRM.items():
            if key in confirm:
                _text_obj(confirm[key], f"{where}.confirm.{key}", limit, errors, plain_only=key != "text")


def block_kit_errors(blocks: Any, *, max_blocks: int = MAX_BLOCKS_PER_MESSAGE) -> list[str]:
    """Every way ``blocks`` breaks Slack's Block Kit rules; empty when Slack would accept it."""
    if not isinstance(blocks, list):
        return ["blocks: expected a JSON array"]
    errors: list[str] = []
    if len(blocks) > max_blocks:
        errors.append(f"blocks: must contain at most {max_blocks} blocks (got {len(blocks)})")
    block_ids: set[str] = set()
    action_ids: set[str] = set()
    for i, b in enumerate(blocks):
        where = f"blocks[{i}]"
        if not isinstance(b, dict) or b.get("type") not in BLOCK_TYPES:
            errors.append(f"{where}: unknown block type {b.get('type') if isinstance(b, dict) else b!r}")
            continue
        bid = b.get("block_id")
        if bid is not None:
            if not isinstance(bid, str) or not bid or len(bid) > MAX_BLOCK_ID:
                errors.append(f"{where}.block_id: must be 1..{MAX_BLOCK_ID} characters")
            elif bid in block_ids:
                errors.append(f"{where}.block_id: {bid!r} is not unique in the message")
            else:
                block_ids.add(bid)
        kind = b["type"]
        if kind == "section":
            if "text" not in b and "fields" not in b:
                errors.append(f"{where}: a section needs text or fields")
            if "text" in b:
                _text_obj(b["text"], f"{where}.text", MAX_SECTION_TEXT, errors)
            fields = b.get("fields")
            if fields is not None:
                if not isinstance(fields, list) or not 1 <= len(fields) <= MAX_SECTION_FIELDS:
                    errors.append(f"{where}.fields: must hold 1..{MAX_SECTION_FIELDS} items")
                else:
                    for j, f in enumerate(fields):
                        _text_obj(f, f"{where}.fields[{j}]", MAX_FIELD_TEXT, errors)
            acc = b.get("accessory")
            if isinstance(acc, dict) and acc.get("type") == "button":
                _button(acc, f"{where}.accessory", errors, action_ids)
        elif kind == "header":
            _text_obj(b.get("text"), f"{where}.text", MAX_HEADER_TEXT, errors, plain_only=True)
        elif kind == "context":
            els = b.get("elements")
            if not isinstance(els, list) or not 1 <= len(els) <= MAX_CONTEXT_ELEMENTS:
                errors.append(f"{where}.elements: must hold 1..{MAX_CONTEXT_ELEMENTS} items")
            else:
                for j, el in enumerate(els):
                    if isinstance(el, dict) and el.get("type") == "image":
                        continue
                    _text_obj(el, f"{where}.elements[{j}]", MAX_TEXT_OBJECT, errors)
        elif kind == "actions":
            els = b.get("elements")
            if not isinstance(els, list) or not 1 <= len(els) <= MAX_ACTIONS_ELEMENTS:
                errors.append(f"{where}.elements: must hold 1..{MAX_ACTIONS_ELEMENTS} items")
            else:
                for j, el in enumerate(els):
                    if not isinstance(el, dict) or el.get("type") != "button":
                        errors.append(f"{where}.elements[{j}]: only buttons are expected from ASAP")
                        continue
                    _button(el, f"{where}.elements[{j}]", errors, action_ids)
    return errors


@dataclass
class Message:
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]] | None
    thread_ts: str | None
    user: str
    updates: int = 0


@dataclass
class Call:
    method: str
    args: dict[str, Any]
    token: str | None


@dataclass
class SlackDouble:
    """``async with SlackDouble() as slack: AsyncWebClient(token=slack.bot_token, base_url=slack.base_url)``."""

    bot_token: str = "xoxb-test-token"
    team_id: str = "T0ASAP"
    bot_user_id: str = "UASAPBOT"
    bot_id: str = "BASAP"
    usergroups: dict[str, list[str]] = field(default_factory=dict)
    not_member: set[str] = field(default_factory=set)  # channels the bot was not invited to
    calls: list[Call] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    ephemerals: list[dict[str, Any]] = field(default_factory=list)
    reactions: list[tuple[str, str, str]] = field(default_factory=list)
    responses: list[dict[str, Any]] = field(default_factory=list)  # posts to a response_url
    violations: list[str] = field(default_factory=list)
    latency_s: float = 0.0  # added to every call, to see that nothing waits on Slack where it must not
    rate_limits: bool = False  # enforce METHOD_LIMITS with 429 + Retry-After
    time_scale: float = 1.0  # windows are multiplied by this (rate-limit runs that must finish quickly)
    limits: dict[str, tuple[Any, ...]] = field(default_factory=lambda: dict(METHOD_LIMITS))
    limited: list[tuple[str, str, int]] = field(default_factory=list)  # (method, channel, Retry-After) refused
    usergroups_error: str | None = None  # e.g. "missing_scope" (no usergroups:read), "paid_teams_only"
    lose_response: dict[str, int] = field(default_factory=dict)  # method -> calls that are done, then answered 500
    _hits: dict[tuple[str, str], deque[float]] = field(default_factory=dict)
    _clock: int = 0
    _runner: web.AppRunner | None = None
    port: int = 0

    # ------------------------------------------------------------ lifecycle
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    def response_url(self, key: str = "cmd") -> str:
        return f"http://127.0.0.1:{self.port}/response/{key}"

    async def start(self) -> SlackDouble:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/response/{key}", self._response)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> SlackDouble:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------ queries for tests
    def called(self, method: str) -> list[dict[str, Any]]:
        return [c.args for c in self.calls if c.method == method]

    def thread(self, channel: str, thread_ts: str) -> list[Message]:
        """Bot messages posted in the thread rooted at ``thread_ts`` (the root itself included)."""
        return [m for m in self.messages if m.channel == channel and (m.thread_ts == thread_ts or m.ts == thread_ts)]

    def message(self, channel: str, ts: str) -> Message | None:
        return next((m for m in self.messages if m.channel == channel and m.ts == ts), None)

    # ------------------------------------------------------------ handlers
    def _next_ts(self) -> str:
        self._clock += 1
        return f"1700000000.{self._clock:06d}"

    async def _args(self, request: web.Request) -> dict[str, Any]:
        args: dict[str, Any] = dict(request.query)
        if request.method == "POST" and request.can_read_body:
            raw = await request.text()
            if request.content_type == "application/json":
                args.update(json.loads(raw or "{}"))
            else:
                args.update(dict(parse_qsl(raw)))
        for key in ("blocks", "attachments"):
            if isinstance(args.get(key), str):  # form-encoded payloads carry JSON strings
                try:
                    args[key] = json.loads(args[key])
                except json.JSONDecodeError:
                    args[key] = {"__invalid_json__": args[key]}
        return args

    async def _api(self, request: web.Request) -> web.Response:
        import asyncio

        method = request.match_info["method"]
        args = await self._args(request)
        auth = request.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else args.get("token")
        self.calls.append(Call(method, args, token))
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if token != self.bot_token:
            return web.json_response({"ok": False, "error": "invalid_auth" if token else "not_authed"})
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        if self.rate_limits and (wait := self._over_limit(method, str(args.get("channel") or ""))) is not None:
            self.limited.append((method, str(args.get("channel") or ""), wait))
            return web.json_response({"ok": False, "error": "ratelimited"}, status=429,
                                     headers={"Retry-After": str(wait)})
        result = handler(args)
        if self.lose_response.get(method):
            # The call took effect but its answer never reached the caller (a worker killed mid-post, a
            # dropped connection): the caller sees a server error.
            self.lose_response[method] -= 1
            return web.Response(status=500, text="upstream connect error")
        return web.json_response(result)

    def _over_limit(self, method: str, channel: str) -> int | None:
        """None when Slack would accept this call now (and it is counted); else the Retry-After seconds."""
        rule = self.limits.get(method)
        if rule is None:
            return None
        now = _time.monotonic()
        if rule[0] == "per_channel":
            key, count, window = (method, channel), rule[3], rule[2] * rule[3] / rule[1]
        elif rule[0] == "per_second":
            key, count, window = (method, ""), rule[1], 1.0
        else:
            key, count, window = (method, ""), TIER_PER_MINUTE[rule[1]], 60.0
        window *= self.time_scale
        hits = self._hits.setdefault(key, deque())
        while hits and now - hits[0] >= window:
            hits.popleft()
        if len(hits) >= count:
            return max(1, math.ceil(hits[0] + window - now))
        hits.append(now)
        return None

    async def _response(self, request: web.Request) -> web.Response:
        body = await request.json()
        errors = block_kit_errors(body["blocks"]) if "blocks" in body else []
        if errors:
            self.violations += errors
            return web.json_response({"ok": False, "error": "invalid_blocks", "errors": errors})
        self.responses.append({"key": request.match_info["key"], **body})
        return web.Response(text="ok")

    def _check_payload(self, args: dict[str, Any]) -> dict[str, Any] | None:
        text = args.get("text")
        blocks = args.get("blocks")
        if not text and not blocks:
            return {"ok": False, "error": "no_text"}
        errors: list[str] = []
        if text is not None and len(str(text)) > MAX_MESSAGE_TEXT:
            errors.append(f"text: must be at most {MAX_MESSAGE_TEXT} characters (got {len(str(text))})")
        if blocks is not None:
            errors += block_kit_errors(blocks)
        if errors:
            self.violations += errors
            return {"ok": False, "error": "invalid_blocks", "errors": errors}
        return None

    def _m_auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "url": "https://asap-test.slack.com/", "team": "ASAP test", "user": "asap",
                "team_id": self.team_id, "user_id": self.bot_user_id, "bot_id": self.bot_id, "is_enterprise_install": False}

    def _m_chat_postMessage(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = args.get("channel")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if channel in self.not_member:
            return {"ok": False, "error": "not_in_channel"}
        if bad := self._check_payload(args):
            return bad
        thread_ts = args.get("thread_ts") or None
        msg = Message(channel, self._next_ts(), str(args.get("text") or ""), args.get("blocks"), thread_ts, self.bot_user_id)
        self.messages.append(msg)
        return {"ok": True, "channel": channel, "ts": msg.ts,
                "message": {"type": "message", "text": msg.text, "user": msg.user, "ts": msg.ts, "bot_id": self.bot_id}}

    def _m_chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        msg = self.message(str(args.get("channel")), str(args.get("ts")))
        if msg is None:
            return {"ok": False, "error": "message_not_found"}
        if bad := self._check_payload(args):
            return bad
        msg.text = str(args.get("text") or "")
        msg.blocks = args.get("blocks")
        msg.updates += 1
        return {"ok": True, "channel": msg.channel, "ts": msg.ts, "text": msg.text}

    def _m_chat_postEphemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        if not args.get("channel") or not args.get("user"):
            return {"ok": False, "error": "user_not_in_channel"}
        if bad := self._check_payload(args):
            return bad
        self.ephemerals.append(args)
        return {"ok": True, "message_ts": self._next_ts()}

    def _m_reactions_add(self, args: dict[str, Any]) -> dict[str, Any]:
        key = (str(args.get("channel")), str(args.get("timestamp")), str(args.get("name")))
        if not all(key):
            return {"ok": False, "error": "invalid_arguments"}
        if key in self.reactions:
            return {"ok": False, "error": "already_reacted"}
        self.reactions.append(key)
        return {"ok": True}

    def _m_usergroups_users_list(self, args: dict[str, Any]) -> dict[str, Any]:
        if self.usergroups_error == "missing_scope":  # Slack's shape for a token without the scope
            return {"ok": False, "error": "missing_scope", "needed": "usergroups:read",
                    "provided": "app_mentions:read,chat:write,reactions:write,commands"}
        if self.usergroups_error:
            return {"ok": False, "error": self.usergroups_error}
        group = args.get("usergroup")
        if group not in self.usergroups:
            return {"ok": False, "error": "no_such_subteam"}
        return {"ok": True, "users": list(self.usergroups[group])}

    def _wire(self, m: Message) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "message", "ts": m.ts, "text": m.text, "user": m.user, "bot_id": self.bot_id}
        if m.thread_ts:
            out["thread_ts"] = m.thread_ts
        if m.blocks:
            out["blocks"] = m.blocks
        return out

    def _m_conversations_replies(self, args: dict[str, Any]) -> dict[str, Any]:
        msgs = self.thread(str(args.get("channel")), str(args.get("ts")))
        return {"ok": True, "has_more": False, "messages": [self._wire(m) for m in msgs]}

    def _m_conversations_history(self, args: dict[str, Any]) -> dict[str, Any]:
        """Top-level messages of a channel, newest first (the double's ts are not wall-clock, so ``oldest`` is
        not applied: every message is returned)."""
        channel = str(args.get("channel"))
        msgs = [m for m in self.messages if m.channel == channel and (not m.thread_ts or m.thread_ts == m.ts)]
        return {"ok": True, "has_more": False, "messages": [self._wire(m) for m in reversed(msgs)]}


# ====================================================================== request signing and a test rig
def sign(secret: str, body: str, timestamp: int | None = None) -> dict[str, str]:
    """Slack's v0 request signature headers for ``body`` (HMAC-SHA256 of ``v0:<ts>:<body>``)."""
    import hashlib
    import hmac
    import time

    ts = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(ts), "X-Slack-Signature": f"v0={digest}"}


def mention_body(text: str, *, event_id: str, channel: str = "C0DATA", user: str = "UALICE", ts: str = "1710000000.000100",
                 thread_ts: str | None = None, bot_user_id: str = "UASAPBOT", kind: str = "app_mention",
                 channel_type: str | None = None) -> dict[str, Any]:
    """An Events API envelope like the ones Slack posts (app_mention or message)."""
    event: dict[str, Any] = {"type": kind, "user": user, "text": text, "ts": ts, "channel": channel,
                             "event_ts": ts}
    if thread_ts:
        event["thread_ts"] = thread_ts
    if channel_type:
        event["channel_type"] = channel_type
    return {"token": "legacy", "team_id": "T0ASAP", "api_app_id": "A0ASAP", "event": event, "type": "event_callback",
            "event_id": event_id, "event_time": 1710000000,
            "authorizations": [{"team_id": "T0ASAP", "user_id": bot_user_id, "is_bot": True}]}


def action_body(action_id: str, value: str, *, user: str, channel: str, message_ts: str, thread_ts: str | None,
                action_ts: str, response_url: str = "") -> dict[str, Any]:
    """A ``block_actions`` payload for a button on a bot message."""
    container: dict[str, Any] = {"type": "message", "message_ts": message_ts, "channel_id": channel, "is_ephemeral": False}
    message: dict[str, Any] = {"type": "message", "ts": message_ts, "user": "UASAPBOT", "bot_id": "BASAP"}
    if thread_ts:
        container["thread_ts"] = thread_ts
        message["thread_ts"] = thread_ts
    return {"type": "block_actions", "user": {"id": user, "username": user.lower(), "team_id": "T0ASAP"},
            "api_app_id": "A0ASAP", "token": "legacy", "container": container, "trigger_id": f"trig-{action_ts}",
            "team": {"id": "T0ASAP"}, "channel": {"id": channel}, "message": message, "response_url": response_url,
            "actions": [{"action_id": action_id, "block_id": "x", "type": "button", "value": value,
                         "action_ts": action_ts, "text": {"type": "plain_text", "text": "Apply"}}]}


class SlackRig:
    """The real path end to end: the runtime's aiohttp server on 127.0.0.1 with the Slack routes, a worker
    on the queue, the Slack Web API double, analyst-mode agents on the sample runs, state in ``tmp``.

    ``async with SlackRig(tmp_path, monkeypatch) as rig: await rig.post_event(body)``.
    """

    SECRET = "8f742231b10e8888abcd11122285a5ab"

    def __init__(self, tmp: Any, monkeypatch: Any, *, appliers: str = "", group: str | None = None,
                 usergroups: dict[str, list[str]] | None = None, redis_url: str | None = None,
                 codehost: Any = None, worker: bool = True, extra_env: dict[str, str] | None = None,
                 double: SlackDouble | None = None, concurrency: int = 2) -> None:
        self.tmp = tmp
        self.mp = monkeypatch
        self.double = double or SlackDouble(usergroups=usergroups or {})
        self.concurrency = concurrency
        self.appliers = appliers
        self.group = group
        self.redis_url = redis_url
        self.codehost = codehost
        self.with_worker = worker
        self.extra_env = extra_env or {}
        self.ctx: Any = None
        self.timings: list[tuple[str, str, float]] = []
        self._runner: web.AppRunner | None = None
        self._worker: Any = None
        self._stop: Any = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/slack/events"

    def env(self) -> dict[str, str]:
        (self.tmp / "model.yaml").write_text("{}\n")
        env = {"SLACK_BOT_TOKEN": self.double.bot_token, "SLACK_SIGNING_SECRET": self.SECRET,
               "SLACK_API_URL": self.double.base_url, "ASAP_STATE_DIR": str(self.tmp / "state"),
               "ASAP_MODEL_CONFIG": str(self.tmp / "model.yaml"), "ASAP_USER_RATE": "off",
               "ASAP_CHANNEL_RATE": "off", "ASAP_MAX_PENDING": "5000", "ASAP_APPLY_SLACK_USERS": self.appliers,
               "ASAP_QUEUE_BLOCK_MS": "50", **self.extra_env}
        if self.group:
            env["ASAP_APPLY_SLACK_GROUPS"] = self.group
        if self.redis_url:
            env["REDIS_URL"] = self.redis_url
        return env

    async def __aenter__(self) -> SlackRig:

        from agents.conversation import Conversation
        from agents.models import build_model
        from bot.runtime.context import RuntimeContext
        from bot.runtime.server import build_app

        await self.double.start()
        env = self.env()
        for key in ("SLACK_APP_TOKEN", "OPENAI_API_KEY", "ASAP_MODEL_BASE_URL", "ASAP_MODEL", "ASAP_RUNS_DIR",
                    "REDIS_URL", "GITHUB_WEBHOOK_SECRET", "ASAP_API_TOKEN"):
            self.mp.delenv(key, raising=False)
        for k, v in env.items():
            self.mp.setenv(k, v)
        self.ctx = RuntimeContext.from_env(env)
        store = self.ctx.store
        self.ctx.conversation_factory = lambda: Conversation(store=store, model=build_model(env))
        self.ctx.extras["slack.timings"] = self.timings
        self.ctx.extras["slack.progress_interval_s"] = 0.05
        if self.codehost is not None:
            self.ctx.extras["slack.codehost"] = self.codehost
        app = build_app(self.ctx, env=env)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        if self.with_worker:
            self.start_worker()
        return self

    def start_worker(self) -> None:
        import asyncio

        from bot.runtime.handlers import Dispatcher

        self._stop = asyncio.Event()
        self._worker = asyncio.create_task(self.ctx.queue.run_worker(Dispatcher(self.ctx), consumer="test-worker",
                                                                     stop=self._stop, concurrency=self.concurrency))

    async def stop_worker(self) -> None:
        if self._worker is not None:
            self._stop.set()
            await self._worker
            self._worker = None

    async def __aexit__(self, *exc: object) -> None:
        await self.stop_worker()
        if self._runner is not None:
            await self._runner.cleanup()
        if self.ctx is not None:
            await self.ctx.close()
        await self.double.stop()

    async def post(self, raw: str, headers: dict[str, str], content_type: str) -> tuple[int, str]:
        import aiohttp

        async with aiohttp.ClientSession() as s:
            async with s.post(self.url, data=raw.encode(), headers={**headers, "Content-Type": content_type}) as r:
                return r.status, await r.text()

    async def post_event(self, body: dict[str, Any], *, retry: int = 0, secret: str | None = None,
                         timestamp: int | None = None) -> tuple[int, str]:
        raw = json.dumps(body)
        headers = sign(secret or self.SECRET, raw, timestamp)
        if retry:
            headers["X-Slack-Retry-Num"] = str(retry)
            headers["X-Slack-Retry-Reason"] = "http_timeout"
        return await self.post(raw, headers, "application/json")

    async def post_form(self, fields: dict[str, str]) -> tuple[int, str]:
        from urllib.parse import urlencode

        raw = urlencode(fields)
        return await self.post(raw, sign(self.SECRET, raw), "application/x-www-form-urlencoded")

    async def click(self, body: dict[str, Any]) -> tuple[int, str]:
        return await self.post_form({"payload": json.dumps(body)})

    async def idle(self, timeout: float = 30.0) -> None:
        """Wait until the queue is empty and no job runs (lazy listeners included: a short grace)."""
        import asyncio
        import time

        end = time.monotonic() + timeout
        await asyncio.sleep(0.05)
        while time.monotonic() < end:
            if await self.ctx.queue.depth() == 0:
                await asyncio.sleep(0.1)
                if await self.ctx.queue.depth() == 0:
                    return
            await asyncio.sleep(0.05)
        raise TimeoutError(f"jobs still running after {timeout:.0f} s")
