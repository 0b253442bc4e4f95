"""A small OpenAI-compatible HTTP server on 127.0.0.1 for tests (stdlib only, nothing leaves the machine).

Serves ``GET /v1/models`` and ``POST /v1/chat/completions`` (plain JSON or SSE streaming) with tool calls.
What it answers is decided by a *responder*: a function from the request body to a :class:`Reply`, or a
script (a list of replies used in order). Replies can be text, tool calls (including malformed
arguments), an HTTP error (e.g. 500) or a slow reply (sleeps first, to trigger client timeouts).
Every request body is kept in :attr:`OpenAIDouble.requests` so tests can assert what the client sent.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    text: str | None = None
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, raw JSON arguments)
    status: int = 200
    error: str | None = None
    delay_s: float = 0.0
    prompt_tokens: int = 50
    completion_tokens: int = 20

    @classmethod
    def say(cls, text: str, **kw: Any) -> Reply:
        return cls(text=text, **kw)

    @classmethod
    def call(cls, name: str, arguments: dict[str, Any] | str, **kw: Any) -> Reply:
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return cls(tool_calls=[(name, raw)], **kw)

    @classmethod
    def fail(cls, status: int = 500, error: str = "internal error") -> Reply:
        return cls(status=status, error=error)

    @classmethod
    def slow(cls, seconds: float, then: Reply | None = None) -> Reply:
        base = then or cls(text="late")
        base.delay_s = seconds
        return base


Responder = Callable[[dict[str, Any]], Reply]


class OpenAIDouble:
    """Start with ``with OpenAIDouble(responder) as d: d.base_url``."""

    def __init__(self, responder: Responder | Sequence[Reply], *, models: Sequence[str] = ("test-model",),
                 port: int = 0) -> None:
        if callable(responder):
            self._responder: Responder = responder
        else:
            script = list(responder)
            lock = threading.Lock()

            def scripted(_body: dict[str, Any]) -> Reply:
                with lock:
                    if not script:
                        return Reply.fail(500, "script exhausted")
                    return script.pop(0)

            self._responder = scripted
        self.models = list(models)
        self.requests: list[dict[str, Any]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> OpenAIDouble:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        double = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                if self.path.rstrip("/") == "/v1/models":
                    self._json(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in double.models]})
                else:
                    self._json(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._json(404, {"error": {"message": f"no route {self.path}"}})
                    return
                double.requests.append(body)
                reply = double._responder(body)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.status != 200:
                    self._json(reply.status, {"error": {"message": reply.error or "error", "type": "server_error"}})
                    return
                if body.get("stream"):
                    self._stream(body, reply)
                else:
                    self._json(200, _completion(body, reply))

            def _stream(self, body: dict[str, Any], reply: Reply) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"
                base = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": body.get("model")}

                def send(choices: list[dict[str, Any]], **extra: Any) -> None:
                    chunk = dict(base, choices=choices, **extra)
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()

                send([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
                if reply.tool_calls:
                    for i, (name, args) in enumerate(reply.tool_calls):
                        tid = f"call_{uuid.uuid4().hex[:8]}"
                        send([{"index": 0, "delta": {"tool_calls": [{"index": i, "id": tid, "type": "function",
                                                                     "function": {"name": name, "arguments": ""}}]},
                               "finish_reason": None}])
                        half = len(args) // 2
                        for piece in (args[:half], args[half:]):
                            send([{"index": 0, "delta": {"tool_calls": [{"index": i, "function": {"arguments": piece}}]},
                                   "finish_reason": None}])
                    finish = "tool_calls"
                else:
                    words = (reply.text or "").split(" ")
                    for j, w in enumerate(words):
                        send([{"index": 0, "delta": {"content": w if j == 0 else " " + w}, "finish_reason": None}])
                    finish = "stop"
                send([{"index": 0, "delta": {}, "finish_reason": finish}])
                if (body.get("stream_options") or {}).get("include_usage"):
                    send([], usage=_usage(reply))
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        return Handler


def _usage(reply: Reply) -> dict[str, int]:
    return {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens}


def _completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    finish = "stop"
    if reply.tool_calls:
        message["content"] = None
        message["tool_calls"] = [
            {"id": f"call_{uuid.uuid4().hex[:8]}", "type": "function", "function": {"name": n, "arguments": a}}
            for n, a in reply.tool_calls
        ]
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _usage(reply),
    }
