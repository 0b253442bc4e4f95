"""Exactly one reply per job: the progress message, updated as the agents work, then the answer.

A job's messages are recorded in the shared memory store under ``slack:progress:<job.id>`` (channel,
the progress message's ts, the ts of every extra message, and the rendered answer once it is computed). A
redelivered job (worker crash, Slack retry that got through, a post that failed) finds the record and
*updates* those messages instead of posting new ones, and re-posts a computed answer without recomputing it.

The first post is idempotent: the intent to post is recorded before ``chat.postMessage`` and the message
carries a block id derived from the job id. A delivery that finds the intent but no ts (the worker died
while the post was in flight) looks for that block id in the thread (``conversations.replies``, or
``conversations.history`` for a new top-level message) and adopts the message it finds instead of posting
a second one. When the post succeeded but writing its ts to the store failed (Redis down, and perhaps back
empty, the intent gone with it), the worker keeps the job and runs it again once the store answers; the
ts it could not store is kept in the process's memo of unsaved records (:class:`ReplyRecord`), so that
rerun updates the message it posted instead of posting a second one.

Progress lines arrive from the agents' thread (``Conversation.ask(progress=...)`` runs in a worker
thread); :meth:`ProgressMessage.say` is thread-safe. Updates go out at most one per ``interval_s`` per
message and only while the process's progress budget allows (:class:`~integrations.slack.pacing.ProgressBudget`):
under rate-limit pressure they coalesce, and the final answer never waits behind them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from typing import Any

from slack_sdk.errors import SlackApiError

from bot.store.base import MemoryStore
from integrations.slack.blocks import SlackMessage, progress_message
from integrations.slack.pacing import SlackClients, note_refusal

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


UNSAVED_LIMIT = 10_000  # records kept in a process's memo of unsaved writes (oldest dropped first)


class ReplyRecord:
    """Where a job's reply lives in Slack (persisted, so a retry edits instead of re-posting).

    ``memo`` is the process's record of writes the store refused (a dict kept by the caller, one per
    process: ``ctx.extras``). A message is posted *before* its ts can be recorded; when that record write
    fails (Redis down), the ts would otherwise be known nowhere and the rerun would post a second message.
    The failed write is kept in ``memo`` instead, a rerun in this process reads it back over what the
    store holds, and the next successful write (:meth:`flush` at the latest) stores it and clears it.
    """

    def __init__(self, store: MemoryStore, job_id: str, memo: dict[str, dict[str, Any]] | None = None) -> None:
        self.store = store
        self.key = RECORD_PREFIX + job_id
        self.memo = memo
        self.data: dict[str, Any] = _get(store, self.key) or {}
        unsaved = memo.get(self.key) if memo is not None else None
        self.unsaved = unsaved is not None  # this process knows more than the store: write it back
        if unsaved is not None:
            self.data = {**self.data, **unsaved}

    @property
    def ts(self) -> str | None:
        return self.data.get("ts")

    def extra(self, n: int) -> str | None:
        extra = self.data.get("extra") or []
        return extra[n] if n < len(extra) else None

    def save(self, **fields: Any) -> None:
        self.data.update(fields)
        self.flush()

    def flush(self) -> None:
        """Write the record; when the store refuses, keep it in the memo (see the class docstring) and raise."""
        try:
            _put(self.store, self.key, self.data)
        except Exception:
            if self.memo is not None:
                self.memo.pop(self.key, None)
                self.memo[self.key] = dict(self.data)
                while len(self.memo) > UNSAVED_LIMIT:
                    self.memo.pop(next(iter(self.memo)))
            raise
        if self.memo is not None:
            self.memo.pop(self.key, None)
        self.unsaved = False

    def add_extra(self, ts: str) -> None:
        self.save(extra=[*(self.data.get("extra") or []), ts])

    @property
    def done(self) -> bool:
        return bool(self.data.get("done"))

    def keep_answer(self, messages: list[SlackMessage]) -> None:
        """Keep the rendered answer, so a failed post is retried without running the analysis again."""
        self.save(answer=[{"text": m.text, "blocks": m.blocks} for m in messages])

    def kept_answer(self) -> list[SlackMessage] | None:
        kept = self.data.get("answer")
        return [SlackMessage(str(m["text"]), list(m["blocks"])) for m in kept] if kept else None


def marker(job_id: str) -> str:
    """The block id a job's first message carries: only this job's delivery can produce it."""
    return "asap-job-" + hashlib.sha256(job_id.encode()).hexdigest()[:24]


class ProgressMessage:
    """ONE message per job: posted (or found) first, updated with progress, replaced by the answer."""

    def __init__(self, clients: SlackClients, record: ReplyRecord, channel: str, thread_ts: str | None,
                 *, run: str | None, job_id: str, interval_s: float = 1.0) -> None:
        self.clients = clients
        self.record = record
        self.channel = channel
        self.thread_ts = thread_ts
        self.run = run
        self.marker = marker(job_id)
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
            if self.record.unsaved:  # posted by an earlier run in this process whose record write failed
                log.info("adopted the message an earlier run posted but could not record", extra={"ts": self.record.ts})
                self.record.flush()
            return self.record.ts
        if self.record.data.get("posting"):  # an earlier delivery died with its post in flight
            found = await self._reconcile(float(self.record.data["posting"]))
            if found:
                log.info("adopted the message an earlier delivery posted", extra={"ts": found})
                self.record.save(channel=self.channel, ts=found, thread_ts=self.thread_ts)
                return found
        self.record.save(posting=time.time())  # the intent, before the post
        msg = progress_message([], run=self.run, marker=self.marker)
        kwargs: dict[str, Any] = {"channel": self.channel, "text": msg.text, "blocks": msg.blocks}
        if self.thread_ts:
            kwargs["thread_ts"] = self.thread_ts
        resp = await self.clients.sure.chat_postMessage(**kwargs)
        self.record.save(channel=self.channel, ts=resp["ts"], thread_ts=self.thread_ts)
        return str(resp["ts"])

    async def _reconcile(self, since: float) -> str | None:
        """The ts of this job's message if an earlier delivery posted it (found by its block id)."""
        try:
            if self.thread_ts:
                resp = await self.clients.sure.conversations_replies(channel=self.channel, ts=self.thread_ts, limit=200)
            else:
                resp = await self.clients.sure.conversations_history(channel=self.channel, oldest=f"{since - 60:.6f}",
                                                                     limit=200)
        except SlackApiError as exc:  # e.g. missing history scope: posting again beats answering nothing
            log.warning("could not look for an earlier post: %s", exc.response.get("error"))
            return None
        for m in resp.get("messages") or []:
            if any(b.get("block_id") == self.marker for b in m.get("blocks") or [] if isinstance(b, dict)):
                return str(m["ts"])
        return None

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
            if not self.clients.budget.take(self.channel):
                self._last = time.monotonic()  # under pressure: keep the lines, try again next interval
                continue
            self._dirty.clear()
            await self._update(progress_message(self.lines, run=self.run))
            self._last = time.monotonic()

    async def _update(self, msg: SlackMessage) -> None:
        try:
            await self.clients.progress.chat_update(channel=self.channel, ts=str(self.record.ts), text=msg.text,
                                                    blocks=msg.blocks)
            self.updates += 1
            if self.first_update_at is None:
                self.first_update_at = time.time()
        except SlackApiError as exc:  # a progress line is not worth failing the job for
            if note_refusal(self.clients.pacer, "chat.update", self.channel, exc):
                self._dirty.set()  # shown with the next update the budget allows
            else:
                log.warning("progress update failed: %s", exc.response.get("error"))

    async def _stop(self) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
            self._flusher = None

    async def finish(self, messages: list[SlackMessage]) -> list[str]:
        """Replace the progress message with the first answer message; post or update the rest in the thread.

        Every call here must arrive, so it goes through the client that waits out Slack's ``Retry-After``.
        Each extra message is recorded right after it is posted, so a retry updates it instead of
        posting it again. Returns the ts of every message of the answer.
        """
        await self._stop()
        sure = self.clients.sure
        first, rest = messages[0], messages[1:]
        await sure.chat_update(channel=self.channel, ts=str(self.record.ts), text=first.text, blocks=first.blocks)
        out = [str(self.record.ts)]
        reply_in = self.thread_ts or str(self.record.ts)
        for n, msg in enumerate(rest):
            ts = self.record.extra(n)
            if ts:
                await sure.chat_update(channel=self.channel, ts=ts, text=msg.text, blocks=msg.blocks)
            else:
                resp = await sure.chat_postMessage(channel=self.channel, thread_ts=reply_in, text=msg.text,
                                                   blocks=msg.blocks)
                ts = str(resp["ts"])
                self.record.add_extra(ts)
            out.append(ts)
        self.record.save(done=True)
        return out

    async def close(self) -> None:
        await self._stop()
