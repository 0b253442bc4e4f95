"""Worker handlers for Slack jobs: answer a question, explain a proposal, apply a proposal.

Registered for ``("slack", "ask" | "explain" | "apply")`` when this module is imported (the worker loads
it through ``ASAP_HANDLER_MODULES=integrations.slack.handlers``; ``asap serve`` imports it with the routes).

- ask: (the front already put the eyes reaction on the person's message) ONE progress message updated while the agents work, then
  the answer in Block Kit (diagnosis, evidence, proposal cards with Apply/Explain, context line), split
  over more messages when it is long. Follow-ups in the thread continue the same Conversation.
- explain: everything behind one proposal card, from the thread's stored workspace (computed numbers).
- apply (click): the button is checked against the thread it sits in (run and proposal must be the
  thread's own), then the clicker against ``ASAP_APPLY_SLACK_USERS`` / ``ASAP_APPLY_SLACK_GROUPS``; others
  get an ephemeral explanation. An allowed click queues ``slack:apply:<channel>:<thread>:<run>:<n>``;
  the queue refuses a second one, so two clicks never open two pull requests.
- apply (open): :func:`bot.apply.apply_proposal` through the configured code host; the link goes to the
  thread (one message per apply job, upserted).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from agents.intents import find_run_id
from agents.workspace import Workspace
from bot.auth import SLACK_GROUPS_VAR, SLACK_USERS_VAR
from bot.errors import AsapError
from bot.runtime.handlers import register_failure_reply, register_handler
from bot.runtime.jobs import Job
from integrations.slack import blocks as bk
from integrations.slack.intake import open_key, thread_key
from integrations.slack.pacing import SlackClients
from integrations.slack.replies import ProgressMessage, ReplyRecord
from integrations.slack.settings import SlackSettings

if TYPE_CHECKING:
    from bot.runtime.context import RuntimeContext

log = logging.getLogger("asap.slack")

REACTION = "eyes"
CLIENT_KEY = "slack.client"
CLIENTS_KEY = "slack.clients"
WAIT_FIRST_KEY = "slack.wait_first_s"  # how long a follow-up waits for its thread's first answer (default 120 s)
SETTINGS_KEY = "slack.settings"
CODEHOST_KEY = "slack.codehost"  # a CodeHost, or a zero-argument factory returning one
GROUP_CACHE_KEY = "slack.group_cache"
TIMINGS_KEY = "slack.timings"  # optional list; handlers append (job id, event, seconds) for benchmarks
UNSAVED_KEY = "slack.unsaved_records"  # reply records the store refused to write (see ReplyRecord)


# ---------------------------------------------------------------- shared pieces
def slack_settings(ctx: RuntimeContext) -> SlackSettings:
    s = ctx.extras.get(SETTINGS_KEY)
    if s is None:
        s = ctx.extras[SETTINGS_KEY] = SlackSettings.from_env()
    return s


def slack_clients(ctx: RuntimeContext) -> SlackClients:
    """The process's Web API clients and rate-limit pacer (:mod:`integrations.slack.pacing`), built once."""
    clients = ctx.extras.get(CLIENTS_KEY)
    if clients is None:
        s = slack_settings(ctx)
        clients = ctx.extras[CLIENTS_KEY] = SlackClients(s.bot_token.get_secret_value(), s.api_url,
                                                         progress_per_min=s.progress_per_min)
    return clients


def slack_client(ctx: RuntimeContext) -> AsyncWebClient:
    """The client for calls that must arrive: Slack's 429s are waited out (``Retry-After``) and retried."""
    client = ctx.extras.get(CLIENT_KEY)
    if client is None:
        client = ctx.extras[CLIENT_KEY] = slack_clients(ctx).sure
    return client


def reply_record(ctx: RuntimeContext, job_id: str) -> ReplyRecord:
    """The job's reply record, with this process's memo of record writes the store refused (a Redis outage)."""
    return ReplyRecord(ctx.store, job_id, memo=ctx.extras.setdefault(UNSAVED_KEY, {}))


def _mark(ctx: RuntimeContext, job: Job, event: str, at: float | None = None) -> None:
    sink = ctx.extras.get(TIMINGS_KEY)
    if isinstance(sink, list):
        sink.append((job.id, event, time.time() if at is None else at))


