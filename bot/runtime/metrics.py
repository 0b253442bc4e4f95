"""Prometheus metrics for the front and the workers (one registry per runtime context).

- ``asap_queue_depth``: jobs queued or running (sampled when /metrics is scraped)
- ``asap_job_seconds{source,kind,outcome}``: handler run time, from a worker taking the job to its end
- ``asap_job_wait_seconds{source}``: time a job waited between submit and a worker taking it
- ``asap_jobs_total{source,kind,outcome}``: outcomes (ok, error, deadline, retry, dead, returned)
- ``asap_submissions_total{source,status}``: what the front did with a request (queued, duplicate, limited, busy)
- ``asap_tokens_total{source,kind,type}``: model tokens spent by handlers (prompt, completion)
- ``asap_cost_usd_total{source,kind}``: model spend where a price is configured
- ``asap_enqueue_seconds``: submit latency at the front (dedupe + limits + enqueue)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

_JOB_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600)
_FAST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)

CONTENT_TYPE = CONTENT_TYPE_LATEST


class RuntimeMetrics:
    """The runtime's metric families in their own registry (so tests and several apps never collide)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.queue_depth = Gauge("asap_queue_depth", "Jobs queued or running", registry=r)
        self.job_seconds = Histogram("asap_job_seconds", "Handler run time per job", ["source", "kind", "outcome"],
                                     buckets=_JOB_BUCKETS, registry=r)
        self.wait_seconds = Histogram("asap_job_wait_seconds", "Time from submit to a worker taking the job",
                                      ["source"], buckets=_JOB_BUCKETS, registry=r)
        self.jobs = Counter("asap_jobs", "Job outcomes", ["source", "kind", "outcome"], registry=r)
        self.submissions = Counter("asap_submissions", "Requests at the front by result", ["source", "status"],
                                   registry=r)
        self.tokens = Counter("asap_tokens", "Model tokens spent", ["source", "kind", "type"], registry=r)
        self.cost = Counter("asap_cost_usd", "Model spend in USD (where a price is configured)", ["source", "kind"],
                            registry=r)
        self.enqueue_seconds = Histogram("asap_enqueue_seconds", "Submit latency at the front", buckets=_FAST_BUCKETS,
                                         registry=r)

    def record_usage(self, source: str, kind: str, usage: Mapping[str, Any], cost_usd: float | None = None) -> None:
        """Count a handler's model spend (``usage`` as in agents' Answer: prompt_tokens, completion_tokens)."""
        for typ in ("prompt", "completion"):
            n = int(usage.get(f"{typ}_tokens") or 0)
            if n > 0:
                self.tokens.labels(source, kind, typ).inc(n)
        if cost_usd:
            self.cost.labels(source, kind).inc(float(cost_usd))

    def render(self) -> bytes:
        """The Prometheus text exposition of this registry."""
        return generate_latest(self.registry)
