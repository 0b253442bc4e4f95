"""Cost model vs published throughput tables: error after one calibration per hardware family, rank order.

Reads ``benchmarks/data/published_tables.yaml`` (each table cites its source), predicts every row's step time
with the uncalibrated cost model (:func:`knowledge.cost_core.evaluate`, the function ``predict`` and the
mesh search use), then applies ONE scale per hardware family (the median measured/predicted ratio over all
rows of that family: what calibrating on one run per family does, without choosing the run) and prints:

* per table: median |error| of throughput after that calibration, Spearman rank correlation of predicted
  vs measured per-GPU throughput within the table, and every row;
* ``--fit``: the shape constant ``SHAPE_TILE`` scanned over a grid, scored across all tables at once
  (median |error| after calibration; Spearman averaged over tables), to show how it was chosen.

Usage: ``python benchmarks/costmodel_fit.py [--fit]``. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.configs.mesh import Mesh  # noqa: E402
from bot.runs.record import RunRecord  # noqa: E402
from knowledge import cost_core  # noqa: E402
from knowledge.cost_remat import megatron_policy  # noqa: E402
from knowledge.cost_shapes import resolve_shape  # noqa: E402
from knowledge.costmodel import mesh_arrays  # noqa: E402
from knowledge.hardware import get_chip  # noqa: E402

TABLES = ROOT / "benchmarks" / "data" / "published_tables.yaml"
GPUS_PER_NODE = 8


def gpu_mesh(tensor: int, pipeline: int, gpus: int) -> Mesh:
    """Megatron rank order (tp-cp-dp-pp): tensor fills the node first, then data, then pipeline."""
    data = gpus // (tensor * pipeline)
    room = GPUS_PER_NODE // tensor if tensor <= GPUS_PER_NODE else 1
    ici_data = min(data, room)
    room //= ici_data
    ici_pp = min(pipeline, room) if room > 1 else 1
    ici = {"tensor": tensor, "data": ici_data, "pipeline": ici_pp}
    dcn = {"data": data // ici_data, "pipeline": pipeline // ici_pp}
    return Mesh(ici={k: v for k, v in ici.items() if v > 1}, dcn={k: v for k, v in dcn.items() if v > 1})


def measured_step_s(table: dict[str, Any], row: list[Any]) -> float:
    """Step time the table's own metric implies."""
    _, heads, h, layers, _t, _p, gpus, batch, value = row
    s, v = table["seq_len"], table["vocab"]
    peak = get_chip(table["chip"]).peak_bf16_flops
    if table["metric"] == "hw_tflops_ptd":
        flops = 96.0 * batch * s * layers * h * h * (1 + s / (6 * h) + v / (16 * layers * h))
        return flops / (value * 1e12 * gpus)
    if table["metric"] == "mfu_kor":
        flops = 72.0 * batch * s * layers * h * h * (1 + s / (6 * h) + v / (12 * layers * h))
        return flops / (value / 100.0 * peak * gpus)
    raise ValueError(f"unknown metric {table['metric']!r}")


