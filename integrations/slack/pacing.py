"""Slack's rate limits, honoured: ``Retry-After`` per method and channel, retries for what must arrive, and a
budget for progress updates that can never starve final answers.

Slack limits Web API calls per method per workspace per app (tiers 1-4: 1+, 20+, 50+ and 100+ calls a
minute; ``chat.update`` and ``reactions.add`` are tier 3) and ``chat.postMessage`` to about one message per
second per channel; an over-limit call gets HTTP 429 with ``Retry-After`` seconds
(https://docs.slack.dev/apis/web-api/rate-limits). Here:

- :class:`Pacer` remembers each ``Retry-After`` under ``(method, scope)``: the channel for
  ``chat.postMessage``, the workspace for every other method. :class:`PacedWebClient` waits out that backoff
  before a call, so jobs running side by side do not hammer a method Slack has just refused.
- Calls that must arrive (the first post, the final answer, a failure notice, an ephemeral refusal) go
  through a client whose retry handler is slack-sdk's ``AsyncRateLimitErrorRetryHandler``, extended only to
  record the ``Retry-After`` in the pacer (:class:`PacedRateLimitRetryHandler`). Only a 429 is retried there:
  Slack did not carry out the call, so repeating it cannot post twice.
- Progress updates use a client without retries and spend from :class:`ProgressBudget`: a share of
  ``chat.update``'s tier (``ASAP_SLACK_PROGRESS_PER_MIN``, default 20 of its 50 a minute), and nothing while
  ``chat.update`` is backing off or did in the last ``cooldown_s``. A skipped update is not lost: the next
  one that is allowed shows the newest lines (updates coalesce under pressure).

The pacer is per process; with several worker processes, lower ``ASAP_SLACK_PROGRESS_PER_MIN`` so their sum
stays under the tier.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Mapping
from typing import Any

from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

log = logging.getLogger("asap.slack")

PER_CHANNEL_METHODS = frozenset({"chat.postMessage"})  # Slack: ~1 message per second per channel
PROGRESS_METHOD = "chat.update"
DEFAULT_PROGRESS_PER_MIN = 20.0  # of chat.update's tier 3 (50+ a minute); the rest is kept for answers
MAX_RETRY_AFTER_S = 120.0  # a header asking for longer is capped (the job's deadline still applies)


def retry_after_s(headers: Mapping[str, Any] | None) -> float:
    """Seconds from a 429's ``Retry-After`` (a value or slack-sdk's list of values); 1 s when absent or malformed."""
    for key, value in (headers or {}).items():
        if str(key).lower() == "retry-after":
            raw = value[0] if isinstance(value, (list, tuple)) and value else value
            try:
                return min(MAX_RETRY_AFTER_S, max(0.0, float(str(raw).strip())))
            except ValueError:
                return 1.0
    return 1.0


def channel_of(params: Mapping[str, Any] | None) -> str:
    """The ``channel`` argument of a Web API call ("" when it has none)."""
    return str((params or {}).get("channel") or "") if isinstance(params, Mapping) else ""


class Pacer:
    """``Retry-After`` remembered per method and scope (channel for ``chat.postMessage``, else workspace)."""

    def __init__(self, *, jitter_s: float = 0.25, clock: Any = time.monotonic) -> None:
        self.jitter_s = jitter_s
        self.clock = clock
        self._until: dict[tuple[str, str], float] = {}
        self._last_limited: dict[str, float] = {}
        self.limited = 0  # 429s seen (for logs and benchmarks)

    @staticmethod
    def key(method: str, channel: str) -> tuple[str, str]:
        return (method, channel if method in PER_CHANNEL_METHODS else "")

    def note(self, method: str, channel: str, retry_after: float) -> None:
        """Slack refused ``method`` (in ``channel``) and asked to wait ``retry_after`` seconds."""
        k = self.key(method, channel)
        now = self.clock()
        self._until[k] = max(self._until.get(k, 0.0), now + retry_after)
        self._last_limited[method] = now
        self.limited += 1
        log.info("slack rate limit: %s asks to wait %.0f s", method, retry_after,
                 extra={"method": method, "channel": channel, "retry_after": retry_after})

    def wait_s(self, method: str, channel: str) -> float:
        """How long a call to ``method`` in ``channel`` should still wait (0 when it may go now)."""
        return max(0.0, self._until.get(self.key(method, channel), 0.0) - self.clock())

    def limited_within(self, method: str, seconds: float) -> bool:
        """Whether ``method`` got a 429 in the last ``seconds``."""
        at = self._last_limited.get(method)
        return at is not None and self.clock() - at < seconds

    async def wait(self, method: str, channel: str) -> None:
        """Sleep out the backoff for ``method`` in ``channel`` (plus a little jitter so waiters spread out)."""
        while (delay := self.wait_s(method, channel)) > 0:
            await asyncio.sleep(delay + random.random() * self.jitter_s)


class PacedRateLimitRetryHandler(AsyncRateLimitErrorRetryHandler):
    """slack-sdk's 429 retry handler, with the wait taken from (and recorded in) the shared :class:`Pacer`.

    slack-sdk's own handler sleeps ``int(Retry-After)`` for this call only; recording it lets every other
    call to the same method (and channel) wait too instead of being refused in turn.
    """

    def __init__(self, pacer: Pacer, *, max_retry_count: int = 30) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.pacer = pacer

    async def prepare_for_next_attempt_async(self, *, state: RetryState, request: HttpRequest,
                                             response: HttpResponse | None = None,
                                             error: Exception | None = None) -> None:
        if response is None:
            raise error  # type: ignore[misc]
        method = request.url.rstrip("/").rsplit("/", 1)[-1]
        channel = channel_of(request.body_params)
        self.pacer.note(method, channel, retry_after_s(response.headers))
        state.next_attempt_requested = True
        await self.pacer.wait(method, channel)
        state.increment_current_attempt()


class PacedWebClient(AsyncWebClient):
    """An ``AsyncWebClient`` that waits out the pacer's backoff for a method (and channel) before calling it."""

    def __init__(self, *args: Any, pacer: Pacer, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pacer = pacer

    async def api_call(self, api_method: str, *, http_verb: str = "POST", files: dict | None = None,
                       data: Any = None, params: dict | None = None, json: dict | None = None,
                       headers: dict | None = None, auth: dict | None = None) -> AsyncSlackResponse:
        channel = channel_of(json) or channel_of(data if isinstance(data, Mapping) else None) or channel_of(params)
        await self.pacer.wait(api_method, channel)
        return await super().api_call(api_method, http_verb=http_verb, files=files, data=data, params=params,
                                      json=json, headers=headers, auth=auth)


class ProgressBudget:
    """How many progress updates may be sent: a token bucket of ``per_min`` a minute (burst ``burst``), closed
    while ``chat.update`` is backing off or was refused in the last ``cooldown_s``."""

    def __init__(self, pacer: Pacer, *, per_min: float = DEFAULT_PROGRESS_PER_MIN, burst: float = 5.0,
                 cooldown_s: float = 60.0) -> None:
        self.pacer = pacer
        self.per_s = per_min / 60.0
        self.burst = burst
        self.cooldown_s = cooldown_s
        self._tokens = burst
        self._at = pacer.clock()
        self.spent = 0
        self.skipped = 0

    def take(self, channel: str) -> bool:
        """Spend one update now, or say no (the caller keeps its lines and tries later)."""
        if self.per_s <= 0 or self.pacer.wait_s(PROGRESS_METHOD, channel) > 0 or \
                self.pacer.limited_within(PROGRESS_METHOD, self.cooldown_s):
            self.skipped += 1
            return False
        now = self.pacer.clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.per_s)
        self._at = now
        if self._tokens < 1.0:
            self.skipped += 1
            return False
        self._tokens -= 1.0
        self.spent += 1
        return True


