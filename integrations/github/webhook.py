"""``POST /github/webhook``: verify, dedupe, queue, answer 2xx fast.

1. ``X-Hub-Signature-256`` must be ``sha256=<hex HMAC of the raw body>`` under ``GITHUB_WEBHOOK_SECRET``,
   compared with :func:`hmac.compare_digest`; anything else is 401 and nothing is parsed.
2. The delivery becomes a job (:mod:`integrations.github.events`) with id ``github:<X-GitHub-Delivery>``;
   the queue refuses an id it has seen, so a redelivery is answered ``200 duplicate`` and posts nothing.
3. Mentions go through the runtime's limits (``ctx.submit``); a refused mention gets its reason as the
   job's one comment, posted in the background. PR reviews are not a person's request and skip the
   per-user limits (dedupe and the queue still apply).

No GitHub API call is made on the request path, so the answer takes milliseconds. In token mode without
``GITHUB_BOT_LOGIN``, the bot's login is looked up once (``GET /user``) in the background at start-up, so
the own-comment check knows the login; until then (or if that fails) own comments are recognised by their
signed marker.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
from typing import Any

import orjson
from aiohttp import web

from bot.errors import AsapError
from bot.runtime.context import RuntimeContext
from bot.runtime.jobs import Job
from integrations.github.config import EXTRAS_KEY, GitHubIntegration
from integrations.github.events import job_from_event

log = logging.getLogger("asap.github.webhook")

PATH = "/github/webhook"
CTX: web.AppKey[RuntimeContext] = web.AppKey("asap_github_ctx", RuntimeContext)
_background: set[asyncio.Task[Any]] = set()


def sign(secret: bytes, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value GitHub sends for ``body``."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify_signature(secret: bytes, body: bytes, header: str | None) -> bool:
    """Constant-time check of ``X-Hub-Signature-256``; False for a missing, malformed or wrong signature."""
    if not secret or not header or not header.startswith("sha256="):
        return False
    return hmac.compare_digest(sign(secret, body).encode(), header.strip().encode())


def _json(data: object, status: int) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


async def github_webhook(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    gi: GitHubIntegration = ctx.extras[EXTRAS_KEY]
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return _json({"error": "payload too large"}, 413)
    if not verify_signature(gi.webhook_secret, body, request.headers.get("X-Hub-Signature-256")):
        return _json({"error": "bad or missing X-Hub-Signature-256"}, 401)
    event = request.headers.get("X-GitHub-Event", "")
    delivery = request.headers.get("X-GitHub-Delivery", "")
    if event == "ping":
        return _json({"ok": True, "pong": True}, 200)
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return _json({"error": "body is not JSON (set the webhook content type to application/json)"}, 400)
    if not isinstance(payload, dict):
        return _json({"error": "expected a JSON object"}, 400)
    got = job_from_event(event, delivery, payload, gi, deadline_s=ctx.settings.deadline_s)
    if isinstance(got, str):
        return _json({"ignored": got}, 200)
    job = got
    try:
        if job.kind == "review":
            status = "queued" if await ctx.queue.submit(job) else "duplicate"
            message = ""
        else:
            sub = await ctx.submit(job)
            status, message = sub.status, sub.message
    except AsapError as exc:
        log.error("could not queue GitHub delivery %s: %s", delivery, exc.message)
        return _json({"error": exc.public()}, 503)
    if status in ("limited", "busy"):
        _reply_later(ctx, job, message)
    code = {"queued": 202, "duplicate": 200, "limited": 200, "busy": 200}[status]
    return _json({"id": job.id, "status": status, "message": message}, code)


def _reply_later(ctx: RuntimeContext, job: Job, message: str) -> None:
    """Post a refusal as the job's comment without holding up the 2xx."""
    from integrations.github.handlers import post_failure

    task = asyncio.get_running_loop().create_task(post_failure(job, message, ctx))
    _background.add(task)
    task.add_done_callback(_background.discard)


def setup_routes(app: web.Application, ctx: RuntimeContext) -> None:
    """The runtime's route hook (enabled by ``GITHUB_WEBHOOK_SECRET``); also registers the job handlers."""
    if EXTRAS_KEY not in ctx.extras:
        ctx.extras[EXTRAS_KEY] = GitHubIntegration.from_env()
    import integrations.github.handlers  # noqa: F401  (registers github/ask|explain|apply|review)

    app[CTX] = ctx
    app.router.add_post(PATH, github_webhook)
    app.on_startup.append(_learn_login)


async def _learn_login(app: web.Application) -> None:
    """Start the one look-up of the bot's login (token mode, ``GITHUB_BOT_LOGIN`` unset) without waiting."""
    gi: GitHubIntegration = app[CTX].extras[EXTRAS_KEY]
    if gi.auth is None or gi.bot_login:
        return
    task = asyncio.get_running_loop().create_task(asyncio.to_thread(gi.lookup_login))
    _background.add(task)
    task.add_done_callback(_background.discard)
