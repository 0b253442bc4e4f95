"""Benchmark: enumerate and score every mesh for a 4,096-chip job over six axes (goal: < 100 ms).

Run: ``.venv/bin/python benchmarks/propose.py`` (add ``--json`` for machine-readable output).

Cases (each a realistic run record, not a sample from examples/):
* ``v5p-4096``      Llama-3-70B-like dense model, one 4,096-chip TPU v5p slice.
* ``v5p-4x1024``    the same over 4 slices of 1,024 chips (ICI x DCN assignments).
* ``h100-4096-moe`` a Mixtral-8x22B-like MoE on 4,096 H100s in 512 nodes of 8 (NVLink x InfiniBand).
* ``v5p-4096-nomodel-count``: the raw 6-axis space with no model constraints (count only: without the
  model there is nothing to score).

For each: number of valid meshes, enumeration ms, scoring ms (vectorized step time + memory for all of
them), and the ``list[Mesh]`` API cost (``enumerate_meshes`` + ``score_meshes``), median of several runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from bot.runs.record import RunRecord
from knowledge.hardware import get_chip
from knowledge.meshsearch import (
    _factorizations,
    _spread,
    enumerate_mesh_arrays,
    enumerate_meshes,
    evaluate_mesh_arrays,
    score_meshes,
)

LLAMA70B = dict(layers=80, d_model=8192, d_ff=28672, heads=64, kv_heads=8, vocab=128256)
MIXTRAL = dict(layers=56, d_model=6144, d_ff=16384, heads=48, kv_heads=8, vocab=32768, experts=8, experts_per_token=2)

CASES: dict[str, RunRecord] = {
    "v5p-4096": RunRecord.model_validate(
        dict(id="bench-v5p-4096", framework="maxtext", chip="tpu-v5p", num_chips=4096, model=LLAMA70B,
             training=dict(global_batch=4096, seq_len=8192, remat="full"))
    ),
    "v5p-4x1024": RunRecord.model_validate(
        dict(id="bench-v5p-4x1024", framework="maxtext", chip="tpu-v5p", num_chips=4096, num_slices=4,
             model=LLAMA70B, training=dict(global_batch=4096, seq_len=8192, remat="full"))
    ),
    "h100-4096-moe": RunRecord.model_validate(
        dict(id="bench-h100-moe", framework="megatron", chip="h100", num_chips=4096, num_slices=512,
             model=MIXTRAL, training=dict(global_batch=4096, seq_len=4096, micro_batch=1, remat="minimal"))
    ),
}


def _median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def bench(repeat: int = 7) -> list[dict[str, object]]:
    """Time enumeration and scoring for every case; returns one row per case."""
    rows: list[dict[str, object]] = []
    for name, run in CASES.items():
        get_chip(run.chip)  # the catalog YAML is read once per process; not part of enumeration
        _factorizations.cache_clear()  # time the enumeration from scratch, not from the memos
        _spread.cache_clear()
        t0 = time.perf_counter()
        ici, dcn = enumerate_mesh_arrays(run)
        cold_enum = (time.perf_counter() - t0) * 1e3
        enum_ms = _median_ms(lambda run=run: enumerate_mesh_arrays(run), repeat)
        score_ms = _median_ms(lambda run=run, i=ici, d=dcn: evaluate_mesh_arrays(run, i, d), repeat)
        meshes = enumerate_meshes(run)
        api_ms = _median_ms(lambda run=run: score_meshes(run, enumerate_meshes(run), None), max(3, repeat // 2))
        scores = evaluate_mesh_arrays(run, ici, dcn)
        rows.append(
            {
                "case": name,
                "chips": run.num_chips,
                "slices": run.num_slices,
                "meshes": len(meshes),
                "fit_memory": int(scores.fits_memory.sum()),
                "enumerate_ms_cold": round(cold_enum, 2),
                "enumerate_ms": round(enum_ms, 2),
                "score_ms": round(score_ms, 2),
                "total_ms": round(enum_ms + score_ms, 2),
                "list_api_total_ms": round(api_ms, 2),
            }
        )
    raw = CASES["v5p-4096"].model_copy(update={"model": None, "training": None})
    t0 = time.perf_counter()
    ici, _ = enumerate_mesh_arrays(raw)
    rows.append(
        {
            "case": "v5p-4096-nomodel-count",
            "chips": 4096,
            "slices": 1,
            "meshes": int(ici.shape[0]),
            "enumerate_ms": round((time.perf_counter() - t0) * 1e3, 2),
        }
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON rows")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    rows = bench(args.repeat)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    for r in rows:
        parts = [f"{k}={v}" for k, v in r.items() if k != "case"]
        print(f"{r['case']:<24} " + "  ".join(parts))
    worst = max(float(r.get("total_ms", 0.0)) for r in rows)
    print(f"goal: enumerate + score < 100 ms per case; worst {worst:.1f} ms -> {'PASS' if worst < 100 else 'MISS'}")


if __name__ == "__main__":
    main()