async def _ephemeral(client: AsyncWebClient, job: Job, text: str) -> None:
    await client.chat_postEphemeral(channel=str(job.reply_to["channel"]), user=job.requester.user_id, text=text,
                                    thread_ts=str(job.reply_to.get("thread_ts") or "") or None,
                                    blocks=bk.sections(bk.escape(text)))


def _load_workspace(ctx: RuntimeContext, thread: str) -> tuple[dict[str, Any], Workspace]:
    doc = ctx.store.get_thread(thread)
    if not doc or not doc.get("workspace"):
        raise AsapError("this thread has no ASAP analysis to act on", field="thread",
                        hint="mention @asap with a run ID to start one")
    return doc, Workspace.from_dict(doc["workspace"])


def _checked_proposal(ctx: RuntimeContext, job: Job) -> tuple[Workspace, dict[str, Any], int]:
    """The proposal a button names, only if the button's run is this thread's run and the number exists.

    The button value is never trusted to select anything else: the thread comes from where Slack says the
    button is (the container), the run must equal that thread's run, and the number must be a card.
    """
    index = int(job.payload.get("index", 0))
    doc, ws = _load_workspace(ctx, job.thread)
    if str(doc.get("run_id")) != str(job.run):
        raise AsapError(f"this button names run {job.run!r}, but the thread is about run {doc.get('run_id')!r}",
                        field="value.run")
    p = ws.proposal(index) if 1 <= index <= bk.MAX_PROPOSALS else None
    if p is None:
        raise AsapError(f"run {job.run} has no proposal {index} in this thread", field="value.i")
    return ws, p, index


# ---------------------------------------------------------------- ask
async def slack_ask(job: Job, ctx: RuntimeContext) -> None:
    """Answer a mention, DM, thread reply or ``/asap`` command (see the module docstring)."""
    record = reply_record(ctx, job.id)
    if record.done:
        if record.unsaved:
            record.flush()  # answered, but "done" never reached the store: store it now (replies wait on it)
        return  # a redelivery of a job that was answered: nothing to do
    if job.payload.get("limit") == "followup" and not await _wait_for_first(job, ctx):
        await _upsert(slack_client(ctx), record, str(job.reply_to["channel"]), str(job.reply_to["thread_ts"]),
                      [bk.still_working_message()])
        record.save(done=True)
        return
    command = bool(job.payload.get("command"))
    if not command and not job.text.strip():  # a file shared without text, a bare mention: ask, don't analyse
        run = (ctx.store.get_thread(job.thread) or {}).get("run_id") or job.run
        await _upsert(slack_client(ctx), record, str(job.reply_to["channel"]), str(job.reply_to["thread_ts"]),
                      [bk.empty_question_message(str(run) if run else None, list(job.payload.get("files") or []))])
        record.save(done=True)
        return
    progress = await _open_progress(job, ctx, record)
    if progress is None:
        return
    kept = record.kept_answer()
    if kept is not None:  # computed by an earlier delivery whose post failed: post it, do not recompute
        await progress.finish(kept)
        _mark(ctx, job, "answered")
        return
    # A slash command starts a new thread under the progress message; everything else continues its thread.
    thread = thread_key(str(job.reply_to["channel"]), str(progress.ts)) if command else job.thread
    if command:  # replies under the progress message wait for this answer (see _wait_for_first)
        ctx.store.put_value(open_key(thread), {"job": job.id, "at": round(time.time(), 3)}, ttl=7 * 86400)
    conv = ctx.conversation()
    try:
        # The analysis is CPU work: it runs in a thread with its own loop so this loop keeps serving Slack.
        answer = await asyncio.to_thread(
            lambda: asyncio.run(conv.ask(job.text, thread_id=thread, run_id=job.run, progress=progress.say)))
    except AsapError as exc:
        await progress.finish([bk.error_message(exc)])
        log.info("slack ask refused: %s", exc.message)
        return
    finally:
        await progress.close()
        if progress.first_update_at is not None:
            _mark(ctx, job, "first_progress", progress.first_update_at)
    ctx.metrics.record_usage(job.source, job.kind, answer.usage, answer.cost_usd)
    doc = ctx.store.get_thread(thread) or {}
    data = answer.to_dict()
    messages = bk.paginate(bk.answer_blocks(data, doc.get("workspace")), bk.fallback_text(data, doc.get("workspace")))
    record.keep_answer(messages)
    await progress.finish(messages)
    _mark(ctx, job, "answered")


