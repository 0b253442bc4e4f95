"""The memory store: conversation threads, the worklog, and one-shot claims.

One small interface (:class:`MemoryStore`) with two implementations: an SQLite file as the embedded
default (``$ASAP_STATE_DIR/state.db``, default ``.asap/state.db``) and Redis when ``REDIS_URL`` is set.
Agents keep each thread's state here so a conversation survives a process restart; the worklog keeps
every request, tool call, model reply and answer so any answer can be traced (``asap log THREAD``).
"""

from __future__ import annotations

from bot.store.base import MemoryStore, open_store

__all__ = ["MemoryStore", "open_store"]
