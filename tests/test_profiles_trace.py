"""JAX/perfetto trace events: the real CPU trace, TPU-style device lines, streaming, and bad files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import orjson
import pytest

from bot.errors import ProfileError
from bot.profiles import trace_events
from bot.profiles.model import OpKind
from bot.profiles.trace_events import parse_trace_bytes, read_trace_events

DATA = Path(__file__).parent / "data" / "profiles"
REAL = DATA / "cpu_step.trace.json.gz"


def real_events() -> dict:
    return json.loads(gzip.decompress(REAL.read_bytes()))


def test_real_cpu_trace_ops_per_device_and_steps():
    p = read_trace_events(REAL, source="t.gz")
    trace = real_events()["traceEvents"]
    # Ground truth straight from the events: all-reduce.3 summed over 4 devices, divided by 4.
    ar = [e for e in trace if e.get("ph") == "X" and e.get("args", {}).get("hlo_op") == "all-reduce.3"]
    assert len(ar) == 12
    ops = {o.name: o for o in p.ops}
    assert ops["all-reduce.3"].total_time_us == pytest.approx(sum(e["dur"] for e in ar) / 4)
    assert ops["all-reduce.3"].occurrences == 3 and ops["all-reduce.3"].kind is OpKind.COLLECTIVE
    assert ops["dot.2"].kind is OpKind.COMPUTE and ops["dot.2"].program == "jit_step"
    assert not any(n.startswith("end: ") for n in ops)
    assert p.num_devices == 4 and p.device_kind == "cpu"
    steps = sorted(
        (e for e in trace if e.get("args", {}).get("step_num") is not None), key=lambda e: int(e["args"]["step_num"])
    )
    assert p.num_steps == 3 and p.step_times_us == pytest.approx([e["dur"] for e in steps])
    assert p.ops == sorted(p.ops, key=lambda o: -o.total_time_us)


def tpu_trace(with_steps: bool = True) -> dict:
    ev = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:TPU:0"}},
        {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "/device:TPU:1"}},
        {"ph": "M", "pid": 9, "name": "process_name", "args": {"name": "/host:CPU"}},
    ]
    for pid in (1, 2):
        ev += [
            {"ph": "M", "pid": pid, "tid": 1, "name": "thread_name", "args": {"name": "Steps"}},
            {"ph": "M", "pid": pid, "tid": 2, "name": "thread_name", "args": {"name": "XLA Ops"}},
            {"ph": "M", "pid": pid, "tid": 3, "name": "thread_name", "args": {"name": "XLA Modules"}},
        ]
        for step in range(2):
            t0 = step * 1000.0
            if with_steps:
                ev.append({"ph": "X", "pid": pid, "tid": 1, "ts": t0, "dur": 900.0 + pid, "name": str(step)})
            ev.append({"ph": "X", "pid": pid, "tid": 3, "ts": t0, "dur": 850.0, "name": "jit_train_step(1)"})
            ev.append({"ph": "X", "pid": pid, "tid": 2, "ts": t0, "dur": 600.0, "name": "fusion.1"})
            ev.append({"ph": "X", "pid": pid, "tid": 2, "ts": t0 + 600, "dur": 200.0, "name": "all-gather-start.2"})
    ev.append({"ph": "X", "pid": 9, "tid": 5, "ts": 0, "dur": 5000.0, "name": "PjitFunction(train_step)"})
    return {"displayTimeUnit": "ns", "traceEvents": ev}


def test_tpu_device_lines_and_steps_thread():
    p = parse_trace_bytes(orjson.dumps(tpu_trace()), source="tpu.json")
    ops = {o.name: o for o in p.ops}
    assert set(ops) == {"fusion.1", "all-gather-start.2"}  # host events and module spans are not ops
    assert ops["fusion.1"].total_time_us == 1200.0 and ops["fusion.1"].occurrences == 2
    assert ops["all-gather-start.2"].kind is OpKind.COLLECTIVE
    assert p.num_devices == 2 and p.device_kind == "TPU"
    assert p.num_steps == 2 and p.step_times_us == [901.5, 901.5]


def test_no_step_markers_leaves_steps_unknown_and_warns():
    p = parse_trace_bytes(orjson.dumps(tpu_trace(with_steps=False)), source="tpu.json")
    assert p.num_steps is None and p.step_time_us is None
    assert any("no step markers" in w for w in p.warnings)


def test_array_form_is_accepted():
    p = parse_trace_bytes(orjson.dumps(tpu_trace()["traceEvents"]), source="a.json")
    assert len(p.ops) == 2


def test_streaming_matches_whole_file(tmp_path, monkeypatch):
    big = tpu_trace()
    filler = [
        {"ph": "X", "pid": 9, "tid": 5, "ts": i, "dur": 1.0, "name": f"host work {i}", "args": {"k": '}{\\"ph\\":'}}
        for i in range(3000)
    ]
    big["traceEvents"] = big["traceEvents"][:9] + filler + big["traceEvents"][9:]
    path = tmp_path / "big.trace.json.gz"
    path.write_bytes(gzip.compress(orjson.dumps(big)))
    whole = read_trace_events(path, source="big")
    monkeypatch.setattr(trace_events, "WHOLE_FILE_BYTES", 1000)
    monkeypatch.setattr(trace_events, "CHUNK_BYTES", 4096)
    streamed = read_trace_events(path, source="big")
    assert streamed.ops == whole.ops and streamed.step_times_us == whole.step_times_us
    assert streamed.num_devices == 2


def test_streaming_truncated_trace_is_an_error(tmp_path, monkeypatch):
    data = orjson.dumps(tpu_trace())
    path = tmp_path / "cut.trace.json"
    path.write_bytes(data[: len(data) - 40])
    monkeypatch.setattr(trace_events, "WHOLE_FILE_BYTES", 200)
    monkeypatch.setattr(trace_events, "CHUNK_BYTES", 256)
    with pytest.raises(ProfileError):
        read_trace_events(path, source="cut")


def test_corrupt_gzip_is_a_clear_error(tmp_path):
    good = REAL.read_bytes()
    truncated = tmp_path / "t.trace.json.gz"
    truncated.write_bytes(good[: len(good) // 2])
    with pytest.raises(ProfileError, match="gzip") as e:
        read_trace_events(truncated)
    assert e.value.source == str(truncated)
    garbage = tmp_path / "g.trace.json.gz"
    garbage.write_bytes(b"this is not gzip at all")
    with pytest.raises(ProfileError, match="gzip"):
        read_trace_events(garbage)


@pytest.mark.parametrize(
    "payload,message",
    [
        (b"", "empty"),
        (b'{"traceEvents": 5}', "list of trace events"),
        (b'{"events": []}', "traceEvents"),
        (b'{"traceEvents": [{"ph": "X", "name": 3, "dur": 1}]}', "name"),
        (b'{"traceEvents": [{"ph": "X", "name": "a", "dur": -1}]}', "non-negative"),
        (b'{"traceEvents": [', "malformed"),
    ],
)
def test_bad_traces(tmp_path, payload, message):
    path = tmp_path / "x.trace.json"
    path.write_bytes(payload)
    with pytest.raises(ProfileError, match=message):
        read_trace_events(path)