async def _open_progress(job: Job, ctx: RuntimeContext, record: ReplyRecord) -> ProgressMessage | None:
    """The job's one progress message (posted, adopted or found); None when the slash command cannot post."""
    channel = str(job.reply_to["channel"])
    command = bool(job.payload.get("command"))
    run_hint = job.run or find_run_id(job.text, [])
    progress = ProgressMessage(slack_clients(ctx), record, channel, None if command else str(job.reply_to["thread_ts"]),
                               run=run_hint, job_id=job.id,
                               interval_s=float(ctx.extras.get("slack.progress_interval_s", 1.0)))
    try:
        await progress.open()
    except SlackApiError as exc:
        if command and exc.response.get("error") in ("not_in_channel", "channel_not_found") and job.reply_to.get("response_url"):
            await _respond(str(job.reply_to["response_url"]),
                           "I can't post in this channel yet: invite me with `/invite @asap` and try again.")
            return None
        raise
    _mark(ctx, job, "progress_posted")
    return progress


async def _wait_for_first(job: Job, ctx: RuntimeContext) -> bool:
    """A follow-up waits behind its thread's first answer; False when that is still not there in time.

    The front marks a thread open when it queues the question that starts it (:func:`open_key`), so a
    reply that arrives before the first answer exists is queued, never dropped. Here it waits (polling the
    store) until the thread has its analysis or the first job has finished (an error answer included).
    """
    opened = ctx.store.get_value(open_key(job.thread)) or {}
    first = str(opened.get("job") or "")
    if not first or first == job.id:
        return True
    limit = float(ctx.extras.get(WAIT_FIRST_KEY, min(120.0, job.deadline_s / 2)))
    end = time.monotonic() + limit
    while True:
        doc = ctx.store.get_thread(job.thread) or {}
        if doc.get("workspace") or reply_record(ctx, first).done:
            return True
        if time.monotonic() >= end:
            log.info("follow-up answered 'still working': the first answer is not there yet",
                     extra={"job_thread": job.thread})
            return False
        await asyncio.sleep(0.2)


async def _respond(response_url: str, text: str) -> None:
    from slack_sdk.webhook.async_client import AsyncWebhookClient

    await AsyncWebhookClient(response_url).send(text=text, response_type="ephemeral")


# ---------------------------------------------------------------- explain
async def slack_explain(job: Job, ctx: RuntimeContext) -> None:
    """Post the details behind one proposal card in its thread (once per thread and proposal)."""
    client = slack_client(ctx)
    try:
        _, p, index = _checked_proposal(ctx, job)
    except AsapError as exc:
        await _ephemeral(client, job, exc.message)
        return
    record = reply_record(ctx, job.id)
    msgs = bk.paginate(bk.explain_blocks(str(job.run), index, p), f"Proposal {index} of run {job.run}: {p.get('mesh_short')}")
    await _upsert(client, record, str(job.reply_to["channel"]), str(job.reply_to["thread_ts"]), msgs)
    ctx.store.append_log(job.thread, {"at": round(time.time(), 3), "kind": "slack_explain", "proposal": index,
                                      "user": job.requester.user_id})


async def _upsert(client: AsyncWebClient, record: ReplyRecord, channel: str, thread_ts: str,
                  msgs: list[bk.SlackMessage]) -> None:
    for n, msg in enumerate(msgs):
        ts = record.ts if n == 0 else record.extra(n - 1)
        if ts:
            await client.chat_update(channel=channel, ts=ts, text=msg.text, blocks=msg.blocks)
            continue
        resp = await client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=msg.text, blocks=msg.blocks)
        if n == 0:
            record.save(channel=channel, ts=str(resp["ts"]))
        else:
            record.add_extra(str(resp["ts"]))


