"""Fit of MaxText's sparse-MoE term on TPU (``knowledge.cost_core.TPU_SPARSE_MOE_EXTRA`` / ``TPU_SPARSE_MOE_EXPERTS``).

Run: ``.venv/bin/python benchmarks/moe_tpu_fit.py [--cases examples/eval]``. Prints figures; asserts nothing.

Scans the two constants over a grid, over every published TPU case of the eval corpus at once (the term touches only
MaxText's dropless MoE on TPU, so the other hardware families are left out of the scan; their figures cannot move).
Per grid point: the median |log(measured / calibrated prediction)| over the sparse-MoE rows (the objective) and over
the dense rows (which move only through their family's calibration), the calibrated median |error| over all TPU rows,
and the Spearman of the three TPU tables that hold MoE rows. The calibration is the eval's: one factor per hardware
family (chip, split by fp8), the median measured / predicted over every point of that family.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
from pathlib import Path

from bot.proposals.eval_figures import calibrations, spearman, step_errors
from bot.proposals.evaluate import run_eval
from bot.runs.store import LocalRunStore
from knowledge import cost_core
from knowledge.cost_settings import settings_for_run
from knowledge.cost_shapes import resolve_shape

REPO = Path(__file__).resolve().parents[1]
TABLES = ("tpu-recipes-ironwood", "tpu-recipes-v5p-models", "tpu-recipes-trillium-models")
EXTRA = (0.0, 0.5, 0.75, 1.0, 1.25, 1.5)
EXPERTS = (1.0, 64.0, 128.0, 256.0)  # 1: no scaling by the expert count


def tpu_cases(cases_dir: Path, into: Path) -> Path:
    """A folder of links to the published TPU cases (chip name says TPU) of ``cases_dir``."""
    for case in sorted(cases_dir.iterdir()):
        run = case / "run.yaml"
        if run.is_file() and not case.name.startswith("sample-"):
            text = run.read_text(encoding="utf-8")
            if any(f"chip: {c}" in text for c in ("tpu", "v5e", "v5p", "v6e", "ironwood")):
                (into / case.name).symlink_to(case.resolve())
    return into


def sparse_moe(cases: Path) -> set[str]:
    """The cases on MaxText's dropless MoE path (the rows the term prices)."""
    store, out = LocalRunStore(cases), set()
    for case in cases.iterdir():
        run = store.get(case.name)
        shape = resolve_shape(run.record, settings_for_run(run))
        if shape.is_moe and not shape.moe_dense_capacity:
            out.add(case.name)
    return out


def score(cases: Path, sparse: set[str]) -> dict[str, float | None]:
    """The figures of one grid point."""
    report = run_eval(cases)
    published = [c for c in report.cases if not c.sample and not c.error]
    points = [(c, p) for c in published for p in c.points if not p.measured_oom and p.measured_step_ms]
    cal = calibrations([p for _, p in points])
    logs: dict[bool, list[float]] = {True: [], False: []}
    for case, p in points:
        if p.family in cal and p.predicted_step_ms:
            logs[case.case in sparse].append(abs(math.log(p.measured_step_ms / (p.predicted_step_ms * cal[p.family]))))
    out: dict[str, float | None] = {
        "moe_log": statistics.median(logs[True]) if logs[True] else None,
        "dense_log": statistics.median(logs[False]) if logs[False] else None,
        "calibrated": statistics.median(step_errors([p for _, p in points], cal)),
    }
    for table in TABLES:
        rows = [p for c, p in points if c.table == table and "tflops_per_chip" in p.metrics and not p.anomaly]
        out[table] = spearman([p.metrics["tflops_per_chip"][0] for p in rows],
                              [p.metrics["tflops_per_chip"][1] for p in rows]) if len(rows) >= 3 else None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=Path, default=REPO / "examples" / "eval")
    args = ap.parse_args()
    kept = cost_core.TPU_SPARSE_MOE_EXTRA, cost_core.TPU_SPARSE_MOE_EXPERTS
    with tempfile.TemporaryDirectory() as tmp:
        cases = tpu_cases(args.cases, Path(tmp))
        sparse = sparse_moe(cases)
        print(f"{'extra':>6} {'experts':>8} {'MoE |log|':>10} {'dense |log|':>12} {'TPU cal':>8} "
              + " ".join(f"{t[12:]:>16}" for t in TABLES))
        for extra in EXTRA:
            for experts in EXPERTS if extra else (1.0,):
                cost_core.TPU_SPARSE_MOE_EXTRA, cost_core.TPU_SPARSE_MOE_EXPERTS = extra, experts
                s = score(cases, sparse)
                mark = " <- kept" if (extra, experts) == kept else ""
                print(f"{extra:6.2f} {experts:8.0f} {s['moe_log']:10.3f} {s['dense_log']:12.3f} {s['calibrated']:8.3f} "
                      + " ".join(f"{s[t]:16.2f}" if s[t] is not None else f"{'-':>16}" for t in TABLES) + mark)
    cost_core.TPU_SPARSE_MOE_EXTRA, cost_core.TPU_SPARSE_MOE_EXPERTS = kept


if __name__ == "__main__":
    main()
