"""Is the language model reachable right now? Checked at start-up, re-checked while the service runs.

``asap serve`` and ``asap worker`` probe the endpoint when they start (``GET <base_url>/models``, see
:func:`agents.models.probe_endpoint`) and every ``recheck_s`` seconds after; /readyz shows the result. While
the model is down, :class:`~agents.conversation.Conversation` answers in analyst mode with a note instead of
failing the job, and a model call that cannot connect marks it down at once. The state is only ever
``ok``/``down``/``unknown``: an unreachable model is not a reason to stop answering.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.errors import AsapError

log = logging.getLogger("asap.agents.model")

DEFAULT_RECHECK_S = 30.0


@dataclass
class ModelHealth:
    """The model endpoint's last known state; ``probe`` raises :class:`AsapError` when it is not usable."""

    probe: Callable[[], object]
    recheck_s: float = DEFAULT_RECHECK_S
    state: str = "unknown"  # ok | down | unknown
    reason: str | None = None
    checked_at: float | None = None  # time.monotonic() of the last probe
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def check(self) -> str:
        """Probe now; returns and records ``ok`` or ``down`` (the reason in :attr:`reason`)."""
        try:
            self.probe()
        except AsapError as exc:
            self._set("down", exc.message)
        except Exception as exc:  # a probe must never take the caller down with it
            self._set("down", f"{type(exc).__name__}: {exc}"[:300])
        else:
            self._set("ok", None)
        return self.state

    def _set(self, state: str, reason: str | None) -> None:
        with self._lock:
            before = self.state
            self.state, self.reason, self.checked_at = state, reason, time.monotonic()
        if state != before:
            if state == "down":
                log.error("model endpoint is down; answering in analyst mode until it is back: %s", reason)
            elif before == "down":
                log.warning("model endpoint is reachable again")

    def mark_down(self, reason: str) -> None:
        """A model call could not connect: treat the model as down until the next successful probe."""
        self._set("down", reason)

    def stale(self) -> bool:
        return self.checked_at is None or time.monotonic() - self.checked_at >= self.recheck_s

    def down_reason(self, *, refresh: bool = True) -> str | None:
        """Why the model is down (None when it is up); re-probes first when the last check is stale."""
        if refresh and self.state != "ok" and self.stale():
            self.check()
        return self.reason if self.state == "down" else None

    def status(self) -> str:
        """One line for /readyz: ``ok``, ``down: <reason>`` or ``unknown`` (not probed yet)."""
        if self.state == "down":
            return f"down: {self.reason}"
        return self.state

    async def run_rechecks(self, stop: asyncio.Event) -> None:
        """Re-probe every ``recheck_s`` seconds until ``stop`` (probes run in a thread: they block)."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.recheck_s)
            if not stop.is_set():
                await asyncio.to_thread(self.check)
