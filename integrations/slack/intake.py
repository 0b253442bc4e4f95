"""Slack requests -> Jobs: what a mention, a DM, a thread reply, ``/asap`` or a button click asks for.

Pure functions of the request body (no I/O), so the HTTP path and Socket Mode build the very same jobs and
the request path stays a few microseconds of parsing before the job is queued.

Job ids are the idempotency keys: ``slack:<event_id>`` for events (Slack's retries carry the same id),
``slack:cmd:<trigger_id>`` for slash commands, ``slack:click:<user>:<action_ts>`` for a button click, and
``slack:explain:<channel>:<thread_ts>:<n>`` (one explanation per proposal and thread). Apply clicks become
``slack:apply:<channel>:<thread_ts>:<run>:<n>`` jobs only after the worker has checked who clicked.
"""

from __future__ import annotations

import html
import re
from typing import Any

from bot.runs.store import normalize_run_query
from bot.runtime.jobs import Job, Requester
from integrations.slack.blocks import parse_action

MAX_TEXT = 4000
_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")
_COMMAND = re.compile(r"^\s*(?:why(?:\s+is)?\s+)?(?:job|run)?\s*[#:]?\s*(?P<run>[A-Za-z0-9][A-Za-z0-9._-]{0,127})\s*(?:slow\??)?\s*$",
                      re.IGNORECASE)
THREAD_PREFIX = "slack"
OPEN_PREFIX = "slack:open:"
# Message subtypes a person sends that still ask something: "also send to channel" replies and messages
# with a file attached. Every other subtype (edits, deletions, joins, bot posts) is not a question.
PERSON_SUBTYPES = frozenset({"thread_broadcast", "file_share"})


def thread_key(channel: str, thread_ts: str) -> str:
    """The conversation key shared with the agents: ``slack:<channel>:<thread_ts>``."""
    return f"{THREAD_PREFIX}:{channel}:{thread_ts}"


def open_key(thread: str) -> str:
    """Store key marking a thread ASAP was asked in, set when its first question is queued (before any answer)."""
    return OPEN_PREFIX + thread


def person_message(event: dict[str, Any]) -> bool:
    """A message a person sent (no subtype, or one of :data:`PERSON_SUBTYPES`), not a bot's."""
    return not event.get("bot_id") and (not event.get("subtype") or event.get("subtype") in PERSON_SUBTYPES)


def clean_text(text: str, bot_user_id: str | None) -> str:
    """The question without the bot's own mention, Slack's escapes undone, whitespace tidied, bounded."""
    if bot_user_id:
        text = re.sub(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>", " ", text)
    text = re.sub(r"<(https?://[^|>]+)(?:\|[^>]*)?>", r"\1", text)  # links -> their URL
    text = html.unescape(text)
    return " ".join(text.split())[:MAX_TEXT]


def mentions_bot(text: str, bot_user_id: str | None) -> bool:
    return bool(bot_user_id) and any(m == bot_user_id for m in _MENTION.findall(text or ""))


def _requester(user: str, display: str | None = None) -> Requester:
    return Requester(source="slack", user_id=user, display=display)


def event_job(body: dict[str, Any], *, bot_user_id: str | None, deadline_s: float = 300.0) -> Job | None:
    """The ``ask`` job for an ``app_mention`` or ``message`` event, or None when it is not for ASAP.

    The caller decides whether a plain thread reply is for ASAP (the thread must be one ASAP is in);
    this function only shapes the job.
    """
    event = body.get("event") or {}
    user = event.get("user")
    channel = event.get("channel")
    ts = event.get("ts")
    event_id = body.get("event_id")
    if not (user and channel and ts and event_id) or not person_message(event):
        return None
    text = clean_text(str(event.get("text") or ""), bot_user_id)
    root = str(event.get("thread_ts") or ts)
    return Job(id=f"slack:{event_id}", source="slack", kind="ask", thread=thread_key(channel, root), text=text,
               requester=_requester(str(user)), deadline_s=deadline_s,
               reply_to={"channel": str(channel), "thread_ts": root, "message_ts": str(ts),
                         "team": str(body.get("team_id") or "")},
               payload={"files": file_names(event)} if event.get("files") else {})


MAX_FILES = 10


def file_names(event: dict[str, Any]) -> list[str]:
    """The names of the files a ``file_share`` message carries (bounded: at most 10, 200 characters each),
    so an answer can say which file it means; the files themselves are never fetched."""
    files = event.get("files") if isinstance(event.get("files"), list) else []
    names = [str(f.get("name") or f.get("title") or "file")[:200] for f in files if isinstance(f, dict)]
    return names[:MAX_FILES]


def parse_command(text: str) -> str | None:
    """The run a ``/asap`` command names ("why 123", "why is job 123 slow", "123"), or None (show help)."""
    m = _COMMAND.match(text or "")
    if not m or m.group("run").lower() in {"help", "why"}:
        return None
    return normalize_run_query(m.group("run")) or None


def command_job(body: dict[str, Any], *, deadline_s: float = 300.0) -> Job | None:
    """The ``ask`` job for ``/asap why <run>``; None when the text names no run (the caller shows help)."""
    run = parse_command(str(body.get("text") or ""))
    if run is None:
        return None
    channel, user, trigger = body.get("channel_id"), body.get("user_id"), body.get("trigger_id")
    if not (channel and user and trigger):
        return None
    return Job(id=f"slack:cmd:{trigger}", source="slack", kind="ask",
               thread=thread_key(str(channel), f"cmd-{trigger}"), run=run, text=f"why is run {run} slow",
               requester=_requester(str(user), body.get("user_name")), deadline_s=deadline_s,
               reply_to={"channel": str(channel), "response_url": str(body.get("response_url") or ""),
                         "team": str(body.get("team_id") or "")},
               payload={"command": True})


def action_job(body: dict[str, Any], *, deadline_s: float = 300.0) -> Job:
    """The job for an Apply/Explain click; the button's value is validated here (shape) and in the worker
    (against the thread the button sits in). Raises AsapError for anything that is not ASAP's button."""
    action = (body.get("actions") or [{}])[0]
    kind, run, index = parse_action(str(action.get("action_id") or ""), str(action.get("value") or ""))
    user = str((body.get("user") or {}).get("id") or "")
    container = body.get("container") or {}
    channel = str(container.get("channel_id") or (body.get("channel") or {}).get("id") or "")
    message = body.get("message") or {}
    root = str(container.get("thread_ts") or message.get("thread_ts") or container.get("message_ts") or "")
    if not (user and channel and root):
        from bot.errors import AsapError

        raise AsapError("the click carries no user, channel or message", field="container")
    job_id = (f"slack:explain:{channel}:{root}:{index}" if kind == "explain"
              else f"slack:click:{user}:{action.get('action_ts') or body.get('trigger_id')}")
    return Job(id=job_id, source="slack", kind=kind, thread=thread_key(channel, root), run=run,  # type: ignore[arg-type]
               requester=_requester(user, (body.get("user") or {}).get("username")), deadline_s=deadline_s,
               reply_to={"channel": channel, "thread_ts": root,
                         "message_ts": str(container.get("message_ts") or message.get("ts") or ""),
                         "response_url": str(body.get("response_url") or "")},
               payload={"index": index, "stage": "click", "limit": "followup"})  # a click is not an analysis