# ---------------------------------------------------------------- apply
async def may_apply(ctx: RuntimeContext, client: AsyncWebClient, user: str) -> bool:
    """The shared policy (:class:`bot.auth.ApplyPolicy`): a listed user, or a member of a listed user group.

    Group members come from ``usergroups.users.list`` (cached for ``group_cache_s``), asked only when the
    user is not listed by ID.
    """
    s = slack_settings(ctx)
    policy = s.policy()
    if policy.check_slack(user).allowed or not s.applier_groups:
        return policy.check_slack(user).allowed
    cache: dict[str, tuple[float, frozenset[str]]] = ctx.extras.setdefault(GROUP_CACHE_KEY, {})
    member_of = []
    for group in sorted(s.applier_groups):
        hit = cache.get(group)
        if hit is None or time.monotonic() - hit[0] > s.group_cache_s:
            try:
                resp = await client.usergroups_users_list(usergroup=group)
            except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
                why = exc.response.get("error") if isinstance(exc, SlackApiError) else type(exc).__name__
                raise AsapError(f"I cannot read the members of user group {group} ({why})",
                                field=SLACK_GROUPS_VAR,
                                hint="check the group ID and that the app has the usergroups:read scope") from None
            hit = cache[group] = (time.monotonic(), frozenset(resp.get("users") or []))
        if user in hit[1]:
            member_of.append(group)
    return policy.check_slack(user, member_of).allowed


def _refusal(s: SlackSettings) -> str:
    who = []
    if s.appliers:
        who.append(f"the people listed in {SLACK_USERS_VAR}")
    if s.applier_groups:
        who.append("members of " + ", ".join(f"<!subteam^{g}>" for g in sorted(s.applier_groups)))
    if not who:
        return ("Applying proposals from Slack is turned off: nobody is allowed yet. An admin can set "
                f"{SLACK_USERS_VAR} (member IDs) or {SLACK_GROUPS_VAR} (user group IDs).")
    return f"Only {' and '.join(who)} can apply proposals. Ask one of them, or use `asap apply` yourself."


def _unknown_membership(s: SlackSettings, exc: AsapError) -> str:
    """The private refusal when group membership cannot be read: nothing is applied, and why."""
    return (f"Not applied: {exc.message}, so I can't tell whether you may apply. "
            f"An admin can grant the usergroups:read scope or list you in {SLACK_USERS_VAR}. "
            "Nothing was changed.")


def code_host(ctx: RuntimeContext) -> Any:
    """The code host Apply writes to: ``ctx.extras['slack.codehost']`` if set; else GitHub when
    ``ASAP_APPLY_GITHUB_REPO`` (owner/repo) is set (credentials as for ``asap apply --github``); else the
    local git repository at ``ASAP_APPLY_REPO`` (default: the current directory), like ``asap apply``."""
    host = ctx.extras.get(CODEHOST_KEY)
    if callable(host) and not hasattr(host, "create_pull"):
        host = host()
    if host is not None:
        return host
    if os.environ.get("ASAP_APPLY_GITHUB_REPO"):
        from integrations.codehost.github import GitHubAuthSettings, GitHubClients

        return GitHubClients(GitHubAuthSettings.from_env()).host(os.environ["ASAP_APPLY_GITHUB_REPO"])
    from integrations.codehost.localgit import LocalGitHost

    return LocalGitHost(os.environ.get("ASAP_APPLY_REPO") or ".")


def change_label(ws: Workspace, p: dict[str, Any]) -> str:
    """What a card's Apply changes, in a few words: the new mesh (when it changes) and each setting change,
    e.g. ``data=2 fsdp=32`` or ``remat_policy full -> minimal_with_context``."""
    now = str(((ws.report or {}).get("run") or {}).get("mesh_short") or "")
    mesh = str(p.get("mesh_short") or "")
    settings = [str(s) for s in p.get("settings_changes") or []]
    parts = ([mesh] if mesh and (mesh != now or not settings) else []) + settings
    return ", ".join(parts)