def predicted_step_s(table: dict[str, Any], row: list[Any]) -> float:
    name, heads, h, layers, t, p, gpus, batch, _ = row
    run = RunRecord.model_validate({
        "id": name, "chip": table["chip"], "num_chips": gpus, "num_slices": max(1, gpus // GPUS_PER_NODE),
        "framework": table["framework"],
        "model": {"layers": layers, "d_model": h, "d_ff": 4 * h, "heads": heads, "vocab": table["vocab"],
                  "mlp_matrices": 2},
        "training": {"global_batch": batch, "seq_len": table["seq_len"],
                     **({"micro_batch": table["micro_batch"]} if table.get("micro_batch") else {})},
    })
    shape = resolve_shape(run)
    spec = megatron_policy(table["remat"] if table["remat"] != "none" else None, source=table["id"])
    shape = dataclasses.replace(shape, remat_spec=spec, remat=spec.policy,
                                sequence_parallel=bool(table.get("sequence_parallel")),
                                flash_attention=bool(table.get("flash_attention", True)))
    mesh = gpu_mesh(t, p, gpus)
    ici, dcn = mesh_arrays([mesh])
    terms = cost_core.evaluate(shape, get_chip(table["chip"]), min(gpus, GPUS_PER_NODE), ici, dcn)
    return float(terms.step_s()[0])


def spearman(a: list[float], b: list[float]) -> float:
    def ranks(x: list[float]) -> list[float]:
        order = sorted(range(len(x)), key=x.__getitem__)
        r = [0.0] * len(x)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and x[order[j + 1]] == x[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2.0
            i = j + 1
        return r

    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb) if va and vb else float("nan")


def evaluate_tables(tables: list[dict[str, Any]]) -> dict[str, Any]:
    """Rows with measured and predicted step time, the per-family scale, and per-table figures."""
    rows = []
    for table in tables:
        for row in table["rows"]:
            rows.append({"table": table["id"], "family": table["chip"], "name": row[0], "gpus": row[6],
                         "tokens": row[7] * table["seq_len"], "measured": measured_step_s(table, row),
                         "predicted": predicted_step_s(table, row)})
    scale = {}
    for fam in {r["family"] for r in rows}:
        scale[fam] = statistics.median(r["measured"] / r["predicted"] for r in rows if r["family"] == fam)
    for r in rows:
        r["calibrated"] = r["predicted"] * scale[r["family"]]
        r["error"] = r["calibrated"] / r["measured"] - 1.0
    per_table = {}
    for table in tables:
        tr = [r for r in rows if r["table"] == table["id"]]
        # Within a table the rows are different models: rank their per-GPU efficiency (the table's own
        # metric: TFLOP/s or MFU), which is measured step / predicted step times the published value.
        meas = [row[-1] for row in table["rows"]]
        pred = [row[-1] * r["measured"] / r["calibrated"] for row, r in zip(table["rows"], tr, strict=True)]
        per_table[table["id"]] = {
            "median_abs_error": statistics.median(abs(r["error"]) for r in tr),
            "spearman": spearman(pred, meas),
        }
    return {"rows": rows, "scale": scale, "tables": per_table,
            "median_abs_error": statistics.median(abs(r["error"]) for r in rows)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="scan SHAPE_TILE over a grid")
    args = ap.parse_args()
    tables = yaml.safe_load(TABLES.read_text())["tables"]
    if args.fit:
        print(f"{'SHAPE_TILE':>10} {'EW_BYTES':>8}  {'median|err|':>11}  {'min Spearman':>12}")
        for c in (0.0, 64.0, 128.0, 256.0):
            for ew in (0.0, 40.0, 80.0, 120.0, 160.0, 240.0):
                cost_core.SHAPE_TILE, cost_core.EW_BYTES = c, ew
                res = evaluate_tables(tables)
                rho = min(t["spearman"] for t in res["tables"].values())
                print(f"{c:10.0f} {ew:8.0f}  {100 * res['median_abs_error']:10.1f}%  {rho:12.2f}")
        return
    res = evaluate_tables(tables)
    for fam, s in res["scale"].items():
        print(f"calibration {fam}: measured / predicted = {s:.3f} (median over the family's rows)")
    for tid, t in res["tables"].items():
        print(f"\n{tid}: median |error| {100 * t['median_abs_error']:.1f}%, Spearman {t['spearman']:.2f}")
        print(f"  {'row':<12} {'measured s':>10} {'predicted s':>11} {'error':>7}")
        for r in res["rows"]:
            if r["table"] == tid:
                print(f"  {r['name']:<12} {r['measured']:10.3f} {r['calibrated']:11.3f} {100 * r['error']:6.1f}%")
    print(f"\nall rows: median |error| {100 * res['median_abs_error']:.1f}% after one calibration per family")


if __name__ == "__main__":
    main()
