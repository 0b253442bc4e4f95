"""Analyst mode: a deterministic ChatCompletionClient that drives the real team through the real tools.

With no language model configured, each agent still takes its turn: this client reads the request
header (``[asap] run=... intent=... args=...``, see :mod:`agents.intents`), emits the ``FunctionCall``\\ s
that the plan needs for the tools the calling agent holds, and once the results are in, replies with a
one-line summary built from those results. The answer a person sees is rendered from the same tool
results as with a real model, so analyst mode gives the full computed answer; only free-form questions
need a model, and the Coordinator says so.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from autogen_core import CancellationToken, FunctionCall
from autogen_core.models import (
    ChatCompletionClient,
    CreateResult,
    FunctionExecutionResultMessage,
    LLMMessage,
    ModelInfo,
    RequestUsage,
    UserMessage,
)
from autogen_core.tools import Tool, ToolSchema

from agents.intents import CALLS, parse_header

NEEDS_A_MODEL = (
    "Analyst mode (no language model configured): the numbers above are computed; I answer the analysis, "
    "'which one would you start with?', 'are you sure?', 'I think proposal N looks better', 'compare 1 and 3', "
    "'explain HBM-bound', 'what if we had N chips' and meshes like 'what about fsdp=16 tensor=4'. "
    "Free-form questions need a model: set OPENAI_API_KEY, or ASAP_MODEL_BASE_URL for a local endpoint."
)


def _tool_name(t: Tool | ToolSchema) -> str:
    return t["name"] if isinstance(t, Mapping) else t.name


class AnalystClient(ChatCompletionClient):
    """Plans tool calls from the request header and writes replies from tool results; zero tokens."""

    def __init__(self) -> None:
        self._usage = RequestUsage(prompt_tokens=0, completion_tokens=0)

    async def create(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = [],
        tool_choice: Any = "auto",
        json_output: Any = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> CreateResult:
        start, header = self._find_request(messages)
        if header is None:
            return self._text("No request header found; analyst mode answers requests sent through ASAP.")
        run_id, intent = header
        offered = {_tool_name(t) for t in tools}
        done: list[tuple[str, dict[str, Any]]] = []
        for m in messages[start + 1:]:
            if isinstance(m, FunctionExecutionResultMessage):
                for r in m.content:
                    try:
                        payload = json.loads(r.content)
                    except (TypeError, ValueError):
                        payload = {"status": "error", "error": {"error": r.content}}
                    done.append((r.name, payload))
        done_names = {n for n, _ in done}
        for tool, argnames in CALLS.get(intent.kind, []):
            if tool in offered and tool not in done_names:
                args = {a: (run_id if a == "run_id" else intent.args.get(a)) for a in argnames}
                args = {k: v for k, v in args.items() if v is not None}
                return CreateResult(
                    finish_reason="function_calls",
                    content=[FunctionCall(id=f"call_{uuid.uuid4().hex[:10]}", name=tool, arguments=json.dumps(args))],
                    usage=RequestUsage(prompt_tokens=0, completion_tokens=0),
                    cached=False,
                )
        return self._text(self._reply(intent.kind, done, offered))

    @staticmethod
    def _find_request(messages: Sequence[LLMMessage]) -> tuple[int, tuple[str, Any] | None]:
        for i in range(len(messages) - 1, -1, -1):
            m = messages[i]
            if isinstance(m, UserMessage) and isinstance(m.content, str) and "[asap]" in m.content:
                return i, parse_header(m.content)
        return -1, None

    def _reply(self, kind: str, done: list[tuple[str, dict[str, Any]]], offered: set[str]) -> str:
        if "recommend_first" in offered:  # the Coordinator
            if kind == "other":
                return NEEDS_A_MODEL
            return "Analyst mode: this answer is computed from the tools' results; a configured model would add free-form explanation."
        lines = []
        for name, payload in done:
            if payload.get("status") != "ok":
                err = payload.get("error") or {}
                lines.append(f"{name} failed: {err.get('error')}" + (f" ({err['hint']})" if err.get("hint") else ""))
                continue
            r = payload.get("result") or {}
            if name == "analyze_run":
                lines.append(f"Run {r.get('run')}: {r.get('bottleneck')}-bound (confidence {r.get('confidence')}). {r.get('summary') or ''}".strip())
            elif name == "propose_meshes":
                meshes = ", ".join(f"{p['rank']}. {p['mesh']}" for p in r.get("proposals") or []) or "none"
                lines.append(f"Proposals ({r.get('verdict')}): {meshes}.")
            elif name == "critique_candidates":
                lines.append(f"Critic checked {len(r.get('checked') or [])} candidates: {r.get('passed')} passed, {r.get('dropped')} dropped.")
            elif name == "weigh_pushback":
                lines.append(f"Verdict on proposal {r.get('preferred')}: {r.get('verdict')}.")
            elif name == "assess_confidence":
                lines.append(f"Overall confidence {r.get('overall')} ({r.get('level')}).")
            elif name == "what_if_chips":
                lines.append(f"{len(r.get('candidates') or [])} checked meshes for {r.get('chips')} chips.")
            elif name == "suggest_mesh":
                lines.append(f"Mesh {r.get('mesh')}: {'accepted' if r.get('accepted') else 'dropped'}.")
            else:
                lines.append(f"{name}: done.")
        return " ".join(lines) or "Nothing to do for this request."

    @staticmethod
    def _text(text: str) -> CreateResult:
        return CreateResult(finish_reason="stop", content=text, usage=RequestUsage(prompt_tokens=0, completion_tokens=0), cached=False)

    async def create_stream(self, messages: Sequence[LLMMessage], **kwargs: Any) -> AsyncGenerator[str | CreateResult, None]:
        result = await self.create(messages, **kwargs)
        if isinstance(result.content, str):
            yield result.content
        yield result

    async def close(self) -> None:
        return None

    def actual_usage(self) -> RequestUsage:
        return self._usage

    def total_usage(self) -> RequestUsage:
        return self._usage

    def count_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []) -> int:
        return 0

    def remaining_tokens(self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []) -> int:
        return 1 << 30

    @property
    def capabilities(self) -> Any:  # deprecated in autogen, still abstract
        return self.model_info

    @property
    def model_info(self) -> ModelInfo:
        return ModelInfo(vision=False, function_calling=True, json_output=False, family="unknown", structured_output=False)


