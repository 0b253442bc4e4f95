"""Exactly one reply per job: the progress message, updated as the agents work, then the answer.

A job's messages are recorded in the shared memory store under ``slack:progress:<job.id>`` (channel,
the progress message's ts, the ts of every extra message). A redelivered job (worker crash, Slack retry
that got through) finds the record and *updates* those messages instead of posting new ones.

Progress lines arrive from the agents' thread (``Conversation.ask(progress=...)`` runs in a worker
thread); :meth:`ProgressMessage.say` is thread-safe and coalesces updates so Slack sees at most one
``chat.update`` per ``interval_s`` (chat.update is rate-limited per channel).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.store.base import MemoryStore
from integrations.slack.blocks import SlackMessage, progress_message

log = logging.getLogger("asap.slack")

RECORD_PREFIX = "slack:progress:"


def _get(store: MemoryStore, key: str) -> dict[str, Any] | None:
    getter = getattr(store, "get_value", None)
    return getter(key) if callable(getter) else store.get_thread(key)


def _put(store: MemoryStore, key: str, value: dict[str, Any]) -> None:
    putter = getattr(store, "put_value", None)
    if callable(putter):
        putter(key, value)
    else:
        store.put_thread(key, value)


class ReplyRecord:
    """Where a job's reply lives in Slack (persisted, so a retry edits instead of re-posting)."""

    def __init__(self, store: MemoryStore, job_id: str) -> None:
        self.store = store
        self.key = RECORD_PREFIX + job_id
        self.data: dict[str, Any] = _get(store, self.key) or {}

    @property
    def ts(self) -> str | None:
        return self.data.get("ts")

    def extra(self, n: int) -> str | None:
        extra = self.data.get("extra") or []
        return extra[n] if n < len(extra) else None

    def save(self, **fields: Any) -> None:
        self.data.update(fields)
        _put(self.store, self.key, self.data)

    def add_extra(self, ts: str) -> None:
        self.save(extra=[*(self.data.get("extra") or []), ts])


class ProgressMessage:
    """ONE message per job: posted (or found) first, updated with progress, replaced by the answer."""

    def __init__(self, client: AsyncWebClient, record: ReplyRecord, channel: str, thread_ts: str | None,
                 *, run: str | None, interval_s: float = 1.0) -> None:
        self.client = client
        self.record = record
        self.channel = channel
        self.thread_ts = thread_ts
        self.run = run
        self.interval_s = interval_s
        self.lines: list[str] = []
        self.updates = 0
        self.first_update_at: float | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dirty = asyncio.Event()
        self._flusher: asyncio.Task[None] | None = None
        self._last = 0.0

    @property
    def ts(self) -> str | None:
        return self.record.ts

    async def open(self) -> str:
        """Post the progress message, or adopt the one an earlier delivery of this job posted."""
        self._loop = asyncio.get_running_loop()
        if self.record.ts:
            return self.record.ts
        msg = progress_message([], run=self.run)
        kwargs: dict[str, Any] = {"channel": self.channel, "text": msg.text, "blocks": msg.blocks}
        if self.thread_ts:
            kwargs["thread_ts"] = self.thread_ts
        resp = await self.client.chat_postMessage(**kwargs)
        self.record.save(channel=self.channel, ts=resp["ts"], thread_ts=self.thread_ts)
        return str(resp["ts"])

    def say(self, line: str) -> None:
        """Add a progress line (callable from any thread)."""
        if self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._push, line)

    def _push(self, line: str) -> None:
        self.lines.append(line)
        self._dirty.set()
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush_loop())

    async def _flush_loop(self) -> None:
        while True:
            await self._dirty.wait()
            wait = self._last + self.interval_s - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self._dirty.clear()
            await self._update(progress_message(self.lines, run=self.run))
            self._last = time.monotonic()

    async def _update(self, msg: SlackMessage) -> None:
        try:
            await self.client.chat_update(channel=self.channel, ts=str(self.record.ts), text=msg.text, blocks=msg.blocks)
            self.updates += 1
            if self.first_update_at is None:
                self.first_update_at = time.time()
        except SlackApiError as exc:  # a progress line is not worth failing the job for
            log.warning("progress update failed: %s", exc.response.get("error"))

    async def _stop(self) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
            self._flusher = None

    async def finish(self, messages: list[SlackMessage]) -> list[str]:
        """Replace the progress message with the first answer message; post or update the rest in the thread.

        Each extra message is recorded right after it is posted, so a retry updates it instead of
        posting it again. Returns the ts of every message of the answer.
        """
        await self._stop()
        first, rest = messages[0], messages[1:]
        await self.client.chat_update(channel=self.channel, ts=str(self.record.ts), text=first.text, blocks=first.blocks)
        out = [str(self.record.ts)]
        reply_in = self.thread_ts or str(self.record.ts)
        for n, msg in enumerate(rest):
            ts = self.record.extra(n)
            if ts:
                await self.client.chat_update(channel=self.channel, ts=ts, text=msg.text, blocks=msg.blocks)
            else:
                resp = await self.client.chat_postMessage(channel=self.channel, thread_ts=reply_in, text=msg.text,
                                                          blocks=msg.blocks)
                ts = str(resp["ts"])
                self.record.add_extra(ts)
            out.append(ts)
        self.record.save(done=True)
        return out

    async def close(self) -> None:
        await self._stop()
