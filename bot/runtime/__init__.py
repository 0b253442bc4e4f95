"""The runtime: a job queue (Redis Streams or in-process), workers, and the HTTP front (``asap serve``).

Front ends turn a request into a :class:`~bot.runtime.jobs.Job`, ``await ctx.submit(job)`` and answer at
once; a worker runs the handler registered for ``(job.source, job.kind)`` and the handler posts the reply.
"""

from __future__ import annotations

from bot.runtime.jobs import Job, Requester

__all__ = ["Job", "Requester"]