async def slack_apply(job: Job, ctx: RuntimeContext) -> None:
    """A click (authorize, dedupe on run + proposal) or the apply itself (see the module docstring)."""
    client = slack_client(ctx)
    if job.payload.get("stage") == "open":
        await _open_pull(job, ctx, client)
        return
    try:
        ws, p, index = _checked_proposal(ctx, job)
    except AsapError as exc:
        await _ephemeral(client, job, exc.message)
        return
    try:
        allowed = await may_apply(ctx, client, job.requester.user_id)
    except AsapError as exc:  # the group lookup failed (no usergroups:read, a plan without groups): fail closed
        log.warning("apply refused, group membership unknown: %s", exc.message,
                    extra={"user": job.requester.user_id, "run": job.run})
        await _ephemeral(client, job, _unknown_membership(slack_settings(ctx), exc))
        return
    if not allowed:
        await _ephemeral(client, job, _refusal(slack_settings(ctx)))
        log.info("apply refused", extra={"user": job.requester.user_id, "run": job.run})
        return
    channel, root = str(job.reply_to["channel"]), str(job.reply_to["thread_ts"])
    apply_job = Job(id=f"slack:apply:{channel}:{root}:{job.run}:{index}", source="slack", kind="apply",
                    thread=job.thread, run=job.run, requester=job.requester, reply_to=job.reply_to,
                    deadline_s=job.deadline_s,
                    payload={"stage": "open", "index": index, "rank": int(p.get("rank") or index),
                             "mesh": change_label(ws, p)})
    if not await ctx.queue.submit(apply_job):
        prior = [e for e in ctx.store.read_log(job.thread) if e.get("kind") == "slack_apply" and e.get("proposal") == index]
        where = f": {prior[-1]['url']}" if prior and prior[-1].get("url") else " (see this thread)"
        await _ephemeral(client, job, f"Proposal {index} of run {job.run} is already applied or being applied{where}.")


async def _open_pull(job: Job, ctx: RuntimeContext, client: AsyncWebClient) -> None:
    from bot.apply import apply_proposal

    index, rank, mesh = int(job.payload["index"]), int(job.payload["rank"]), str(job.payload.get("mesh", ""))
    channel, root = str(job.reply_to["channel"]), str(job.reply_to["thread_ts"])
    record = reply_record(ctx, job.id)
    who = f"<@{job.requester.user_id}>"
    start = bk.SlackMessage(f"Applying proposal {index} ({mesh})…",
                            bk.sections(f":gear: {who} is applying proposal {index} (`{bk.escape(mesh)}`) of run "
                                        f"{bk.escape(job.run)}: opening a pull request…"))
    await _upsert(client, record, channel, root, [start])
    try:
        result = await asyncio.to_thread(lambda: apply_proposal(str(job.run), rank, job.requester, code_host(ctx)))
    except AsapError as exc:
        await _upsert(client, record, channel, root, [bk.error_message(exc)])
        ctx.store.append_log(job.thread, {"at": round(time.time(), 3), "kind": "slack_apply", "proposal": index,
                                          "user": job.requester.user_id, "error": exc.message})
        return
    icon = ":white_check_mark:" if result.status in ("created", "updated", "unchanged") else ":warning:"
    text = f"{icon} {who}: {bk.escape(result.message)}"
    if result.url.startswith("http"):
        text += f"\n<{result.url}|{bk.escape(result.branch)}>"
    await _upsert(client, record, channel, root, [bk.SlackMessage(bk.clip(result.message, bk.MAX_FALLBACK_TEXT),
                                                                    bk.sections(text))])
    ctx.store.append_log(job.thread, {"at": round(time.time(), 3), "kind": "slack_apply", "proposal": index,
                                      "rank": rank, "user": job.requester.user_id, "url": result.url,
                                      "status": result.status, "created": result.created})


# ---------------------------------------------------------------- failures
async def slack_failure(job: Job, reason: str, ctx: RuntimeContext) -> None:
    """Tell the person their request failed: in the job's own message when it has one, else in the thread."""
    client = slack_client(ctx)
    record = reply_record(ctx, job.id)
    msg = bk.SlackMessage(bk.clip(f"Sorry, that failed: {reason}", bk.MAX_FALLBACK_TEXT),
                          bk.sections(f":warning: Sorry, that failed: {bk.escape(reason)}"))
    channel = str(job.reply_to.get("channel") or "")
    if not channel:
        return
    if record.ts:
        await client.chat_update(channel=channel, ts=record.ts, text=msg.text, blocks=msg.blocks)
    elif job.reply_to.get("thread_ts"):
        await _upsert(client, record, channel, str(job.reply_to["thread_ts"]), [msg])
    elif job.reply_to.get("response_url"):
        await _respond(str(job.reply_to["response_url"]), msg.text)
    record.save(done=True)  # settled: replies waiting behind this job go ahead (see _wait_for_first)


HANDLERS: dict[str, Callable[..., Any]] = {"ask": slack_ask, "explain": slack_explain, "apply": slack_apply}


def register() -> None:
    for kind, fn in HANDLERS.items():
        register_handler("slack", kind, fn)
    register_failure_reply("slack", slack_failure)


register()
