"""What a thread has computed so far: the analysis, the proposals, every Critic verdict, what-if results.

The workspace is the single source of numbers for an answer: tools write their results here, the
renderer reads them from here, and the thread record stores it (JSON) so follow-ups after a process
restart answer from the same numbers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class ToolResult:
    """One tool call of the current request, as the model saw it."""

    tool: str
    args: dict[str, Any]
    status: str
    result: Any = None
    error: dict[str, Any] | None = None
    agent: str | None = None
    ms: float = 0.0


@dataclass
class Workspace:
    run_id: str
    report: dict[str, Any] | None = None
    proposals: dict[str, Any] | None = None
    verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)  # mesh_short -> CriticResult (+ok)
    suggested: list[dict[str, Any]] = field(default_factory=list)  # model-suggested meshes and their fate
    whatif: dict[str, Any] | None = None
    stance: dict[str, Any] = field(default_factory=dict)  # e.g. {"recommended": 1, "defended": [2]}
    turn: list[ToolResult] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("turn")
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Workspace:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "turn"}
        return cls(**known)

    def proposal_list(self) -> list[dict[str, Any]]:
        """Proposals that passed the Critic (all of them when the Critic has not looked yet)."""
        props = (self.proposals or {}).get("proposals") or []
        return [p for p in props if self.verdicts.get(p["mesh_short"], {}).get("ok", True)]

    def proposal(self, number: int) -> dict[str, Any] | None:
        props = self.proposal_list()
        return props[number - 1] if 1 <= number <= len(props) else None

    def results(self, tool: str) -> list[ToolResult]:
        return [r for r in self.turn if r.tool == tool]

    def last_ok(self, tool: str) -> Any:
        for r in reversed(self.turn):
            if r.tool == tool and r.status == "ok":
                return r.result
        return None
