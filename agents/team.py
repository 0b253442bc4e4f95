"""The AutoGen team: Coordinator, Analyzer, Proposal and Critic in one SelectorGroupChat.

Who speaks is decided by the request's plan (:mod:`agents.intents`), not by a model call: for a first
question Analyzer -> Proposal -> Critic -> Coordinator, so the Critic always sees every candidate before
the Coordinator answers; follow-ups use shorter plans. Each agent holds only its own tools
(:data:`agents.tools.AGENT_TOOLS`) and its system prompt from ``agents/prompts/<name>.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import ChatAgent
from autogen_agentchat.conditions import MaxMessageTermination, SourceMatchTermination
from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage
from autogen_agentchat.teams import SelectorGroupChat
from autogen_core.models import ChatCompletionClient

from agents.tools import ToolBox

PROMPTS = Path(__file__).resolve().parent / "prompts"
AGENTS = ("Coordinator", "Analyzer", "Proposal", "Critic")
DESCRIPTIONS = {
    "Coordinator": "Takes the request, routes the work and writes the answer from the computed results.",
    "Analyzer": "Loads the run and profile; KPIs, roofline of the top ops, diagnosis with evidence.",
    "Proposal": "Generates and ranks candidate meshes with predicted step time, rationale and confidence.",
    "Critic": "Checks every candidate (device count, divisibility, memory, diagnosis, past failures); defends or revises.",
}


@cache
def prompt(name: str) -> str:
    """The agent's system prompt, kept as a data file so it can be reviewed and edited without code."""
    return (PROMPTS / f"{name.lower()}.md").read_text(encoding="utf-8")


class Plan:
    """The speaking order for one request; the selector pops from it."""

    def __init__(self, toolbox: ToolBox) -> None:
        self.toolbox = toolbox
        self.order: list[str] = []

    def set(self, order: Sequence[str]) -> None:
        self.order = list(order)

    def select(self, messages: Sequence[BaseAgentEvent | BaseChatMessage]) -> str | None:
        speaker = self.order.pop(0) if self.order else "Coordinator"
        self.toolbox.agent = speaker
        return speaker


def build_team(clients: dict[str, ChatCompletionClient], toolbox: ToolBox, plan: Plan) -> SelectorGroupChat:
    """Four AssistantAgents with their tools, in a SelectorGroupChat that follows ``plan``."""
    participants: list[ChatAgent] = []
    for name in AGENTS:
        participants.append(
            AssistantAgent(
                name,
                model_client=clients[name],
                tools=toolbox.tools_for(name),  # type: ignore[arg-type]
                system_message=prompt(name),
                description=DESCRIPTIONS[name],
                reflect_on_tool_use=name == "Coordinator",
                max_tool_iterations=3,
            )
        )
    return SelectorGroupChat(
        participants,
        model_client=clients["Coordinator"],
        selector_func=plan.select,
        allow_repeated_speaker=True,
        termination_condition=SourceMatchTermination(["Coordinator"]) | MaxMessageTermination(12),
    )
