"""Structured logs: one JSON object per line with the job id, and no secret ever printed."""

from __future__ import annotations

import io
import logging

import orjson

from bot.runtime.logs import REDACTED, JsonFormatter, RedactFilter, Redactor, configure_logging, job_context

SLACK = "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp"
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
OPENAI = "sk-proj-abcdefghijklmnop1234567890"


def _logger(env: dict[str, str]) -> tuple[logging.Logger, io.StringIO]:
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RedactFilter(env))
    log = logging.getLogger(f"asap.test.{id(buf)}")
    log.handlers[:] = [handler]
    log.setLevel(logging.DEBUG)
    log.propagate = False
    return log, buf


def _lines(buf: io.StringIO) -> list[dict]:
    return [orjson.loads(line) for line in buf.getvalue().splitlines()]


def test_token_shapes_are_redacted_in_message_args_and_extra() -> None:
    log, buf = _logger({})
    log.info("posting with %s", SLACK, extra={"headers": {"Authorization": f"Bearer {GITHUB}"}, "key": OPENAI})
    log.warning(f"openai said no for {OPENAI}; url redis://:hunter2pass@redis:6379/0")
    raw = buf.getvalue()
    for secret in (SLACK, GITHUB, OPENAI, "hunter2pass"):
        assert secret not in raw
    first, second = _lines(buf)
    assert first["msg"] == f"posting with {REDACTED}"
    assert first["headers"] == {"Authorization": f"Bearer {REDACTED}"} and first["key"] == REDACTED
    assert "redis://[redacted]@redis:6379/0" in second["msg"]


def test_values_of_secret_environment_variables_are_redacted() -> None:
    env = {"SLACK_SIGNING_SECRET": "8f7e6d5c4b3a29180f", "MY_API_KEY": "plainvalue-42", "GITHUB_TOKEN": "tok3n-value",
           "HOME": "/root"}
    log, buf = _logger(env)
    log.error("signature mismatch with 8f7e6d5c4b3a29180f using plainvalue-42 and tok3n-value in /root")
    assert _lines(buf)[0]["msg"] == f"signature mismatch with {REDACTED} using {REDACTED} and {REDACTED} in /root"


def test_exception_tracebacks_are_redacted() -> None:
    log, buf = _logger({})
    try:
        raise RuntimeError(f"auth failed for token {SLACK}")
    except RuntimeError:
        log.exception("call failed")
    line = _lines(buf)[0]
    assert SLACK not in buf.getvalue() and "RuntimeError: auth failed for token [redacted]" in line["error"]


def test_records_carry_the_job_id_and_fields_as_json() -> None:
    log, buf = _logger({})
    with job_context("slack:Ev123"):
        log.info("job started", extra={"attempt": 2})
    log.info("idle")
    inside, outside = _lines(buf)
    assert inside["job_id"] == "slack:Ev123" and inside["attempt"] == 2 and inside["level"] == "info"
    assert "job_id" not in outside and outside["logger"].startswith("asap.test")


def test_configure_logging_covers_every_library_logger() -> None:
    buf = io.StringIO()
    handler = configure_logging("INFO", stream=buf, env={"X_SECRET": "s3cr3t-value"})
    try:
        logging.getLogger("aiohttp.access").info("GET /slack/events token=%s s3cr3t-value", SLACK)
        line = orjson.loads(buf.getvalue().splitlines()[-1])
        assert line["msg"] == f"GET /slack/events token={REDACTED} {REDACTED}"
    finally:
        logging.getLogger().removeHandler(handler)


def test_redactor_leaves_ordinary_text_alone() -> None:
    r = Redactor()
    text = "run 123: fsdp=8 tensor=4 is comm-bound; ask-me skip task-force sketch"
    assert r(text) == text
