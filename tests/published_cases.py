"""The cost model's prediction for a published eval case (``examples/eval/<case>``) at the mesh and settings the
case ran, optionally with some settings changed: the shared step of the tests that check pricing on real rows."""

from __future__ import annotations

from pathlib import Path

from bot.proposals.engine import baseline_mesh
from bot.runs.store import LocalRunStore
from knowledge import costmodel
from knowledge.cost_settings import settings_for_run

EVAL = Path(__file__).resolve().parents[1] / "examples" / "eval"


def predict_case(case: str, **update: object) -> costmodel.Prediction:
    """Predict ``case`` as configured; ``update`` overrides fields of its resolved training settings."""
    run = LocalRunStore(EVAL).get(case)
    mesh, _ = baseline_mesh(run, None)
    settings = settings_for_run(run)
    if update:
        assert settings is not None, f"{case}: no config settings to update"
        settings = settings.model_copy(update=update)
    return costmodel.predict(run.record, mesh, settings=settings)
