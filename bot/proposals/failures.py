"""Known failures: configurations recorded as failed for a run's model and hardware.

For now the history lives beside the run as ``<run folder>/failures.yaml`` (the knowledge store will
later serve the same records)::

    schema_version: 1
    failures:
      - mesh: {ici: {fsdp: 8, tensor: 2}, dcn: {data: 2}}
        outcome: oom              # oom | invalid | crash | slower
        model: llama3-8b          # optional: only applies to runs of this model
        chip: tpu-v5p             # optional: only applies to this chip
        detail: "RESOURCE_EXHAUSTED: 101.2G of 95.7G hbm"
        source: "job 124, 2024-05-02"

A mesh recorded as ``oom``, ``invalid`` or ``crash`` is never proposed again for the same model and chip;
``slower`` is remembered as a warning (it ran, but did not help).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot import yamlsafe
from bot.configs.mesh import Mesh
from bot.errors import AsapError, brief
from bot.proposals.kinds import mesh_key
from bot.runs.record import RunRecord

FAILURES_FILE = "failures.yaml"
MAX_FAILURES_BYTES = 1 << 20
HARD_OUTCOMES = ("oom", "invalid", "crash")


class FailedConfig(BaseModel):
    """One configuration that was tried and failed."""

    model_config = ConfigDict(extra="forbid")
    mesh: Mesh = Field(description="the mesh that failed")
    outcome: Literal["oom", "invalid", "crash", "slower"] = Field(description="what happened")
    model: str | None = Field(default=None, description="model name it failed for; omit = this run's model")
    chip: str | None = Field(default=None, description="chip it failed on; omit = this run's chip")
    detail: str | None = Field(default=None, description="error text or measurement")
    source: str | None = Field(default=None, description="where it is recorded (job, log, PR)")


class FailureHistory(BaseModel):
    """The ``failures.yaml`` file."""

    model_config = ConfigDict(extra="forbid")
    schema_version: Literal[1] = 1
    failures: list[FailedConfig] = Field(default_factory=list)

    def matching(self, record: RunRecord, mesh: Mesh) -> list[FailedConfig]:
        """Records for this exact mesh that apply to this run's model and chip."""
        from knowledge.hardware import get_chip

        key = mesh_key(mesh)
        run_chip = _chip_key(record.chip, get_chip)
        run_model = (record.model.name if record.model else None) or None
        out = []
        for f in self.failures:
            if mesh_key(f.mesh) != key:
                continue
            if f.chip and _chip_key(f.chip, get_chip) != run_chip:
                continue
            if f.model and run_model and f.model.strip().lower() != run_model.strip().lower():
                continue
            out.append(f)
        return out


def _chip_key(name: str, get_chip) -> str:  # type: ignore[no-untyped-def]
    try:
        return get_chip(name).key
    except AsapError:
        return name.strip().lower()


def load_failures(folder: Path) -> FailureHistory:
    """Read ``failures.yaml`` from a run folder; an absent file is an empty history."""
    path = folder / FAILURES_FILE
    if not path.is_file():
        return FailureHistory()
    if path.stat().st_size > MAX_FAILURES_BYTES:
        raise AsapError("failures file is larger than 1 MiB; expected a small YAML list", source=str(path))
    try:
        raw = yamlsafe.load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise AsapError("failures file is not UTF-8 text", source=str(path)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise AsapError(f"malformed YAML{where}: {getattr(exc, 'problem', exc)}", source=str(path)) from None
    if raw is None:
        return FailureHistory()
    if not isinstance(raw, dict):
        raise AsapError(
            f"expected a mapping with 'failures: [...]', got {type(raw).__name__}", source=str(path), field="(top level)"
        )
    try:
        return FailureHistory.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        got = f" (got {brief(err['input'])})" if "input" in err and not isinstance(err["input"], dict | list) else ""
        raise AsapError(f"{err['msg']}{got}", source=str(path), field=loc) from None
