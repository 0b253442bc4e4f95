"""A 100k-row hlo_stats export loads whole and within a memory bound (200 MB traced).

Load time is measured in benchmarks/profile_size.py (a fresh process per case), not asserted here: a timed unit
test fails on a loaded machine without anything having changed."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import orjson
import pytest

from bot.profiles.xprof_export import read_xprof_export

DATA = Path(__file__).parent / "data" / "profiles"
CATEGORIES = ["convolution fusion", "loop fusion", "all-reduce", "data formatting", "all-gather", "output fusion"]


def write_big_hlo_stats(path: Path, n: int) -> None:
    """n rows on xprof 2.24's real 29 hlo_stats columns, with realistic expression / framework-op text."""
    cols = json.loads((DATA / "cpu_hlo_stats.json").read_text())["cols"]
    rows = []
    for i in range(n):
        v = {
            "rank": i + 1,
            "program_id": "123",
            "category": CATEGORIES[i % 6],
            "hlo_op_name": f"fusion.{i}",
            "hlo_op_expression": f"%fusion.{i} = bf16[8,1024,4096]{{2,1,0}} fusion(bf16[8,1024,4096]{{2,1,0}} %p.1, "
            f"bf16[4096,4096]{{1,0}} %p.2), kind=kOutput, calls=%fused_computation.{i}",
            "tf_op_name": f"jit(train_step)/jvp(transformer)/layer_{i % 32}/mlp/dot_general",
            "occurrences": 32,
            "total_time": 123.4 + i % 7,
            "avg_time": 3.8,
            "total_self_time": 123.4,
            "avg_self_time": 3.8,
            "normalized_flop_rate": 1000.0,
            "measured_memory_bw": 500.0,
            "hbm_bw": 450.0,
            "operational_intensity": 2.0,
            "bound_by": "HBM",
            "hlo_rematerialization": "No",
            "outside_compilation": "No",
            "autotuned": "No",
            "source_info": "model.py:123",
            "core_type": "TensorCore",
        }
        rows.append({"c": [{"v": v.get(c["id"], 0.0 if c["type"] == "number" else "")} for c in cols]})
    path.write_bytes(orjson.dumps({"cols": cols, "rows": rows}))


@pytest.mark.slow
def test_100k_row_hlo_stats_loads_whole_and_small(tmp_path):
    path = tmp_path / "hlo_stats.json"
    write_big_hlo_stats(path, 100_000)
    tracemalloc.start()
    profile = read_xprof_export(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(profile.ops) == 100_000 and profile.ops[5].total_time_us == pytest.approx(128.4)
    assert peak < 200e6
