"""The unit of work the front ends hand to workers: one :class:`Job` per request.

A job carries everything a worker needs to answer (who asked, where to reply, what about) and nothing
that needs the front's process: it is serialized to JSON into the queue. ``id`` is the idempotency key
(``slack:<event_id>``, ``github:<delivery id>``, ``cli:<uuid>``): the queue refuses a second job with the
same id, and replies are upserts keyed by it, so a redelivered request never posts twice.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.errors import AsapError

Source = Literal["slack", "github", "cli"]
Kind = Literal["ask", "apply", "review", "explain"]


class Requester(BaseModel):
    """Who asked: the front end's user id (Slack user, GitHub login, local user) and a display name."""

    model_config = ConfigDict(extra="forbid")

    source: Source
    user_id: str
    display: str | None = None


class Job(BaseModel):
    """One request, queued by a front end and run by exactly one worker to completion."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=256)
    source: Source
    kind: Kind
    thread: str = Field(min_length=1, max_length=512)
    run: str | None = None
    text: str = ""
    requester: Requester
    reply_to: dict[str, str | int] = {}
    payload: dict[str, Any] = {}
    created_at: float = Field(default_factory=time.time)
    deadline_s: float = Field(default=300.0, gt=0, le=3600)

    def to_bytes(self) -> bytes:
        """The queue's wire form (compact JSON)."""
        return orjson.dumps(self.model_dump(mode="json"))

    @classmethod
    def from_bytes(cls, raw: bytes | str) -> Job:
        """Parse a queued job; a malformed entry raises :class:`AsapError` naming what is wrong."""
        try:
            return cls.model_validate(orjson.loads(raw))
        except (orjson.JSONDecodeError, ValidationError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise AsapError(f"malformed job in the queue: {first}", source="queue",
                            hint="a job is the JSON form of bot.runtime.jobs.Job") from None

    def channel_key(self) -> str:
        """The place the request came from, for per-channel rate limits.

        ``slack:<channel>:<thread_ts>`` -> ``slack:<channel>``; ``github:<owner>/<repo>#<n>`` ->
        ``github:<owner>/<repo>``; anything else is its own channel.
        """
        if self.source == "slack" and self.thread.count(":") >= 2:
            return self.thread.rsplit(":", 1)[0]
        if self.source == "github" and "#" in self.thread:
            return self.thread.split("#", 1)[0]
        return self.thread

    def user_key(self) -> str:
        """The requester, namespaced by front end (a Slack id and a GitHub login never collide)."""
        return f"{self.requester.source}:{self.requester.user_id}"


def new_job_id(source: Source = "cli") -> str:
    """A fresh id for a request that has no natural idempotency key (the CLI, the HTTP jobs route)."""
    return f"{source}:{uuid.uuid4().hex}"
