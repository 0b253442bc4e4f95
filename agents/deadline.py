"""When the answer to the current request is due: a context variable the runtime sets around each job.

The job's handler runs the conversation in a worker thread with its own event loop (``asyncio.to_thread``
copies the context), so a deadline set by the dispatcher reaches :meth:`Conversation.ask` through every
front end (CLI jobs, Slack, GitHub) without each handler passing it along. Values are
``time.monotonic()`` instants; ``None`` means no deadline (the plain CLI).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar

_REPLY_BY: ContextVar[float | None] = ContextVar("asap_reply_by", default=None)


def reply_by() -> float | None:
    """The monotonic instant by which the current request's answer must be ready, or None."""
    return _REPLY_BY.get()


def seconds_left(deadline: float | None = None) -> float | None:
    """Seconds until ``deadline`` (or the context's), None when there is no deadline."""
    when = deadline if deadline is not None else _REPLY_BY.get()
    return None if when is None else when - time.monotonic()


@contextlib.contextmanager
def answer_within(seconds: float) -> Iterator[float]:
    """Within this block, answers are due ``seconds`` from now (an earlier outer deadline still wins)."""
    when = time.monotonic() + seconds
    outer = _REPLY_BY.get()
    if outer is not None:
        when = min(when, outer)
    token = _REPLY_BY.set(when)
    try:
        yield when
    finally:
        _REPLY_BY.reset(token)
