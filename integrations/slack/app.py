"""The Slack front: one Bolt ``AsyncApp`` served over HTTP (``POST /slack/events``) and/or Socket Mode.

``setup_routes(app, ctx)`` is the runtime's route hook (``bot.runtime.server.ROUTE_SETUPS``). It builds the
Bolt app from :class:`~integrations.slack.settings.SlackSettings` and

- HTTP mode (``SLACK_SIGNING_SECRET``): mounts ``POST /slack/events`` for events, ``/asap`` and button
  clicks (one Request URL for all three). Bolt checks the ``v0`` HMAC signature and refuses requests
  older than 5 minutes with 401 before any listener runs.
- Socket Mode (``SLACK_APP_TOKEN``): opens the WebSocket when the aiohttp app starts, closes it on cleanup.

Listeners only turn the request into a :class:`~bot.runtime.jobs.Job` and queue it through
``ctx.submit`` (dedupe by id in the shared store or Redis, rate limits, global cap), so Slack gets its
acknowledgement in milliseconds whatever the agents are doing. ``process_before_response=True`` makes
the 200 wait for the job to be queued: a crash after the acknowledgement can never lose a request. The
eyes reaction (or a rate-limit notice) is sent after the acknowledgement, once the front is quiet
(:class:`~bot.runtime.afterack.AfterAck`), so a burst's reactions do not delay its remaining acks. Retried deliveries
(``X-Slack-Retry-Num``) carry the same event id and are acknowledged without queuing anything.
"""

from __future__ import annotations

import logging
import re
import time
from typing import TYPE_CHECKING, Any

import aiohttp
import orjson
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from bot.errors import AsapError
from bot.runtime.afterack import AfterAck
from bot.runtime.server import CTX_KEY
from integrations.slack import handlers as slack_handlers  # registers the worker handlers
from integrations.slack.intake import action_job, command_job, event_job, mentions_bot, open_key, person_message
from integrations.slack.pacing import SlackClients, note_refusal
from integrations.slack.settings import SlackSettings

if TYPE_CHECKING:
    from bot.runtime.context import RuntimeContext
    from bot.runtime.jobs import Job

log = logging.getLogger("asap.slack")

EVENTS_PATH = "/slack/events"
BOLT_KEY: web.AppKey[AsyncApp] = web.AppKey("asap_slack_bolt", AsyncApp)
AFTER_KEY: web.AppKey[AfterAck] = web.AppKey("asap_slack_after_ack", AfterAck)
FAST_KEY = "slack.fast_events"
SOCKET_KEY = "slack.socket_handler"
ACTIONS = re.compile(r"^asap_(apply|explain):[1-9]$")
USAGE = ("Ask me about a training run: `/asap why 123`, or mention me in a channel: "
         "`@asap why is job 123 slow?` I answer in a thread; reply there to ask follow-ups.")


AFTER_ACK_KEY = "slack.after_ack"


def after_ack(ctx: RuntimeContext) -> AfterAck:
    """This process's scheduler for Web API calls that follow an acknowledgement (reactions, notices).

    Not a Bolt lazy listener: those deep-copy the whole request per call, which costs more than the rest
    of the request path. Not a plain task either: under a burst those calls would compete with the acks
    still to be sent; :class:`~bot.runtime.afterack.AfterAck` sends them once the front is quiet.
    """
    sched = ctx.extras.get(AFTER_ACK_KEY)
    if sched is None:
        sched = ctx.extras[AFTER_ACK_KEY] = AfterAck()
    return sched


async def _queue(ctx: RuntimeContext, job: Job) -> tuple[str, str]:
    """Submit ``job`` (dedupe, limits, cap); a queue outage raises, so Slack gets a 500 and retries."""
    try:
        sub = await ctx.submit(job)
    except AsapError as exc:
        log.error("could not queue a Slack request: %s", exc.message)
        raise
    return sub.status, sub.message


NOTICE_PREFIX = "slack:notice:"
NOTICE_TTL_S = 3600.0  # Slack retries an event three times within about 5 minutes; an hour covers them all


def notice_once(ctx: RuntimeContext, job: Job) -> bool:
    """True the first time a refusal notice is due for ``job.id`` (a claim in the shared store, so every
    front agrees); False for a retry of a request already told. Only the notice is remembered, never the
    job: the job id stays free, so a later delivery that is within the limits runs. When the store cannot
    be reached the notice goes out anyway (a second notice beats none)."""
    try:
        return ctx.store.claim(NOTICE_PREFIX + job.id, NOTICE_TTL_S)
    except Exception as exc:  # the store is down: tell the person rather than nothing
        log.warning("could not record the refusal notice: %s: %s", type(exc).__name__, exc)
        return True


