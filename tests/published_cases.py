"""The cost model's prediction for a published eval case (``examples/eval/<case>``) at the mesh and settings the
case ran, optionally with some settings changed: the shared step of the tests that check pricing on real rows."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from bot.proposals.engine import baseline_mesh
from bot.runs.store import LocalRunStore
from knowledge import costmodel
from knowledge.cost_settings import settings_for_run

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "examples" / "eval"


def predict_case(case: str, **update: object) -> costmodel.Prediction:
    """Predict ``case`` as configured; ``update`` overrides fields of its resolved training settings."""
    run = LocalRunStore(EVAL).get(case)
    mesh, _ = baseline_mesh(run, None)
    settings = settings_for_run(run)
    if update:
        assert settings is not None, f"{case}: no config settings to update"
        settings = settings.model_copy(update=update)
    return costmodel.predict(run.record, mesh, settings=settings)


def measured_step_ms(case: str, tflops_per_chip: float) -> float:
    """The step time a published row's model TFLOP/s per chip means for ``case``, through ASAP's model-FLOP count."""
    from bot.analysis.kpis import model_flops_per_step

    run = LocalRunStore(EVAL).get(case)
    flops = model_flops_per_step(run.record).per_step
    assert flops is not None, f"{case}: no model-FLOP count"
    return 1e3 * flops / (tflops_per_chip * 1e12 * run.record.num_chips)


def propose_case(case: str):  # type: ignore[no-untyped-def]
    """The proposal engine's answer for ``case`` (analysis, proposals, advice), as ``asap propose`` gives it."""
    from bot.analysis.analyze import analyze_run
    from bot.proposals.engine import propose

    run = LocalRunStore(EVAL).get(case)
    return propose(run, analyze_run(run))


def load_script(name: str, folder: str = "scripts") -> ModuleType:
    """``<folder>/<name>.py`` as a module (``scripts/`` and ``benchmarks/`` are not packages)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / folder / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses resolve their string annotations through the module's entry
    spec.loader.exec_module(mod)
    return mod


def assert_script_writes(name: str, cases: list[str], out: Path) -> None:
    """Running ``scripts/<name>.py`` into ``out`` writes exactly ``cases``, byte for byte as committed: the corpus is
    reproducible from its script."""
    assert load_script(name).main(["x", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(cases)
    for case in cases:
        for f in (EVAL / case).iterdir():
            assert (out / case / f.name).read_text() == f.read_text(), f"{case}/{f.name}"


def megatron_yaml_settings(tmp_path: Path, extra: str):  # type: ignore[no-untyped-def]
    """The training settings ASAP reads from a small Megatron-format YAML (TP 2, 4,096 tokens) plus ``extra`` YAML."""
    from bot.configs.detect import load_config
    from knowledge.cost_settings import settings_from_config

    path = tmp_path / "megatron.yaml"
    path.write_text("model:\n  tensor_model_parallel_size: 2\n  seq_length: 4096\n" + extra)
    return settings_from_config(load_config(path))
