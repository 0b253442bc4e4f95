"""Big and hostile profile files: gzip bombs stop early, traces stream whatever the whitespace, and big op
tables are read window by window (through an mmap) and kept within bounded memory with exact totals.

The 1 GiB figures come from benchmarks/profile_size.py; these tests shrink the thresholds to check the
same code paths on small files.
"""

from __future__ import annotations

import gzip
import json
import math

import orjson
import pytest
from test_profiles_trace import tpu_trace
from test_profiles_xprof import TPU_ROWS, hlo_table

from bot.errors import ProfileError
from bot.profiles import datatable, io, reduce, trace_events
from bot.profiles.io import read_bytes
from bot.profiles.trace_events import read_trace_events
from bot.profiles.xprof_export import parse_hlo_stats, read_xprof_export


def _bomb_trace(size: int) -> bytes:
    one = orjson.dumps({"ph": "X", "pid": 1, "tid": 2, "ts": 1, "dur": 1.0, "name": "fusion.1",
                        "args": {"hlo_op": "fusion.1"}})
    events = b",".join([one] * (size // len(one)))
    return gzip.compress(b'{"traceEvents":[' + events + b"]}", compresslevel=9)


@pytest.mark.timeout(60)
def test_gzip_bomb_is_refused_after_the_ratio_free_allowance(tmp_path, monkeypatch):
    monkeypatch.setattr(io, "RATIO_FREE_BYTES", 4 << 20)
    monkeypatch.setattr(trace_events, "CHUNK_BYTES", 1 << 20)
    monkeypatch.setattr(trace_events, "WHOLE_FILE_BYTES", 1 << 20)
    path = tmp_path / "bomb.trace.json.gz"
    path.write_bytes(_bomb_trace(64 << 20))  # ~64 MiB of identical events in well under 1 MiB of gzip
    assert path.stat().st_size < (64 << 20) // io.MAX_GZIP_RATIO
    with pytest.raises(ProfileError, match="gzip bomb") as info:
        read_trace_events(path, source="bomb.trace.json.gz")
    assert "bomb.trace.json.gz" in info.value.render()
    gz_json = tmp_path / "hlo_stats.json.gz"
    gz_json.write_bytes(gzip.compress(b" " * (8 << 20) + b"{}"))
    with pytest.raises(ProfileError, match="gzip bomb"):
        read_bytes(gz_json, source="hlo_stats.json.gz")


def test_ordinary_gzip_ratio_is_accepted(tmp_path, monkeypatch):
    monkeypatch.setattr(io, "RATIO_FREE_BYTES", 1 << 10)
    path = tmp_path / "t.trace.json.gz"
    path.write_bytes(gzip.compress(orjson.dumps(tpu_trace())))
    assert read_trace_events(path, source="t").ops


def test_streaming_handles_events_separated_by_whitespace(tmp_path, monkeypatch):
    trace = tpu_trace()
    filler = [{"ph": "X", "pid": 9, "tid": 5, "ts": i, "dur": 1.0, "name": f"host {i}"} for i in range(2000)]
    trace["traceEvents"] = trace["traceEvents"][:9] + filler + trace["traceEvents"][9:]
    path = tmp_path / "pretty.trace.json"
    path.write_text(json.dumps(trace, indent=2))  # ",\n    {" between events
    whole = read_trace_events(path, source="pretty")
    monkeypatch.setattr(trace_events, "WHOLE_FILE_BYTES", 1000)
    monkeypatch.setattr(trace_events, "CHUNK_BYTES", 4096)
    streamed = read_trace_events(path, source="pretty")
    assert streamed.ops == whole.ops and streamed.step_times_us == whole.step_times_us


def test_trace_without_streamable_boundaries_is_refused_not_buffered(tmp_path, monkeypatch):
    events = [{"name": f"e{i}", "dur": 1.0, "ph": "X", "pid": 1, "tid": 1, "ts": i} for i in range(3000)]
    path = tmp_path / "odd.trace.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))  # "ph" is not the first key: no boundaries
    monkeypatch.setattr(trace_events, "WHOLE_FILE_BYTES", 1000)
    monkeypatch.setattr(trace_events, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(trace_events, "MAX_EVENT_BYTES", 16384)
    with pytest.raises(ProfileError, match="as jax.profiler writes them"):
        read_trace_events(path, source="odd")


def _many_rows(n: int) -> list[dict]:
    return [dict(TPU_ROWS[i % 3], hlo_op_name=f"op.{i}", total_time=float(1 + (i * 7919) % 1000)) for i in range(n)]


def test_big_table_keeps_the_longest_ops_and_exact_totals(tmp_path, monkeypatch):
    data = orjson.dumps(hlo_table(_many_rows(3000)))
    exact = parse_hlo_stats(data, source="h.json")
    assert len(exact.ops) == 3000 and not any("summed" in w for w in exact.warnings)
    monkeypatch.setattr(reduce, "MAX_OPS", 200)
    monkeypatch.setattr(reduce.OpReducer.__init__, "__defaults__", (200,))
    monkeypatch.setattr(datatable, "WINDOW_BYTES", 4096)
    monkeypatch.setattr(io, "MMAP_BYTES", 1024)
    path = tmp_path / "hlo_stats.json"
    path.write_bytes(data)
    small = read_xprof_export(path, source="hlo_stats.json")  # through an mmap, window by window
    assert len(small.ops) < 3000 // 5
    assert math.isclose(sum(o.total_time_us for o in small.ops), sum(o.total_time_us for o in exact.ops))
    flops = [sum(o.flops or 0 for o in p.ops) for p in (small, exact)]
    assert math.isclose(*flops)
    top = sorted(exact.ops, key=lambda o: o.total_time_us, reverse=True)[:200]
    kept = {o.name for o in small.ops}
    assert all(o.name in kept for o in top[:150])
    assert any(o.name.startswith("(") and "smaller convolution fusion ops" in o.name for o in small.ops)
    assert any("3,000 op rows" in w and "summed per category" in w for w in small.warnings)


def test_bad_row_in_a_later_window_is_named_by_its_row_in_the_file(monkeypatch):
    table = hlo_table(_many_rows(300))
    table["rows"][250]["c"][7]["v"] = -5.0  # total_time: negative
    monkeypatch.setattr(datatable, "WINDOW_BYTES", 2000)
    with pytest.raises(ProfileError) as info:
        parse_hlo_stats(orjson.dumps(table), source="h.json")
    assert "rows[250]" in info.value.render()


def test_windowed_table_keeps_the_visible_share(tmp_path, monkeypatch):
    """op_time_fraction (summed total_self_time_percent) is the same read whole or window by window."""
    rows = [dict(r, total_self_time_percent=0.001) for r in _many_rows(300)]
    data = orjson.dumps(hlo_table(rows))
    whole = parse_hlo_stats(data, source="h.json")
    monkeypatch.setattr(datatable, "WINDOW_BYTES", 2000)
    windowed = parse_hlo_stats(data, source="h.json")
    assert whole.op_time_fraction is not None
    assert math.isclose(windowed.op_time_fraction, whole.op_time_fraction)
    assert math.isclose(whole.op_time_fraction, 0.3)