def note_refusal(pacer: Pacer, method: str, channel: str, exc: Exception) -> bool:
    """Record a 429 that reached the caller as ``SlackApiError`` (no-retry client); True when it was one."""
    resp = getattr(exc, "response", None)
    if resp is None or getattr(resp, "status_code", None) != 429:
        return False
    pacer.note(method, channel, retry_after_s(getattr(resp, "headers", None)))
    return True


class SlackClients:
    """The process's two Web API clients over one pacer: ``sure`` (429s retried) and ``progress`` (never retried)."""

    def __init__(self, token: str, base_url: str, *, pacer: Pacer | None = None,
                 progress_per_min: float = DEFAULT_PROGRESS_PER_MIN, timeout: int = 15) -> None:
        self.pacer = pacer or Pacer()
        handlers: list[AsyncRetryHandler] = [PacedRateLimitRetryHandler(self.pacer)]
        self.sure = PacedWebClient(token=token, base_url=base_url, timeout=timeout, pacer=self.pacer,
                                   retry_handlers=handlers)
        self.progress = PacedWebClient(token=token, base_url=base_url, timeout=timeout, pacer=self.pacer,
                                       retry_handlers=[])
        self.budget = ProgressBudget(self.pacer, per_min=progress_per_min)

    def share_session(self, session: Any) -> None:
        """Use one aiohttp session (connection pool) for both clients."""
        self.sure.session = session
        self.progress.session = session
