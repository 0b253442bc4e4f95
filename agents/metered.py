"""A ChatCompletionClient wrapper: per-request token budget, timeout, usage accounting and worklog.

Every model call of a request goes through here, so the worklog records each reply and its token
usage, a request that would exceed its budget stops with :class:`TokenBudgetExceeded`, and a model
that does not answer within the timeout raises :class:`ModelFailure` (the conversation then falls back
to the analyst answer and says so).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any

from autogen_core import CancellationToken
from autogen_core.models import ChatCompletionClient, CreateResult, LLMMessage, ModelInfo, RequestUsage
from autogen_core.tools import Tool, ToolSchema

from bot.errors import AsapError


class ModelFailure(AsapError):
    """The model did not give a usable reply (timeout, HTTP 5xx, malformed output).

    ``unreachable`` is set when the endpoint could not be reached at all (connection refused, DNS): the
    conversation then marks the model down until the next successful probe (:mod:`agents.health`).
    """

    unreachable: bool = False


class TokenBudgetExceeded(ModelFailure):
    """The request used up its token budget."""


def _connection_error(exc: BaseException) -> bool:
    """True for "could not reach the endpoint" (openai.APIConnectionError, httpx.ConnectError), not for timeouts."""
    names = {t.__name__ for t in type(exc).__mro__}
    if "APITimeoutError" in names:
        return False
    return bool(names & {"APIConnectionError", "ConnectError", "ConnectionError"})


class Meter:
    """Token accounting of one request, shared by every agent's client."""

    def __init__(self, budget: int, log: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.budget = budget
        self.log = log or (lambda e: None)
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.calls = 0
        self.unreachable: str | None = None  # set when a call could not reach the endpoint at all

    @property
    def used(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class MeteredClient(ChatCompletionClient):
    """One agent's view of the model: same inner client, shared :class:`Meter`."""

    def __init__(self, inner: ChatCompletionClient, meter: Meter, *, timeout_s: float, agent: str | None = None) -> None:
        self.inner = inner
        self.meter = meter
        self.timeout_s = timeout_s
        self.agent = agent

    def _log(self, entry: dict[str, Any]) -> None:
        self.meter.log(entry)

    async def create(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = [],
                     tool_choice: Any = "auto", json_output: Any = None, extra_create_args: Mapping[str, Any] = {},
                     cancellation_token: CancellationToken | None = None) -> CreateResult:
        m = self.meter
        if m.used >= m.budget:
            raise TokenBudgetExceeded(f"request used {m.used} tokens, over its budget of {m.budget}",
                                      field="token_budget", hint="raise token_budget in .asap/model.yaml or ASAP_TOKEN_BUDGET")
        t0 = time.perf_counter()
        try:
            result = await asyncio.wait_for(
                self.inner.create(messages, tools=tools, tool_choice=tool_choice, json_output=json_output,
                                  extra_create_args=extra_create_args, cancellation_token=cancellation_token),
                timeout=self.timeout_s,
            )
        except TimeoutError:
            self._log({"kind": "model_error", "agent": self.agent, "error": f"timeout after {self.timeout_s}s"})
            raise ModelFailure(f"the model did not answer within {self.timeout_s:g} s", field="timeout_s") from None
        except AsapError:
            raise
        except Exception as exc:  # openai.APIStatusError (5xx), connection errors, malformed responses
            self._log({"kind": "model_error", "agent": self.agent, "error": f"{type(exc).__name__}: {exc}"})
            failure = ModelFailure(f"the model request failed: {type(exc).__name__}: {str(exc)[:300]}")
            failure.unreachable = _connection_error(exc)
            if failure.unreachable:
                self.meter.unreachable = failure.message
            raise failure from None
        m.calls += 1
        m.prompt_tokens += result.usage.prompt_tokens
        m.completion_tokens += result.usage.completion_tokens
        content: Any = result.content
        if isinstance(content, list):
            content = [{"name": c.name, "arguments": c.arguments} for c in content]
        self._log({"kind": "model_reply", "agent": self.agent, "content": content, "finish_reason": result.finish_reason,
                   "usage": {"prompt_tokens": result.usage.prompt_tokens, "completion_tokens": result.usage.completion_tokens},
                   "ms": round((time.perf_counter() - t0) * 1000, 2)})
        return result

    async def create_stream(self, messages: Sequence[LLMMessage], **kwargs: Any) -> AsyncGenerator[str | CreateResult, None]:
        result = await self.create(messages, **kwargs)
        if isinstance(result.content, str):
            yield result.content
        yield result

    async def close(self) -> None:
        await self.inner.close()

    def actual_usage(self) -> RequestUsage:
        return RequestUsage(prompt_tokens=self.meter.prompt_tokens, completion_tokens=self.meter.completion_tokens)

    def total_usage(self) -> RequestUsage:
        return self.inner.total_usage()

    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []) -> int:
        return self.inner.count_tokens(messages, tools=tools)

    def remaining_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []) -> int:
        return self.inner.remaining_tokens(messages, tools=tools)

    @property
    def capabilities(self) -> Any:
        return self.inner.model_info

    @property
    def model_info(self) -> ModelInfo:
        return self.inner.model_info
