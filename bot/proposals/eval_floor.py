"""The eval floor: the current figures on the published corpus, kept in the repo, that CI must not fall below.

``examples/eval/floor.yaml`` records, for the cases that are not ``sample-*``, the figures ``asap eval``
measured on the model as it is (rates that must not drop, errors that must not grow, the Spearman of each
published table). :func:`regressions` lists every figure that got worse than its floor by more than the
tolerance; ``asap eval --floor`` exits 1 on any, and ``tests/test_eval_corpus.py`` runs the same check.
When the model improves, raise the floor with ``asap eval --write-floor``.
"""

from __future__ import annotations

import math
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, ValidationError

from bot import yamlsafe
from bot.errors import AsapError
from bot.proposals.models import EvalFigures, EvalReport

HIGHER_IS_BETTER = ("top1_rate", "top3_rate", "oom_recall")
LOWER_IS_BETTER = (
    "false_oom_rate",
    "critic_false_rejection_rate",
    "step_time_error_median",
    "step_time_error_median_uncalibrated",
    "memory_error_median",
)


class Floor(BaseModel):
    """``floor.yaml``: figures the published-case eval must keep."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = 1
    tolerance: float = Field(default=0.005, ge=0, description="slack on every figure (rounding, float noise)")
    min_cases: NonNegativeInt = Field(description="published (non-sample) cases the corpus must hold")
    at_least: dict[str, float] = Field(default_factory=dict, description=f"figures that must not drop: {HIGHER_IS_BETTER}")
    at_most: dict[str, float] = Field(default_factory=dict, description=f"figures that must not grow: {LOWER_IS_BETTER}")
    spearman_at_least: dict[str, float] = Field(default_factory=dict, description="table -> Spearman it must keep")
    measured_on: str | None = Field(default=None, description="which model the figures were measured on")


def load_floor(path: Path) -> Floor:
    try:
        raw = yamlsafe.load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise AsapError(f"cannot read the floor file: {exc}", source=str(path)) from None
    except yaml.YAMLError as exc:
        raise AsapError(f"malformed YAML: {getattr(exc, 'problem', exc)}", source=str(path)) from None
    try:
        floor = Floor.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise AsapError(err["msg"], source=str(path), field=".".join(str(p) for p in err["loc"]) or "(top level)") from None
    unknown = [k for k in floor.at_least if k not in HIGHER_IS_BETTER] + [k for k in floor.at_most if k not in LOWER_IS_BETTER]
    if unknown:
        raise AsapError(f"unknown figure(s) {unknown}; at_least takes {HIGHER_IS_BETTER}, at_most {LOWER_IS_BETTER}",
                        source=str(path))
    return floor


def regressions(report: EvalReport, floor: Floor) -> list[str]:
    """Every figure that fell below (or rose above) its floor by more than the tolerance, in words."""
    figs: EvalFigures | None = report.published
    if figs is None:
        return ["no published (non-sample) cases were evaluated"]
    out: list[str] = []
    if figs.cases < floor.min_cases:
        out.append(f"published cases {figs.cases} < {floor.min_cases}")
    broken = [c.case for c in report.cases if c.error]
    if broken:
        out.append(f"cases that failed to evaluate: {', '.join(broken)}")
    tol = floor.tolerance
    for key, want in floor.at_least.items():
        got = getattr(figs, key)
        if got is None or got < want - tol:
            out.append(f"{key} {_fmt(got)} < floor {want:.3f}")
    for key, want in floor.at_most.items():
        got = getattr(figs, key)
        if got is None or got > want + tol:
            out.append(f"{key} {_fmt(got)} > floor {want:.3f}")
    rho = {t.table: t.spearman for t in figs.tables}
    for table, want in floor.spearman_at_least.items():
        got = rho.get(table)
        if got is None or got < want - tol:
            out.append(f"Spearman of table {table} {_fmt(got)} < floor {want:.3f}")
    return out


def floor_from(report: EvalReport, *, measured_on: str | None = None) -> Floor:
    """The floor that the report's figures set (rounded to 3 decimals, towards the lenient side)."""
    figs = report.published
    if figs is None:
        raise AsapError("no published (non-sample) cases: nothing to set a floor from")

    def down(x: float) -> float:
        return math.floor(x * 1000) / 1000

    def up(x: float) -> float:
        return math.ceil(x * 1000) / 1000

    return Floor(
        min_cases=figs.cases,
        at_least={k: down(v) for k in HIGHER_IS_BETTER if (v := getattr(figs, k)) is not None},
        at_most={k: up(v) for k in LOWER_IS_BETTER if (v := getattr(figs, k)) is not None},
        spearman_at_least={t.table: down(t.spearman) for t in figs.tables if t.spearman is not None},
        measured_on=measured_on,
    )


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"