def retry_num(request: AsyncBoltRequest) -> int:
    """Slack's ``X-Slack-Retry-Num`` (0 for a first delivery); a retry is answered by the dedupe, not here."""
    values = request.headers.get("x-slack-retry-num") or ["0"]
    try:
        return int(values[0])
    except (TypeError, ValueError):
        return 0


def build_bolt_app(ctx: RuntimeContext, settings: SlackSettings | None = None) -> AsyncApp:
    """The Bolt app shared by HTTP and Socket Mode; its Web API client is also the workers' client."""
    settings = settings or SlackSettings.from_env()
    ctx.extras[slack_handlers.SETTINGS_KEY] = settings
    clients = ctx.extras.get(slack_handlers.CLIENTS_KEY)
    if clients is None:
        clients = ctx.extras[slack_handlers.CLIENTS_KEY] = SlackClients(
            settings.bot_token.get_secret_value(), settings.api_url, progress_per_min=settings.progress_per_min)
    client: AsyncWebClient = ctx.extras.setdefault(slack_handlers.CLIENT_KEY, clients.sure)
    secret = settings.signing_secret.get_secret_value() if settings.signing_secret else None
    bolt = AsyncApp(client=client, signing_secret=secret, process_before_response=True,
                    request_verification_enabled=secret is not None, name="asap",
                    attaching_conversation_kwargs_enabled=False,  # assistant threads: not used
                    logger=logging.getLogger("asap.slack.bolt"))
    deadline = ctx.settings.deadline_s
    later = after_ack(ctx)

    async def refused(job: Job, message: str) -> None:
        """After the ack: tell a rate-limited person why nothing happens (ephemeral, in the thread), once.

        A refused id is not remembered by dedupe (a later delivery must be able to run), so Slack's retries
        of a refused event are refused again; the notice is claimed per job id so they do not repeat it.
        """
        if not notice_once(ctx, job):
            log.info("refusal notice already sent for this request", extra={"job": job.id})
            return
        try:
            await client.chat_postEphemeral(channel=str(job.reply_to.get("channel")), user=job.requester.user_id,
                                            thread_ts=str(job.reply_to.get("thread_ts") or "") or None, text=message)
        except SlackApiError as exc:
            log.warning("could not tell the requester about the limit: %s", exc.response.get("error"))
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("could not reach Slack to tell the requester about the limit: %s", exc)

    async def react(job: Job) -> None:
        """Eyes on the person's message as soon as the request is queued; skipped while Slack asks
        ``reactions.add`` to wait (cosmetic: the progress message is the real acknowledgement)."""
        if clients.pacer.wait_s("reactions.add", "") > 0:
            return
        try:
            await clients.progress.reactions_add(channel=str(job.reply_to["channel"]),
                                                 timestamp=str(job.reply_to["message_ts"]), name=slack_handlers.REACTION)
        except SlackApiError as exc:
            if not note_refusal(clients.pacer, "reactions.add", "", exc) and exc.response.get("error") != "already_reacted":
                log.warning("could not add the reaction: %s", exc.response.get("error"))
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("could not reach Slack to add the reaction: %s", exc)

    def in_thread(event: dict[str, Any]) -> bool:
        """Whether ``event`` is a reply in a thread ASAP is in: answered, or asked and still being answered."""
        if not event.get("thread_ts") or event.get("thread_ts") == event.get("ts"):
            return False
        key = f"slack:{event.get('channel')}:{event.get('thread_ts')}"
        return ctx.store.get_thread(key) is not None or ctx.store.get_value(open_key(key)) is not None

    async def queue(job: Job, *, follow_up: bool = False) -> str:
        """Submit ``job``; the reaction or the limit notice goes out after the acknowledgement.

        A follow-up (a reply in one of ASAP's threads) counts against the follow-up limit, not the analysis
        limit; a question that starts a thread marks it open at once, so replies sent before its answer
        exists are queued behind it rather than dropped.
        """
        if follow_up:
            job.payload["limit"] = "followup"
        status, message = await _queue(ctx, job)
        if status == "queued" and not follow_up:
            ctx.store.put_value(open_key(job.thread), {"job": job.id, "at": round(time.time(), 3)}, ttl=7 * 86400)
        if status == "queued" and job.reply_to.get("message_ts"):
            later.add(react(job))
        elif status in ("limited", "busy"):
            later.add(refused(job, message))
        return status

    async def mention(body: dict[str, Any], bot_user_id: str | None, retry: int) -> None:
        event = body.get("event") or {}
        if str(event.get("channel", "")).startswith("D"):
            return  # a DM: the message.im event answers it
        job = event_job(body, bot_user_id=bot_user_id, deadline_s=deadline)
        if job is not None:
            status = await queue(job, follow_up=in_thread(event))
            log.info("mention %s", status, extra={"job": job.id, "retry": retry})

    async def message(body: dict[str, Any], bot_user_id: str | None, retry: int) -> None:
        event = body.get("event") or {}
        if not person_message(event):
            return  # edits, deletions, joins, bot posts (ours included): not questions
        text = str(event.get("text") or "")
        follow_up = in_thread(event)
        if mentions_bot(text, bot_user_id) and event.get("channel_type") != "im":
            return  # the app_mention event answers it
        if event.get("channel_type") != "im" and not follow_up:
            return  # ordinary channel chatter, or a thread ASAP is not in
        job = event_job(body, bot_user_id=bot_user_id, deadline_s=deadline)
        if job is not None:
            await queue(job, follow_up=follow_up)

    fast = FastEvents(secret, {"app_mention": mention, "message": message}) if secret else None
    ctx.extras[FAST_KEY] = fast

    async def on_mention(body: dict[str, Any], context: AsyncBoltContext, request: AsyncBoltRequest) -> None:
        if fast is not None:
            fast.learn(context.bot_user_id, context.bot_id)
        await mention(body, context.bot_user_id, retry_num(request))

    async def on_message(body: dict[str, Any], context: AsyncBoltContext, request: AsyncBoltRequest) -> None:
        if fast is not None:
            fast.learn(context.bot_user_id, context.bot_id)
        await message(body, context.bot_user_id, retry_num(request))

    async def on_command(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
        job = command_job(body, deadline_s=deadline)
        if job is None:
            await ack(text=USAGE)
            return
        status, message = await _queue(ctx, job)
        if status == "queued":
            await ack(text=f"Looking at run {job.run}; I'll answer in this channel.")
        elif status == "duplicate":
            await ack()
        else:
            await ack(text=message)

    async def on_action(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
        try:
            job = action_job(body, deadline_s=deadline)
        except AsapError as exc:
            await ack()
            log.warning("ignored a button click: %s", exc.message)
            return
        status, message = await _queue(ctx, job)
        await ack()
        if status in ("limited", "busy"):
            later.add(refused(job, message))

    async def noop_ack(ack: AsyncAck) -> None:
        await ack()

    bolt.event("app_mention")(on_mention)
    bolt.event("message")(on_message)
    bolt.command("/asap")(on_command)
    bolt.action(ACTIONS)(on_action)
    bolt.action(re.compile(r".*"))(noop_ack)  # anything else clicked on our messages: acknowledge, do nothing
    return bolt


class FastEvents:
    """``app_mention`` and ``message`` deliveries over HTTP answered without Bolt's dispatch.

    They are nearly all of the traffic and all of a burst. Bolt's dispatch (request object, middleware
    chain, listener runner, keyword injection) costs ~0.1 ms per request on top of our own ~0.05 ms; under
    a burst of 200 that is 20 ms more before the last acknowledgement. This path does what Bolt does for
    these two events, in the same order: v0 signature and 5-minute timestamp check (slack_sdk's verifier),
    drop the bot's own events (as Bolt's IgnoringSelfEvents), run the same listener body, answer 200 (500
    when queuing failed, so Slack retries). Anything else, a request that fails the signature check included,
    goes to Bolt, which answers it exactly as before (401 for a forged or stale one). The bot's identity is
    learned from the first event Bolt dispatched (its ``auth.test``); until then every request goes to Bolt.
    """

    def __init__(self, signing_secret: str, listeners: dict[str, Any]) -> None:
        self.verifier = SignatureVerifier(signing_secret)
        self.listeners = listeners
        self.bot_user_id: str | None = None
        self.bot_id: str | None = None
        self.ready = False

    def learn(self, bot_user_id: str | None, bot_id: str | None) -> None:
        if not self.ready and bot_user_id:
            self.bot_user_id, self.bot_id, self.ready = bot_user_id, bot_id, True

    async def answer(self, request: web.Request, raw: bytes) -> web.Response | None:
        """The response, or None when Bolt should handle this request."""
        if not self.ready or not raw.startswith(b"{"):
            return None
        headers = request.headers
        try:
            if not self.verifier.is_valid(raw, headers.get("X-Slack-Request-Timestamp"), headers.get("X-Slack-Signature")):
                return None
            body = orjson.loads(raw)
        except (ValueError, TypeError):  # a malformed timestamp or body: Bolt answers it
            return None
        event = body.get("event") if isinstance(body, dict) and body.get("type") == "event_callback" else None
        listener = self.listeners.get(event.get("type")) if isinstance(event, dict) else None
        if listener is None:
            return None
        user, bot_id = event.get("user"), event.get("bot_id")
        if (user is not None and user == self.bot_user_id) or (bot_id is not None and bot_id == self.bot_id):
            return web.Response(status=200, text="")  # the bot's own event: acknowledged, ignored
        try:
            retry = int(headers.get("X-Slack-Retry-Num") or 0)
        except ValueError:
            retry = 0
        try:
            await listener(body, self.bot_user_id, retry)
        except Exception as exc:  # e.g. the queue is down: 500, and Slack delivers the event again
            log.error("could not handle a Slack event: %s: %s", type(exc).__name__, exc)
            return web.Response(status=500, text="")
        return web.Response(status=200, text="")


async def handle_events(request: web.Request) -> web.Response:
    """``POST /slack/events``: mentions and messages on the fast path (:class:`FastEvents`), everything else
    through Bolt, which verifies the signature (401 when forged or stale) and dispatches."""
    bolt = request.app[BOLT_KEY]
    request.app[AFTER_KEY].request_started()
    t0 = time.perf_counter()
    stamp = request.headers.get("X-Slack-Request-Timestamp")
    if stamp is not None and not stamp.strip().isdigit():
        # Not Slack's: its timestamp is whole seconds. Bolt would raise on it (a 500 and a traceback per
        # request, which anyone could send): refuse it as unverifiable, with one short log line.
        log.warning("refused a Slack request with a malformed X-Slack-Request-Timestamp (%d chars)", len(stamp))
        return web.Response(status=401, text="")
    fast: FastEvents | None = request.app[CTX_KEY].extras.get(FAST_KEY)
    if fast is not None:
        resp = await fast.answer(request, await request.read())
        if resp is not None:
            return resp
    bolt_req = await to_bolt_request(request)
    bolt_resp = await bolt.async_dispatch(bolt_req)
    resp = await to_aiohttp_response(bolt_resp)
    log.debug("slack request answered", extra={"status": resp.status, "ms": round((time.perf_counter() - t0) * 1000, 2)})
    return resp


def setup_routes(app: web.Application, ctx: RuntimeContext) -> None:
    """The runtime's route hook: HTTP route and/or Socket Mode connection, per the settings present."""
    settings = SlackSettings.from_env()
    bolt = build_bolt_app(ctx, settings)
    app[BOLT_KEY] = bolt
    app[AFTER_KEY] = later = after_ack(ctx)

    async def open_session(_: web.Application) -> None:
        # One connection pool for every Web API call of this process (slack_sdk opens a new session per
        # call otherwise: a TCP connect and pool set-up for each reaction and message update).
        session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15))
        bolt.client.session = session
        clients: SlackClients = ctx.extras[slack_handlers.CLIENTS_KEY]
        clients.share_session(session)

    async def close_session(_: web.Application) -> None:
        await later.close(timeout=5)  # reactions and notices still on their way: send them, give them a moment
        session, bolt.client.session = bolt.client.session, None
        clients: SlackClients = ctx.extras[slack_handlers.CLIENTS_KEY]
        clients.share_session(None)
        if session is not None:
            await session.close()

    app.on_startup.append(open_session)
    app.on_cleanup.append(close_session)
    if "http" in settings.modes:
        app.router.add_post(EVENTS_PATH, handle_events)
    if "socket" in settings.modes:
        token = settings.app_token.get_secret_value()  # type: ignore[union-attr]

        async def start_socket(_: web.Application) -> None:
            from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

            handler = AsyncSocketModeHandler(bolt, app_token=token)
            ctx.extras[SOCKET_KEY] = handler
            await handler.connect_async()
            log.info("Slack Socket Mode connected")

        async def stop_socket(_: web.Application) -> None:
            handler = ctx.extras.pop(SOCKET_KEY, None)
            if handler is not None:
                await handler.close_async()

        app.on_startup.append(start_socket)
        app.on_cleanup.append(stop_socket)
