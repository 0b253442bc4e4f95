"""Structured JSON logs for the runtime, tagged with the job id, with secrets redacted.

Every record becomes one JSON line (``at``, ``level``, ``logger``, ``msg``, ``job_id`` when a job is
running, plus any ``extra={...}`` fields). :class:`RedactFilter` scrubs the message, the arguments and the
extra fields of anything that looks like a credential: Slack tokens (``xox?-``/``xapp-``), GitHub tokens
(``ghp_``, ``gho_``, ``ghs_``, ``ghu_``, ``github_pat_``), API keys (``sk-...``), ``Authorization: Bearer``
values, passwords in URLs, and the literal values of environment variables whose name contains TOKEN,
SECRET, KEY or PASSWORD. It is attached to the handler, so records from any library pass through it.
"""

from __future__ import annotations

import contextvars
import logging
import os
import re
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import orjson

job_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("asap_job_id", default=None)

REDACTED = "[redacted]"
_PATTERNS = [
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{6,}"),
    re.compile(r"\bxapp-[A-Za-z0-9-]{6,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{16,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{12,}"),
    re.compile(r"(?i)(?<=bearer )[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(?<=://)[^/\s:@]*:[^/\s@]+(?=@)"),  # user:password@ in URLs
]
_SECRET_NAME = re.compile(r"TOKEN|SECRET|KEY|PASSWORD|PASSWD", re.IGNORECASE)
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """Values of environment variables whose names mark them as secrets (long enough to be specific)."""
    env = os.environ if env is None else env
    vals = {v for k, v in env.items() if _SECRET_NAME.search(k) and v and len(v) >= 6}
    return sorted(vals, key=len, reverse=True)


class Redactor:
    """Replaces secrets in text: known token shapes plus the given literal values."""

    def __init__(self, values: list[str] | None = None) -> None:
        self.values = [v for v in (values or []) if v]

    def __call__(self, text: str) -> str:
        for v in self.values:
            if v in text:
                text = text.replace(v, REDACTED)
        for pat in _PATTERNS:
            text = pat.sub(REDACTED, text)
        return text

    def scrub(self, value: Any) -> Any:
        """Redact strings inside a JSON-like value (dicts, lists, tuples); other values unchanged."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, Mapping):
            return {k: (REDACTED if isinstance(k, str) and _SECRET_NAME.search(k) and v else self.scrub(v))
                    for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.scrub(v) for v in value)
        return value


class RedactFilter(logging.Filter):
    """A logging filter that redacts the formatted message, exception text and extra fields."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.redact = Redactor(secret_values(env))

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # a bad format string must not lose the record
            msg = f"{record.msg!r} {record.args!r}"
        record.msg, record.args = self.redact(msg), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        record.exc_info = None
        for key, value in list(vars(record).items()):
            if key not in _STANDARD:
                setattr(record, key, REDACTED if _SECRET_NAME.search(key) and value else self.redact.scrub(value))
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line; includes the current job id and the record's extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "at": round(record.created, 3),
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        job = getattr(record, "job_id", None) or job_id_var.get()
        if job:
            out["job_id"] = job
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in out:
                out[key] = value
        if record.exc_text:
            out["error"] = record.exc_text
        elif record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


@contextmanager
def job_context(job_id: str) -> Iterator[None]:
    """Tag every log record emitted inside the block (and tasks it starts) with ``job_id``."""
    token = job_id_var.set(job_id)
    try:
        yield
    finally:
        job_id_var.reset(token)


def configure_logging(level: str = "INFO", *, stream: Any = None, env: Mapping[str, str] | None = None) -> logging.Handler:
    """Send every log record to ``stream`` (default stderr) as redacted JSON lines; returns the handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RedactFilter(env))
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_asap_runtime", False)]:
        root.removeHandler(old)
    handler._asap_runtime = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper())
    return handler
