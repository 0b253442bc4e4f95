"""Summing rows from columns (below the reducer's cutoff, and ops folded at compaction) gives exactly what
folding OpStats one by one gives.

A large hlo_stats table is read window by window with a lowered ``MAX_OPS``, once with the column fold
(:mod:`bot.profiles.hlo_fold`) and once building an OpStat for every row and folding them op by op
(``OpReducer._fold``'s sort and groupby); the kept ops, the summed buckets
(bit for bit), the warnings and the visible share must be identical.
"""

from __future__ import annotations

import random

import orjson
import pytest

from bot.profiles import datatable, reduce, xprof_export
from bot.profiles.xprof_export import parse_hlo_stats

COLS = ["hlo_op_name", "category", "occurrences", "total_time", "total_self_time", "program_id",
        "normalized_flop_rate", "measured_memory_bw", "hbm_bw", "operational_intensity", "bound_by",
        "parent_op_name", "total_self_time_percent"]
CATS = ["convolution fusion", "loop fusion", "all-reduce", "while", "megacore fusion", "data formatting", "other"]
NAMES = ["fusion", "copy", "all-gather-start", "custom-call", "infeed", "tuple", "reshape"]


def _row(i: int, rng: random.Random) -> list[object]:
    cat = CATS[rng.randrange(len(CATS))]
    total = round(rng.expovariate(1 / 40.0), 3)  # rounded: equal times (ties) occur
    return [
        f"{NAMES[i % len(NAMES)]}.{i}",
        cat,
        rng.choice([1, 20, 7.0, None]),
        total,
        rng.choice([None, round(total / 3, 3)]),
        rng.choice(["1", "2", ""]),
        rng.choice([0.0, None, rng.uniform(1, 3e5)]),
        rng.choice([None, 0.0, rng.uniform(10, 2500)]),
        rng.choice([0.0, rng.uniform(10, 2500)]),
        rng.choice([None, 0.0, rng.uniform(0.1, 900)]),
        rng.choice(["Compute", "HBM", None, "", "ICI", "vmem read"]),
        "fusion.1" if rng.random() < 0.01 else "",
        rng.choice([None, 1e-6]),
    ]


def _table(n: int) -> bytes:
    rng = random.Random(7)
    cols = [{"id": c, "label": c, "type": "string"} for c in COLS]
    rows = [{"c": [{"v": v} for v in _row(i, rng)]} for i in range(n)]
    return orjson.dumps({"cols": cols, "rows": rows, "p": {}})


def test_column_fold_equals_folding_opstats(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _table(120_000)
    monkeypatch.setattr(reduce, "MAX_OPS", 3000)
    monkeypatch.setattr(reduce.OpReducer.__init__, "__defaults__", (3000,))
    monkeypatch.setattr(datatable, "WINDOW_BYTES", 256 << 10)  # ~100 windows
    calls = []
    real = xprof_export._fold_window

    def counted(*args: object) -> bool:
        calls.append(1)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(xprof_export, "_fold_window", counted)
    folded = parse_hlo_stats(data, source="h.json")
    assert len(calls) > 50  # the column fold did the work for most windows
    monkeypatch.setattr(xprof_export, "_fold_window", lambda *args: False)
    monkeypatch.setattr(reduce, "sum_ops", lambda ops: None)  # and the reducer folds op by op
    via_ops = parse_hlo_stats(data, source="h.json")

    assert folded.ops == via_ops.ops  # kept ops and summed buckets, floats bit for bit
    assert folded.warnings == via_ops.warnings
    assert folded.op_time_fraction == via_ops.op_time_fraction
    assert sum(1 for o in folded.ops if not o.name.startswith("(")) == 3000
    assert any("op rows; the 3,000 longest are kept one by one" in w for w in folded.warnings)
    assert any("nested op row(s)" in w for w in folded.warnings)
    assert any(o.name.startswith("(") and o.category == "while" for o in folded.ops)


def test_bad_row_after_the_cutoff_is_named_by_its_row_in_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows summed from the columns are still checked: an error names the row in the whole file."""
    table = orjson.loads(_table(20_000))
    table["rows"][17_000]["c"][1]["v"] = 5  # category: a number is read as text "5"; bound_by next
    table["rows"][18_500]["c"][10]["v"] = 3.5  # bound_by: a number is not text
    monkeypatch.setattr(reduce.OpReducer.__init__, "__defaults__", (500,))
    monkeypatch.setattr(datatable, "WINDOW_BYTES", 64 << 10)
    with pytest.raises(xprof_export.ProfileError) as info:
        parse_hlo_stats(orjson.dumps(table), source="h.json")
    assert "rows[18500].bound_by" in info.value.render()
